// Schedules of a fleet: the implementation (the contract is in router/schedule.h).
#include "router/schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <set>
#include <sstream>

namespace pagoda::router {

namespace {

// The C library converts with the process's TZ; conversions here set it under this lock
// and put it back.
std::mutex& tz_mutex() {
    static std::mutex mu;
    return mu;
}

template <typename F>
auto with_tz(const std::string& tz, F f) {
    std::lock_guard lock(tz_mutex());
    const char* old = std::getenv("TZ");
    const std::string saved = old ? old : "";
    setenv("TZ", tz.c_str(), 1);
    tzset();
    auto out = f();
    if (old) {
        setenv("TZ", saved.c_str(), 1);
    } else {
        unsetenv("TZ");
    }
    tzset();
    return out;
}

}  // namespace

bool time_zone_exists(const std::string& tz) {
    if (tz == "UTC" || tz == "Etc/UTC") return true;
    if (tz.empty() || tz.find("..") != std::string::npos || tz.front() == '/') return false;
    for (const char* dir : {"/usr/share/zoneinfo/", "/usr/lib/zoneinfo/"}) {
        std::error_code ec;
        if (std::filesystem::is_regular_file(std::string(dir) + tz, ec)) return true;
    }
    return false;
}

int64_t local_to_unix(const std::string& tz, int y, int m, int d, int minute_of_day) {
    return with_tz(tz, [&] {
        std::tm tm{};
        tm.tm_year = y - 1900;
        tm.tm_mon = m - 1;
        tm.tm_mday = d;
        tm.tm_hour = minute_of_day / 60;
        tm.tm_min = minute_of_day % 60;
        tm.tm_isdst = -1;
        std::tm probe = tm;
        const time_t t = mktime(&probe);
        // A time inside the spring gap: mktime moves it past the gap (glibc) -- keep that.
        // A time that occurs twice: take the earlier instant (summer time, isdst = 1).
        std::tm summer = tm;
        summer.tm_isdst = 1;
        const time_t ts = mktime(&summer);
        if (summer.tm_hour == tm.tm_hour && summer.tm_min == tm.tm_min && ts < t) {
            return int64_t(ts);
        }
        return int64_t(t);
    });
}

LocalTime unix_to_local(const std::string& tz, int64_t t) {
    return with_tz(tz, [&] {
        std::tm tm{};
        const time_t tt = time_t(t);
        localtime_r(&tt, &tm);
        return LocalTime{tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour * 60 + tm.tm_min};
    });
}

int64_t today_at(const std::string& tz, int minute_of_day, int64_t now) {
    const LocalTime l = unix_to_local(tz, now);
    return local_to_unix(tz, l.y, l.m, l.d, minute_of_day);
}

Result<int> parse_hhmm(std::string_view s) {
    int h = 0, m = 0;
    if (s.size() != 5 || s[2] != ':' || !std::isdigit(s[0]) || !std::isdigit(s[1]) ||
        !std::isdigit(s[3]) || !std::isdigit(s[4])) {
        return make_error(ErrorCode::kInvalidArgument, "'{}' is not a time HH:MM", s);
    }
    h = (s[0] - '0') * 10 + (s[1] - '0');
    m = (s[3] - '0') * 10 + (s[4] - '0');
    if (h > 23 || m > 59) {
        return make_error(ErrorCode::kInvalidArgument, "'{}' is not a time of day (00:00-23:59)",
                          s);
    }
    return h * 60 + m;
}

namespace {

Result<ScheduleEntry> parse_line(const std::string& line) {
    std::istringstream in(line);
    std::string hhmm, action, a1, a2, extra;
    in >> hhmm >> action >> a1 >> a2 >> extra;
    ScheduleEntry e;
    e.text = line;
    PAGODA_ASSIGN_OR_RETURN(e.minute_of_day, parse_hhmm(hhmm));
    auto want = [&](size_t n, const char* usage) -> Status {
        const size_t got = !a1.empty() + !a2.empty() + !extra.empty();
        if (got != n) {
            return make_error(ErrorCode::kInvalidArgument, "'{}': expected '{}'", line, usage);
        }
        return ok_status();
    };
    if (action == "prewarm") {
        PAGODA_TRY(want(1, "HH:MM prewarm POOL"));
        e.action = ScheduleEntry::Action::kPrewarm;
        e.pool = a1;
    } else if (action == "shift") {
        PAGODA_TRY(want(2, "HH:MM shift POOL PERCENT%"));
        e.action = ScheduleEntry::Action::kShift;
        e.pool = a1;
        if (a2.empty() || a2.back() != '%') {
            return make_error(ErrorCode::kInvalidArgument, "'{}': the share ends with %, as 10%",
                              line);
        }
        char* end = nullptr;
        e.percent = std::strtod(a2.c_str(), &end);
        if (end != a2.c_str() + a2.size() - 1 || !(e.percent >= 0 && e.percent <= 100)) {
            return make_error(ErrorCode::kInvalidArgument, "'{}': the share must be 0%-100%", line);
        }
    } else if (action == "reverse") {
        PAGODA_TRY(want(0, "HH:MM reverse"));
        e.action = ScheduleEntry::Action::kReverse;
    } else {
        return make_error(ErrorCode::kInvalidArgument,
                          "'{}': unknown action '{}' (prewarm, shift, reverse)", line, action);
    }
    return e;
}

}  // namespace

Result<Schedule> parse_schedule(const std::string& time_zone,
                                const std::vector<std::string>& lines) {
    if (!time_zone_exists(time_zone)) {
        return make_error(ErrorCode::kInvalidArgument,
                          "unknown time zone '{}' (an IANA name such as Europe/Paris, or UTC)",
                          time_zone);
    }
    Schedule s;
    s.time_zone = time_zone;
    std::set<int> minutes;
    for (const auto& line : lines) {
        PAGODA_ASSIGN_OR_RETURN(ScheduleEntry e, parse_line(line));
        if (!minutes.insert(e.minute_of_day).second) {
            return make_error(ErrorCode::kInvalidArgument,
                              "'{}' overlaps another entry at the same time", line);
        }
        s.entries.push_back(std::move(e));
    }
    std::sort(s.entries.begin(), s.entries.end(),
              [](const auto& a, const auto& b) { return a.minute_of_day < b.minute_of_day; });
    return s;
}

std::vector<std::pair<int64_t, const ScheduleEntry*>> due(const Schedule& s, int64_t from,
                                                          int64_t to) {
    std::vector<std::pair<int64_t, const ScheduleEntry*>> out;
    if (to <= from || s.entries.empty()) return out;
    // Local dates from the day before `from` to the day after `to`.
    const LocalTime first = unix_to_local(s.time_zone, from - 86400);
    std::tm day{};
    day.tm_year = first.y - 1900;
    day.tm_mon = first.m - 1;
    day.tm_mday = first.d;
    day.tm_hour = 12;
    for (int k = 0; k < 3 + int((to - from) / 86400); ++k) {
        std::tm d = day;
        d.tm_mday += k;
        timegm(&d);  // normalises the date
        for (const auto& e : s.entries) {
            const int64_t t = local_to_unix(s.time_zone, d.tm_year + 1900, d.tm_mon + 1, d.tm_mday,
                                            e.minute_of_day);
            if (t > from && t <= to) out.emplace_back(t, &e);
        }
    }
    std::sort(out.begin(), out.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    return out;
}

}  // namespace pagoda::router
