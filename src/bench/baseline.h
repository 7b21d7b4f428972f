#pragma once
// The performance-baseline store: every bench run is a row in a SQLite file with what it
// ran against (model, server config, hardware, scenario hash, Pagoda version) and its
// headline metrics. A named baseline is the set of runs saved under that name (the latest
// --save-baseline replaces the earlier set); --compare reads it back.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"

namespace pagoda::bench {

struct RunRow {
    int64_t id = 0;
    std::string created_at;  // UTC, ISO 8601
    std::string baseline;    // empty = not part of a baseline
    std::string scenario, scenario_hash, url, model, hardware, version, verdict;
    std::string server_json = "{}";
    std::map<std::string, double> metrics;
};

// "cpu model, N threads, M GiB" of this machine.
std::string hardware_fingerprint();

class BaselineStore {
  public:
    ~BaselineStore();
    // $XDG_DATA_HOME/pagoda/bench.db, else ~/.local/share/pagoda/bench.db.
    static std::string default_path();
    // Opens or creates the file (and its folder) and the schema.
    static Result<std::unique_ptr<BaselineStore>> open(const std::string& path);

    Result<int64_t> record(const RunRow& row);
    // Marks runs as the baseline `name`, replacing any earlier set of that name.
    Status save_baseline(const std::string& name, const std::vector<int64_t>& run_ids);
    Result<std::vector<RunRow>> baseline(const std::string& name);
    Result<std::vector<std::string>> baseline_names();
    Result<std::vector<RunRow>> history(int limit);

  private:
    BaselineStore() = default;
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace pagoda::bench
