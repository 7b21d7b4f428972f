#pragma once
// Logging: one line per event on stderr, `HH:MM:SS level event key=value key="text"`
// (for example `preempted seq=17 reason="no_blocks"`), formatted with fmt. Thread-safe (one
// fprintf per line). Nothing per token at INFO: per-step facts are metrics.
// With LogFormat::kJson (`--log-format json`) each line is one JSON object instead:
// {"ts": "2026-12-06T10:31:02.123Z", "level": "info", "event": "preempted", "seq": 17,
// "reason": "no_blocks"}: numbers stay numbers, quoted values strings, text after the pairs
// goes to "msg".

#include <fmt/core.h>

#include <cstdio>
#include <string>
#include <string_view>

namespace pagoda {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

enum class LogFormat { kText, kJson };

void set_log_level(LogLevel level);
void set_log_format(LogFormat format);
// The inside of a JSON string for `s` (quotes, backslashes and control characters escaped);
// the log's JSON lines and the HTTP server's own error bodies use it.
std::string json_escape(std::string_view s);
void append_json_escaped(std::string& out, std::string_view s);  // the same, appended
// The JSON object of one `event key=value ...` line (what kJson writes, without the time).
std::string log_line_json(const char* level, const std::string& line);
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
