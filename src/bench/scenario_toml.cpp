// Reading scenario files (TOML) into a Scenario (scenario.h): errors name the file, the line
// and the key.
#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>

#include "bench/scenario.h"

namespace pagoda::bench {

namespace {

struct Ctx {
    std::string file;
    std::optional<Error> err;

    void fail(const toml::node* n, const std::string& key, const std::string& reason) {
        if (err) return;
        int line = 0, col = 0;
        if (n) {
            line = int(n->source().begin.line);
            col = int(n->source().begin.column);
        }
        err = make_error(ErrorCode::kInvalidFile, "{}:{}:{}: {}: {}", file, line, col, key, reason);
    }
};

class Reader {
  public:
    Reader(const toml::table& t, std::string prefix, Ctx& ctx)
        : t_(t), prefix_(std::move(prefix)), ctx_(ctx) {}

    std::string key(std::string_view k) const {
        return prefix_.empty() ? std::string(k) : prefix_ + "." + std::string(k);
    }
    const toml::node* get(std::string_view k) {
        used_.insert(std::string(k));
        return t_.get(k);
    }
    bool has(std::string_view k) const { return t_.contains(k); }

    void number(std::string_view k, double& out, double min, double max,
                bool min_exclusive = false) {
        const toml::node* n = get(k);
        if (!n) return;
        double v;
        if (auto i = n->as_integer()) {
            v = double(i->get());
        } else if (auto f = n->as_floating_point()) {
            v = f->get();
        } else {
            return ctx_.fail(n, key(k), fmt::format("expected a number, got {}", type_name(*n)));
        }
        if (!std::isfinite(v) || v < min || v > max || (min_exclusive && v == min)) {
            return ctx_.fail(n, key(k),
                             fmt::format("{} is out of range; allowed: {} {} to {}", v,
                                         min_exclusive ? "above" : "from", min, max));
        }
        out = v;
    }
    void integer(std::string_view k, int64_t& out, int64_t min, int64_t max) {
        const toml::node* n = get(k);
        if (!n) return;
        auto i = n->as_integer();
        if (!i)
            return ctx_.fail(n, key(k), fmt::format("expected an integer, got {}", type_name(*n)));
        if (i->get() < min || i->get() > max) {
            return ctx_.fail(
                n, key(k),
                fmt::format("{} is out of range; allowed: {} to {}", i->get(), min, max));
        }
        out = i->get();
    }
    void string(std::string_view k, std::string& out) {
        const toml::node* n = get(k);
        if (!n) return;
        auto s = n->as_string();
        if (!s)
            return ctx_.fail(n, key(k), fmt::format("expected a string, got {}", type_name(*n)));
        out = s->get();
    }
    void choice(std::string_view k, std::string& out, const std::vector<std::string>& allowed) {
        const toml::node* n = t_.get(k);
        string(k, out);
        if (n && !ctx_.err && std::find(allowed.begin(), allowed.end(), out) == allowed.end()) {
            std::string list;
            for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
            ctx_.fail(n, key(k), fmt::format("'{}' is not allowed; use one of: {}", out, list));
        }
    }
    void duration(std::string_view k, double& out) {
        const toml::node* n = get(k);
        if (!n) return;
        if (auto s = n->as_string()) {
            auto d = parse_duration(s->get());
            if (!d) return ctx_.fail(n, key(k), d.error().message);
            out = *d;
        } else if (n->is_number()) {
            double v =
                n->is_integer() ? double(n->as_integer()->get()) : n->as_floating_point()->get();
            if (!(v >= 0) || !std::isfinite(v))
                return ctx_.fail(n, key(k), fmt::format("{} must be >= 0 seconds", v));
            out = v;
        } else {
            ctx_.fail(
                n, key(k),
                fmt::format("expected a duration such as \"30s\" or a number of seconds, got {}",
                            type_name(*n)));
        }
    }
    const toml::table* table(std::string_view k) {
        const toml::node* n = get(k);
        if (!n) return nullptr;
        if (!n->is_table()) {
            ctx_.fail(n, key(k), fmt::format("expected a table, got {}", type_name(*n)));
            return nullptr;
        }
        return n->as_table();
    }
    // Unknown keys are errors (a typo must not silently change the load).
    void finish(const std::vector<std::string>& allowed) {
        for (auto&& [k, v] : t_) {
            if (std::find(allowed.begin(), allowed.end(), std::string(k.str())) == allowed.end()) {
                std::string list;
                for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
                ctx_.fail(&v, key(k.str()), fmt::format("unknown key; allowed here: {}", list));
                return;
            }
        }
    }
    static const char* type_name(const toml::node& n) {
        switch (n.type()) {
            case toml::node_type::string: return "a string";
            case toml::node_type::integer: return "an integer";
            case toml::node_type::floating_point: return "a number";
            case toml::node_type::boolean: return "a boolean";
            case toml::node_type::array: return "an array";
            case toml::node_type::table: return "a table";
            default: return "a date or time";
        }
    }

  private:
    const toml::table& t_;
    std::string prefix_;
    Ctx& ctx_;
    std::set<std::string> used_;
};

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
        if (!ctx.err && d.low > d.high)
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
    if (!ctx.err && d.min > d.max)
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
    r.duration("duration", p.duration_s);
    r.finish({"process", "rate", "burstiness", "duration"});
}

}  // namespace

Result<Scenario> parse_scenario(std::string_view text, const std::string& source_name) {
    toml::table root;
    try {
        root = toml::parse(text, source_name);
    } catch (const toml::parse_error& e) {
        return make_error(ErrorCode::kInvalidFile, "{}:{}:{}: {}", source_name,
                          e.source().begin.line, e.source().begin.column, e.description());
    }
    Ctx ctx{source_name, std::nullopt};
    Scenario s;
    s.classes.clear();
    Reader r(root, "", ctx);
    r.string("name", s.name);
    r.choice("endpoint", s.endpoint, {"completions", "chat"});
    r.string("model", s.model);
    r.duration("duration", s.duration_s);
    r.integer("requests", s.requests, 1, int64_t(1) << 40);
    r.duration("warmup", s.warmup_s);
    r.duration("cooldown", s.cooldown_s);
    r.duration("timeout", s.timeout_s);
    r.duration("window", s.window_s);
    int64_t seed = 1;
    r.integer("seed", seed, 0, INT64_MAX);
    s.seed = uint64_t(seed);

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
            s.arrival.kind = Arrival::Kind::kOpen;
            double burstiness = 1;
            if (a->contains("phases")) ar.number("burstiness", burstiness, 0, 1e3, true);
            if (const toml::node* ph = ar.get("phases")) {
                const toml::array* arr = ph->as_array();
                if (!arr || arr->empty()) {
                    ctx.fail(ph, "arrival.phases",
                             "expected one or more [[arrival.phases]] tables");
                } else {
                    for (size_t i = 0; i < arr->size() && !ctx.err; ++i) {
                        const toml::node& e = *arr->get(i);
                        std::string key = fmt::format("arrival.phases[{}]", i);
                        if (!e.is_table()) {
                            ctx.fail(&e, key, "expected a table");
                            break;
                        }
                        Phase p;
                        read_phase(*e.as_table(), key, p, process, ctx, burstiness);
                        if (!ctx.err && p.duration_s <= 0 && i + 1 < arr->size()) {
                            ctx.fail(&e, key, "every phase but the last needs duration > 0");
                        }
                        s.arrival.phases.push_back(p);
                    }
                }
                ar.finish({"process", "burstiness", "phases"});
            } else {
                Phase p;
                read_phase(*a, "arrival", p, process, ctx);
                s.arrival.phases.push_back(p);
            }
        }
    } else if (!ctx.err) {
        ctx.fail(&root, "arrival",
                 "missing: add an [arrival] table (process and rate, or process = \"closed\" with "
                 "concurrency)");
    }

    if (const toml::node* cl = r.get("class")) {
        const toml::array* arr = cl->as_array();
        if (!arr || arr->empty()) {
            ctx.fail(cl, "class", "expected one or more [[class]] tables");
        } else {
            for (size_t i = 0; i < arr->size() && !ctx.err; ++i) {
                const toml::node& e = *arr->get(i);
                std::string key = fmt::format("class[{}]", i);
                if (!e.is_table()) {
                    ctx.fail(&e, key, "expected a table");
                    break;
                }
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
                for (const auto& other : s.classes) {
                    if (other.name == c.name)
                        ctx.fail(&e, key + ".name",
                                 fmt::format("duplicate class name '{}'", c.name));
                }
                s.classes.push_back(std::move(c));
            }
        }
    } else if (s.arrival.kind != Arrival::Kind::kTrace && !ctx.err) {
        ctx.fail(&root, "class",
                 "missing: add at least one [[class]] with input and output lengths");
    }

    if (const toml::node* cr = r.get("criteria")) {
        const toml::array* arr = cr->as_array();
        if (!arr) {
            ctx.fail(cr, "criteria",
                     "expected a list of strings such as [\"p99_ttft_ms < 800\", \"error_rate < "
                     "0.001\"]");
        } else {
            for (size_t i = 0; i < arr->size() && !ctx.err; ++i) {
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
    if (const toml::table* st = r.table("stop")) {
        Reader sr(*st, "stop", ctx);
        sr.number("error_rate", s.stop_error_rate, 0, 1, true);
        sr.integer("in_flight", s.stop_in_flight, 1, int64_t(1) << 30);
        sr.finish({"error_rate", "in_flight"});
    }
    r.finish({"name", "endpoint", "model", "duration", "requests", "warmup", "cooldown", "timeout",
              "window", "seed", "arrival", "class", "criteria", "stop"});
    if (ctx.err) return *ctx.err;
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
