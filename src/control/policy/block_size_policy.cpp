// Block-size policies: the implementation (the contract is in control/policy/block_size_policy.h).
#include "control/policy/block_size_policy.h"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "kernels/cpu/ops.h"
#include "kvcache/kv_pool.h"

namespace pagoda::control {

Result<BlockSizePolicy> parse_block_size_policy(const std::string& s) {
    if (s == "static") return BlockSizePolicy::kStatic;
    if (s == "seed") return BlockSizePolicy::kSeed;
    if (s == "measured") return BlockSizePolicy::kMeasured;
    return make_error(
        ErrorCode::kInvalidArgument,
        "--block-size-policy: unknown policy \"{}\" (allowed: static, seed, measured)", s);
}

const char* block_size_policy_name(BlockSizePolicy p) {
    switch (p) {
        case BlockSizePolicy::kStatic: return "static";
        case BlockSizePolicy::kSeed: return "seed";
        case BlockSizePolicy::kMeasured: return "measured";
    }
    return "?";
}

// ---- seed ------------------------------------------------------------------------------

double seed_predicted(double ctx, double avg_ctx, const SeedParams& p) {
    const double h = ctx > p.long_context ? p.h_long : p.h_short;
    return h * ctx + (1 - h) * avg_ctx;
}

int seed_raw_block(double predicted, const SeedParams& p) {
    const double scaled = std::floor(predicted * p.scaling);  // int(): toward zero, >= 0 here
    return int(std::clamp(scaled, double(p.min_block), double(p.max_block)));
}

int round_to_supported(int block, int lo, int hi) {
    int best = 0;
    for (int s : kvcache::kAllowedBlockSizes) {
        if (s < lo || s > hi) continue;
        if (best == 0 || std::abs(s - block) < std::abs(best - block) ||
            (std::abs(s - block) == std::abs(best - block) && s > best)) {
            best = s;
        }
    }
    return best == 0 ? lo : best;
}

json SeedDecision::to_json() const {
    return {{"ctx", ctx},
            {"avg_ctx", avg_ctx},
            {"mixed", mixed},
            {"short_mean", short_mean},
            {"long_mean", long_mean},
            {"short_share", short_share},
            {"predicted", predicted},
            {"raw_block", raw},
            {"block_size", block}};
}

SeedDecision seed_decide(const LengthHistogram& window, double ctx, double avg_ctx,
                         const SeedParams& p) {
    SeedDecision d;
    d.ctx = ctx;
    d.avg_ctx = avg_ctx;
    if (window.count() == 0 && ctx <= 0) {
        d.raw = d.block = p.base;
        return d;
    }
    const int64_t cut = int64_t(p.long_context);
    const LengthHistogram::Part s = window.part(0, cut), l = window.part(cut + 1, INT64_MAX);
    const double n = double(std::max<int64_t>(window.count(), 1));
    d.short_mean = s.mean;
    d.long_mean = l.mean;
    d.short_share = double(s.count) / n;
    d.mixed = double(s.count) / n >= p.mixed_min_share && double(l.count) / n >= p.mixed_min_share;
    d.predicted = d.mixed ? p.w_short * seed_predicted(s.mean, avg_ctx, p) +
                                p.w_long * seed_predicted(l.mean, avg_ctx, p)
                          : seed_predicted(ctx, avg_ctx, p);
    d.raw = seed_raw_block(d.predicted, p);
    d.block = round_to_supported(d.raw, p.min_block, p.max_block);
    return d;
}

double refit_scaling(double predicted, int best_block) {
    if (predicted <= 0) return 0.15;
    return std::clamp(double(best_block) / predicted, 0.001, 1.0);
}

// ---- calibration -----------------------------------------------------------------------

double Calibration::attention_seconds(int block, int64_t len) const {
    auto it = seconds.find(block);
    if (it == seconds.end() || lengths.empty()) return 0;
    const std::vector<double>& t = it->second;
    if (len <= lengths.front()) return t.front() * double(len) / double(lengths.front());
    for (size_t i = 1; i < lengths.size(); ++i) {
        if (len <= lengths[i]) {
            const double f = double(len - lengths[i - 1]) / double(lengths[i] - lengths[i - 1]);
            return t[i - 1] + f * (t[i] - t[i - 1]);
        }
    }
    return t.back() * double(len) / double(lengths.back());
}

json Calibration::to_json() const {
    json per = json::object();
    for (const auto& [b, t] : seconds) per[std::to_string(b)] = t;
    return {{"key", key}, {"lengths", lengths}, {"seconds", per}};
}

Result<Calibration> Calibration::from_json(const json& j) {
    Calibration c;
    try {
        c.key = j.at("key").get<std::string>();
        c.lengths = j.at("lengths").get<std::vector<int64_t>>();
        for (const auto& [b, t] : j.at("seconds").items()) {
            c.seconds[std::stoi(b)] = t.get<std::vector<double>>();
            if (c.seconds[std::stoi(b)].size() != c.lengths.size())
                throw std::runtime_error("size");
        }
    } catch (const std::exception& e) {
        return make_error(ErrorCode::kInvalidArgument, "block-size calibration: {}", e.what());
    }
    if (c.lengths.empty() || !std::is_sorted(c.lengths.begin(), c.lengths.end())) {
        return make_error(ErrorCode::kInvalidArgument,
                          "block-size calibration: lengths must be sorted and non-empty");
    }
    return c;
}

std::string calibration_key(const CalibrationShape& s) {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    return fmt::format(
        "layers={} heads={} kv_heads={} head_dim={} kv_dtype={} simd={} threads={} "
        "host={}",
        s.num_layers, s.num_heads, s.num_kv_heads, s.head_dim, kvcache::kv_dtype_name(s.dtype),
        kernels::cpu::simd_target_name(), kernels::cpu::num_threads(), host);
}

namespace {

constexpr int kCalibrationSeqs = 4;

// Seconds of one decode step's attention for one layer and kCalibrationSeqs sequences of
// `len` tokens whose blocks are scattered over the pool.
double time_attention(const CalibrationShape& s, int block, int64_t len, uint64_t seed) {
    const int64_t per_seq = (len + block - 1) / block;
    const int64_t blocks = per_seq * kCalibrationSeqs;
    kernels::PagedKv kv;
    kv.dtype = s.dtype;
    kv.block_size = block;
    kv.num_kv_heads = s.num_kv_heads;
    kv.head_dim = s.head_dim;
    const size_t bytes = size_t(blocks) * kv.block_bytes();
    std::vector<uint8_t> k(bytes, 0x11), v(bytes, 0x22);  // written: no shared zero pages
    kv.k = k.data();
    kv.v = v.data();
    std::vector<int32_t> ids(static_cast<size_t>(blocks));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), std::mt19937_64(seed));
    std::vector<kernels::AttentionSeq> seqs(kCalibrationSeqs);
    std::vector<int> offsets(kCalibrationSeqs);
    for (int i = 0; i < kCalibrationSeqs; ++i) {
        seqs[size_t(i)] = {ids.data() + size_t(i) * size_t(per_seq), 1, int(len - 1)};
        offsets[size_t(i)] = i;
    }
    kernels::AttentionShape shape;
    shape.num_heads = s.num_heads;
    shape.scale = 1.0f / std::sqrt(float(s.head_dim));
    shape.q_stride = shape.out_stride = s.num_heads * s.head_dim;
    std::vector<float> q(size_t(kCalibrationSeqs * shape.q_stride), 0.01f), out(q.size());
    using C = std::chrono::steady_clock;
    kernels::cpu::paged_attention_batch(kv, shape, seqs, offsets, q.data(), out.data());
    double best = 1e30;
    for (int trial = 0; trial < 3; ++trial) {
        int reps = 0;
        const auto t0 = C::now();
        double dt = 0;
        do {
            kernels::cpu::paged_attention_batch(kv, shape, seqs, offsets, q.data(), out.data());
            ++reps;
            dt = std::chrono::duration<double>(C::now() - t0).count();
        } while (dt < 2e-3);
        best = std::min(best, dt / reps);
    }
    return best;
}

}  // namespace

Result<Calibration> calibrate(const CalibrationShape& s, const std::vector<int64_t>& lengths) {
    if (s.num_layers < 1 || s.num_kv_heads < 1 || s.head_dim < 1 ||
        s.num_heads % s.num_kv_heads != 0 || lengths.empty()) {
        return make_error(ErrorCode::kInvalidArgument, "block-size calibration: bad shape");
    }
    kernels::cpu::adopt_num_threads();
    Calibration c;
    c.key = calibration_key(s);
    c.lengths = lengths;
    std::sort(c.lengths.begin(), c.lengths.end());
    for (int b : kvcache::kAllowedBlockSizes) {
        std::vector<double>& t = c.seconds[b];
        for (int64_t len : c.lengths) {
            t.push_back(time_attention(s, b, len, uint64_t(b * 131 + len)) * s.num_layers /
                        kCalibrationSeqs);
        }
    }
    return c;
}

// ---- measured --------------------------------------------------------------------------

json Candidate::to_json() const {
    return {{"block_size", block_size},
            {"attention_us", attention_us},
            {"waste", waste},
            {"cost", cost},
            {"pool_tokens", pool_tokens},
            {"need_tokens", need_tokens},
            {"fits", fits}};
}

json MeasuredDecision::to_json() const {
    json c = json::array();
    for (const Candidate& x : candidates) c.push_back(x.to_json());
    return {{"candidates", c}, {"block_size", block}, {"gain", gain}, {"reason", reason}};
}

namespace {

Candidate cost_of(int b, const LengthHistogram& lengths, const Calibration& cal,
                  const MeasuredInputs& in) {
    Candidate c;
    c.block_size = b;
    double attn = 0, used = 0, alloc = 0;
    for (int i = 0; i < LengthHistogram::kBuckets; ++i) {
        const int64_t n = lengths.bucket_count(i);
        if (n == 0) continue;
        const double len = std::max(1.0, lengths.bucket_mean(i));
        const double slots = std::ceil(len / b) * b;
        attn += double(n) * cal.attention_seconds(b, int64_t(std::llround(len)));
        used += double(n) * len;
        alloc += double(n) * slots;
    }
    const double count = double(lengths.count());
    c.attention_us = attn / count * 1e6;
    c.waste = alloc > 0 ? 1.0 - used / alloc : 0.0;
    const double pressure = std::max(in.kv_pressure, kMinPlanPressure);
    c.cost = c.attention_us / (1.0 - pressure * c.waste);
    const int64_t per_block = in.kv_bytes_per_token * b;
    c.pool_tokens = per_block > 0 ? in.kv_memory_bytes / per_block * b : 0;
    const int64_t longest = lengths.quantile(0.99);
    c.need_tokens =
        int64_t(std::ceil(double(std::max<int64_t>(in.concurrency, 1)) * alloc / count));
    c.need_tokens = std::max(c.need_tokens, (longest + b - 1) / b * b);
    c.fits = c.need_tokens <= c.pool_tokens;
    return c;
}

}  // namespace

MeasuredDecision measured_decide(const LengthHistogram& lengths, const Calibration& cal,
                                 const MeasuredInputs& in) {
    MeasuredDecision d;
    d.block = in.current_block;
    if (lengths.count() == 0) {
        d.reason = "no finished requests yet";
        return d;
    }
    const Candidate* best = nullptr;
    const Candidate* current = nullptr;
    for (int b : kvcache::kAllowedBlockSizes) {
        if (cal.seconds.count(b) == 0) continue;
        d.candidates.push_back(cost_of(b, lengths, cal, in));
    }
    for (const Candidate& c : d.candidates) {
        if (c.block_size == in.current_block) current = &c;
        if (c.fits && (best == nullptr || c.cost < best->cost)) best = &c;
    }
    if (best == nullptr) {
        d.reason = "no block size holds the current concurrency in the KV budget; keeping it";
        return d;
    }
    d.block = best->block_size;
    if (current == nullptr || !current->fits) {
        d.gain = 1.0;
        d.reason = fmt::format("the current size {} does not fit the KV budget at concurrency {}",
                               in.current_block, in.concurrency);
    } else {
        d.gain = current->cost > 0 ? (current->cost - best->cost) / current->cost : 0.0;
        d.reason = fmt::format("block {} costs {:.3f} us per sequence-step against {:.3f} for {}",
                               best->block_size, best->cost, current->cost, in.current_block);
    }
    return d;
}

RelayoutEconomics relayout_economics(double cost_current_us, double cost_choice_us,
                                     double decode_tokens_per_s, double horizon_s, int64_t tokens,
                                     double seconds_per_token) {
    RelayoutEconomics e;
    e.decode_tokens_per_s = std::max(decode_tokens_per_s, 0.0);
    e.horizon_s = std::max(horizon_s, 0.0);
    e.tokens = std::max<int64_t>(tokens, 0);
    e.seconds_per_token = std::max(seconds_per_token, 0.0);
    e.saving_s = (cost_current_us - cost_choice_us) * 1e-6 * e.decode_tokens_per_s * e.horizon_s;
    if (e.tokens > 0) e.cost_s = double(e.tokens) * e.seconds_per_token;  // inf: unknown
    return e;
}

json RelayoutEconomics::to_json() const {
    const bool known = std::isfinite(cost_s);
    return {{"saving_s", saving_s},
            {"cost_s", known ? json(cost_s) : json("unknown")},
            {"net_s", known ? json(net_s()) : json(nullptr)},
            {"tokens", tokens},
            {"seconds_per_token",
             std::isfinite(seconds_per_token) ? json(seconds_per_token) : json("unknown")},
            {"decode_tokens_per_s", decode_tokens_per_s},
            {"horizon_s", horizon_s}};
}

}  // namespace pagoda::control
