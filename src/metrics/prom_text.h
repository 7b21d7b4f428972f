#pragma once
// A reader of the Prometheus text exposition format (version 0.0.4): the samples of a
// scrape as (name, labels, value). The control plane reads the replica's own /metrics text
// with it, so alert rules name exactly the series an external Prometheus would scrape.
// Comment lines are skipped; a malformed line is counted and skipped. Thread-safe (pure).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "metrics/metrics.h"

namespace pagoda::metrics {

struct Sample {
    std::string name;
    Labels labels;  // in the order written
    double value = 0;

    // The value of label `key`, or "" when absent.
    std::string_view label(std::string_view key) const;
};

struct ParsedText {
    std::vector<Sample> samples;
    int64_t bad_lines = 0;
    int64_t first_bad_line = 0;  // 1-based, 0 when none
};

ParsedText parse_text(std::string_view text);

}  // namespace pagoda::metrics
