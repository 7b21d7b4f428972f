#pragma once
// Production trace files, read into one shape. Formats are detected from the first line:
// - Pagoda JSONL: {"timestamp": s | "timestamp_ms": ms, "input_len", "output_len",
//   optional "prompt", "class"};
// - Mooncake JSONL (kvcache-ai/Mooncake traces): {"timestamp": ms, "input_length",
//   "output_length", "hash_ids": [...]}, each hash id a block of 512 prompt tokens, equal
//   ids meaning equal blocks (a shared prefix);
// - Azure LLM inference trace CSV (2023 and the 2024 week-long files):
//   TIMESTAMP,ContextTokens,GeneratedTokens with TIMESTAMP as "2023-11-16 18:15:46.6805900";
// - BurstGPT CSV: Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
//   (Timestamp in seconds; rows of another model than `model_filter` are left out; rows
//   with 0 response tokens, failed requests in that dataset, are skipped and counted).
// Pure functions over a stream (fuzzed): errors are "FILE:LINE: problem".

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "base/result.h"

namespace pagoda::bench {

enum class TraceFormat { kPagoda, kMooncake, kAzure, kBurstGpt };
const char* trace_format_name(TraceFormat f);

struct TraceRecord {
    double ts_s = 0;  // seconds, as in the file (absolute or relative)
    int64_t input_len = 0, output_len = 0;
    std::string prompt;  // Pagoda JSONL only
    bool has_prompt = false;
    std::string klass;              // Pagoda JSONL only
    std::vector<int64_t> hash_ids;  // Mooncake only
    int64_t line = 0;
};

struct Trace {
    TraceFormat format = TraceFormat::kPagoda;
    std::vector<TraceRecord> records;
    int64_t other_model = 0;     // BurstGPT rows left out by the model filter
    int64_t zero_output = 0;     // BurstGPT rows with 0 response tokens, skipped
    int64_t block_tokens = 512;  // Mooncake's prompt tokens per hash id
};

struct TraceReadOptions {
    std::string model_filter;  // BurstGPT's Model column ("" keeps every model)
};

// Reads a whole trace. Errors: unknown format or columns, a bad field, timestamps that go
// backwards, negative or zero lengths, no requests.
Result<Trace> parse_trace(std::istream& in, const std::string& name, const TraceReadOptions& o);
Result<Trace> read_trace_file(const std::string& path, const TraceReadOptions& o);

}  // namespace pagoda::bench
