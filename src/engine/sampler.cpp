// Sampling: the implementation (the contract is in engine/sampler.h).
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace pagoda::engine {

#define bad(...) make_error(ErrorCode::kInvalidArgument, __VA_ARGS__)
Status SamplingParams::validate(int vocab_size) const {
    if (!(temperature >= 0.0f) || temperature > 100.0f)
        return bad("temperature must be in [0, 100], got {}", temperature);
    if (top_k < -1) return bad("top_k must be -1, 0 (off) or > 0, got {}", top_k);
    if (!(top_p > 0.0f && top_p <= 1.0f)) return bad("top_p must be in (0, 1], got {}", top_p);
    if (!(min_p >= 0.0f && min_p <= 1.0f)) return bad("min_p must be in [0, 1], got {}", min_p);
    if (!(repetition_penalty > 0.0f && repetition_penalty <= 2.0f)) {
        return bad("repetition_penalty must be in (0, 2], got {}", repetition_penalty);
    }
    if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f)) {
        return bad("presence_penalty must be in [-2, 2], got {}", presence_penalty);
    }
    if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f)) {
        return bad("frequency_penalty must be in [-2, 2], got {}", frequency_penalty);
    }
    for (const auto& [id, bias] : logit_bias) {
        if (id < 0 || (vocab_size > 0 && id >= vocab_size)) {
            return bad("logit_bias token id {} is out of range [0, {})", id, vocab_size);
        }
        if (!(bias >= -100.0f && bias <= 100.0f))
            return bad("logit_bias for token {} must be in [-100, 100], got {}", id, bias);
    }
    if (max_tokens < 1) return bad("max_tokens must be >= 1, got {}", max_tokens);
    if (min_tokens < 0 || min_tokens > max_tokens) {
        return bad("min_tokens must be in [0, max_tokens={}], got {}", max_tokens, min_tokens);
    }
    if (stop.size() > 16) return bad("at most 16 stop strings are allowed, got {}", stop.size());
    for (const auto& s : stop) {
        if (s.empty()) return bad("stop strings must not be empty");
        if (s.size() > 256) return bad("a stop string may be at most 256 bytes, got {}", s.size());
    }
    for (int32_t id : stop_token_ids) {
        if (id < 0 || (vocab_size > 0 && id >= vocab_size)) {
            return bad("stop_token_ids: token id {} is out of range [0, {})", id, vocab_size);
        }
    }
    if (n < 1 || n > kMaxN) return bad("n must be in [1, {}], got {}", kMaxN, n);
    if (logprobs < -1 || logprobs > kMaxLogprobs)
        return bad("logprobs must be in [0, {}], got {}", kMaxLogprobs, logprobs);
    return ok_status();
}
#undef bad

Sampler::Sampler(const SamplingParams& p, int index)
    : index_(index),
      min_tokens_(p.min_tokens),
      penalties_(p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f ||
                 p.frequency_penalty != 0.0f),
      plain_greedy_(p.temperature == 0.0f && !penalties_ && p.logit_bias.empty()),
      p_(p) {}

bool Sampler::masks_end(std::span<const int32_t> end_tokens) const {
    return generated_ < min_tokens_ && !end_tokens.empty();
}

bool Sampler::reshapes(std::span<const int32_t> end_tokens) const {
    return penalties_ || masks_end(end_tokens) || !p_.logit_bias.empty();
}

bool Sampler::greedy(std::span<const int32_t> end_tokens) const {
    return plain_greedy_ && !masks_end(end_tokens);
}

void Sampler::accept(int32_t token) {
    if (penalties_) ++counts_[token];  // the history only feeds the penalties
    ++generated_;
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> prompt,
                        std::span<const int32_t> end_tokens, std::span<const uint8_t> allowed) {
    if (!reshapes(end_tokens) && allowed.empty()) return draw(logits);
    const bool mask_end = masks_end(end_tokens);
    row_.assign(logits.begin(), logits.end());
    const int32_t vocab = int32_t(row_.size());
    constexpr float kNever = -std::numeric_limits<float>::infinity();
    if (!allowed.empty()) {
        for (size_t i = 0; i < row_.size(); ++i) {
            if (i >= allowed.size() || allowed[i] == 0) row_[i] = kNever;
        }
    }
    for (const auto& [id, bias] : p_.logit_bias) {
        if (id >= 0 && id < vocab) row_[size_t(id)] += bias;
    }
    if (mask_end) {
        for (int32_t id : end_tokens) {
            if (id >= 0 && id < vocab) row_[size_t(id)] = kNever;
        }
    }
    if (p_.repetition_penalty != 1.0f) {
        // Each token seen in the prompt or the output, once: divide positive logits, multiply
        // negative.
        std::vector<uint8_t> seen(size_t(vocab), 0);
        auto apply = [&](int32_t id) {
            if (id < 0 || id >= vocab || seen[size_t(id)]) return;
            seen[size_t(id)] = 1;
            float& l = row_[size_t(id)];
            l = l > 0.0f ? l / p_.repetition_penalty : l * p_.repetition_penalty;
        };
        for (int32_t id : prompt) apply(id);
        for (const auto& [id, c] : counts_) apply(id);
    }
    if (p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f) {
        for (const auto& [id, c] : counts_) {
            if (id >= 0 && id < vocab)
                row_[size_t(id)] -= p_.frequency_penalty * float(c) + p_.presence_penalty;
        }
    }
    return draw(row_);
}

int32_t Sampler::sample(std::span<const float> logits) { return draw(logits); }

TokenLogprob compute_logprobs(std::span<const float> logits, int32_t token, int k) {
    TokenLogprob r;
    r.token = token;
    float mx = -std::numeric_limits<float>::infinity();
    for (float l : logits) mx = std::max(mx, l);
    double sum = 0.0;
    for (float l : logits) sum += std::exp(double(l) - double(mx));
    const float lse = mx + float(std::log(sum));
    r.logprob = logits[size_t(token)] - lse;
    if (k > 0) {
        std::vector<std::pair<float, int32_t>> c;
        c.reserve(logits.size());
        for (size_t i = 0; i < logits.size(); ++i) c.emplace_back(logits[i], int32_t(i));
        const size_t kk = std::min(size_t(k), c.size());
        std::partial_sort(
            c.begin(), c.begin() + ptrdiff_t(kk), c.end(), [](const auto& a, const auto& b) {
                return a.first > b.first || (a.first == b.first && a.second < b.second);
            });
        for (size_t i = 0; i < kk; ++i) r.top.emplace_back(c[i].second, c[i].first - lse);
    }
    return r;
}

int32_t argmax(std::span<const float> logits) {
    int32_t best = 0;
    for (size_t i = 1; i < logits.size(); ++i) {
        if (logits[i] > logits[size_t(best)]) best = int32_t(i);
    }
    return best;
}

int32_t Sampler::draw(std::span<const float> logits) {
    if (p_.temperature == 0.0f) return argmax(logits);
    cand_.clear();
    cand_.reserve(logits.size());
    for (size_t i = 0; i < logits.size(); ++i)
        cand_.emplace_back(logits[i] / p_.temperature, int32_t(i));
    auto by_logit = [](const auto& a, const auto& b) {
        return a.first > b.first || (a.first == b.first && a.second < b.second);
    };
    size_t n = cand_.size();
    if (p_.top_k > 0 && size_t(p_.top_k) < n) {
        std::partial_sort(cand_.begin(), cand_.begin() + p_.top_k, cand_.end(), by_logit);
        n = size_t(p_.top_k);
    } else {
        std::sort(cand_.begin(), cand_.end(), by_logit);
    }
    // Softmax over the kept candidates.
    const float mx = cand_[0].first;
    double sum = 0.0;
    for (size_t i = 0; i < n; ++i) {
        cand_[i].first = std::exp(cand_[i].first - mx);
        sum += cand_[i].first;
    }
    for (size_t i = 0; i < n; ++i) cand_[i].first = float(cand_[i].first / sum);
    // min_p: drop candidates below min_p * the top probability.
    if (p_.min_p > 0.0f) {
        const float floor = p_.min_p * cand_[0].first;
        size_t keep = 1;
        while (keep < n && cand_[keep].first >= floor) ++keep;
        n = keep;
    }
    // top_p: smallest prefix whose mass reaches top_p.
    if (p_.top_p < 1.0f) {
        double acc = 0.0;
        size_t keep = 0;
        while (keep < n) {
            acc += cand_[keep].first;
            ++keep;
            if (acc >= p_.top_p) break;
        }
        n = keep;
    }
    double total = 0.0;
    for (size_t i = 0; i < n; ++i) total += cand_[i].first;
    if (!rng_) rng_.emplace(p_.seed ? *p_.seed + uint64_t(index_) : std::random_device{}());
    const double r = std::uniform_real_distribution<double>(0.0, total)(*rng_);
    double acc = 0.0;
    for (size_t i = 0; i < n; ++i) {
        acc += cand_[i].first;
        if (r < acc) return cand_[i].second;
    }
    return cand_[n - 1].second;
}

}  // namespace pagoda::engine
