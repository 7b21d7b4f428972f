// Logging: the implementation (the contract is in base/log.h).
#include "base/log.h"

#include <atomic>
#include <chrono>
#include <ctime>

namespace pagoda {
namespace {
std::atomic<int> g_level{int(LogLevel::kInfo)};
}

void set_log_level(LogLevel level) { g_level.store(int(level)); }
LogLevel log_level() { return LogLevel(g_level.load(std::memory_order_relaxed)); }

void log_line(LogLevel level, const std::string& line) {
    static const char* kNames[] = {"debug", "info", "warn", "error", "off"};
    const auto now = std::chrono::system_clock::now();
    const std::time_t t = std::chrono::system_clock::to_time_t(now);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char ts[32];
    std::strftime(ts, sizeof ts, "%H:%M:%S", &tm);
    std::fprintf(stderr, "%s %s %s\n", ts, kNames[int(level)], line.c_str());
}

}  // namespace pagoda
