// Logging setup: one spdlog logger per component ("meta", "data", "client", "fuse", "cli").
#pragma once

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

namespace aquifer {

// Sets the default level for all Aquifer loggers from `level` ("trace", "debug", "info", "warn",
// "error", "off"); unknown names give "info". Logs go to stderr. Call once at process start;
// thread-safe afterwards.
void SetupLogging(const std::string& level);

// Returns the logger named `component`, creating it (stderr, colour off) on first use.
// Never null; thread-safe.
std::shared_ptr<spdlog::logger> Logger(const std::string& component);

}  // namespace aquifer
