#pragma once
// `pagoda bench trace-stats`: what an operator needs to know about a trace before choosing
// block size and batch knobs: arrivals per minute, length percentiles, burstiness (the
// coefficient of variation of the gaps: 1 for Poisson, above for bursty traffic), and for
// Mooncake traces how much of the prompt blocks repeat (prefix-cache potential).

#include <nlohmann/json.hpp>

#include "bench/trace_formats.h"

namespace pagoda::bench {

nlohmann::json trace_stats(const Trace& t);
// A few lines for a terminal.
std::string trace_stats_text(const nlohmann::json& stats);

}  // namespace pagoda::bench
