// The implementation of model/reference.h (the contract is there).
#include "model/reference.h"

#include <algorithm>
#include <cmath>

#include "kernels/ref/ops.h"

namespace pagoda::model {
namespace {

void linear(const Linear& l, const float* x, float* y) {
    kernels::ref::matmul(l.view, x, 1, y);
    for (size_t r = 0; r < l.bias.size(); ++r) y[r] += l.bias[r];
}

// SwiGLU feed-forward of one row h into o: the dense layer's, or the mixture's (softmax
// router, the k best experts by a full sort, optionally renormalised, summed in double).
void feed_forward(const ModelConfig& c, const LayerWeights& L, const float* h, float* o) {
    const int D = c.dim;
    auto swiglu_ffn = [&](const Linear& gate, const Linear& up, const Linear& down, float* out) {
        const int F = int(gate.view.rows);
        std::vector<float> g(size_t(F), 0.0f), u(size_t(F), 0.0f);
        linear(gate, h, g.data());
        linear(up, h, u.data());
        kernels::ref::swiglu(g.data(), u.data(), F, g.data());
        linear(down, g.data(), out);
    };
    if (L.experts.empty()) {
        swiglu_ffn(L.w_gate, L.w_up, L.w_down, o);
        return;
    }
    std::vector<float> p(size_t(c.num_experts));
    linear(L.router, h, p.data());
    kernels::ref::softmax(p.data(), c.num_experts);
    std::vector<int> order(size_t(c.num_experts));
    for (int e = 0; e < c.num_experts; ++e) order[size_t(e)] = e;
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return p[size_t(a)] > p[size_t(b)]; });
    order.resize(size_t(c.num_experts_used));
    double sum = 0.0;
    for (int e : order) sum += p[size_t(e)];
    std::vector<double> acc(size_t(D), 0.0);
    std::vector<float> y(static_cast<size_t>(D));
    for (int e : order) {
        const Expert& x = L.experts[size_t(e)];
        swiglu_ffn(x.gate, x.up, x.down, y.data());
        const double w = c.moe_norm_topk ? p[size_t(e)] / sum : p[size_t(e)];
        for (int i = 0; i < D; ++i) acc[size_t(i)] += w * y[size_t(i)];
    }
    for (int i = 0; i < D; ++i) o[i] = float(acc[size_t(i)]);
}

}  // namespace

std::vector<std::vector<float>> reference_forward(const Model& m, std::span<const int32_t> tokens) {
    const ModelConfig& c = m.config();
    const Weights& w = m.weights();
    const int D = c.dim, QD = c.q_dim(), KVD = c.kv_dim(), HD = c.head_dim;
    const double scale = c.attention_scale > 0.0f ? c.attention_scale : 1.0 / std::sqrt(double(HD));
    const int T = int(tokens.size());
    const int group = c.num_heads / c.num_kv_heads;
    std::vector<std::vector<float>> kcache(size_t(c.num_layers),
                                           std::vector<float>(size_t(T) * KVD));
    std::vector<std::vector<float>> vcache = kcache;
    auto buf = [](int n) { return std::vector<float>(static_cast<size_t>(n)); };
    std::vector<float> x = buf(D), h = buf(D), q = buf(QD), k = buf(KVD), v = buf(KVD),
                       att = buf(QD), o = buf(D), scores;
    std::vector<std::vector<float>> out;
    for (int p = 0; p < T; ++p) {
        kernels::ref::dequantize_row(w.token_embd, tokens[size_t(p)], x.data());
        for (float& xi : x) xi *= c.embedding_scale;
        for (int l = 0; l < c.num_layers; ++l) {
            const LayerWeights& L = w.layers[size_t(l)];
            kernels::ref::rmsnorm(x.data(), L.attn_norm.data(), D, c.rms_eps, h.data());
            linear(L.wq, h.data(), q.data());
            linear(L.wk, h.data(), k.data());
            linear(L.wv, h.data(), v.data());
            if (c.qk_norm == QkNorm::kWhole) {
                kernels::ref::rmsnorm(q.data(), L.q_norm.data(), QD, c.rms_eps, q.data());
                kernels::ref::rmsnorm(k.data(), L.k_norm.data(), KVD, c.rms_eps, k.data());
            } else if (c.qk_norm == QkNorm::kPerHead) {
                for (int hh = 0; hh < c.num_heads; ++hh)
                    kernels::ref::rmsnorm(&q[size_t(hh * HD)], L.q_norm.data(), HD, c.rms_eps,
                                          &q[size_t(hh * HD)]);
                for (int hh = 0; hh < c.num_kv_heads; ++hh)
                    kernels::ref::rmsnorm(&k[size_t(hh * HD)], L.k_norm.data(), HD, c.rms_eps,
                                          &k[size_t(hh * HD)]);
            }
            kernels::ref::rope(q.data(), c.num_heads, HD, p, c.rope);
            kernels::ref::rope(k.data(), c.num_kv_heads, HD, p, c.rope);
            std::copy(k.begin(), k.end(), kcache[size_t(l)].begin() + long(p) * KVD);
            std::copy(v.begin(), v.end(), vcache[size_t(l)].begin() + long(p) * KVD);
            for (int hh = 0; hh < c.num_heads; ++hh) {
                const int kvh = hh / group;
                scores.assign(size_t(p + 1), 0.0f);
                for (int t = 0; t <= p; ++t) {
                    double dot = 0.0;
                    for (int d = 0; d < HD; ++d) {
                        dot += double(q[size_t(hh * HD + d)]) *
                               kcache[size_t(l)][size_t(t * KVD + kvh * HD + d)];
                    }
                    scores[size_t(t)] = float(dot * scale);
                }
                kernels::ref::softmax(scores.data(), p + 1);
                for (int d = 0; d < HD; ++d) {
                    double acc = 0.0;
                    for (int t = 0; t <= p; ++t)
                        acc += double(scores[size_t(t)]) *
                               vcache[size_t(l)][size_t(t * KVD + kvh * HD + d)];
                    att[size_t(hh * HD + d)] = float(acc);
                }
            }
            linear(L.wo, att.data(), o.data());
            for (int i = 0; i < D; ++i) x[size_t(i)] += c.residual_scale * o[size_t(i)];
            kernels::ref::rmsnorm(x.data(), L.ffn_norm.data(), D, c.rms_eps, h.data());
            feed_forward(c, L, h.data(), o.data());
            for (int i = 0; i < D; ++i) x[size_t(i)] += c.residual_scale * o[size_t(i)];
        }
        kernels::ref::rmsnorm(x.data(), w.output_norm.data(), D, c.rms_eps, h.data());
        std::vector<float> logits(static_cast<size_t>(c.vocab_size));
        linear(w.output, h.data(), logits.data());
        for (float& z : logits) z /= c.logit_scale;
        out.push_back(std::move(logits));
    }
    return out;
}

}  // namespace pagoda::model
