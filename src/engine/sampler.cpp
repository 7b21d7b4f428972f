#include "engine/sampler.h"

#include <algorithm>
#include <cmath>

namespace pagoda::engine {

Status SamplingParams::validate() const {
    if (!(temperature >= 0.0f) || temperature > 100.0f) {
        return make_error(ErrorCode::kInvalidArgument, "temperature must be in [0, 100], got {}", temperature);
    }
    if (top_k < -1) return make_error(ErrorCode::kInvalidArgument, "top_k must be -1, 0 (off) or > 0, got {}", top_k);
    if (!(top_p > 0.0f && top_p <= 1.0f)) {
        return make_error(ErrorCode::kInvalidArgument, "top_p must be in (0, 1], got {}", top_p);
    }
    if (!(min_p >= 0.0f && min_p <= 1.0f)) {
        return make_error(ErrorCode::kInvalidArgument, "min_p must be in [0, 1], got {}", min_p);
    }
    return ok_status();
}

Sampler::Sampler(const SamplingParams& p) : p_(p), rng_(p.seed ? *p.seed : std::random_device{}()) {}

int32_t argmax(std::span<const float> logits) {
    int32_t best = 0;
    for (size_t i = 1; i < logits.size(); ++i) {
        if (logits[i] > logits[size_t(best)]) best = int32_t(i);
    }
    return best;
}

int32_t Sampler::sample(std::span<const float> logits) {
    if (p_.temperature == 0.0f) return argmax(logits);
    cand_.clear();
    cand_.reserve(logits.size());
    for (size_t i = 0; i < logits.size(); ++i) cand_.emplace_back(logits[i] / p_.temperature, int32_t(i));
    auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
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
    const double r = std::uniform_real_distribution<double>(0.0, total)(rng_);
    double acc = 0.0;
    for (size_t i = 0; i < n; ++i) {
        acc += cand_[i].first;
        if (r < acc) return cand_[i].second;
    }
    return cand_[n - 1].second;
}

}  // namespace pagoda::engine
