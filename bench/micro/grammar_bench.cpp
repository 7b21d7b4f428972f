// Cost of grammar-constrained decoding for docs/performance.md (a plain program, not a
// timed test): the token mask per decode step for a JSON-schema grammar on a vocabulary.
//
//   grammar_bench VOCAB.gguf [DOCUMENT_TOKENS]
//
// Builds the vocabulary's byte trie (once per vocabulary), compiles a tool-call-like schema,
// tokenizes a document valid against it and walks it token by token as a sequence would:
// at each step the mask is computed (timed) and the document's next token must be in it.
// Reports the trie build time and the mask time per step (mean, p50, p99, max) for one
// sequence, and for 16 sequences at different positions of the document (one step of a
// batch of 16).
#include <fmt/core.h>

#include <algorithm>
#include <chrono>

#include "grammar/json_schema.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

using namespace pagoda;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

const char* kSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "enum": ["get_weather", "search_flights"]},
    "arguments": {
      "type": "object",
      "properties": {
        "location": {"type": "string"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 4}
      },
      "required": ["location"]
    }
  },
  "required": ["name", "arguments"]
})";

const char* kDocument =
    R"({"name": "get_weather", "arguments": {"location": "Paris, France", "unit": "celsius", "days": 3, "tags": ["rain", "wind"]}})";

struct Stats {
    double mean = 0, p50 = 0, p99 = 0, max = 0;
};

Stats stats(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    Stats s;
    for (double x : v) s.mean += x / double(v.size());
    s.p50 = v[v.size() / 2];
    s.p99 = v[std::min(v.size() - 1, v.size() * 99 / 100)];
    s.max = v.back();
    return s;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        fmt::print(stderr, "usage: grammar_bench VOCAB.gguf\n");
        return 2;
    }
    auto g = model::open_gguf(argv[1]);
    if (!g.ok()) return fmt::print(stderr, "error: {}\n", g.error().message), 1;
    auto tok = tokenizer::Tokenizer::from_gguf(*g->gguf);
    if (!tok.ok()) return fmt::print(stderr, "error: {}\n", tok.error().message), 1;
    std::vector<std::string> bytes;
    for (int32_t t = 0; t < tok->vocab().size(); ++t) bytes.push_back(tok->token_bytes(t));
    auto t0 = Clock::now();
    const grammar::TokenTrie trie(bytes);
    const double trie_ms = ms_since(t0);
    t0 = Clock::now();
    auto gr = grammar::json_schema_grammar(nlohmann::ordered_json::parse(kSchema));
    if (!gr.ok()) return fmt::print(stderr, "error: {}\n", gr.error().message), 1;
    const double compile_ms = ms_since(t0);
    const auto ids =
        tok->encode(kDocument, {tokenizer::AddSpecial::kNo, tokenizer::ParseSpecial::kNo});

    // One sequence walking the document.
    std::vector<grammar::Matcher> states{grammar::Matcher(*gr)};
    std::vector<double> one;
    std::vector<uint8_t> mask;
    for (int32_t id : ids) {
        t0 = Clock::now();
        states.back().fill_mask(trie, mask);
        one.push_back(ms_since(t0));
        if (!mask[size_t(id)]) return fmt::print(stderr, "error: token {} refused\n", id), 1;
        states.push_back(states.back());
        if (!states.back().accept(bytes[size_t(id)]))
            return fmt::print(stderr, "error: accept\n"), 1;
    }
    // A batch of 16 at positions spread over the document: one step's masks, repeated.
    std::vector<double> batch;
    for (int rep = 0; rep < 3; ++rep) {
        t0 = Clock::now();
        for (int k = 0; k < 16; ++k)
            states[size_t(k) * (states.size() - 1) / 16].fill_mask(trie, mask);
        batch.push_back(ms_since(t0));
    }
    // The same with a mask cache shared by the sequences (cold at the start of the walk).
    grammar::MaskCache cache;
    std::vector<double> one_cached, batch_cached;
    for (size_t i = 0; i + 1 < states.size(); ++i) {
        t0 = Clock::now();
        states[i].fill_mask(trie, mask, &cache);
        one_cached.push_back(ms_since(t0));
    }
    for (int rep = 0; rep < 3; ++rep) {
        t0 = Clock::now();
        for (int k = 0; k < 16; ++k) {
            states[size_t(k) * (states.size() - 1) / 16].fill_mask(trie, mask, &cache);
        }
        batch_cached.push_back(ms_since(t0));
    }
    const Stats c1 = stats(one_cached), c16 = stats(batch_cached);
    const Stats s1 = stats(one), s16 = stats(batch);
    fmt::print(
        "vocabulary: {} tokens, trie {} nodes built in {:.1f} ms; schema compiled in {:.2f} ms\n",
        bytes.size(), trie.nodes().size(), trie_ms, compile_ms);
    fmt::print("1 sequence, {} steps: mask mean {:.3f} ms, p50 {:.3f}, p99 {:.3f}, max {:.3f}\n",
               one.size(), s1.mean, s1.p50, s1.p99, s1.max);
    fmt::print("16 sequences (one step): mean {:.3f} ms, p50 {:.3f}, max {:.3f}\n", s16.mean,
               s16.p50, s16.max);
    fmt::print(
        "with the mask cache ({} positions, {} hits): 1 sequence mean {:.3f} ms, max "
        "{:.3f}; 16 sequences (warm) mean {:.3f} ms\n",
        cache.size(), cache.hits(), c1.mean, c1.max, c16.mean);
    return 0;
}
