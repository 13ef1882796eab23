#include "common/logging.h"

#include <mutex>

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

namespace aquifer {

namespace {
std::mutex g_mu;  // guards g_level, g_file_sink and logger creation
spdlog::level::level_enum g_level = spdlog::level::info;
std::shared_ptr<spdlog::sinks::sink> g_file_sink;  // null: loggers write to stderr
constexpr char kPattern[] = "%Y-%m-%dT%H:%M:%S.%e %L %n %v";
}  // namespace

Status SetupLogging(const std::string& level, const std::string& log_file) {
  SetupLogging(level);
  if (log_file.empty()) return OkStatus();
  try {
    auto sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(log_file, /*truncate=*/false);
    std::lock_guard lock(g_mu);
    g_file_sink = std::move(sink);
  } catch (const spdlog::spdlog_ex& e) {
    return Status(Code::kInvalidArgument, std::string("log file: ") + e.what());
  }
  return OkStatus();
}

void SetupLogging(const std::string& level) {
  std::lock_guard lock(g_mu);
  g_level = spdlog::level::from_str(level);
  if (g_level == spdlog::level::off && level != "off") g_level = spdlog::level::info;
  spdlog::set_level(g_level);
  spdlog::set_pattern(kPattern);
}

std::shared_ptr<spdlog::logger> Logger(const std::string& component) {
  if (auto existing = spdlog::get(component)) return existing;
  std::lock_guard lock(g_mu);
  if (auto existing = spdlog::get(component)) return existing;
  std::shared_ptr<spdlog::logger> logger;
  if (g_file_sink) {
    logger = std::make_shared<spdlog::logger>(component, g_file_sink);
    logger->flush_on(spdlog::level::trace);  // every line reaches the file, crash or not
    logger->set_pattern(kPattern);
    spdlog::register_logger(logger);
  } else {
    logger = spdlog::stderr_logger_mt(component);
  }
  logger->set_level(g_level);
  return logger;
}

}  // namespace aquifer
