// libFuzzer target: alert rule files (TOML), rule expressions evaluated over a small series
// history and translated to PromQL, and Prometheus exposition text (the replica's own
// /metrics as the rules read it). The first byte picks which. Errors are fine; crashes,
// hangs and unbounded memory are not.
#include <cstddef>
#include <cstdint>
#include <string>

#include "control/alerting/alert_rules.h"
#include "metrics/prom_text.h"

using namespace pagoda;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
    switch (data[0] % 3) {
        case 0: {
            auto set = control::parse_rules(text, "fuzz.toml");
            if (set.ok()) {
                for (const auto& r : set->rules) (void)control::to_promql(*r.expr);
                (void)set->history_ms();
            }
            break;
        }
        case 1: {
            auto e = control::parse_expr(text);
            if (!e.ok()) break;
            control::SeriesHistory h;
            const auto a = metrics::parse_text(
                "pagoda_requests_total 1\npagoda_memory_usage_perc 0.5\n"
                "pagoda_time_to_first_token_seconds_bucket{le=\"0.5\"} 1\n"
                "pagoda_time_to_first_token_seconds_bucket{le=\"+Inf\"} 2\n");
            const auto b = metrics::parse_text(
                "pagoda_requests_total 0\npagoda_memory_usage_perc 0.9\n"
                "pagoda_time_to_first_token_seconds_bucket{le=\"0.5\"} 3\n"
                "pagoda_time_to_first_token_seconds_bucket{le=\"+Inf\"} 9\n");
            h.add(0, a.samples);
            h.add(1000, b.samples);
            (void)control::evaluate(**e, h, 1000);
            (void)control::to_promql(**e);
            break;
        }
        default: {
            const auto p = metrics::parse_text(text);
            control::SeriesHistory h;
            h.add(0, p.samples);
            h.add(1000, p.samples);
            for (const auto& s : p.samples) {
                (void)h.rate({s.name, {}}, 5000, 1000);
                (void)control::histogram_quantile(0.9,
                                                  h.bucket_increases({s.name, {}}, 5000, 1000));
            }
            break;
        }
    }
    return 0;
}
