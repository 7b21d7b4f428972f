#pragma once
// The warning tier's diagnostic report: what a person needs to see when an alert fires,
// gathered in one place. Sections: the alert, a metric snapshot and the last window of
// the rule's series, KV cache and prefix cache state, the scheduler queue with why-waiting
// counts, the slowest recent requests with their stage breakdown, the config version and
// its recent changes, and host facts. Written as JSON and Markdown to
// <state-dir>/reports/. Thread-safe (pure functions and a file write).

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/result.h"
#include "control/config/config_store.h"
#include "engine/engine.h"

namespace pagoda::control {

struct ReportInputs {
    nlohmann::json alert;            // rule, severity, state, value, expression, summary
    nlohmann::json metric_snapshot;  // {"series": value} of the latest scrape
    nlohmann::json series_window;    // SeriesHistory::dump of the rule's selectors
    const engine::EngineStats* engine = nullptr;
    nlohmann::json slowest_requests;  // RequestLog::slowest()
    std::optional<ConfigVersion> config;
    std::vector<ConfigVersion> recent_changes;
    int64_t now_unix_ms = 0;
};

// The section names every report has, in order.
const std::vector<std::string>& report_sections();
nlohmann::json build_report(const ReportInputs& in);
std::string report_markdown(const nlohmann::json& report);
nlohmann::json host_facts();

struct ReportPaths {
    std::string json_path, markdown_path;
};
// <dir>/<UTC time>-<rule>.json and .md; creates `dir`.
Result<ReportPaths> write_report(const std::string& dir, const nlohmann::json& report);

}  // namespace pagoda::control
