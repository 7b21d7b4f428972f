// The built-in scenarios of `pagoda bench --preset NAME` (scenario.h).
#include <fmt/core.h>

#include "bench/scenario.h"

namespace pagoda::bench {

namespace {

RequestClass make_class(std::string name, double weight, double in_mean, double in_sd, double out,
                        Slo slo) {
    RequestClass c;
    c.name = std::move(name);
    c.weight = weight;
    if (in_sd > 0) {
        c.input.kind = LengthDist::Kind::kNormal;
        c.input.mean = in_mean;
        c.input.stddev = in_sd;
        c.input.min = 1;
        c.input.max = int64_t(in_mean * 2);
    } else {
        c.input.kind = LengthDist::Kind::kFixed;
        c.input.value = in_mean;
    }
    c.output.kind = LengthDist::Kind::kFixed;
    c.output.value = out;
    c.slo = slo;
    return c;
}

Scenario open_loop(std::string name, double rate, double duration) {
    Scenario s;
    s.name = std::move(name);
    Phase p;
    p.rate = rate;
    s.arrival.phases = {p};
    s.duration_s = duration;
    s.warmup_s = duration / 12;
    s.cooldown_s = duration / 12;
    return s;
}

void add_criteria(Scenario& s, std::initializer_list<const char*> texts) {
    for (const char* t : texts) s.criteria.push_back(*parse_criterion(t));
}

}  // namespace

std::vector<std::string> preset_names() {
    return {"1k",     "4k",        "32k",   "50rps",          "200rps",
            "500rps", "mix-70-30", "burst", "seed-acceptance"};
}

std::string preset_help() {
    return "1k, 4k, 32k: 1024/4096/32768-token prompts, 128 output tokens, Poisson at 8/2/0.25 "
           "requests/s for 60 s; "
           "50rps, 200rps, 500rps: ~256-token prompts, 128 output tokens, Poisson at that rate for "
           "60 s; "
           "mix-70-30: 70% short (~256 in, 128 out) and 30% long (~2048 in, 256 out) at 20 "
           "requests/s; "
           "burst: short requests at 50 requests/s for 30 s, 300 for 60 s, then 50 for 30 s; "
           "seed-acceptance: an 8-hour working day compressed to 8 minutes (one minute per hour, "
           "4 to 10 requests/s, 70% short / 30% long) with the seed's acceptance criteria: "
           "errors < 0.1% (no OOM), latency fluctuation within 15%, short p99 TTFT < 800 ms, "
           "> 120 tokens/s per sequence (mean TPOT < 8.33 ms), server busy 60-80%. "
           "--scale F multiplies rates and lengths by F, keeping the shape and durations.";
}

Result<Scenario> preset(std::string_view name) {
    Slo short_slo{500.0, 50.0, std::nullopt, std::nullopt};
    Slo long_slo{3000.0, 100.0, std::nullopt, std::nullopt};
    Scenario s;
    if (name == "1k" || name == "4k" || name == "32k") {
        double len = name == "1k" ? 1024 : name == "4k" ? 4096 : 32768;
        double rate = name == "1k" ? 8 : name == "4k" ? 2 : 0.25;
        Slo slo{len / 1024 * 1000, 100.0, std::nullopt, std::nullopt};
        s = open_loop(std::string(name), rate, 60);
        s.classes = {make_class("prompt" + std::string(name), 1, len, 0, 128, slo)};
        add_criteria(s, {"error_rate < 0.01", "goodput_ratio >= 0.9"});
    } else if (name == "50rps" || name == "200rps" || name == "500rps") {
        double rate = name == "50rps" ? 50 : name == "200rps" ? 200 : 500;
        s = open_loop(std::string(name), rate, 60);
        s.classes = {make_class("short", 1, 256, 64, 128, short_slo)};
        add_criteria(s, {"error_rate < 0.01", "p99_ttft_ms < 1000", "goodput_ratio >= 0.9"});
    } else if (name == "mix-70-30") {
        s = open_loop("mix-70-30", 20, 60);
        s.classes = {make_class("short", 0.7, 256, 64, 128, short_slo),
                     make_class("long", 0.3, 2048, 256, 256, long_slo)};
        add_criteria(s, {"error_rate < 0.01", "short: p99_ttft_ms < 800",
                         "long: p99_ttft_ms < 5000", "goodput_ratio >= 0.9"});
    } else if (name == "burst") {
        s.name = "burst";
        Phase a, b, c;
        a.rate = 50;
        a.duration_s = 30;
        b.rate = 300;
        b.duration_s = 60;
        c.rate = 50;
        c.duration_s = 30;
        s.arrival.phases = {a, b, c};
        s.duration_s = 120;
        s.classes = {make_class("short", 1, 256, 64, 128, short_slo)};
        add_criteria(s, {"error_rate < 0.01", "p99_ttft_ms < 2000"});
    } else if (name == "seed-acceptance") {
        // 09:00-17:00, an hour a minute: rise, late-morning peak, lunch dip, afternoon, fall.
        s.name = "seed-acceptance";
        for (double r : {4.0, 8.0, 10.0, 6.0, 9.0, 10.0, 8.0, 5.0}) {
            Phase ph;
            ph.rate = r;
            ph.duration_s = 60;
            s.arrival.phases.push_back(ph);
        }
        s.duration_s = 480;
        s.warmup_s = 10;
        s.window_s = 60;  // fluctuation between the hours' windows
        s.classes = {make_class("short", 0.7, 256, 64, 128, short_slo),
                     make_class("long", 0.3, 2048, 256, 256, long_slo)};
        add_criteria(
            s, {"error_rate < 0.001", "latency_fluctuation <= 0.15", "short: p99_ttft_ms < 800",
                "mean_tpot_ms < 8.33", "busy_ratio >= 0.6", "busy_ratio <= 0.8"});
    } else {
        std::string list;
        for (const auto& n : preset_names()) list += (list.empty() ? "" : ", ") + n;
        return make_error(ErrorCode::kInvalidArgument, "unknown preset '{}'; available: {}", name,
                          list);
    }
    return s;
}

}  // namespace pagoda::bench
