// `pagoda tune`'s pure parts: the search space (from the settings table), grids, ranking.
#include "bench/tune.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "settings/settings.h"

namespace pagoda::bench {

using json = nlohmann::json;

namespace {

// The searchable settings: those the settings table gives a tune grid.
bool searchable(const settings::Spec& s) { return !s.tune_grid.empty(); }

std::string fmt_num(double v, int prec = 1) {
    return std::isfinite(v) ? fmt::format("{:.{}f}", v, prec) : "-";
}

}  // namespace

Result<std::vector<Knob>> parse_search(const std::string& spec) {
    std::vector<Knob> out;
    std::stringstream in(spec);
    std::string item;
    std::set<std::string> seen;
    while (std::getline(in, item, ',')) {
        if (item.empty()) continue;
        const size_t eq = item.find('=');
        std::string name = item.substr(0, eq);
        std::replace(name.begin(), name.end(), '-', '_');
        const settings::Spec* def = settings::find(name);
        if (def == nullptr || !searchable(*def)) {
            return make_error(ErrorCode::kInvalidArgument,
                              "--search: unknown knob '{}' (searchable: {})", name,
                              settings::names(searchable));
        }
        if (!seen.insert(name).second) {
            return make_error(ErrorCode::kInvalidArgument, "--search: '{}' given twice", name);
        }
        Knob k{std::string(def->name), def->flag(), def->tune_grid, 0};
        if (eq != std::string::npos) {
            k.values.clear();
            std::stringstream vs(item.substr(eq + 1));
            std::string v;
            while (std::getline(vs, v, ':')) {
                char* end = nullptr;
                const long long x = std::strtoll(v.c_str(), &end, 10);
                if (v.empty() || *end != '\0' || x < 1) {
                    return make_error(ErrorCode::kInvalidArgument,
                                      "--search: {} value '{}' is not a positive integer (write "
                                      "values as {}=16:32:64)",
                                      name, v, name);
                }
                if (Status st = settings::check(*def, x); !st.ok()) {
                    return make_error(ErrorCode::kInvalidArgument, "--search: {}",
                                      st.error().message);
                }
                if (std::find(k.values.begin(), k.values.end(), x) == k.values.end())
                    k.values.push_back(x);
            }
            if (k.values.empty()) {
                return make_error(ErrorCode::kInvalidArgument, "--search: {} has no values", name);
            }
        }
        const bool has_default = std::find(k.values.begin(), k.values.end(),
                                           settings::default_value(*def).number) != k.values.end();
        k.start = has_default ? settings::default_value(*def).number : k.values.front();
        out.push_back(std::move(k));
    }
    if (out.empty()) {
        return make_error(ErrorCode::kInvalidArgument, "--search names no knob (searchable: {})",
                          settings::names(searchable));
    }
    return out;
}

std::string config_label(const TuneConfig& c) {
    std::string s;
    for (const auto& [k, v] : c) s += fmt::format("{}{}={}", s.empty() ? "" : " ", k, v);
    return s;
}

bool better(const Trial& a, const Trial& b) {
    const bool ok_a = a.error.empty(), ok_b = b.error.empty();
    if (ok_a != ok_b) return ok_a;
    if (a.meets_slo != b.meets_slo) return a.meets_slo;
    // Goodput within 2% is a tie (open-loop runs all serve what was offered): then fewer
    // GPUs for it, then the lower p99 TTFT.
    const double hi = std::max(a.goodput_rps, b.goodput_rps);
    if (hi > 0 && std::abs(a.goodput_rps - b.goodput_rps) > 0.02 * hi)
        return a.goodput_rps > b.goodput_rps;
    if (std::abs(a.goodput_per_gpu - b.goodput_per_gpu) > 0.02 * std::max(a.goodput_per_gpu, 1e-9))
        return a.goodput_per_gpu > b.goodput_per_gpu;
    return a.p99_ttft_ms < b.p99_ttft_ms;
}

std::vector<TuneConfig> grid(const std::vector<Knob>& knobs) {
    std::vector<TuneConfig> out = {TuneConfig{}};
    for (const Knob& k : knobs) {
        std::vector<TuneConfig> next;
        for (const TuneConfig& c : out) {
            for (int64_t v : k.values) {
                TuneConfig d = c;
                d[k.name] = v;
                next.push_back(std::move(d));
            }
        }
        out = std::move(next);
    }
    return out;
}

std::vector<Trial> coordinate_search(const std::vector<Knob>& knobs,
                                     const std::function<Trial(const TuneConfig&)>& run,
                                     int max_trials) {
    std::vector<Trial> trials;
    std::map<TuneConfig, size_t> done;
    auto trial = [&](const TuneConfig& c) -> const Trial* {
        auto it = done.find(c);
        if (it != done.end()) return &trials[it->second];
        if (int(trials.size()) >= max_trials) return nullptr;
        trials.push_back(run(c));
        done[c] = trials.size() - 1;
        return &trials.back();
    };
    TuneConfig best_cfg;
    for (const Knob& k : knobs) best_cfg[k.name] = k.start;
    const Trial* first = trial(best_cfg);
    if (first == nullptr) return trials;
    Trial best = *first;
    for (bool changed = true; changed;) {
        changed = false;
        for (const Knob& k : knobs) {
            for (int64_t v : k.values) {
                TuneConfig c = best.config;
                c[k.name] = v;
                const Trial* t = trial(c);
                if (t == nullptr) return trials;
                if (better(*t, best)) {
                    best = *t;
                    changed = true;
                }
            }
        }
    }
    return trials;
}

int best_trial(const std::vector<Trial>& trials) {
    int best = -1;
    for (size_t i = 0; i < trials.size(); ++i) {
        if (!trials[i].error.empty() || !trials[i].meets_slo) continue;
        if (best < 0 || better(trials[i], trials[size_t(best)])) best = int(i);
    }
    return best;
}

std::string trials_table(const std::vector<Trial>& trials, int best) {
    std::string o = fmt::format(
        "{:>3} {:<58} {:>4} {:>8} {:>8} {:>9} {:>9} {:>7} {:>6} {:>6}  {}\n", "#", "configuration",
        "SLO", "goodput", "per GPU", "p99 TTFT", "p99 TPOT", "batch", "b/TP", "waste", "");
    for (size_t i = 0; i < trials.size(); ++i) {
        const Trial& t = trials[i];
        const std::string mark = int(i) == best ? "<- best" : "";
        if (!t.error.empty()) {
            o += fmt::format("{:>3} {:<58} {}\n", t.index, config_label(t.config),
                             "error: " + t.error);
            continue;
        }
        o += fmt::format("{:>3} {:<58} {:>4} {:>8} {:>8} {:>9} {:>9} {:>7} {:>6} {:>5}%  {}\n",
                         t.index, config_label(t.config), t.meets_slo ? "yes" : "no",
                         fmt_num(t.goodput_rps, 2), fmt_num(t.goodput_per_gpu, 2),
                         fmt_num(t.p99_ttft_ms), fmt_num(t.p99_tpot_ms), fmt_num(t.mean_batch),
                         fmt_num(t.mean_batch / t.gpus, 2), fmt_num(100 * t.kv_waste), mark);
    }
    o += "(goodput: requests/s meeting their class SLOs; batch: sequences sampled per engine step; "
         "b/TP: batch / tensor-parallel size; waste: empty KV slots in finished requests' last "
         "blocks)\n";
    return o;
}

json trials_json(const std::vector<Trial>& trials, int best) {
    json arr = json::array();
    for (const Trial& t : trials) {
        arr.push_back({{"index", t.index},
                       {"config", t.config},
                       {"error", t.error.empty() ? json(nullptr) : json(t.error)},
                       {"meets_slo", t.meets_slo},
                       {"gpus", t.gpus},
                       {"goodput_rps", t.goodput_rps},
                       {"goodput_per_gpu", t.goodput_per_gpu},
                       {"requests_per_s", t.requests_per_s},
                       {"output_tokens_per_s", t.output_tokens_per_s},
                       {"p99_ttft_ms", t.p99_ttft_ms},
                       {"p99_tpot_ms", t.p99_tpot_ms},
                       {"error_rate", t.error_rate},
                       {"mean_batch", t.mean_batch},
                       {"batch_per_tp", t.mean_batch / std::max(1, t.gpus)},
                       {"kv_waste", t.kv_waste},
                       {"wall_s", t.wall_s},
                       {"criteria", t.criteria}});
    }
    return {{"trials", arr},
            {"best", best >= 0 ? json(trials[size_t(best)].index) : json(nullptr)}};
}

std::string trials_html(const std::vector<Trial>& trials, int best, const std::string& title) {
    auto esc = [](const std::string& s) {
        std::string o;
        for (char c : s) {
            if (c == '<')
                o += "&lt;";
            else if (c == '>')
                o += "&gt;";
            else if (c == '&')
                o += "&amp;";
            else
                o += c;
        }
        return o;
    };
    double top = 0;
    for (const Trial& t : trials) top = std::max(top, t.goodput_rps);
    std::string o = "<!doctype html><meta charset=utf-8><title>" + esc(title) +
                    "</title><style>body{font:14px sans-serif;margin:2em}td,th{padding:2px "
                    "8px;text-align:right}td:nth-child(2){text-align:left}.best{background:#dfd}"
                    ".no{color:#a00}</style><h1>" +
                    esc(title) +
                    "</h1><table><tr><th>#<th>configuration<th>SLO<th>goodput "
                    "req/s<th><th>per GPU<th>p99 TTFT ms<th>p99 TPOT ms<th>batch<th>batch/TP<th>"
                    "KV waste</tr>";
    for (size_t i = 0; i < trials.size(); ++i) {
        const Trial& t = trials[i];
        const double w = top > 0 ? 160 * t.goodput_rps / top : 0;
        o += fmt::format(
            "<tr class='{}'><td>{}<td>{}<td class='{}'>{}<td>{}<td><svg width=160 height=10><rect "
            "width={:.0f} height=10 fill='{}'/></svg><td>{}<td>{}<td>{}<td>{}<td>{}<td>{}%</tr>",
            int(i) == best ? "best" : "", t.index, esc(config_label(t.config)),
            t.meets_slo ? "" : "no", t.error.empty() ? (t.meets_slo ? "yes" : "no") : esc(t.error),
            fmt_num(t.goodput_rps, 2), w, t.meets_slo ? "#3a3" : "#bbb",
            fmt_num(t.goodput_per_gpu, 2), fmt_num(t.p99_ttft_ms), fmt_num(t.p99_tpot_ms),
            fmt_num(t.mean_batch), fmt_num(t.mean_batch / std::max(1, t.gpus), 2),
            fmt_num(100 * t.kv_waste));
    }
    o += "</table>";
    return o;
}

std::string config_toml(const std::vector<std::pair<std::string, std::string>>& base,
                        const std::vector<Knob>& knobs, const TuneConfig& best,
                        const std::string& comment) {
    std::string o;
    std::stringstream c(comment);
    for (std::string line; std::getline(c, line);) o += "# " + line + "\n";
    auto value = [](const std::string& v) -> std::string {
        if (v.empty()) return "true";
        char* end = nullptr;
        std::strtod(v.c_str(), &end);
        if (*end == '\0') return v;
        return json(v).dump();  // a TOML basic string is JSON-escaped text
    };
    std::set<std::string> searched;
    for (const Knob& k : knobs) searched.insert(k.flag.substr(2));
    for (const auto& [k, v] : base) {
        if (!searched.count(k)) o += fmt::format("{} = {}\n", k, value(v));
    }
    for (const Knob& k : knobs) o += fmt::format("{} = {}\n", k.flag.substr(2), best.at(k.name));
    return o;
}

}  // namespace pagoda::bench
