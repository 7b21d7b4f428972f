// Calibration of the performance model: the implementation (the contract is in
// model/sim/calibrate.h).
#include "model/sim/calibrate.h"

#include <fmt/core.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/toml_reader.h"
#include "model/sim/published_toml.h"  // generated from published.toml: kPublishedToml

namespace pagoda::model::sim {

namespace {

Result<kernels::KvDtype> kv_type(const std::string& s) {
    if (s == "bf16") return kernels::KvDtype::kBF16;
    if (s == "f16" || s == "fp16") return kernels::KvDtype::kF16;
    if (s == "f32") return kernels::KvDtype::kF32;
    return make_error(ErrorCode::kInvalidArgument, "kv_cache_dtype '{}' (allowed: bf16, f16, f32)",
                      s);
}

const char* kv_name(kernels::KvDtype t) {
    return t == kernels::KvDtype::kF32 ? "f32" : t == kernels::KvDtype::kF16 ? "f16" : "bf16";
}

const char* weight_name(WeightType w) {
    switch (w) {
        case WeightType::kFp8: return "fp8";
        case WeightType::kQ8_0: return "q8_0";
        case WeightType::kQ4_0: return "q4_0";
        case WeightType::kBf16: break;
    }
    return "bf16";
}

Result<StepMeasurement> read_step(const toml::table& t, const std::string& where) {
    StepMeasurement m;
    auto integer = [&](const char* key, int64_t lo, int64_t hi, int64_t def,
                       bool required) -> Result<int64_t> {
        const toml::node* n = t.get(key);
        if (n == nullptr) {
            if (!required) return def;
            return make_error(ErrorCode::kInvalidArgument, "{} needs '{}'", where, key);
        }
        if (!n->is_integer() || *n->value<int64_t>() < lo || *n->value<int64_t>() > hi) {
            return make_error(ErrorCode::kInvalidArgument,
                              "{}: '{}' must be an integer in [{}, {}]", where, key, lo, hi);
        }
        return *n->value<int64_t>();
    };
    PAGODA_ASSIGN_OR_RETURN(int64_t seqs, integer("seqs", 1, 65536, 1, false));
    PAGODA_ASSIGN_OR_RETURN(int64_t tokens, integer("new_tokens", 1, 1 << 20, 1, false));
    PAGODA_ASSIGN_OR_RETURN(m.context, integer("context", 0, int64_t(1) << 24, 0, false));
    m.seqs = int(seqs);
    m.new_tokens = int(tokens);
    const toml::node* ms = t.get("ms");
    if (ms == nullptr || !(ms->is_floating_point() || ms->is_integer()) ||
        !(ms->value<double>().value_or(0) > 0)) {
        return make_error(ErrorCode::kInvalidArgument,
                          "{} needs 'ms', the measured step time in milliseconds (> 0)", where);
    }
    m.ms = *ms->value<double>();
    m.note = t.get("note") ? t.get("note")->value_or(std::string()) : "";
    for (const auto& [k, v] : t) {
        const std::string key(k.str());
        if (key != "seqs" && key != "new_tokens" && key != "context" && key != "ms" &&
            key != "note" && key != "batch") {
            return make_error(ErrorCode::kInvalidArgument,
                              "{}: unknown key '{}' (allowed: seqs, new_tokens, context, ms, "
                              "note, batch)",
                              where, key);
        }
    }
    if (const toml::node* b = t.get("batch")) {
        const toml::array* rows = b->as_array();
        for (size_t i = 0; rows != nullptr && i < rows->size(); ++i) {
            const toml::array* r = (*rows)[i].as_array();
            if (r == nullptr || r->size() != 3 || !(*r)[0].is_integer() || !(*r)[1].is_integer() ||
                !(*r)[2].is_integer() || *(*r)[0].value<int64_t>() < 1 ||
                *(*r)[1].value<int64_t>() < 0) {
                return make_error(ErrorCode::kInvalidArgument,
                                  "{}: batch[{}] must be [new_tokens >= 1, context >= 0, logits "
                                  "0|1]",
                                  where, i);
            }
            m.mix.push_back({int(*(*r)[0].value<int64_t>()), *(*r)[1].value<int64_t>(),
                             *(*r)[2].value<int64_t>() != 0});
        }
        if (m.mix.empty()) {
            return make_error(ErrorCode::kInvalidArgument,
                              "{}: batch must be a non-empty array of [new_tokens, context, "
                              "logits]",
                              where);
        }
    }
    return m;
}

Result<MeasurementSet> read_set(const toml::table& t, const std::string& where) {
    MeasurementSet s;
    auto text = [&](const char* key, std::string& out, bool required) -> Status {
        const toml::node* n = t.get(key);
        if (n == nullptr && !required) return ok_status();
        if (n == nullptr || !n->is_string() || n->value_or(std::string()).empty()) {
            return make_error(ErrorCode::kInvalidArgument, "{} needs a non-empty string '{}'",
                              where, key);
        }
        out = *n->value<std::string>();
        return ok_status();
    };
    PAGODA_TRY(text("gpu", s.gpu, true));
    PAGODA_TRY(text("model", s.model, true));
    PAGODA_TRY(text("source", s.source, true));
    std::string w = "bf16", kv = "bf16";
    PAGODA_TRY(text("weight_dtype", w, false));
    PAGODA_TRY(text("kv_cache_dtype", kv, false));
    PAGODA_ASSIGN_OR_RETURN(s.weights, parse_weight_type(w));
    PAGODA_ASSIGN_OR_RETURN(s.kv, kv_type(kv));
    if (const toml::node* n = t.get("tp")) {
        if (!n->is_integer() || *n->value<int64_t>() < 1 || *n->value<int64_t>() > 64)
            return make_error(ErrorCode::kInvalidArgument, "{}: 'tp' must be in [1, 64]", where);
        s.tp = int(*n->value<int64_t>());
    }
    const toml::array* steps = t.get("steps") ? t.get("steps")->as_array() : nullptr;
    if (steps == nullptr || steps->empty()) {
        return make_error(ErrorCode::kInvalidArgument, "{} needs a non-empty array 'steps'", where);
    }
    for (size_t i = 0; i < steps->size(); ++i) {
        const toml::table* row = (*steps)[i].as_table();
        const std::string w2 = fmt::format("{} steps[{}]", where, i);
        if (row == nullptr) {
            return make_error(ErrorCode::kInvalidArgument, "{} is not a table {{seqs, ms, ...}}",
                              w2);
        }
        PAGODA_ASSIGN_OR_RETURN(StepMeasurement m, read_step(*row, w2));
        s.steps.push_back(std::move(m));
    }
    return s;
}

// Squared log errors of all rows, or +inf when a prediction fails.
double loss(const std::vector<MeasurementSet>& sets, const std::vector<SetModel>& models,
            const Efficiency& eff) {
    auto r = evaluate(sets, models, eff);
    if (!r.ok()) return INFINITY;
    double sum = 0;
    for (const FitRow& row : r->rows) {
        const double e = std::log(row.predicted_ms / row.measured_ms);
        sum += e * e;
    }
    return sum;
}

// Nelder-Mead minimisation of f from x0 with initial steps `step`; returns the best point.
std::vector<double> nelder_mead(const std::function<double(const std::vector<double>&)>& f,
                                std::vector<double> x0, const std::vector<double>& step) {
    const size_t n = x0.size();
    std::vector<std::vector<double>> p(n + 1, x0);
    for (size_t i = 0; i < n; ++i) p[i + 1][i] += step[i];
    std::vector<double> fv(n + 1);
    for (size_t i = 0; i <= n; ++i) fv[i] = f(p[i]);
    auto along = [&](const std::vector<double>& c, const std::vector<double>& w, double t) {
        std::vector<double> x(n);
        for (size_t i = 0; i < n; ++i) x[i] = c[i] + t * (w[i] - c[i]);
        return x;
    };
    for (int it = 0; it < 4000; ++it) {
        std::vector<size_t> order(n + 1);
        for (size_t i = 0; i <= n; ++i) order[i] = i;
        std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return fv[a] < fv[b]; });
        const size_t best = order[0], worst = order[n], second = order[n - 1];
        if (std::abs(fv[worst] - fv[best]) < 1e-14 * (1 + std::abs(fv[best]))) break;
        std::vector<double> c(n, 0.0);
        for (size_t i = 0; i <= n; ++i) {
            if (i == worst) continue;
            for (size_t j = 0; j < n; ++j) c[j] += p[i][j] / double(n);
        }
        const auto r = along(c, p[worst], -1.0);
        const double fr = f(r);
        if (fr < fv[best]) {
            const auto e = along(c, p[worst], -2.0);
            const double fe = f(e);
            p[worst] = fe < fr ? e : r;
            fv[worst] = std::min(fe, fr);
        } else if (fr < fv[second]) {
            p[worst] = r;
            fv[worst] = fr;
        } else {
            const auto k = along(c, p[worst], fr < fv[worst] ? -0.5 : 0.5);
            const double fk = f(k);
            if (fk < std::min(fr, fv[worst])) {
                p[worst] = k;
                fv[worst] = fk;
            } else {  // shrink towards the best
                for (size_t i = 0; i <= n; ++i) {
                    if (i == best) continue;
                    p[i] = along(p[best], p[i], 0.5);
                    fv[i] = f(p[i]);
                }
            }
        }
    }
    size_t best = 0;
    for (size_t i = 1; i <= n; ++i)
        if (fv[i] < fv[best]) best = i;
    return p[best];
}

}  // namespace

const char* published_measurements() { return kPublishedToml; }

std::vector<SeqWork> StepMeasurement::batch() const {
    if (!mix.empty()) return mix;
    return std::vector<SeqWork>(size_t(seqs), SeqWork{new_tokens, context, true});
}

Result<std::vector<MeasurementSet>> parse_measurements(std::string_view text,
                                                       std::string_view origin) {
    PAGODA_ASSIGN_OR_RETURN(toml::table root, parse_toml(text, std::string(origin)));
    const toml::array* sets = root.get("set") ? root.get("set")->as_array() : nullptr;
    if (sets == nullptr || sets->empty()) {
        return make_error(ErrorCode::kInvalidArgument,
                          "{}: no [[set]] of measurements (see src/model/sim/calibrate.h)", origin);
    }
    std::vector<MeasurementSet> out;
    for (size_t i = 0; i < sets->size(); ++i) {
        const toml::table* t = (*sets)[i].as_table();
        const std::string where = fmt::format("{}: set {}", origin, i + 1);
        if (t == nullptr)
            return make_error(ErrorCode::kInvalidArgument, "{} is not a table", where);
        PAGODA_ASSIGN_OR_RETURN(MeasurementSet s, read_set(*t, where));
        out.push_back(std::move(s));
    }
    return out;
}

std::string measurements_toml(const std::vector<MeasurementSet>& sets) {
    auto quoted = [](const std::string& v) {
        std::ostringstream o;
        o << toml::value<std::string>(v);
        return o.str();
    };
    std::string o;
    for (const MeasurementSet& s : sets) {
        o += fmt::format(
            "[[set]]\ngpu = {}\nmodel = {}\ntp = {}\nweight_dtype = \"{}\"\nkv_cache_dtype = "
            "\"{}\"\nsource = {}\nsteps = [\n",
            quoted(s.gpu), quoted(s.model), s.tp, weight_name(s.weights), kv_name(s.kv),
            quoted(s.source));
        for (const StepMeasurement& m : s.steps) {
            if (!m.mix.empty()) {
                std::string b;
                for (const SeqWork& w : m.mix)
                    b += fmt::format("{}[{}, {}, {}]", b.empty() ? "" : ", ", w.new_tokens,
                                     w.context, w.logits ? 1 : 0);
                o += fmt::format("  {{ batch = [{}], ms = {:.4f} }},\n", b, m.ms);
                continue;
            }
            o += fmt::format("  {{ seqs = {}, new_tokens = {}, context = {}, ms = {:.4f}{} }},\n",
                             m.seqs, m.new_tokens, m.context, m.ms,
                             m.note.empty() ? "" : ", note = " + quoted(m.note));
        }
        o += "]\n\n";
    }
    return o;
}

Result<std::vector<StepMeasurement>> parse_step_trace(std::string_view jsonl,
                                                      std::string_view origin, size_t max_rows) {
    std::vector<StepMeasurement> all;
    size_t line_no = 0, start = 0;
    while (start < jsonl.size()) {
        size_t end = jsonl.find('\n', start);
        if (end == std::string_view::npos) end = jsonl.size();
        const std::string_view line = jsonl.substr(start, end - start);
        start = end + 1;
        ++line_no;
        if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
        const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
        StepMeasurement m;
        bool good = j.is_object() && j.contains("batch") && j["batch"].is_array() &&
                    !j["batch"].empty() && j.contains("ms") && j["ms"].is_number() &&
                    j["ms"].get<double>() > 0;
        for (size_t i = 0; good && i < j["batch"].size(); ++i) {
            const nlohmann::json& r = j["batch"][i];
            good = r.is_array() && r.size() == 3 && r[0].is_number_integer() &&
                   r[1].is_number_integer() && r[2].is_number_integer() && r[0].get<int>() >= 1 &&
                   r[1].get<int64_t>() >= 0;
            if (good) m.mix.push_back({r[0].get<int>(), r[1].get<int64_t>(), r[2].get<int>() != 0});
        }
        if (!good) {
            return make_error(ErrorCode::kInvalidArgument,
                              "{}: line {}: expected {{\"batch\": [[new_tokens, context, logits], "
                              "...], \"ms\": > 0}}",
                              origin, line_no);
        }
        m.ms = j["ms"].get<double>();
        all.push_back(std::move(m));
    }
    if (all.empty()) return make_error(ErrorCode::kInvalidArgument, "{}: no steps", origin);
    if (max_rows == 0 || all.size() <= max_rows) return all;
    std::vector<StepMeasurement> some;
    for (size_t i = 0; i < max_rows; ++i) some.push_back(all[i * all.size() / max_rows]);
    return some;
}

Result<FitResult> evaluate(const std::vector<MeasurementSet>& sets,
                           const std::vector<SetModel>& models, const Efficiency& eff) {
    if (sets.size() != models.size()) {
        return make_error(ErrorCode::kInvalidArgument, "{} sets but {} models", sets.size(),
                          models.size());
    }
    FitResult r;
    r.efficiency = eff;
    double sq = 0;
    // Measured steps are the engine's own (vLLM's benchmark_latency, the CPU engine's step
    // timings): no serving API per sequence, so its overhead (fitted to loaded serving by
    // `pagoda sim loaded`) stays out of these rows.
    Efficiency engine_only = eff;
    engine_only.seq_overhead_ms = 0;
    for (size_t i = 0; i < sets.size(); ++i) {
        const MeasurementSet& s = sets[i];
        PAGODA_ASSIGN_OR_RETURN(
            PerfModel pm,
            PerfModel::create(models[i].gpu, models[i].shape, s.tp, s.weights, s.kv, engine_only));
        for (size_t j = 0; j < s.steps.size(); ++j) {
            FitRow row{i, j, s.steps[j].ms, pm.step(s.steps[j].batch()).total_s * 1000};
            sq += row.rel_error() * row.rel_error();
            r.max_abs_rel_error = std::max(r.max_abs_rel_error, std::abs(row.rel_error()));
            r.rows.push_back(row);
        }
    }
    r.rms_rel_error = r.rows.empty() ? 0 : std::sqrt(sq / double(r.rows.size()));
    return r;
}

Result<FitResult> fit(const std::vector<MeasurementSet>& sets, const std::vector<SetModel>& models,
                      const Efficiency& start, const FitFactors& factors) {
    PAGODA_TRY(start.validate());
    if (auto first = evaluate(sets, models, start); !first.ok()) return first.error();
    Efficiency e = start;
    // Each factor as a coordinate: efficiencies in log space over [0.01, 1], the overhead
    // linearly over [0, 200) ms. A small pull towards the start keeps factors the rows do
    // not constrain where they were.
    struct Coord {
        double* v;
        double lo, hi, start;
        bool log;
    };
    std::vector<Coord> coords;
    if (factors.compute) coords.push_back({&e.compute, 0.01, 1.0, start.compute, true});
    if (factors.memory) coords.push_back({&e.memory, 0.01, 1.0, start.memory, true});
    if (factors.network) coords.push_back({&e.network, 0.01, 1.0, start.network, true});
    if (factors.attention) coords.push_back({&e.attention, 0.01, 1.0, start.attention, true});
    if (factors.overlap) coords.push_back({&e.overlap, 0.0, 1.0, start.overlap, false});
    if (factors.overhead)
        coords.push_back({&e.step_overhead_ms, 0.0, 199.0, start.step_overhead_ms, false});
    auto pull = [&](const Coord& c, double v) {
        const double d = c.log ? std::log(v / c.start) : (v - c.start) / 10.0;
        return 1e-8 * d * d;
    };
    // Coordinates: log of an efficiency, the overhead itself; outside the bounds costs more
    // the further out it is.
    auto set = [&](const std::vector<double>& x) {
        double out = 0;
        for (size_t i = 0; i < coords.size(); ++i) {
            const Coord& c = coords[i];
            const double v = c.log ? std::exp(x[i]) : x[i];
            const double clamped = std::clamp(v, c.lo, c.hi);
            out += std::abs(v - clamped);
            *c.v = clamped;
        }
        return out;
    };
    auto objective = [&](const std::vector<double>& x) {
        const double outside = set(x);
        double l = loss(sets, models, e) + 1e3 * outside;
        for (const Coord& c : coords) l += pull(c, *c.v);
        return l;
    };
    std::vector<double> x, step;
    for (const Coord& c : coords) {
        x.push_back(c.log ? std::log(c.start) : c.start);
        step.push_back(c.log ? 0.3 : 1.0);
    }
    if (!coords.empty()) {
        for (int restart = 0; restart < 4; ++restart) x = nelder_mead(objective, x, step);
        set(x);
    }
    return evaluate(sets, models, e);
}

}  // namespace pagoda::model::sim
