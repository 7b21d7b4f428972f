// Model::moe_block: a mixture-of-experts feed-forward over the batch (the contract is in
// model/model.h). Each row's router picks its top-k experts; then each expert runs once, as
// one batched matmul over the rows routed to it (vLLM's fused-MoE grouping, llama.cpp's
// mul_mat_id), not row by row; its output is added to those rows weighted by the router.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/ops.h"
#include "model/model.h"

namespace pagoda::model {
namespace {

// The top-k of a row's softmaxed router logits `p` (n experts), best first, ties to the
// lower index; their weights divided by their sum when `norm`.
void top_k(const float* p, int n, int k, bool norm, std::vector<std::pair<int, float>>& out) {
    out.clear();
    for (int e = 0; e < n; ++e) out.emplace_back(e, p[e]);
    std::partial_sort(out.begin(), out.begin() + k, out.end(), [](const auto& a, const auto& b) {
        return a.second > b.second || (a.second == b.second && a.first < b.first);
    });
    out.resize(size_t(k));
    if (!norm) return;
    float sum = 0.0f;
    for (const auto& [e, w] : out) sum += w;
    sum = std::max(sum, 6.103515625e-5f);  // as llama.cpp clamps it (half's smallest normal)
    for (auto& [e, w] : out) w /= sum;
}

// y rows [offset[e], offset[e+1]) = linear(expert e) of x's same rows, for every expert
// with rows: quantized experts as one parallel pass (QuantMatmul::run_many), others one
// matmul each. x and y have row strides x_cols and y_cols.
template <class Pick>
void run_experts(const LayerWeights& L, const std::vector<int>& offset, Pick pick, const float* x,
                 int x_cols, float* y, int y_cols) {
    std::vector<kernels::cpu::QuantMatmul::Job> jobs;
    for (size_t e = 0; e < L.experts.size(); ++e) {
        const int m = offset[e + 1] - offset[e];
        if (m == 0) continue;
        const Linear& l = *pick(L.experts[e]);
        const float* xe = x + size_t(offset[e]) * size_t(x_cols);
        float* ye = y + size_t(offset[e]) * size_t(y_cols);
        if (l.quant && l.bias.empty()) {
            jobs.push_back({l.quant.get(), xe, m, ye});
        } else {
            l.forward(xe, m, ye);
        }
    }
    kernels::cpu::QuantMatmul::run_many(jobs);
}

}  // namespace

void router_logits(const Linear& router, const float* h, int T, int D, float* out) {
    const int E = int(router.view.rows);
    if (router.view.type == formats::TensorType::kF32 && router.bias.empty()) {
        // Direct dot products at every batch size: decode's few rows cost less on this
        // thread than a parallel pass, and one kernel for every T keeps a row's experts the
        // same whatever else is in the batch (the packed F32 kernel rounds otherwise).
        const auto* w = reinterpret_cast<const float*>(router.view.data);
#pragma omp parallel for schedule(static) if (T >= 8)
        for (int t = 0; t < T; ++t) {
            for (int e = 0; e < E; ++e)
                out[size_t(t) * size_t(E) + size_t(e)] =
                    kernels::cpu::dot_f32(h + size_t(t) * D, w + size_t(e) * D, D);
        }
    } else {
        router.forward(h, T, out);  // the packed kernels: rows independent of the batch
    }
}

void Model::moe_block(const LayerWeights& L, int T) {
    const int D = cfg_.dim, F = cfg_.expert_ffn_dim, E = cfg_.num_experts;
    const int K = cfg_.num_experts_used;
    float *x = s_.x.data(), *h = s_.h.data();
    // Router: softmax over the experts, each row's top-k grouped by expert.
    if (s_.probs.size() < size_t(T) * size_t(E)) s_.probs.resize(size_t(T) * size_t(E));
    router_logits(L.router, h, T, D, s_.probs.data());
    s_.routed.resize(size_t(E));
    for (auto& r : s_.routed) r.clear();
    std::vector<std::pair<int, float>> chosen;
    for (int t = 0; t < T; ++t) {
        float* p = s_.probs.data() + size_t(t) * size_t(E);
        kernels::cpu::softmax(p, E);
        top_k(p, E, K, cfg_.moe_norm_topk, chosen);
        for (const auto& [e, w] : chosen) s_.routed[size_t(e)].emplace_back(t, w);
    }
    // Rows gathered expert by expert: expert e's rows start at offset[e] of xe.
    std::vector<int> offset(size_t(E) + 1, 0);
    for (int e = 0; e < E; ++e)
        offset[size_t(e) + 1] = offset[size_t(e)] + int(s_.routed[size_t(e)].size());
    const size_t rows = size_t(offset[size_t(E)]);
    auto grow_to = [](std::vector<float>& v, size_t n) {
        if (v.size() < n) v.resize(n);
    };
    grow_to(s_.xe, rows * size_t(D));
    grow_to(s_.ye, rows * size_t(D));
    grow_to(s_.fused, rows * 2 * size_t(F));
    grow_to(s_.up, rows * size_t(F));
    for (int e = 0; e < E; ++e) {
        for (size_t i = 0; i < s_.routed[size_t(e)].size(); ++i) {
            std::memcpy(s_.xe.data() + (size_t(offset[size_t(e)]) + i) * D,
                        h + size_t(s_.routed[size_t(e)][i].first) * D, sizeof(float) * size_t(D));
        }
    }
    // Gate and up of every expert with rows, as one pass; SwiGLU; down, as one pass.
    run_experts(
        L, offset, [&](const Expert& ex) { return &ex.gate_up; }, s_.xe.data(), D, s_.fused.data(),
        2 * F);
    float* act = s_.up.data();
#pragma omp parallel for schedule(static) if (rows >= 16)
    for (size_t i = 0; i < rows; ++i) {
        const float* row = s_.fused.data() + i * 2 * size_t(F);
        kernels::cpu::swiglu(row, row + F, F, act + i * size_t(F));
    }
    run_experts(
        L, offset, [&](const Expert& ex) { return &ex.down; }, act, F, s_.ye.data(), D);
    // Each row's sum in expert order, so it is the same whatever else is in the batch.
    std::fill(s_.o.begin(), s_.o.begin() + ptrdiff_t(size_t(T) * size_t(D)), 0.0f);
    for (int e = 0; e < E; ++e) {
        const auto& routed = s_.routed[size_t(e)];
        for (size_t i = 0; i < routed.size(); ++i) {
            const auto& [t, w] = routed[i];
            kernels::cpu::axpy_f32(w, s_.ye.data() + (size_t(offset[size_t(e)]) + i) * D,
                                   s_.o.data() + size_t(t) * D, D);
        }
    }
#pragma omp parallel for schedule(static) if (T > 1)
    for (int t = 0; t < T; ++t) {
        kernels::cpu::axpy_f32(cfg_.residual_scale, s_.o.data() + size_t(t) * D, x + size_t(t) * D,
                               D);
    }
}

}  // namespace pagoda::model
