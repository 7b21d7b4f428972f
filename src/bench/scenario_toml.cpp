// Reading scenario files (TOML) into a Scenario (scenario.h): errors name the file, the line
// and the key.
#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>

#include "base/toml_reader.h"
#include "bench/scenario.h"

namespace pagoda::bench {

namespace {

using Ctx = TomlReader;
using Reader = TomlTable;

// A duration: "30s" or a number of seconds.
void read_duration(Reader& r, std::string_view k, double& out) {
    const toml::node* n = r.get(k);
    if (!n) return;
    if (auto s = n->as_string()) {
        auto d = parse_duration(s->get());
        if (!d) return r.fail(n, k, d.error().message);
        out = *d;
    } else if (n->is_number()) {
        double v = n->is_integer() ? double(n->as_integer()->get()) : n->as_floating_point()->get();
        if (!(v >= 0) || !std::isfinite(v))
            return r.fail(n, k, fmt::format("{} must be >= 0 seconds", v));
        out = v;
    } else {
        r.fail(n, k,
               fmt::format("expected a duration such as \"30s\" or a number of seconds, got {}",
                           Reader::type_name(*n)));
    }
}

void read_length(const toml::node* n, const std::string& key, LengthDist& d, Ctx& ctx) {
    if (!n) return;
    if (n->is_number()) {
        double v = n->is_integer() ? double(n->as_integer()->get()) : n->as_floating_point()->get();
        if (!(v >= 1) || v > (1 << 20))
            return ctx.fail(n, key,
                            fmt::format("{} is out of range; allowed: 1 to 1048576 tokens", v));
        d = LengthDist{};
        d.kind = LengthDist::Kind::kFixed;
        d.value = std::round(v);
        return;
    }
    if (!n->is_table()) {
        return ctx.fail(n, key,
                        "expected a number of tokens or a table such as { dist = \"normal\", mean "
                        "= 256, stddev = 64 }");
    }
    Reader r(*n->as_table(), key, ctx);
    std::string dist = "fixed";
    r.choice("dist", dist, {"fixed", "uniform", "normal", "lognormal", "empirical"});
    d = LengthDist{};
    const double kMax = 1 << 20;
    double mn = 1, mx = kMax;
    r.number("min", mn, 0, kMax);
    r.number("max", mx, 1, kMax);
    d.min = int64_t(mn);
    d.max = int64_t(mx);
    std::vector<std::string> allowed = {"dist", "min", "max"};
    if (dist == "fixed") {
        d.kind = LengthDist::Kind::kFixed;
        if (!r.has("value")) ctx.fail(n, key, "dist = \"fixed\" needs value");
        r.number("value", d.value, 1, kMax);
        allowed.push_back("value");
    } else if (dist == "uniform") {
        d.kind = LengthDist::Kind::kUniform;
        if (!r.has("low") || !r.has("high"))
            ctx.fail(n, key, "dist = \"uniform\" needs low and high");
        r.number("low", d.low, 1, kMax);
        r.number("high", d.high, 1, kMax);
        if (!ctx.failed() && d.low > d.high)
            ctx.fail(n, key, fmt::format("low ({}) is above high ({})", d.low, d.high));
        allowed.insert(allowed.end(), {"low", "high"});
    } else if (dist == "normal" || dist == "lognormal") {
        d.kind = dist == "normal" ? LengthDist::Kind::kNormal : LengthDist::Kind::kLogNormal;
        if (!r.has("mean"))
            ctx.fail(n, key, fmt::format("dist = \"{}\" needs mean (and stddev)", dist));
        r.number("mean", d.mean, 1, kMax);
        r.number("stddev", d.stddev, 0, kMax);
        allowed.insert(allowed.end(), {"mean", "stddev"});
    } else {
        d.kind = LengthDist::Kind::kEmpirical;
        const toml::node* v = r.get("values");
        const toml::array* a = v ? v->as_array() : nullptr;
        if (!a || a->empty()) {
            ctx.fail(v ? v : n, key + ".values",
                     "dist = \"empirical\" needs values = [a non-empty list of token counts]");
        } else {
            for (const auto& e : *a) {
                if (!e.is_integer() || e.as_integer()->get() < 1) {
                    ctx.fail(&e, key + ".values", "every value must be an integer >= 1");
                    break;
                }
                d.values.push_back(e.as_integer()->get());
            }
        }
        allowed.push_back("values");
    }
    if (!ctx.failed() && d.min > d.max)
        ctx.fail(n, key, fmt::format("min ({}) is above max ({})", d.min, d.max));
    r.finish(allowed);
}

Phase::Process process_of(const std::string& s) {
    return s == "constant" ? Phase::Process::kConstant
           : s == "gamma"  ? Phase::Process::kGamma
                           : Phase::Process::kPoisson;
}

void read_phase(const toml::table& t, const std::string& key, Phase& p,
                const std::string& default_process, Ctx& ctx, double default_burstiness = 1) {
    Reader r(t, key, ctx);
    p.burstiness = default_burstiness;
    std::string process = default_process;
    r.choice("process", process, {"constant", "poisson", "gamma"});
    p.process = process_of(process);
    if (!t.contains("rate")) ctx.fail(&t, key, "needs rate (requests per second)");
    r.number("rate", p.rate, 0, 1e6, true);
    r.number("burstiness", p.burstiness, 0, 1e3, true);
    read_duration(r, "duration", p.duration_s);
    r.finish({"process", "rate", "burstiness", "duration"});
}

// [arrival] for the open-loop processes: one phase, or [[arrival.phases]].
void read_open_arrival(const toml::table& a, Reader& ar, const std::string& process, Scenario& s,
                       Ctx& ctx) {
    s.arrival.kind = Arrival::Kind::kOpen;
    double burstiness = 1;
    if (a.contains("phases")) ar.number("burstiness", burstiness, 0, 1e3, true);
    if (const toml::node* ph = ar.get("phases")) {
        ctx.each_table(ph, "arrival.phases",
                       [&](size_t i, size_t n, const toml::node& e, const std::string& key) {
                           Phase p;
                           read_phase(*e.as_table(), key, p, process, ctx, burstiness);
                           if (!ctx.failed() && p.duration_s <= 0 && i + 1 < n) {
                               ctx.fail(&e, key, "every phase but the last needs duration > 0");
                           }
                           s.arrival.phases.push_back(p);
                       });
        ar.finish({"process", "burstiness", "phases"});
    } else {
        Phase p;
        read_phase(a, "arrival", p, process, ctx);
        s.arrival.phases.push_back(p);
    }
}

// [arrival]: the process and its parameters.
void read_arrival(const toml::table& root, Reader& r, Scenario& s, Ctx& ctx) {
    if (const toml::table* a = r.table("arrival")) {
        Reader ar(*a, "arrival", ctx);
        std::string process = "poisson";
        ar.choice("process", process, {"constant", "poisson", "gamma", "closed", "trace"});
        if (process == "closed") {
            s.arrival.kind = Arrival::Kind::kClosed;
            int64_t c = 0;
            if (!a->contains("concurrency"))
                ctx.fail(a, "arrival", "process = \"closed\" needs concurrency");
            ar.integer("concurrency", c, 1, 100000);
            s.arrival.concurrency = int(c);
            ar.finish({"process", "concurrency"});
        } else if (process == "trace") {
            s.arrival.kind = Arrival::Kind::kTrace;
            if (!a->contains("trace"))
                ctx.fail(a, "arrival", "process = \"trace\" needs trace = \"FILE.jsonl\"");
            ar.string("trace", s.arrival.trace);
            ar.number("speed", s.arrival.trace_speed, 0, 1e6, true);
            ar.finish({"process", "trace", "speed"});
        } else {
            read_open_arrival(*a, ar, process, s, ctx);
        }
    } else if (!ctx.failed()) {
        ctx.fail(&root, "arrival",
                 "missing: add an [arrival] table (process and rate, or process = \"closed\" with "
                 "concurrency)");
    }
}

// One [[class]]: name, weight, lengths or dataset, SLO.
RequestClass read_class(const toml::node& e, const std::string& key, size_t i, Ctx& ctx) {
    RequestClass c;
    c.name = fmt::format("class{}", i);
    Reader cr(*e.as_table(), key, ctx);
    cr.string("name", c.name);
    cr.number("weight", c.weight, 0, 1e9, true);
    if (!e.as_table()->contains("input") && !e.as_table()->contains("dataset")) {
        ctx.fail(&e, key, "needs input (a length or distribution) or dataset");
    }
    if (!e.as_table()->contains("output"))
        ctx.fail(&e, key, "needs output (a length or distribution)");
    read_length(cr.get("input"), key + ".input", c.input, ctx);
    read_length(cr.get("output"), key + ".output", c.output, ctx);
    cr.string("dataset", c.dataset);
    if (const toml::table* slo = cr.table("slo")) {
        Reader sr(*slo, key + ".slo", ctx);
        auto opt = [&](const char* k, std::optional<double>& o) {
            if (!slo->contains(k)) return;
            double v = 0;
            sr.number(k, v, 0, 1e9, true);
            o = v;
        };
        opt("ttft_ms", c.slo.ttft_ms);
        opt("tpot_ms", c.slo.tpot_ms);
        opt("itl_ms", c.slo.itl_ms);
        opt("e2e_ms", c.slo.e2e_ms);
        sr.finish({"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"});
    }
    cr.finish({"name", "weight", "input", "output", "slo", "dataset"});
    return c;
}

// [[class]]: the request classes, names unique.
void read_classes(const toml::table& root, Reader& r, Scenario& s, Ctx& ctx) {
    if (const toml::node* cl = r.get("class")) {
        ctx.each_table(cl, "class",
                       [&](size_t i, size_t, const toml::node& e, const std::string& key) {
                           RequestClass c = read_class(e, key, i, ctx);
                           for (const auto& other : s.classes) {
                               if (other.name == c.name)
                                   ctx.fail(&e, key + ".name",
                                            fmt::format("duplicate class name '{}'", c.name));
                           }
                           s.classes.push_back(std::move(c));
                       });
    } else if (s.arrival.kind != Arrival::Kind::kTrace && !ctx.failed()) {
        ctx.fail(&root, "class",
                 "missing: add at least one [[class]] with input and output lengths");
    }
}

// criteria = ["p99_ttft_ms < 800", ...]
void read_criteria(Reader& r, Scenario& s, Ctx& ctx) {
    if (const toml::node* cr = r.get("criteria")) {
        const toml::array* arr = cr->as_array();
        if (!arr) {
            ctx.fail(cr, "criteria",
                     "expected a list of strings such as [\"p99_ttft_ms < 800\", \"error_rate < "
                     "0.001\"]");
        } else {
            for (size_t i = 0; i < arr->size() && !ctx.failed(); ++i) {
                const toml::node& e = *arr->get(i);
                if (!e.is_string()) {
                    ctx.fail(&e, fmt::format("criteria[{}]", i),
                             "expected a string such as \"p99_ttft_ms < 800\"");
                    break;
                }
                auto c = parse_criterion(e.as_string()->get());
                if (!c) {
                    ctx.fail(&e, fmt::format("criteria[{}]", i), c.error().message);
                    break;
                }
                s.criteria.push_back(*c);
            }
        }
    }
}

}  // namespace

Result<Scenario> parse_scenario(std::string_view text, const std::string& source_name) {
    PAGODA_ASSIGN_OR_RETURN(toml::table root, parse_toml(text, source_name));
    Ctx ctx(source_name, /*columns=*/true);
    Scenario s;
    s.classes.clear();
    Reader r(root, "", ctx);
    r.string("name", s.name);
    r.choice("endpoint", s.endpoint, {"completions", "chat"});
    r.string("model", s.model);
    read_duration(r, "duration", s.duration_s);
    r.integer("requests", s.requests, 1, int64_t(1) << 40);
    read_duration(r, "warmup", s.warmup_s);
    read_duration(r, "cooldown", s.cooldown_s);
    read_duration(r, "timeout", s.timeout_s);
    read_duration(r, "window", s.window_s);
    int64_t seed = 1;
    r.integer("seed", seed, 0, INT64_MAX);
    s.seed = uint64_t(seed);

    read_arrival(root, r, s, ctx);
    read_classes(root, r, s, ctx);
    read_criteria(r, s, ctx);
    if (const toml::table* st = r.table("stop")) {
        Reader sr(*st, "stop", ctx);
        sr.number("error_rate", s.stop_error_rate, 0, 1, true);
        sr.integer("in_flight", s.stop_in_flight, 1, int64_t(1) << 30);
        sr.finish({"error_rate", "in_flight"});
    }
    r.finish({"name", "endpoint", "model", "duration", "requests", "warmup", "cooldown", "timeout",
              "window", "seed", "arrival", "class", "criteria", "stop"});
    if (ctx.failed()) return ctx.error();
    if (s.classes.empty()) {
        RequestClass c;
        c.input.value = 128;
        c.output.value = 128;
        s.classes.push_back(c);
    }
    for (const auto& c : s.criteria) {
        if (!c.klass.empty() && std::none_of(s.classes.begin(), s.classes.end(),
                                             [&](const auto& k) { return k.name == c.klass; })) {
            return make_error(
                ErrorCode::kInvalidFile,
                "{}: criteria: '{}' names class '{}', which the scenario does not define",
                source_name, c.text, c.klass);
        }
    }
    auto v = s.validate();
    if (!v) return make_error(ErrorCode::kInvalidFile, "{}: {}", source_name, v.error().message);
    return s;
}

Result<Scenario> load_scenario_file(const std::string& path) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f)
        return make_error(ErrorCode::kNotFound, "cannot open scenario file '{}': {}", path,
                          std::strerror(errno));
    std::string text;
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) {
        text.append(buf, n);
        if (text.size() > (16u << 20)) {
            std::fclose(f);
            return make_error(ErrorCode::kInvalidFile,
                              "{}: larger than 16 MiB; is this a scenario file?", path);
        }
    }
    std::fclose(f);
    return parse_scenario(text, path);
}

}  // namespace pagoda::bench
