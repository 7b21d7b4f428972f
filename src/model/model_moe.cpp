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

}  // namespace

void Model::moe_block(const LayerWeights& L, int T) {
    const int D = cfg_.dim, F = cfg_.expert_ffn_dim, E = cfg_.num_experts;
    const int K = cfg_.num_experts_used;
    float *x = s_.x.data(), *h = s_.h.data();
    // Router: softmax over the experts, each row's top-k grouped by expert.
    if (s_.probs.size() < size_t(T) * size_t(E)) s_.probs.resize(size_t(T) * size_t(E));
    L.router.forward(h, T, s_.probs.data());
    s_.routed.resize(size_t(E));
    for (auto& r : s_.routed) r.clear();
    std::vector<std::pair<int, float>> chosen;
    for (int t = 0; t < T; ++t) {
        float* p = s_.probs.data() + size_t(t) * size_t(E);
        kernels::cpu::softmax(p, E);
        top_k(p, E, K, cfg_.moe_norm_topk, chosen);
        for (const auto& [e, w] : chosen) s_.routed[size_t(e)].emplace_back(t, w);
    }
    std::fill(s_.o.begin(), s_.o.begin() + ptrdiff_t(size_t(T) * size_t(D)), 0.0f);
    // Each expert with rows: gather them, SwiGLU, down, add back weighted. Experts run in
    // index order, so a row's sum has the same order whatever else is in the batch.
    for (int e = 0; e < E; ++e) {
        const auto& rows = s_.routed[size_t(e)];
        const int m = int(rows.size());
        if (m == 0) continue;
        const Expert& ex = L.experts[size_t(e)];
        if (s_.xe.size() < size_t(m) * size_t(D)) s_.xe.resize(size_t(m) * size_t(D));
        if (s_.ye.size() < size_t(m) * size_t(D)) s_.ye.resize(size_t(m) * size_t(D));
        for (int i = 0; i < m; ++i) {
            std::memcpy(s_.xe.data() + size_t(i) * D, h + size_t(rows[size_t(i)].first) * D,
                        sizeof(float) * size_t(D));
        }
        float* g = s_.gate.data();
        if (ex.gate_up.packed()) {
            if (s_.fused.size() < size_t(m) * 2 * size_t(F)) s_.fused.resize(size_t(m) * 2 * F);
            ex.gate_up.forward(s_.xe.data(), m, s_.fused.data());
            for (int i = 0; i < m; ++i) {
                const float* row = s_.fused.data() + size_t(i) * 2 * F;
                kernels::cpu::swiglu(row, row + F, F, g + size_t(i) * F);
            }
        } else {
            ex.gate.forward(s_.xe.data(), m, g);
            ex.up.forward(s_.xe.data(), m, s_.up.data());
            for (int i = 0; i < m; ++i)
                kernels::cpu::swiglu(g + size_t(i) * F, s_.up.data() + size_t(i) * F, F,
                                     g + size_t(i) * F);
        }
        ex.down.forward(g, m, s_.ye.data());
        for (int i = 0; i < m; ++i) {
            const auto& [t, w] = rows[size_t(i)];
            kernels::cpu::axpy_f32(w, s_.ye.data() + size_t(i) * D, s_.o.data() + size_t(t) * D, D);
        }
    }
#pragma omp parallel for schedule(static) if (T > 1)
    for (int t = 0; t < T; ++t) {
        kernels::cpu::axpy_f32(cfg_.residual_scale, s_.o.data() + size_t(t) * D, x + size_t(t) * D,
                               D);
    }
}

}  // namespace pagoda::model
