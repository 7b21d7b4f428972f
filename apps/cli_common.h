#pragma once
// Shared helpers of the pagoda CLI subcommands: flag parsing helpers, error reporting,
// the bundled model path. Used only by apps/.

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/units.h"  // parse_memory, for the flags
#include "tokenizer/vocab.h"

namespace pagoda::app {

// The model used when -m is not given.
std::string default_model_path();
// "90" or "90s", "500ms", "5m", "24h", "1d": a duration in milliseconds (>= 0).
Result<int64_t> parse_duration_ms(const std::string& s);
// Prints "error: <message>" on one line to stderr and returns exit code 1.
int fail(const Error& e);
// Benchmark prompt of `len` tokens: BOS, then deterministic pseudo-random non-control ids
// (a different stream per index).
std::vector<int32_t> synthetic_prompt(const tokenizer::Vocab& v, int len, int index);
// A running server's admin API: the URL and the admin key (else PAGODA_ADMIN_API_KEY).
struct AdminTarget {
    std::string url = "http://127.0.0.1:8000";
    std::string admin_key;
};
// Sends one admin request and prints the JSON answer (indented) to stdout. Returns 0, or 1
// on a transport or HTTP error (the server's message on stderr). `if_match` > 0 sends it.
int admin_request(const AdminTarget& t, const std::string& method, const std::string& path,
                  const std::string& body, int64_t if_match = 0);
// A one-line progress bar on stderr (only when stderr is a terminal).
void progress_bar(const char* what, size_t done, size_t total);

}  // namespace pagoda::app
