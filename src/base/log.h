#pragma once
// Logging: one line per event on stderr, `HH:MM:SS level event key=value key="text"`
// (for example `preempted seq=17 reason="no_blocks"`), formatted with fmt. Thread-safe (one
// fprintf per line). Nothing per token at INFO: per-step facts are metrics.

#include <fmt/core.h>

#include <cstdio>

namespace pagoda {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

void set_log_level(LogLevel level);
LogLevel log_level();
void log_line(LogLevel level, const std::string& line);

template <typename... Args>
void log_info(fmt::format_string<Args...> f, Args&&... args) {
    if (log_level() <= LogLevel::kInfo)
        log_line(LogLevel::kInfo, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void log_warn(fmt::format_string<Args...> f, Args&&... args) {
    if (log_level() <= LogLevel::kWarn)
        log_line(LogLevel::kWarn, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void log_error(fmt::format_string<Args...> f, Args&&... args) {
    log_line(LogLevel::kError, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void log_debug(fmt::format_string<Args...> f, Args&&... args) {
    if (log_level() <= LogLevel::kDebug)
        log_line(LogLevel::kDebug, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace pagoda
