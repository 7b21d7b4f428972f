// The implementation of bench/trace_formats.h (the contract is there).
#include "bench/trace_formats.h"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>

namespace pagoda::bench {

namespace {

using json = nlohmann::json;

std::string trim(const std::string& s) {
    const size_t a = s.find_first_not_of(" \t\r\n\"");
    if (a == std::string::npos) return "";
    const size_t b = s.find_last_not_of(" \t\r\n\"");
    return s.substr(a, b - a + 1);
}

std::string lower(std::string s) {
    for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

std::vector<std::string> split_csv(const std::string& line) {
    std::vector<std::string> out;
    size_t pos = 0;
    while (true) {
        const size_t comma = line.find(',', pos);
        out.push_back(trim(line.substr(pos, comma == std::string::npos ? comma : comma - pos)));
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    return out;
}

// A whole number >= 0 from a CSV field ("12", "12.0").
bool parse_count(const std::string& s, int64_t& out) {
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0' || !std::isfinite(v) || v < 0 || v > 1e12 || v != std::floor(v)) {
        return false;
    }
    out = int64_t(v);
    return true;
}

// "2023-11-16 18:15:46.6805900" (UTC) to unix seconds.
bool parse_azure_time(const std::string& s, double& out) {
    std::tm tm{};
    const char* rest = strptime(s.c_str(), "%Y-%m-%d %H:%M:%S", &tm);
    if (rest == nullptr) return false;
    double frac = 0;
    if (*rest == '.') {
        char* end = nullptr;
        frac = std::strtod(rest, &end);
        rest = end;
    }
    if (*rest != '\0') return false;
    out = double(timegm(&tm)) + frac;
    return true;
}

struct Reader {
    const std::string& name;
    Trace t;
    int64_t line = 0;
    Error where(const std::string& why) const {
        return Error{ErrorCode::kInvalidFile, fmt::format("{}:{}: {}", name, line, why)};
    }
    // Appends a record after the checks every format shares.
    Status add(TraceRecord r) {
        r.line = line;
        if (r.output_len < 1) return where("the output length must be at least 1 token");
        if (!r.has_prompt && r.input_len < 1)
            return where("the input length must be at least 1 token");
        if (!std::isfinite(r.ts_s) || r.ts_s < 0) return where("the timestamp must be >= 0");
        if (!t.records.empty() && r.ts_s < t.records.back().ts_s) {
            return where(fmt::format("timestamps must be in order ({} comes after {})", r.ts_s,
                                     t.records.back().ts_s));
        }
        t.records.push_back(std::move(r));
        return ok_status();
    }
};

Status pagoda_line(Reader& rd, const json& j) {
    TraceRecord r;
    if (j.contains("timestamp") && j["timestamp"].is_number()) {
        r.ts_s = j["timestamp"].get<double>();
    } else if (j.contains("timestamp_ms") && j["timestamp_ms"].is_number()) {
        r.ts_s = j["timestamp_ms"].get<double>() / 1000;
    } else {
        return rd.where("needs \"timestamp\" (seconds) or \"timestamp_ms\" as a number");
    }
    if (j.contains("prompt")) {
        if (!j["prompt"].is_string()) return rd.where("\"prompt\" must be a string");
        r.prompt = j["prompt"].get<std::string>();
        r.has_prompt = true;
    }
    if (j.contains("input_len")) {
        if (!j["input_len"].is_number_integer() || j["input_len"].get<int64_t>() < 1)
            return rd.where("\"input_len\" must be an integer >= 1");
        r.input_len = j["input_len"].get<int64_t>();
    } else if (!r.has_prompt) {
        return rd.where("needs \"input_len\" or \"prompt\"");
    }
    if (!j.contains("output_len") || !j["output_len"].is_number_integer() ||
        j["output_len"].get<int64_t>() < 1) {
        return rd.where("needs \"output_len\" as an integer >= 1");
    }
    r.output_len = j["output_len"].get<int64_t>();
    if (j.contains("class")) {
        if (!j["class"].is_string()) return rd.where("\"class\" must be a string");
        r.klass = j["class"].get<std::string>();
    }
    return rd.add(std::move(r));
}

Status mooncake_line(Reader& rd, const json& j) {
    TraceRecord r;
    if (!j.contains("timestamp") || !j["timestamp"].is_number())
        return rd.where("needs \"timestamp\" (milliseconds) as a number");
    r.ts_s = j["timestamp"].get<double>() / 1000;
    for (const char* k : {"input_length", "output_length"}) {
        if (!j.contains(k) || !j[k].is_number_integer() || j[k].get<int64_t>() < 1)
            return rd.where(fmt::format("needs \"{}\" as an integer >= 1", k));
    }
    r.input_len = j["input_length"].get<int64_t>();
    r.output_len = j["output_length"].get<int64_t>();
    if (j.contains("hash_ids")) {
        if (!j["hash_ids"].is_array()) return rd.where("\"hash_ids\" must be a list of integers");
        for (const auto& h : j["hash_ids"]) {
            if (!h.is_number_integer()) return rd.where("\"hash_ids\" must be a list of integers");
            r.hash_ids.push_back(h.get<int64_t>());
        }
        const int64_t blocks = (r.input_len + rd.t.block_tokens - 1) / rd.t.block_tokens;
        if (int64_t(r.hash_ids.size()) > blocks + 1) {
            return rd.where(fmt::format("{} hash_ids for {} input tokens ({} blocks of {})",
                                        r.hash_ids.size(), r.input_len, blocks, rd.t.block_tokens));
        }
    }
    return rd.add(std::move(r));
}

// The CSV formats: the header names the columns; every row has as many fields.
Status csv_header(Reader& rd, const std::vector<std::string>& cols) {
    std::vector<std::string> want;
    if (rd.t.format == TraceFormat::kAzure) {
        want = {"timestamp", "contexttokens", "generatedtokens"};
    } else {
        want = {"timestamp",       "model",        "request tokens",
                "response tokens", "total tokens", "log type"};
    }
    for (const std::string& c : cols) {
        if (std::find(want.begin(), want.end(), lower(c)) == want.end()) {
            return rd.where(fmt::format("unknown column '{}' for a {} trace", c,
                                        trace_format_name(rd.t.format)));
        }
    }
    if (cols.size() != want.size()) {
        return rd.where(fmt::format("a {} trace has {} columns, this header {}",
                                    trace_format_name(rd.t.format), want.size(), cols.size()));
    }
    return ok_status();
}

Status csv_row(Reader& rd, const std::vector<std::string>& cols, const std::vector<std::string>& f,
               const TraceReadOptions& o) {
    if (f.size() != cols.size()) {
        return rd.where(fmt::format("{} fields, the header has {}", f.size(), cols.size()));
    }
    auto field = [&](const char* name) -> const std::string& {
        for (size_t i = 0; i < cols.size(); ++i) {
            if (lower(cols[i]) == name) return f[i];
        }
        return f[0];  // not reached: csv_header checked the columns
    };
    TraceRecord r;
    if (rd.t.format == TraceFormat::kAzure) {
        if (!parse_azure_time(field("timestamp"), r.ts_s)) {
            return rd.where(fmt::format("TIMESTAMP '{}' is not like 2023-11-16 18:15:46.6805900",
                                        field("timestamp")));
        }
        if (!parse_count(field("contexttokens"), r.input_len) ||
            !parse_count(field("generatedtokens"), r.output_len)) {
            return rd.where("ContextTokens and GeneratedTokens must be whole numbers >= 0");
        }
        return rd.add(std::move(r));
    }
    char* end = nullptr;
    r.ts_s = std::strtod(field("timestamp").c_str(), &end);
    if (field("timestamp").empty() || *end != '\0') {
        return rd.where(
            fmt::format("Timestamp '{}' is not a number of seconds", field("timestamp")));
    }
    if (!parse_count(field("request tokens"), r.input_len) ||
        !parse_count(field("response tokens"), r.output_len)) {
        return rd.where("Request tokens and Response tokens must be whole numbers >= 0");
    }
    if (!o.model_filter.empty() && field("model") != o.model_filter) {
        ++rd.t.other_model;
        return ok_status();
    }
    if (r.output_len == 0) {  // a failed request in BurstGPT
        ++rd.t.zero_output;
        return ok_status();
    }
    return rd.add(std::move(r));
}

Status detect(Reader& rd, const std::string& first) {
    if (!first.empty() && first[0] == '{') {
        const json j = json::parse(first, nullptr, false);
        rd.t.format = j.is_object() && j.contains("input_length") ? TraceFormat::kMooncake
                                                                  : TraceFormat::kPagoda;
        return ok_status();
    }
    const std::string h = lower(first);
    if (h.find("contexttokens") != std::string::npos) {
        rd.t.format = TraceFormat::kAzure;
    } else if (h.find("request tokens") != std::string::npos) {
        rd.t.format = TraceFormat::kBurstGpt;
    } else {
        return rd.where(
            "not a trace: expected Pagoda JSONL ({\"timestamp\", \"input_len\", "
            "\"output_len\"}), Mooncake JSONL ({\"timestamp\", \"input_length\", "
            "\"output_length\", \"hash_ids\"}), an Azure CSV (TIMESTAMP,ContextTokens,"
            "GeneratedTokens) or a BurstGPT CSV (Timestamp,Model,Request tokens,Response "
            "tokens,Total tokens,Log Type)");
    }
    return ok_status();
}

}  // namespace

const char* trace_format_name(TraceFormat f) {
    switch (f) {
        case TraceFormat::kPagoda: return "pagoda-jsonl";
        case TraceFormat::kMooncake: return "mooncake";
        case TraceFormat::kAzure: return "azure";
        case TraceFormat::kBurstGpt: return "burstgpt";
    }
    return "?";
}

Result<Trace> parse_trace(std::istream& in, const std::string& name, const TraceReadOptions& o) {
    Reader rd{name, {}};
    std::string text;
    bool detected = false;
    std::vector<std::string> cols;
    while (std::getline(in, text)) {
        ++rd.line;
        if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
        if (!detected) {
            PAGODA_TRY(detect(rd, text));
            detected = true;
            if (rd.t.format == TraceFormat::kAzure || rd.t.format == TraceFormat::kBurstGpt) {
                cols = split_csv(text);
                PAGODA_TRY(csv_header(rd, cols));
                continue;
            }
        }
        if (!cols.empty()) {
            PAGODA_TRY(csv_row(rd, cols, split_csv(text), o));
            continue;
        }
        const json j = json::parse(text, nullptr, false);
        if (j.is_discarded() || !j.is_object()) return rd.where("not a JSON object");
        PAGODA_TRY(rd.t.format == TraceFormat::kMooncake ? mooncake_line(rd, j)
                                                         : pagoda_line(rd, j));
    }
    if (rd.t.records.empty()) {
        std::string why = "no requests in the trace";
        if (rd.t.other_model > 0) {
            why += fmt::format(" ({} rows of other models than '{}')", rd.t.other_model,
                               o.model_filter);
        }
        return make_error(ErrorCode::kInvalidFile, "{}: {}", name, why);
    }
    return std::move(rd.t);
}

Result<Trace> read_trace_file(const std::string& path, const TraceReadOptions& o) {
    std::ifstream in(path);
    if (!in) return make_error(ErrorCode::kNotFound, "cannot open trace file '{}'", path);
    return parse_trace(in, path, o);
}

}  // namespace pagoda::bench
