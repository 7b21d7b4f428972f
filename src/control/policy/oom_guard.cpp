// OomGuard: the implementation (the contract is in control/policy/oom_guard.h).
#include "control/policy/oom_guard.h"

#include <fmt/core.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace pagoda::control {

json GuardSignal::to_json() const {
    return {{"signal", name}, {"value", value}, {"threshold", threshold}, {"text", text}};
}

const char* guard_action_name(GuardAction a) {
    switch (a) {
        case GuardAction::kNone: return "none";
        case GuardAction::kReport: return "report";
        case GuardAction::kRollback: return "rollback";
    }
    return "?";
}

GuardAction guard_action(bool any_signal, int64_t now_ms, int64_t changed_at_ms,
                         bool stable_target_differs, const GuardOptions& o) {
    if (!any_signal) return GuardAction::kNone;
    const bool recent = now_ms - changed_at_ms <= o.window_ms;
    return recent && stable_target_differs ? GuardAction::kRollback : GuardAction::kReport;
}

std::vector<GuardSignal> OomGuard::observe(const GuardSample& s) {
    std::vector<GuardSignal> out;
    minute_.push_back(s);
    while (minute_.size() > 1 && s.at_ms - minute_.front().at_ms > 60'000) minute_.pop_front();

    const double free_frac =
        s.total_blocks > 0 ? double(s.free_blocks) / double(s.total_blocks) : 1.0;
    low_free_run_ = free_frac < o_.free_blocks_fraction && s.waiting > 0 ? low_free_run_ + 1 : 0;
    if (low_free_run_ >= o_.sustain) {
        out.push_back({"kv_free_blocks", free_frac, o_.free_blocks_fraction,
                       fmt::format("{} of {} KV blocks free ({:.1f}%) with {} requests waiting",
                                   s.free_blocks, s.total_blocks, free_frac * 100, s.waiting)});
    }
    const GuardSample& first = minute_.front();
    const double span_min = double(s.at_ms - first.at_ms) / 60'000.0;
    const int64_t preempted = s.pressure_preemptions - first.pressure_preemptions;
    // Over at least 10 s of samples, so one burst right after start is not a rate.
    if (span_min >= 10.0 / 60 && double(preempted) / span_min > o_.preemptions_per_minute) {
        const double rate = double(preempted) / span_min;
        out.push_back({"preemption_rate", rate, o_.preemptions_per_minute,
                       fmt::format("{:.0f} preemptions per minute ({} in the last {:.0f} s)", rate,
                                   preempted, span_min * 60)});
    }
    const double rss_frac =
        o_.memory_limit_bytes > 0 ? double(s.rss_bytes) / double(o_.memory_limit_bytes) : 0.0;
    high_rss_run_ = rss_frac > o_.rss_fraction ? high_rss_run_ + 1 : 0;
    if (high_rss_run_ >= o_.sustain) {
        out.push_back({"rss", rss_frac, o_.rss_fraction,
                       fmt::format("resident memory {:.1f} MiB is {:.0f}% of the {:.1f} MiB limit",
                                   double(s.rss_bytes) / (1 << 20), rss_frac * 100,
                                   double(o_.memory_limit_bytes) / (1 << 20))});
    }
    return out;
}

GuardSignal OomGuard::allocation_failure(const std::string& error) {
    return {"pool_allocation", 1, 0, "a KV pool could not be allocated: " + error};
}

int64_t read_rss_bytes() {
    std::ifstream f("/proc/self/statm");
    int64_t size = 0, resident = 0;
    if (!(f >> size >> resident)) return 0;
    return resident * int64_t(sysconf(_SC_PAGESIZE));
}

namespace {

// A number from this process's cgroup (v2) file `name`; 0 when unlimited ("max") or unknown.
int64_t read_cgroup_value(const char* name) {
    std::ifstream cg("/proc/self/cgroup");
    std::string line, path;
    while (std::getline(cg, line)) {
        if (line.rfind("0::", 0) == 0) path = line.substr(3);
    }
    if (path.empty()) return 0;
    std::ifstream f("/sys/fs/cgroup" + path + "/" + name);
    std::string v;
    if (!(f >> v) || v == "max") return 0;
    try {
        return std::stoll(v);
    } catch (const std::exception&) {
        return 0;
    }
}

}  // namespace

int64_t read_cgroup_memory_limit() { return read_cgroup_value("memory.max"); }

int64_t read_available_memory() {
    std::ifstream f("/proc/meminfo");
    std::string key, unit;
    int64_t kb = 0, avail = 0;
    while (f >> key >> kb) {
        std::getline(f, unit);
        if (key == "MemAvailable:") avail = kb * 1024;
    }
    const int64_t limit = read_cgroup_memory_limit();
    if (limit > 0) {
        const int64_t room = std::max<int64_t>(limit - read_cgroup_value("memory.current"), 0);
        avail = avail > 0 ? std::min(avail, room) : room;
    }
    return avail;
}

}  // namespace pagoda::control
