// Logging: the implementation (the contract is in base/log.h).
#include "base/log.h"

#include <atomic>
#include <cctype>
#include <charconv>
#include <chrono>
#include <ctime>

namespace pagoda {
namespace {
std::atomic<int> g_level{int(LogLevel::kInfo)};
std::atomic<int> g_format{int(LogFormat::kText)};

void json_string(std::string& out, std::string_view s) {
    out += '"';
    out += json_escape(s);
    out += '"';
}

bool is_number(std::string_view v) {
    if (v.empty() || v == "-" || v.find_first_of("xXnN") != std::string_view::npos) return false;
    double d = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), d);
    return ec == std::errc() && p == v.data() + v.size();
}

bool is_key(std::string_view k) {
    if (k.empty()) return false;
    for (const char c : k) {
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') {
            return false;
        }
    }
    return true;
}

// One `key=value` or `key="text"` at `i`; false (i unchanged) when the rest is not one.
bool next_pair(std::string_view line, size_t& i, std::string& out) {
    const size_t eq = line.find('=', i);
    if (eq == std::string_view::npos || !is_key(line.substr(i, eq - i))) return false;
    const std::string_view key = line.substr(i, eq - i);
    size_t v = eq + 1, end = 0;
    std::string_view value;
    bool quoted = v < line.size() && line[v] == '"';
    if (quoted) {  // to the closing quote that ends the line or precedes a space
        end = v + 1;
        while (end < line.size() &&
               !(line[end] == '"' && (end + 1 == line.size() || line[end + 1] == ' '))) {
            end += line[end] == '\\' ? 2 : 1;
        }
        if (end >= line.size()) return false;
        value = line.substr(v + 1, end - v - 1);
        ++end;
    } else {
        end = line.find(' ', v);
        if (end == std::string_view::npos) end = line.size();
        value = line.substr(v, end - v);
    }
    out += ", ";
    json_string(out, key);
    out += ": ";
    if (!quoted && is_number(value)) {
        out += value;
    } else if (!quoted && value == "-") {  // "no value" in the text format
        out += "null";
    } else if (!quoted && (value == "true" || value == "false")) {
        out += value;
    } else {
        json_string(out, value);
    }
    i = end;
    while (i < line.size() && line[i] == ' ') ++i;
    return true;
}

}  // namespace

std::string json_escape(std::string_view s) {
    std::string out;
    append_json_escaped(out, s);
    return out;
}

void append_json_escaped(std::string& out, std::string_view s) {
    for (const char c : s) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\t': out += "\\t"; break;
            case '\r': out += "\\r"; break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    out += fmt::format("\\u{:04x}", int(c));
                } else {
                    out += c;
                }
        }
    }
}

void set_log_level(LogLevel level) { g_level.store(int(level)); }
LogLevel log_level() { return LogLevel(g_level.load(std::memory_order_relaxed)); }
void set_log_format(LogFormat format) { g_format.store(int(format)); }

std::string log_line_json(const char* level, const std::string& text) {
    const std::string_view line = text;
    std::string out = "{\"level\": ";
    json_string(out, level);
    size_t i = line.find(' ');
    std::string_view event = line.substr(0, i);
    i = i == std::string_view::npos ? line.size() : i + 1;
    if (event.find('=') != std::string_view::npos) {  // a line of pairs only: no event name
        event = "log";
        i = 0;
    }
    out += ", \"event\": ";
    json_string(out, event);
    while (i < line.size() && next_pair(line, i, out)) {
    }
    if (i < line.size()) {
        out += ", \"msg\": ";
        json_string(out, line.substr(i));
    }
    return out + "}";
}

void log_line(LogLevel level, const std::string& line) {
    static const char* kNames[] = {"debug", "info", "warn", "error", "off"};
    const auto now = std::chrono::system_clock::now();
    const std::time_t t = std::chrono::system_clock::to_time_t(now);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char ts[32];
    if (LogFormat(g_format.load(std::memory_order_relaxed)) == LogFormat::kJson) {
        std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
        const auto ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() %
            1000;
        std::string j = log_line_json(kNames[int(level)], line);
        std::fprintf(stderr, "{\"ts\": \"%s.%03dZ\", %s\n", ts, int(ms), j.c_str() + 1);
        return;
    }
    std::strftime(ts, sizeof ts, "%H:%M:%S", &tm);
    std::fprintf(stderr, "%s %s %s\n", ts, kNames[int(level)], line.c_str());
}

}  // namespace pagoda
