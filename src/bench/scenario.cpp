// A load scenario: the implementation (the contract is in bench/scenario.h).
#include "bench/scenario.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>

namespace pagoda::bench {

double LengthDist::expected() const {
    switch (kind) {
        case Kind::kFixed: return value;
        case Kind::kUniform: return (low + high) / 2;
        case Kind::kNormal:
        case Kind::kLogNormal: return mean;
        case Kind::kEmpirical: {
            double s = 0;
            for (auto v : values) s += double(v);
            return values.empty() ? 0 : s / double(values.size());
        }
    }
    return 0;
}

void LengthDist::scale(double f) {
    auto sc = [f](double x) { return std::max(1.0, std::round(x * f)); };
    value = sc(value);
    low = sc(low);
    high = sc(high);
    mean = sc(mean);
    stddev = std::max(0.0, stddev * f);
    for (auto& v : values) v = int64_t(sc(double(v)));
    min = int64_t(sc(double(min)));
    if (max < (int64_t(1) << 20)) max = int64_t(sc(double(max)));
}

Result<double> parse_duration(std::string_view text) {
    std::string s(text);
    double mult = 1;
    auto ends = [&](std::string_view suf) { return s.size() > suf.size() && s.ends_with(suf); };
    if (ends("ms")) {
        mult = 0.001;
        s.resize(s.size() - 2);
    } else if (ends("s")) {
        s.resize(s.size() - 1);
    } else if (ends("m")) {
        mult = 60;
        s.resize(s.size() - 1);
    } else if (ends("h")) {
        mult = 3600;
        s.resize(s.size() - 1);
    }
    char* end = nullptr;
    double v = s.empty() ? NAN : std::strtod(s.c_str(), &end);
    if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v) || v < 0) {
        return make_error(ErrorCode::kInvalidArgument,
                          "'{}' is not a duration; use a number of seconds or a number with ms, s, "
                          "m or h (e.g. 30s, 2m)",
                          text);
    }
    return v * mult;
}

const std::vector<std::string>& known_metrics() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> n;
        for (const char* m : {"ttft", "itl", "tpot", "e2e"}) {
            for (const char* s : {"mean", "stddev", "p50", "p90", "p95", "p99", "p999", "max"}) {
                n.push_back(fmt::format("{}_{}_ms", s, m));
            }
        }
        for (const char* x : {"error_rate", "requests_per_s", "output_tokens_per_s",
                              "input_tokens_per_s", "goodput_rps", "goodput_ratio",
                              "latency_fluctuation", "busy_ratio", "completed", "failed"}) {
            n.emplace_back(x);
        }
        return n;
    }();
    return names;
}

Result<Criterion> parse_criterion(std::string_view text) {
    Criterion c;
    c.text = std::string(text);
    std::string_view rest = text;
    auto trim = [](std::string_view s) {
        while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
            s.remove_prefix(1);
        while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
        return s;
    };
    size_t colon = rest.find(':');
    if (colon != std::string_view::npos) {
        c.klass = std::string(trim(rest.substr(0, colon)));
        rest = rest.substr(colon + 1);
        if (c.klass.empty())
            return make_error(ErrorCode::kInvalidArgument,
                              "criterion '{}': empty class name before ':'", text);
    }
    size_t op = rest.find_first_of("<>");
    if (op == std::string_view::npos) {
        return make_error(
            ErrorCode::kInvalidArgument,
            "criterion '{}': expected '[class:] metric OP number' with OP one of <, <=, >, >=",
            text);
    }
    c.metric = std::string(trim(rest.substr(0, op)));
    c.op = std::string(1, rest[op]);
    size_t num = op + 1;
    if (num < rest.size() && rest[num] == '=') {
        c.op += '=';
        ++num;
    }
    std::string value(trim(rest.substr(num)));
    char* end = nullptr;
    c.threshold = value.empty() ? NAN : std::strtod(value.c_str(), &end);
    if (value.empty() || end != value.c_str() + value.size() || !std::isfinite(c.threshold)) {
        return make_error(ErrorCode::kInvalidArgument, "criterion '{}': '{}' is not a number", text,
                          value);
    }
    const auto& known = known_metrics();
    if (std::find(known.begin(), known.end(), c.metric) == known.end()) {
        return make_error(ErrorCode::kInvalidArgument,
                          "criterion '{}': unknown metric '{}'; known: "
                          "STAT_{{ttft,itl,tpot,e2e}}_ms with STAT in "
                          "mean, stddev, p50, p90, p95, p99, p999, max; error_rate, "
                          "requests_per_s, output_tokens_per_s, "
                          "input_tokens_per_s, goodput_rps, goodput_ratio, latency_fluctuation, "
                          "busy_ratio, completed, failed",
                          text, c.metric);
    }
    return c;
}

Status Scenario::validate() const {
    if (classes.empty()) return make_error(ErrorCode::kInvalidArgument, "no request classes");
    if (arrival.kind == Arrival::Kind::kOpen) {
        if (arrival.phases.empty())
            return make_error(ErrorCode::kInvalidArgument, "the arrival has no rate");
        for (const auto& p : arrival.phases) {
            if (!(p.rate > 0))
                return make_error(ErrorCode::kInvalidArgument,
                                  "rate must be > 0 requests/s, got {}", p.rate);
            if (!(p.burstiness > 0))
                return make_error(ErrorCode::kInvalidArgument, "burstiness must be > 0, got {}",
                                  p.burstiness);
        }
    }
    if (arrival.kind == Arrival::Kind::kClosed && arrival.concurrency < 1) {
        return make_error(ErrorCode::kInvalidArgument, "closed loop needs concurrency >= 1");
    }
    if (arrival.kind != Arrival::Kind::kTrace && duration_s <= 0 && requests <= 0) {
        double phased = 0;
        bool open_end = false;
        for (const auto& p : arrival.phases) {
            phased += p.duration_s;
            open_end |= p.duration_s <= 0;
        }
        if (arrival.kind == Arrival::Kind::kClosed || open_end || phased <= 0) {
            return make_error(ErrorCode::kInvalidArgument,
                              "the run has no limit: set duration or requests");
        }
    }
    // A plan is built in memory before the run: bound it.
    constexpr double kMaxRequests = 5e6;
    double planned = 0;
    if (arrival.kind == Arrival::Kind::kOpen) {
        double t = 0;
        for (const auto& p : arrival.phases) {
            double d = p.duration_s > 0 ? p.duration_s : std::max(0.0, duration_s - t);
            if (duration_s > 0) d = std::min(d, std::max(0.0, duration_s - t));
            planned += p.rate * (d > 0 ? d : 1e300);
            t += d;
        }
    } else if (arrival.kind == Arrival::Kind::kClosed) {
        planned = requests > 0 ? double(requests) : 0;
    }
    if (requests > 0) planned = std::min(planned, double(requests));
    if (planned > kMaxRequests) {
        return make_error(ErrorCode::kInvalidArgument,
                          "the schedule would send about {:.3g} requests; one run sends at most "
                          "{:.0f} (lower the rate, "
                          "duration or requests)",
                          planned, kMaxRequests);
    }
    if (duration_s > 0 && warmup_s + cooldown_s >= duration_s) {
        return make_error(ErrorCode::kInvalidArgument,
                          "warmup ({}s) + cooldown ({}s) leave nothing of duration ({}s)", warmup_s,
                          cooldown_s, duration_s);
    }
    for (const auto& c : classes) {
        if (!(c.weight > 0))
            return make_error(ErrorCode::kInvalidArgument, "class '{}': weight must be > 0",
                              c.name);
    }
    if (!(timeout_s > 0)) return make_error(ErrorCode::kInvalidArgument, "timeout must be > 0");
    if (!(window_s > 0)) return make_error(ErrorCode::kInvalidArgument, "window must be > 0");
    return ok_status();
}

void Scenario::scale(double f) {
    for (auto& p : arrival.phases) p.rate *= f;
    for (auto& c : classes) {
        c.input.scale(f);
        c.output.scale(f);
    }
    if (arrival.kind == Arrival::Kind::kClosed)
        arrival.concurrency = std::max(1, int(std::lround(arrival.concurrency * f)));
    if (arrival.kind == Arrival::Kind::kTrace) {
        arrival.trace_rate_scale *= f;
        arrival.trace_length_scale *= f;
    }
}

void Scenario::set_duration(double seconds) {
    double phased = 0;
    for (const auto& p : arrival.phases) phased += p.duration_s;
    if (phased > 0) {
        for (auto& p : arrival.phases) p.duration_s *= seconds / phased;
    }
    if (duration_s > 0) {
        warmup_s *= seconds / duration_s;
        cooldown_s *= seconds / duration_s;
    }
    duration_s = seconds;
}

std::string Scenario::hash() const {
    std::string s = fmt::format("{}|{}|{}|{}|{}|{}|{}|{}|", endpoint, duration_s, requests,
                                warmup_s, cooldown_s, seed, int(arrival.kind), arrival.concurrency);
    s += arrival.trace;
    s += fmt::format("|{}|{}|{}|{}", arrival.trace_speed, arrival.trace_rate_scale,
                     arrival.trace_length_scale, int(arrival.on_overlong));
    if (arrival.trace_window_from_s > 0 || arrival.trace_window_to_s > 0) {
        s += fmt::format("|{}-{}", arrival.trace_window_from_s, arrival.trace_window_to_s);
    }
    if (!arrival.trace_model.empty()) s += "|model=" + arrival.trace_model;
    for (const auto& p : arrival.phases)
        s += fmt::format("p{},{},{},{}|", int(p.process), p.rate, p.burstiness, p.duration_s);
    auto dist = [](const LengthDist& d) {
        std::string r = fmt::format("{},{},{},{},{},{},{},{}", int(d.kind), d.value, d.low, d.high,
                                    d.mean, d.stddev, d.min, d.max);
        for (auto v : d.values) r += fmt::format(",{}", v);
        return r;
    };
    for (const auto& c : classes)
        s += fmt::format("c{},{},{},{},{}|", c.name, c.weight, dist(c.input), dist(c.output),
                         c.dataset);
    uint64_t h = 1469598103934665603ull;
    for (unsigned char ch : s) {
        h ^= ch;
        h *= 1099511628211ull;
    }
    return fmt::format("{:016x}", h);
}

}  // namespace pagoda::bench
