#pragma once
// Report output: JSON (schema in docs/metrics.md), a terminal summary, and a self-contained
// HTML page with inline SVG charts (no scripts, nothing fetched).

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/stats.h"

namespace pagoda::bench {

nlohmann::json report_json(const Report& r);
// The target's process CPU time over the run per request sent, from its /metrics (NaN when
// it exports no process_cpu_seconds_total): the serving overhead on the simulated backend.
double server_cpu_ms_per_request(const Report& r);
// The same over the output tokens the client received.
double server_cpu_us_per_token(const Report& r);
// The server's streamed-answer socket writes (pagoda_http_stream_writes_total) per output
// token the client received; NaN when its /metrics did not say.
double server_writes_per_token(const Report& r);
nlohmann::json stats_json(const Stats& s);
std::string terminal_summary(const Report& r);
std::string html_report(const Report& r, const Scenario& s,
                        const std::vector<RequestRecord>& records);
std::string deltas_table(const std::vector<MetricDelta>& deltas);
nlohmann::json deltas_json(const std::vector<MetricDelta>& deltas);

}  // namespace pagoda::bench
