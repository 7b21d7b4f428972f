#pragma once
// `pagoda tune`: the search over serving knobs. Each trial is a configuration (knob ->
// value) run as a short-lived replica under a bench scenario; this file holds what does not
// need processes: the search space, the grid and coordinate strategies, the ranking (the
// SLO first, then goodput, then goodput per GPU, then p99 TTFT), and the outputs (trial
// table for the terminal, JSON, HTML, and the winning config file for `pagoda serve
// --config`). The runner lives in apps/cmd_tune.cpp.

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"

namespace pagoda::bench {

struct Knob {
    std::string name;  // max_num_seqs, max_num_batched_tokens, block_size, tensor_parallel_size
    std::string flag;  // the pagoda serve flag, e.g. --max-num-seqs
    std::vector<int64_t> values;
    int64_t start = 0;  // the serve default when it is among the values, else the first
};

// "max_num_seqs,block_size=16:32" -> knobs with default or given values. Errors list the
// knobs that can be searched.
Result<std::vector<Knob>> parse_search(const std::string& spec);

using TuneConfig = std::map<std::string, int64_t>;
std::string config_label(const TuneConfig& c);  // "max_num_seqs=64 block_size=16"

struct Trial {
    int index = 0;
    TuneConfig config;
    std::string error;  // the replica did not start or the bench failed to run
    bool meets_slo = false;
    int gpus = 1;
    double goodput_rps = 0, goodput_per_gpu = 0, requests_per_s = 0, output_tokens_per_s = 0;
    double p99_ttft_ms = 0, p99_tpot_ms = 0, error_rate = 0;
    double mean_batch = 0;  // sequences sampled per engine step (server metrics)
    double kv_waste = 0;    // share of the KV slots of finished requests' last blocks left empty
    double wall_s = 0;
    nlohmann::json criteria = nlohmann::json::array();
};

// True when `a` ranks above `b`.
bool better(const Trial& a, const Trial& b);

// Every combination, in order (the first knob varies slowest).
std::vector<TuneConfig> grid(const std::vector<Knob>& knobs);

// Coordinate search from every knob's start: for each knob in turn, try its other values
// with the rest fixed at the best so far and keep the best; repeat until a pass changes
// nothing or `max_trials` trials ran. `run` is called once per distinct configuration.
std::vector<Trial> coordinate_search(const std::vector<Knob>& knobs,
                                     const std::function<Trial(const TuneConfig&)>& run,
                                     int max_trials);

// The best trial that meets the SLO, if any (index into trials), else -1.
int best_trial(const std::vector<Trial>& trials);

// The trial table for the terminal; `best` is marked.
std::string trials_table(const std::vector<Trial>& trials, int best);
nlohmann::json trials_json(const std::vector<Trial>& trials, int best);
std::string trials_html(const std::vector<Trial>& trials, int best, const std::string& title);

// A config file for `pagoda serve --config`: the base serve flags (long name, value; an
// empty value is a switch) and the winning knobs, with a comment saying where it came from.
std::string config_toml(const std::vector<std::pair<std::string, std::string>>& base,
                        const std::vector<Knob>& knobs, const TuneConfig& best,
                        const std::string& comment);

}  // namespace pagoda::bench
