// The startup warmup of `pagoda serve` (serve_startup.h).
#include "apps/serve_startup.h"

#include <fmt/core.h>

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "apps/cli_common.h"
#include "http/server.h"

namespace pagoda::app {

using Clock = std::chrono::steady_clock;

namespace {
// An in-process Responder for warmup requests: collects the answer, serialises pumps.
class LocalResponder : public http::Responder {
  public:
    void send(http::Response r) override { done(std::move(r.body)); }
    void start_stream(int, std::string, std::vector<std::pair<std::string, std::string>>) override {
    }
    void write(std::string_view chunk) override {
        std::lock_guard<std::mutex> lock(mu_);
        body_ += chunk;
    }
    void finish() override { done({}); }
    void write_last(std::string_view chunk) override { done(std::string(chunk)); }
    void post(std::function<void()> fn) override {
        std::lock_guard<std::mutex> lock(run_mu_);
        fn();
    }
    void on_disconnect(std::function<void()>) override {}
    bool disconnected() const override { return false; }
    void on_complete(std::function<void(double)>) override {}
    std::string wait() {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return done_; });
        return body_;
    }

  private:
    void done(std::string extra) {
        {
            std::lock_guard<std::mutex> lock(mu_);
            body_ += extra;
            done_ = true;
        }
        cv_.notify_all();
    }
    std::mutex mu_, run_mu_;
    std::condition_variable cv_;
    std::string body_;
    bool done_ = false;
};

}  // namespace

// Engine warmup: the per-batch-size matmul primitives, then (`rounds_too`, --warmup full)
// prompts and concurrent decodes through the engine until the round time settles or, after
// the first, kRoundsBudget seconds are spent. The minimal tier stops after the primitives:
// the API requests that follow (warm_api) run prefills and concurrent decodes through the
// engine too, and a replica that takes seconds to come up defeats scale-out on a burst.
// Returns a description for the log.
std::string warmup(engine::Engine& eng, model::Model& m, bool rounds_too) {
    const auto t0 = Clock::now();
    const auto k = eng.knobs();
    const int prepared = m.prepare_kernels(k.max_num_batched_tokens, k.max_num_seqs);
    const double prep_s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!rounds_too) {
        return fmt::format(
            "matmul primitives for batch buckets up to {} tokens ({} matrix x bucket pairs, "
            "{:.2f} s)",
            k.max_num_batched_tokens, prepared, prep_s);
    }
    const auto& v = eng.model().tokenizer().vocab();
    const int max_seqs = std::min(eng.knobs().max_num_seqs, 8);
    constexpr double kRoundsBudget = 0.5;
    double last = 0.0;
    int rounds = 0;
    const auto rounds0 = Clock::now();
    for (; rounds < 5; ++rounds) {
        if (rounds > 1 &&
            std::chrono::duration<double>(Clock::now() - rounds0).count() > kRoundsBudget + last)
            break;
        const auto r0 = Clock::now();
        std::vector<std::shared_ptr<engine::RequestStream>> ss;
        for (int i = 0; i < max_seqs; ++i) {
            engine::Request r;
            r.prompt_ids.assign(size_t(8 + 2 * i), v.bos >= 0 ? v.bos : 0);
            for (size_t k = 1; k < r.prompt_ids.size(); ++k)
                r.prompt_ids[k] = int32_t((k * 7 + size_t(i)) % size_t(v.size()));
            r.sampling.max_tokens = 4;
            r.sampling.temperature = 0.0f;
            r.sampling.ignore_eos = true;
            r.traffic = false;  // also run by a full warmup while serving
            r.cache_salt =
                uint64_t(rounds) * 1000 + uint64_t(i) + 1;  // no prefix hits: compute everything
            auto s = eng.submit(std::move(r));
            if (s.ok()) ss.push_back(*s);
        }
        engine::Event ev;
        for (auto& s : ss) {
            while (s->next(ev)) {
            }
        }
        const double dt = std::chrono::duration<double>(Clock::now() - r0).count();
        if (rounds > 0 && std::abs(dt - last) <= 0.1 * last) {
            ++rounds;
            last = dt;
            break;
        }
        last = dt;
    }
    return fmt::format(
        "matmul primitives for batch buckets up to {} tokens ({} matrix x bucket pairs, {:.2f} s), "
        "then {} rounds of {} concurrent requests (8..{} prompt tokens, 4 new each) until the "
        "round time settled or {:.1f} s after the first (last {:.3f} s); total {:.2f} s",
        k.max_num_batched_tokens, prepared, prep_s, rounds, max_seqs, 6 + 2 * max_seqs,
        kRoundsBudget, last, std::chrono::duration<double>(Clock::now() - t0).count());
}

// Sends real API requests through the handler (JSON, tokenizer, engine, SSE formatting)
// so the first client request after ready finds every path warm.
int warm_api(server::OpenAiServer& api) {
    const char* bodies[][2] = {
        {"/v1/completions", R"({"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0})"},
        {"/v1/completions",
         R"({"prompt": "Once upon a time", "max_tokens": 4, "stream": true, "logprobs": 1})"},
        {"/v1/chat/completions",
         R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "stream": true})"},
        {"/v1/chat/completions",
         R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "n": 2})"},
    };
    // All four at once: the engine batches them (one at a time took ~1 s of a TinyLlama
    // replica's start).
    std::vector<std::shared_ptr<LocalResponder>> pending;
    for (auto& b : bodies) {
        http::Request r;
        r.method = "POST";
        r.path = r.target = b[0];
        r.body = b[1];
        http::Reply rep = api.handle(r, server::Origin::kWarmup);
        if (!rep.deferred) continue;
        auto lr = std::make_shared<LocalResponder>();
        rep.deferred(lr);
        pending.push_back(lr);
    }
    int ok = 0;
    for (auto& lr : pending) ok += lr->wait().empty() ? 0 : 1;
    return ok;
}

}  // namespace pagoda::app
