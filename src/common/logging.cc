#include "common/logging.h"

#include <mutex>

#include <spdlog/sinks/stdout_sinks.h>

namespace aquifer {

namespace {
std::mutex g_mu;  // guards g_level and logger creation
spdlog::level::level_enum g_level = spdlog::level::info;
}  // namespace

void SetupLogging(const std::string& level) {
  std::lock_guard lock(g_mu);
  g_level = spdlog::level::from_str(level);
  if (g_level == spdlog::level::off && level != "off") g_level = spdlog::level::info;
  spdlog::set_level(g_level);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %L %n %v");
}

std::shared_ptr<spdlog::logger> Logger(const std::string& component) {
  if (auto existing = spdlog::get(component)) return existing;
  std::lock_guard lock(g_mu);
  if (auto existing = spdlog::get(component)) return existing;
  auto logger = spdlog::stderr_logger_mt(component);
  logger->set_level(g_level);
  return logger;
}

}  // namespace aquifer
