// libFuzzer target: arbitrary bytes as the control plane's stored context-length statistics
// (JSON read back from pagoda.db, which a person or a crash may have damaged). Errors are
// fine; crashes, hangs and unbounded memory are not.
#include <cstddef>
#include <cstdint>
#include <string>

#include "control/policy/length_stats.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    const auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded()) return 0;
    auto s = pagoda::control::ContextLengthStats::from_json(j);
    if (s.ok()) {
        (void)s->all().quantile(0.99);
        (void)s->all().mean();
        (void)s->window_for(int64_t(size) * 3'600'000, 10);
        s->add(int64_t(size), 0);
        (void)s->to_json().dump();
    }
    auto h = pagoda::control::LengthHistogram::from_json(j);
    if (h.ok()) (void)h->part(0, 8000);
    return 0;
}
