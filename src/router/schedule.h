#pragma once
// Schedules of a fleet: lines "HH:MM ACTION ARGS" in a time zone, evaluated on wall-clock
// local time, so "20:00" stays 20:00 across daylight-saving changes. Actions:
//   prewarm POOL        start and warm POOL's replicas ahead of a shift
//   shift POOL PCT%     move POOL to PCT percent of the traffic (progressive, with the breaker)
//   reverse             shift back to the pool that had the traffic before the last switch
// A time that does not exist on a day (the hour skipped in spring) fires at the first minute
// after the gap; a time that occurs twice (autumn) fires once, at its first occurrence.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"

namespace pagoda::router {

struct ScheduleEntry {
    int minute_of_day = 0;  // local
    enum class Action { kPrewarm, kShift, kReverse } action = Action::kShift;
    std::string pool;
    double percent = 0;
    std::string text;  // the line as written
};

struct Schedule {
    std::string time_zone = "UTC";
    std::vector<ScheduleEntry> entries;  // by time of day
};

// Errors: bad time, unknown action or pool syntax, percent outside [0, 100], two entries at
// the same minute (overlapping), an unknown time zone.
Result<Schedule> parse_schedule(const std::string& time_zone,
                                const std::vector<std::string>& lines);

// Unix seconds of `local` wall-clock time on the local date y-m-d in `tz`.
int64_t local_to_unix(const std::string& tz, int y, int m, int d, int minute_of_day);
// The local date (y, m, d) and minute of day of unix time `t` in `tz`.
struct LocalTime {
    int y = 0, m = 0, d = 0, minute_of_day = 0;
};
LocalTime unix_to_local(const std::string& tz, int64_t t);
bool time_zone_exists(const std::string& tz);
// Unix seconds of `minute_of_day` on the local date of `now` in `tz` (a rehearsal clock's
// start, `--schedule-clock-start 19:29`).
int64_t today_at(const std::string& tz, int minute_of_day, int64_t now);

// Entries firing in (from, to], in time order, with their unix seconds.
std::vector<std::pair<int64_t, const ScheduleEntry*>> due(const Schedule& s, int64_t from,
                                                          int64_t to);
// Parses "HH:MM" into a minute of day.
Result<int> parse_hhmm(std::string_view s);

}  // namespace pagoda::router
