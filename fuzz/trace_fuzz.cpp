// libFuzzer target: arbitrary bytes as a trace file (any format `pagoda bench --trace`
// reads), with and without a BurstGPT model filter, then the trace statistics of what
// parsed. Errors are fine; crashes, hangs and unbounded memory are not.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "bench/trace_formats.h"
#include "bench/trace_stats.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    for (const char* model : {"", "ChatGPT"}) {
        std::istringstream in(text);
        auto t = pagoda::bench::parse_trace(in, "fuzz", pagoda::bench::TraceReadOptions{model});
        if (t.ok()) (void)pagoda::bench::trace_stats_text(pagoda::bench::trace_stats(*t));
    }
    return 0;
}
