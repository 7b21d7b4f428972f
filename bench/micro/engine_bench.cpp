// The engine thread's CPU per generated token on the simulated GPU, for docs/performance.md
// (plain program, not a timed test). The 50rps preset's requests (random ~256-token prompts,
// 128 greedy tokens, ignore_eos, detokenized) at a fixed concurrency against the sim replica
// perf-frontend.sh serves (h100-sxm x8, llama-3-8b, the bundled vocabulary), with its
// modelled time divided by SPEED so the run is CPU-bound. A consumer thread takes each
// stream's events every INTERVAL events, as the server's --stream-interval does. Reports the
// engine thread's CPU microseconds per token (from /proc/self/task) over ROUNDS runs.
// EVICT_MB > 0 writes over a buffer that large after each forward pass, so that the step's
// work starts from cold caches as the server's does on this VM, where a vCPU left idle for
// the modelled GPU time comes back with other work in its caches; the writes' own CPU time
// is left out. Run it under `valgrind --tool=callgrind --cache-sim=yes` to count, function
// by function, the cache lines a step brings in (docs/performance.md).
//
//   engine_bench [REQUESTS (2000)] [CONCURRENCY (200)] [INTERVAL (16)] [ROUNDS (3)] [SPEED (1e4)]
//                [EVICT_MB (0)]
#include <fmt/core.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "base/log.h"
#include "engine/engine.h"
#include "model/model.h"
#include "model/sim/perf_model.h"

using namespace pagoda;

namespace {

// CPU seconds of this process's threads named `name`.
double thread_cpu_s(const std::string& name) {
    double ticks = 0;
    for (const auto& t : std::filesystem::directory_iterator("/proc/self/task")) {
        std::ifstream comm(t.path() / "comm");
        std::string c;
        std::getline(comm, c);
        if (c != name) continue;
        std::ifstream stat(t.path() / "stat");
        std::string s((std::istreambuf_iterator<char>(stat)), {});
        std::istringstream rest(s.substr(s.rfind(')') + 2));
        std::string field;
        double utime = 0, stime = 0;
        for (int i = 3; i <= 15 && rest >> field; ++i) {
            if (i == 14) utime = std::stod(field);
            if (i == 15) stime = std::stod(field);
        }
        ticks += utime + stime;
    }
    return ticks / double(sysconf(_SC_CLK_TCK));
}

double thread_cpu_now_s() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

// Writes over `buf` after each forward pass (EVICT_MB), adding the writes' CPU time to
// `cpu_s` so that it can be left out.
std::function<void(const model::ForwardBatch&, double)> evict_after_forward(
    std::vector<uint8_t>& buf, std::atomic<double>& cpu_s) {
    return [&buf, &cpu_s](const model::ForwardBatch&, double) {
        const double t0 = thread_cpu_now_s();
        for (size_t i = 0; i < buf.size(); i += 64) buf[i] = uint8_t(buf[i] + 1);
        cpu_s = cpu_s + (thread_cpu_now_s() - t0);
    };
}

// Streams whose notifier fired, drained by one consumer thread (the server's PumpQueue).
struct Consumer {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<engine::RequestStream*> ready;
    std::atomic<int64_t> tokens{0};
    std::atomic<int> done{0};

    void run(int total) {
        std::vector<engine::Event> evs;
        std::deque<engine::RequestStream*> batch;
        while (done.load() < total) {
            {
                std::unique_lock<std::mutex> lock(mu);
                cv.wait(lock, [&] { return !ready.empty(); });
                batch.swap(ready);
            }
            for (engine::RequestStream* s : batch) {
                s->take_all(evs);
                for (const engine::Event& e : evs) {
                    tokens += int64_t(e.token_ids.size());
                    if (e.request_done) ++done;
                }
            }
            batch.clear();
        }
    }
};

}  // namespace

int main(int argc, char** argv) {
    set_log_level(LogLevel::kWarn);
    const int requests = argc > 1 ? std::atoi(argv[1]) : 2000;
    const int concurrency = argc > 2 ? std::atoi(argv[2]) : 200;
    const int interval = argc > 3 ? std::atoi(argv[3]) : 16;
    const int rounds = argc > 4 ? std::atoi(argv[4]) : 3;
    model::SimOptions o;
    o.model = "llama-3-8b";
    o.vocab_path = PAGODA_DEFAULT_MODEL;
    o.gpu = *model::sim::find_gpu("h100-sxm");
    o.efficiency = o.gpu.efficiency;
    o.tp = 8;
    o.speed = argc > 5 ? std::atof(argv[5]) : 1e4;
    auto m = model::Model::simulate(o);
    if (!m.ok()) return fmt::print(stderr, "{}\n", m.error().message), 1;
    engine::EngineConfig cfg;
    auto plan = (*m)->perf_model()->memory(0.9, cfg.sched.knobs.max_num_batched_tokens);
    if (!plan.ok()) return fmt::print(stderr, "{}\n", plan.error().message), 1;
    cfg.kv.dtype = kvcache::KvDtype::kBF16;
    cfg.kv.memory_bytes = plan->kv;
    cfg.kv.virtual_memory = true;
    const int vocab = (*m)->tokenizer().vocab().size();
    const size_t evict_bytes = size_t(argc > 6 ? std::atof(argv[6]) : 0) << 20;
    std::vector<uint8_t> evict(evict_bytes);
    std::atomic<double> evict_cpu_s{0};
    if (evict_bytes > 0) cfg.on_forward = evict_after_forward(evict, evict_cpu_s);
    fmt::print("engine thread CPU per token: {} requests, {} at a time, interval {}, speed {}{}\n",
               requests, concurrency, interval, o.speed,
               evict_bytes > 0
                   ? fmt::format(", {} MiB evicted after each forward", evict_bytes >> 20)
                   : "");
    for (int round = 0; round < rounds; ++round) {
        auto e = engine::Engine::create(**m, cfg);
        if (!e.ok()) return fmt::print(stderr, "{}\n", e.error().message), 1;
        Consumer c;
        std::thread consumer([&] { c.run(requests); });
        std::mt19937 rng(uint32_t(round + 1));
        const double cpu0 = thread_cpu_s("pagoda-engine");
        std::vector<std::shared_ptr<engine::RequestStream>> live;
        for (int i = 0; i < requests; ++i) {
            while (i - c.done.load() >= concurrency) {
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
            }
            engine::Request r;
            const int len = 192 + int(rng() % 128);
            for (int k = 0; k < len; ++k) r.prompt_ids.push_back(int32_t(3 + rng() % (vocab - 3)));
            r.sampling.temperature = 0;
            r.sampling.max_tokens = 128;
            r.sampling.ignore_eos = true;
            auto s = (*e)->submit(std::move(r));
            if (!s.ok()) return fmt::print(stderr, "{}\n", s.error().message), 1;
            engine::RequestStream* raw = s->get();
            (*s)->set_notify(
                [&c, raw] {
                    {
                        std::lock_guard<std::mutex> lock(c.mu);
                        c.ready.push_back(raw);
                    }
                    c.cv.notify_one();
                },
                interval);
            {  // events pushed before the notifier was set
                std::lock_guard<std::mutex> lock(c.mu);
                c.ready.push_back(raw);
            }
            c.cv.notify_one();
            live.push_back(*s);
        }
        consumer.join();
        const double cpu = thread_cpu_s("pagoda-engine") - cpu0 - evict_cpu_s.exchange(0);
        fmt::print("round {}: {} tokens, engine thread {:.3f} s, {:.2f} us a token\n", round + 1,
                   c.tokens.load(), cpu, cpu * 1e6 / double(c.tokens.load()));
    }
    return 0;
}
