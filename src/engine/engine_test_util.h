#pragma once
// Helpers of the engine tests (engine_test.cpp, engine_control_test.cpp): the models they
// run on, a small engine config, greedy requests, random prompts, and collecting a stream.
// Tests only.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "base/check.h"
#include "engine/engine.h"
#include "model/test_model.h"
#include "testdata/stories260k_golden.h"

namespace pagoda::engine::test_util {

inline model::Model& stories() {
    static std::unique_ptr<model::Model> m = [] {
        auto r = model::Model::load(testdata::kStoriesPath);
        PAGODA_CHECK(r.ok()) << r.error().message;
        return std::move(r).value();
    }();
    return *m;
}

// A random-weight F32 model of a test shape (model/test_model.h), written once per process.
inline model::Model& shape_model(const std::string& shape, uint64_t seed) {
    static std::map<std::string, std::unique_ptr<model::Model>> models;
    auto& m = models[shape];
    if (m) return *m;
    // One file per process: test binaries that run side by side must not rewrite a file
    // another one has mapped.
    const std::string path = ::testing::TempDir() + "/pagoda_engine_" + shape + "_" +
                             std::to_string(::getpid()) + ".gguf";
    auto s = model::find_shape(shape);
    PAGODA_CHECK(s.ok()) << "shape " << shape;
    auto st = model::write_test_model({.shape = *s,
                                       .dtype = formats::TensorType::kF32,
                                       .seed = seed,
                                       .vocab_path = testdata::kStoriesPath,
                                       .output_path = path});
    PAGODA_CHECK(st.ok()) << st.error().message;
    auto r = model::Model::load(path);
    PAGODA_CHECK(r.ok()) << r.error().message;
    std::remove(path.c_str());  // the mapping keeps the data; no file left behind per run
    m = std::move(r).value();
    return *m;
}

inline model::Model& tiny_gqa() { return shape_model("tiny-gqa", 11); }
// Head dimension 32: a q8_0 KV cache quantizes whole rows in blocks of 32.
inline model::Model& tiny_hd32() { return shape_model("tiny-gqa-hd32", 13); }
// The bundled model, one of the two test shapes above, or another test shape by name
// (a mixture of experts: "tiny-mixtral", "tiny-qwen3moe", ...).
inline model::Model& model_named(const std::string& name) {
    if (name == "stories260k") return stories();
    if (name == "tiny-gqa") return tiny_gqa();
    if (name == "tiny-gqa-hd32") return tiny_hd32();
    return shape_model(name, 17);
}

inline EngineConfig config(int block_size, int budget, int64_t num_blocks = 512) {
    EngineConfig c;
    c.kv.block_size = block_size;
    c.kv.num_blocks = num_blocks;
    c.sched.knobs.max_num_batched_tokens = budget;
    c.sched.knobs.max_num_seqs = 64;
    c.sched.max_model_len = 0;
    return c;
}

struct Output {
    std::vector<int32_t> ids;
    std::string text;
    FinishReason finish = FinishReason::kError;
    std::string stop_reason;
    Usage usage;
    RequestTimings timings;
    uint64_t last_step = 0;
    std::vector<uint64_t> token_steps;  // the engine step of every event that carried tokens
};

// Collects every event of a stream; one Output per sample index.
inline std::vector<Output> collect(RequestStream& s, int n = 1) {
    std::vector<Output> out(static_cast<size_t>(n));
    Event ev;
    while (s.next(ev)) {
        Output& o = out[size_t(ev.index)];
        o.ids.insert(o.ids.end(), ev.token_ids.begin(), ev.token_ids.end());
        o.text += ev.text;
        o.last_step = ev.step;
        if (!ev.token_ids.empty()) o.token_steps.push_back(ev.step);
        if (ev.finish) {
            o.finish = *ev.finish;
            o.stop_reason = ev.stop_reason;
        }
        if (ev.request_done) {
            for (auto& x : out) {
                x.usage = ev.usage;
                x.timings = ev.timings;
            }
        }
    }
    return out;
}

inline Request greedy(std::vector<int32_t> prompt, int max_tokens) {
    Request r;
    r.prompt_ids = std::move(prompt);
    r.sampling.temperature = 0.0f;
    r.sampling.max_tokens = max_tokens;
    r.sampling.ignore_eos = true;
    return r;
}

inline std::vector<std::vector<int32_t>> random_prompts(const model::Model& m, int count,
                                                        int min_len, int max_len, uint64_t seed) {
    std::mt19937_64 rng(seed);
    const auto& v = m.tokenizer().vocab();
    std::vector<std::vector<int32_t>> out;
    for (int i = 0; i < count; ++i) {
        const int len = std::uniform_int_distribution<int>(min_len, max_len)(rng);
        std::vector<int32_t> p = {v.bos >= 0 ? v.bos : 0};
        while (int(p.size()) < len) {
            const int32_t id = int32_t(rng() % uint64_t(v.size()));
            if (!v.is_control(id)) p.push_back(id);
        }
        out.push_back(std::move(p));
    }
    return out;
}

inline std::vector<int32_t> alone(model::Model& m, const EngineConfig& cfg, const Request& r) {
    auto e = Engine::create(m, cfg);
    PAGODA_CHECK(e.ok()) << e.error().message;
    auto s = (*e)->submit(r);
    PAGODA_CHECK(s.ok()) << s.error().message;
    return collect(**s)[0].ids;
}

}  // namespace pagoda::engine::test_util
