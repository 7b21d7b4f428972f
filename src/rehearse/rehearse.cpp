// The three arms of a rehearsal: capacity probes, the best-static search, the control arm,
// and the JSON of the result (rehearse.h).
#include "rehearse/rehearse.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "base/toml_reader.h"
#include "base/units.h"
#include "model/test_model.h"
#include "router/schedule.h"

namespace pagoda::rehearse {

namespace {

using json = nlohmann::json;

struct Setup {
    model::sim::PerfModel perf;
    const RehearseOptions& o;
    const std::vector<Arrival>& mix;  // the day's requests: the probes' lengths
};

Result<model::sim::PerfModel> perf_model(const RehearseOptions& o) {
    PAGODA_ASSIGN_OR_RETURN(model::sim::GpuSpec gpu, model::sim::find_gpu(o.gpu));
    PAGODA_ASSIGN_OR_RETURN(model::ModelShape shape, model::find_shape(o.model));
    return model::sim::PerfModel::create(gpu, model::sim::SimShape::of(shape), 1,
                                         model::sim::WeightType::kBf16, kernels::KvDtype::kBF16,
                                         gpu.efficiency);
}

ArmPlan static_arm(const std::string& name, const ReplicaConfig& c, int replicas,
                   const RehearseOptions& o) {
    ArmPlan a;
    a.name = name;
    a.replica = c;
    a.replicas = replicas;
    a.cold_start_day_s = o.cold_start_s;
    return a;
}

// Requests per second one replica holds within the SLO: bisection over steady loads with
// the day's own request lengths (10 simulated minutes each).
Result<double> capacity(const Setup& s, const ReplicaConfig& c) {
    double lo = 0, hi = 64;
    for (int i = 0; i < 9; ++i) {
        const double rps = (lo + hi) / 2;
        const std::vector<Arrival> load = steady_load(rps, 600, 7, s.o.max_model_len, &s.mix);
        PAGODA_ASSIGN_OR_RETURN(ArmResult r, simulate(s.perf, s.o.max_model_len, load, {600, 1},
                                                      static_arm("probe", c, 1, s.o), s.o.slo, {}));
        (r.slo_attainment >= s.o.slo.attainment ? lo : hi) = rps;
    }
    return lo;
}

// The fewest replicas with which `c` holds the SLO over the day: from the capacity's guess
// `start`, up while it fails, else down while it holds.
Result<ArmResult> fewest_replicas(const Setup& s, const Day& day, const ReplicaConfig& c, int start,
                                  const std::string& name) {
    auto run = [&](int n) -> Result<ArmResult> {
        PAGODA_ASSIGN_OR_RETURN(ArmResult r,
                                simulate(s.perf, s.o.max_model_len, day.arrivals, day.shape,
                                         static_arm(name, c, n, s.o), s.o.slo, s.o.faults));
        if (s.o.progress) {
            s.o.progress(fmt::format("{}: {} x {}: attainment {:.2f}%", name, n, c.label(),
                                     100 * r.slo_attainment));
        }
        return r;
    };
    int n = std::clamp(start, 1, s.o.max_replicas);
    PAGODA_ASSIGN_OR_RETURN(ArmResult best, run(n));
    const bool holds = best.slo_attainment >= s.o.slo.attainment;
    while (holds && n > 1) {
        PAGODA_ASSIGN_OR_RETURN(ArmResult fewer, run(--n));
        if (fewer.slo_attainment < s.o.slo.attainment) break;
        best = fewer;
    }
    while (!holds && best.slo_attainment < s.o.slo.attainment && n < s.o.max_replicas) {
        PAGODA_ASSIGN_OR_RETURN(best, run(++n));
    }
    return best;
}

// The control arm sizes by the per-replica rate the best static fleet held at the peak
// hour (the capacity a pool reaches, above a lone replica's probe; so at utilisation 1 the
// peak needs what best_static runs). Without a forecast it starts with best_static's count.
ArmPlan control_arm(const ArmResult& best, double peak_hour_rps,
                    const std::vector<double>& forecast, const RehearseOptions& o) {
    const double replica_rps = peak_hour_rps / std::max(1, best.max_replicas);
    ArmPlan a = static_arm("control", best.replica, 0, o);
    a.sizing = true;
    control::PoolSizingConfig& z = a.sizer;
    if (o.pool) {  // the fleet file's pool
        z = *o.pool;
        if (z.replica_rps <= 0) z.replica_rps = replica_rps;
        a.cold_start_day_s = z.cold_start_s;
    } else {
        z.min_replicas = 1;
        z.max_replicas = std::min(o.max_replicas, best.max_replicas + 2);
        z.replica_rps = replica_rps;
        z.ttft_slo_s = o.slo.ttft_s;
        z.cold_start_s = o.cold_start_s;
        z.up_cooldown_s = 60;
        z.down_cooldown_s = 120;
        z.down_stabilisation_s = 600;
    }
    z.target_utilisation = 0.9;
    z.down_headroom = 0.1;
    a.forecast_per_min = forecast;
    a.replicas = forecast.empty() ? best.max_replicas
                                  : std::max(1, int(std::ceil(forecast[0] / replica_rps)));
    return a;
}

json arm_json(const ArmResult& a) {
    json hours = json::array();
    for (size_t h = 0; h < a.hours.size(); ++h) {
        const Bucket& b = a.hours[h];
        hours.push_back({{"hour", h},
                         {"requests", b.requests},
                         {"goodput_rps", b.goodput_rps},
                         {"slo_attainment", b.requests ? double(b.good) / double(b.requests) : 1},
                         {"mean_replicas", b.mean_replicas},
                         {"p99_ttft_s", b.p99_ttft_s},
                         {"preemptions", b.preemptions},
                         {"actions", b.actions},
                         {"refused", b.refused},
                         {"lost_accepted", b.lost}});
    }
    json curve = json::array();
    for (const Bucket& b : a.curve) {
        curve.push_back({{"rate_rps", b.rate_rps},
                         {"replicas", b.mean_replicas},
                         {"p99_ttft_s", b.p99_ttft_s}});
    }
    return {{"config", a.replica.label()},
            {"max_num_seqs", a.replica.max_num_seqs},
            {"max_num_batched_tokens", a.replica.max_num_batched_tokens},
            {"block_size", a.replica.block_size},
            {"requests", a.requests},
            {"goodput_rps", a.goodput_rps},
            {"slo_attainment", a.slo_attainment},
            {"replica_hours", a.replica_hours},
            {"goodput_per_replica_hour", a.goodput_per_replica_hour},
            {"max_replicas", a.max_replicas},
            {"p99_ttft_s", a.p99_ttft_s},
            {"p99_tpot_s", a.p99_tpot_s},
            {"preemptions", a.preemptions},
            {"actions", a.actions},
            {"refused", a.refused},
            {"resumed", a.resumed},
            {"lost_accepted", a.lost},
            {"hours", hours},
            {"curve", curve},
            {"events", a.events}};
}

}  // namespace

Result<Slo> parse_slo(const std::string& text) {
    Slo s;
    std::stringstream in(text);
    std::string item;
    while (std::getline(in, item, ',')) {
        const size_t lt = item.find('<');
        const size_t eq = item.find('=');
        const size_t at = lt != std::string::npos ? lt : eq;
        if (at == std::string::npos) {
            return make_error(ErrorCode::kInvalidArgument,
                              "--slo: '{}' is not KEY<VALUE (keys: p99_ttft_ms, p99_tpot_ms, "
                              "attainment)",
                              item);
        }
        const std::string key = item.substr(0, at), value = item.substr(at + 1);
        char* end = nullptr;
        const double v = std::strtod(value.c_str(), &end);
        if (value.empty() || *end != '\0' || !(v > 0)) {
            return make_error(ErrorCode::kInvalidArgument,
                              "--slo: {} needs a positive number, got '{}'", key, value);
        }
        if (key == "p99_ttft_ms") {
            s.ttft_s = v / 1000;
        } else if (key == "p99_tpot_ms") {
            s.tpot_s = v / 1000;
        } else if (key == "attainment" && v <= 1) {
            s.attainment = v;
        } else {
            return make_error(ErrorCode::kInvalidArgument,
                              "--slo: unknown key '{}' (allowed: p99_ttft_ms, p99_tpot_ms, "
                              "attainment in (0, 1])",
                              key);
        }
    }
    return s;
}

Result<std::vector<Fault>> load_faults(const std::string& path) {
    PAGODA_ASSIGN_OR_RETURN(toml::table t, parse_toml_file(path));
    TomlReader rd(path);
    std::vector<Fault> out;
    rd.only(t, "", {"fault"});
    if (const toml::node* n = t.get("fault")) {
        rd.each_table(n, "fault", [&](size_t, size_t, const toml::node& e, const std::string& k) {
            const toml::table& ft = *e.as_table();
            rd.only(ft, k + ".", {"kind", "at", "duration", "factor"});
            Fault f;
            const std::string kind = rd.str(ft, k + ".", "kind").value_or("");
            if (kind == "slow") {
                f.kind = Fault::Kind::kSlow;
            } else if (kind != "kill") {
                rd.fail(ft.get("kind"), k + ".kind",
                        fmt::format("'{}' is not a fault kind (allowed: kill, slow)", kind));
                return;
            }
            auto at = router::parse_hhmm(rd.str(ft, k + ".", "at").value_or(""));
            if (!at) {
                rd.fail(ft.get("at"), k + ".at", "expected a time of day \"HH:MM\"");
                return;
            }
            f.at_day_s = *at * 60.0;
            f.duration_day_s =
                double(rd.duration(ft, k + ".", "duration").value_or(600'000)) / 1000;
            f.factor = rd.number(ft, k + ".", "factor", 1, 100).value_or(2);
            out.push_back(f);
        });
    }
    if (rd.failed()) return rd.error();
    return out;
}

Result<Rehearsal> rehearse(const Day& day, const std::vector<double>& forecast_per_min,
                           const RehearseOptions& o) {
    PAGODA_ASSIGN_OR_RETURN(model::sim::PerfModel perf, perf_model(o));
    const Setup s{perf, o, day.arrivals};
    Rehearsal r;
    r.day = day;
    // best_static: every grid config's capacity, then the day at the fewest replicas.
    struct Tried {
        ReplicaConfig c;
        double rps = 0;
    };
    std::vector<Tried> tried;
    for (int seqs : o.seqs_grid) {
        for (int toks : o.tokens_grid) {
            Tried t{{seqs, toks, 16, 0.9}, 0};
            PAGODA_ASSIGN_OR_RETURN(t.rps, capacity(s, t.c));
            if (o.progress)
                o.progress(fmt::format("capacity of {}: {:.2f} req/s", t.c.label(), t.rps));
            r.search.push_back({{"config", t.c.label()}, {"replica_rps", t.rps}});
            tried.push_back(t);
        }
    }
    std::sort(tried.begin(), tried.end(),
              [](const Tried& a, const Tried& b) { return a.rps > b.rps; });
    ArmResult best;
    for (size_t i = 0; i < std::min<size_t>(2, tried.size()); ++i) {
        const int start = int(std::ceil(day.peak_hour_rps / std::max(0.01, tried[i].rps))) - 1;
        PAGODA_ASSIGN_OR_RETURN(ArmResult a,
                                fewest_replicas(s, day, tried[i].c, start, "best_static"));
        const bool meets = a.slo_attainment >= o.slo.attainment;
        const bool best_meets = best.slo_attainment >= o.slo.attainment;
        if (i == 0 || (meets && !best_meets) ||
            (meets == best_meets && a.goodput_per_replica_hour > best.goodput_per_replica_hour)) {
            best = a;
        }
    }
    // defaults: vLLM's on an A100 (V1: 2048 batched tokens below H100, 256 sequences).
    ReplicaConfig dflt{
        256, o.gpu.rfind("h100", 0) == 0 || o.gpu.rfind("h200", 0) == 0 ? 8192 : 2048, 16, 0.9};
    double dflt_rps = 0;
    for (const auto& t : tried) {
        if (t.c.max_num_seqs == dflt.max_num_seqs &&
            t.c.max_num_batched_tokens == dflt.max_num_batched_tokens)
            dflt_rps = t.rps;
    }
    if (dflt_rps == 0) {
        PAGODA_ASSIGN_OR_RETURN(dflt_rps, capacity(s, dflt));
    }
    const int dstart = int(std::ceil(day.peak_hour_rps / std::max(0.01, dflt_rps))) - 1;
    PAGODA_ASSIGN_OR_RETURN(ArmResult defaults, fewest_replicas(s, day, dflt, dstart, "defaults"));
    PAGODA_ASSIGN_OR_RETURN(
        ArmResult control,
        simulate(perf, o.max_model_len, day.arrivals, day.shape,
                 control_arm(best, day.peak_hour_rps, forecast_per_min, o), o.slo, o.faults));
    if (o.progress)
        o.progress(fmt::format("control: attainment {:.2f}%", 100 * control.slo_attainment));
    r.arms = {defaults, best, control};
    return r;
}

json Rehearsal::to_json(const RehearseOptions& o) const {
    json arms_j;
    for (const ArmResult& a : arms) arms_j[a.name] = arm_json(a);
    auto ratio = [&](size_t x, size_t y, const char* field) {
        const double d = arms_j[arms[y].name][field].get<double>();
        return d > 0 ? arms_j[arms[x].name][field].get<double>() / d : 0.0;
    };
    return {
        {"day",
         {{"source", day.name},
          {"day_hours", day.shape.day_s / 3600},
          {"compress", day.shape.compress},
          {"requests", day.arrivals.size()},
          {"peak_hour_rps", day.peak_hour_rps}}},
        {"setup",
         {{"gpu", o.gpu},
          {"model", o.model},
          {"cold_start_s", o.cold_start_s},
          {"slo",
           {{"p99_ttft_ms", o.slo.ttft_s * 1000},
            {"p99_tpot_ms", o.slo.tpot_s * 1000},
            {"attainment", o.slo.attainment}}}}},
        {"arms", arms_j},
        {"ratios",
         {{"control_vs_best_static_goodput_per_replica_hour",
           ratio(2, 1, "goodput_per_replica_hour")},
          {"control_vs_defaults_goodput_per_replica_hour", ratio(2, 0, "goodput_per_replica_hour")},
          {"best_static_vs_defaults_goodput_per_replica_hour",
           ratio(1, 0, "goodput_per_replica_hour")},
          {"control_vs_best_static_slo_attainment", ratio(2, 1, "slo_attainment")}}},
        {"search", search}};
}

}  // namespace pagoda::rehearse
