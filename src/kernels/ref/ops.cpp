// Reference kernels: the implementation (the contract is in kernels/ref/ops.h).
#include "kernels/ref/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "base/half.h"

namespace pagoda::kernels::ref {

using formats::BlockQ4_0;
using formats::BlockQ8_0;

void unpack_k_block(TensorType type, const uint8_t* block, KBlock* out) {
    if (type == TensorType::kQ6_K) {
        const auto* b = reinterpret_cast<const formats::BlockQ6_K*>(block);
        out->d = fp16_to_float(b->d);
        out->dmin = 0.0f;
        // The scales are signed by the format.
        for (int j = 0; j < 16; ++j)
            out->sc[j] = b->scales[j];  // NOLINT(bugprone-signed-char-misuse)
        for (int half = 0; half < 2; ++half) {
            const uint8_t* ql = b->ql + 64 * half;
            const uint8_t* qh = b->qh + 32 * half;
            uint8_t* q = out->q + 128 * half;
            for (int l = 0; l < 32; ++l) {
                q[l] = uint8_t((ql[l] & 0x0f) | ((qh[l] & 3) << 4));
                q[l + 32] = uint8_t((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4));
                q[l + 64] = uint8_t((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
                q[l + 96] = uint8_t((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
            }
        }
        return;
    }
    PAGODA_CHECK(type == TensorType::kQ4_K || type == TensorType::kQ5_K)
        << "unpack_k_block: not a K-quant: " << uint32_t(type);
    const bool q5 = type == TensorType::kQ5_K;
    // Q4_K and Q5_K share d, dmin and scales at the front; Q5_K adds qh before qs.
    const auto* b4 = reinterpret_cast<const formats::BlockQ4_K*>(block);
    const auto* b5 = reinterpret_cast<const formats::BlockQ5_K*>(block);
    out->d = fp16_to_float(b4->d);
    out->dmin = fp16_to_float(b4->dmin);
    for (int j = 0; j < 8; ++j) formats::k_scale_min(j, b4->scales, &out->sc[j], &out->m[j]);
    const uint8_t* qs = q5 ? b5->qs : b4->qs;
    for (int c = 0; c < 4; ++c) {
        for (int l = 0; l < 32; ++l) {
            int lo = qs[32 * c + l] & 0x0f, hi = qs[32 * c + l] >> 4;
            if (q5) {
                lo |= ((b5->qh[l] >> (2 * c)) & 1) << 4;
                hi |= ((b5->qh[l] >> (2 * c + 1)) & 1) << 4;
            }
            out->q[64 * c + l] = uint8_t(lo);
            out->q[64 * c + 32 + l] = uint8_t(hi);
        }
    }
}

void dequantize_row(const WeightView& w, int64_t r, float* out) {
    const uint8_t* row = w.row(r);
    const int64_t n = w.cols;
    switch (w.type) {
        case TensorType::kF32:
            for (int64_t i = 0; i < n; ++i) out[i] = reinterpret_cast<const float*>(row)[i];
            return;
        case TensorType::kF16:
            for (int64_t i = 0; i < n; ++i)
                out[i] = fp16_to_float(reinterpret_cast<const uint16_t*>(row)[i]);
            return;
        case TensorType::kBF16:
            for (int64_t i = 0; i < n; ++i)
                out[i] = bf16_to_float(reinterpret_cast<const uint16_t*>(row)[i]);
            return;
        case TensorType::kQ8_0: {
            const auto* b = reinterpret_cast<const BlockQ8_0*>(row);
            for (int64_t k = 0; k < n / 32; ++k) {
                const float d = fp16_to_float(b[k].d);
                for (int j = 0; j < 32; ++j) out[k * 32 + j] = d * float(b[k].qs[j]);
            }
            return;
        }
        case TensorType::kQ4_0: {
            const auto* b = reinterpret_cast<const BlockQ4_0*>(row);
            for (int64_t k = 0; k < n / 32; ++k) {
                const float d = fp16_to_float(b[k].d);
                for (int j = 0; j < 16; ++j) {
                    out[k * 32 + j] = d * float((b[k].qs[j] & 0x0f) - 8);
                    out[k * 32 + j + 16] = d * float((b[k].qs[j] >> 4) - 8);
                }
            }
            return;
        }
        case TensorType::kQ4_K:
        case TensorType::kQ5_K:
        case TensorType::kQ6_K: {
            const size_t bytes = formats::tensor_type_traits(uint32_t(w.type))->block_bytes;
            KBlock kb;
            for (int64_t k = 0; k < n / 256; ++k) {
                unpack_k_block(w.type, row + size_t(k) * bytes, &kb);
                float* o = out + k * 256;
                const bool q6 = w.type == TensorType::kQ6_K;
                for (int e = 0; e < 256; ++e) {
                    const int j = q6 ? e / 16 : e / 32;  // the sub-block
                    const float sc = float(kb.sc[j]);
                    o[e] = q6 ? kb.d * sc * float(int(kb.q[e]) - 32)
                              : kb.d * sc * float(kb.q[e]) - kb.dmin * float(kb.m[j]);
                }
            }
            return;
        }
        default: PAGODA_CHECK(false) << "dequantize_row: unsupported type " << uint32_t(w.type);
    }
}

void quantize_row(TensorType type, const float* x, int64_t n, uint8_t* out) {
    switch (type) {
        case TensorType::kF32: std::memcpy(out, x, size_t(n) * 4); return;
        case TensorType::kF16:
            for (int64_t i = 0; i < n; ++i)
                reinterpret_cast<uint16_t*>(out)[i] = float_to_fp16(x[i]);
            return;
        case TensorType::kBF16:
            for (int64_t i = 0; i < n; ++i)
                reinterpret_cast<uint16_t*>(out)[i] = float_to_bf16(x[i]);
            return;
        case TensorType::kQ8_0: {
            auto* b = reinterpret_cast<BlockQ8_0*>(out);
            for (int64_t k = 0; k < n / 32; ++k) {
                float amax = 0.0f;
                for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[k * 32 + j]));
                const float d = amax / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
                b[k].d = float_to_fp16(d);
                for (int j = 0; j < 32; ++j) b[k].qs[j] = int8_t(std::lrintf(x[k * 32 + j] * id));
            }
            return;
        }
        case TensorType::kQ4_0: {
            auto* b = reinterpret_cast<BlockQ4_0*>(out);
            for (int64_t k = 0; k < n / 32; ++k) {
                float amax = 0.0f, mx = 0.0f;  // value with the largest magnitude, with its sign
                for (int j = 0; j < 32; ++j) {
                    if (std::fabs(x[k * 32 + j]) > amax) {
                        amax = std::fabs(x[k * 32 + j]);
                        mx = x[k * 32 + j];
                    }
                }
                const float d = mx / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
                b[k].d = float_to_fp16(d);
                for (int j = 0; j < 16; ++j) {
                    const int lo = std::min(15, int(x[k * 32 + j] * id + 8.5f));
                    const int hi = std::min(15, int(x[k * 32 + 16 + j] * id + 8.5f));
                    b[k].qs[j] = uint8_t(std::max(0, lo) | (std::max(0, hi) << 4));
                }
            }
            return;
        }
        default: PAGODA_CHECK(false) << "quantize_row: unsupported type " << uint32_t(type);
    }
}

void matmul(const WeightView& w, const float* x, int m, float* y) {
    std::vector<float> row(static_cast<size_t>(w.cols));
    for (int64_t r = 0; r < w.rows; ++r) {
        dequantize_row(w, r, row.data());
        for (int i = 0; i < m; ++i) {
            double acc = 0.0;
            const float* xi = x + size_t(i) * size_t(w.cols);
            for (int64_t c = 0; c < w.cols; ++c) acc += double(row[size_t(c)]) * double(xi[c]);
            y[size_t(i) * size_t(w.rows) + size_t(r)] = float(acc);
        }
    }
}

void rmsnorm(const float* x, const float* weight, int n, float eps, float* out) {
    double ss = 0.0;
    for (int i = 0; i < n; ++i) ss += double(x[i]) * double(x[i]);
    const float inv = float(1.0 / std::sqrt(ss / n + double(eps)));
    for (int i = 0; i < n; ++i) out[i] = x[i] * inv * weight[i];
}

void swiglu(const float* gate, const float* up, int n, float* out) {
    for (int i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void softmax(float* x, int n) {
    float mx = -INFINITY;
    for (int i = 0; i < n; ++i) mx = std::max(mx, x[i]);
    double sum = 0.0;
    for (int i = 0; i < n; ++i) {
        x[i] = std::exp(x[i] - mx);
        sum += x[i];
    }
    for (int i = 0; i < n; ++i) x[i] = float(x[i] / sum);
}

void rope(float* x, int num_heads, int head_dim, int pos, const RopeParams& p) {
    const int half = p.rot_dim / 2;
    for (int i = 0; i < half; ++i) {
        double theta = double(pos) * double(p.freq_scale) *
                       std::pow(double(p.freq_base), -2.0 * i / p.rot_dim);
        if (p.freq_factors) theta /= double(p.freq_factors[i]);
        const float c = float(std::cos(theta)), s = float(std::sin(theta));
        for (int h = 0; h < num_heads; ++h) {
            float* v = x + size_t(h) * size_t(head_dim);
            const int a = p.style == RopeStyle::kNormal ? 2 * i : i;
            const int b = p.style == RopeStyle::kNormal ? 2 * i + 1 : i + half;
            const float x0 = v[a], x1 = v[b];
            v[a] = x0 * c - x1 * s;
            v[b] = x0 * s + x1 * c;
        }
    }
}

namespace {
// K (which == 0) is [head_dim][slot] per block and head, V [slot][head_dim].
size_t kv_index(const PagedKv& kv, const int32_t* block_table, int which, int pos, int kv_head,
                int d) {
    const int32_t block = block_table[pos / kv.block_size];
    const int slot = pos % kv.block_size;
    const size_t head = size_t(block) * kv.block_stride() + size_t(kv_head) * kv.head_stride();
    return which == 0 ? head + size_t(d) * size_t(kv.block_size) + size_t(slot)
                      : head + size_t(slot) * size_t(kv.head_dim) + size_t(d);
}
}  // namespace

float kv_at(const PagedKv& kv, const int32_t* block_table, int which, int pos, int kv_head, int d) {
    const void* base = which == 0 ? kv.k : kv.v;
    if (kv_quantized(kv.dtype)) {
        const int32_t block = block_table[pos / kv.block_size];
        return kv_quant_value(kv.dtype, kv.quant_row(base, block, kv_head, pos % kv.block_size), d);
    }
    const size_t idx = kv_index(kv, block_table, which, pos, kv_head, d);
    switch (kv.dtype) {
        case KvDtype::kF32: return static_cast<const float*>(base)[idx];
        case KvDtype::kF16: return fp16_to_float(static_cast<const uint16_t*>(base)[idx]);
        case KvDtype::kBF16: return bf16_to_float(static_cast<const uint16_t*>(base)[idx]);
        case KvDtype::kQ8_0:
        case KvDtype::kQ4_0: break;  // above
    }
    return 0.0f;
}

void kv_write(const PagedKv& kv, const int32_t* block_table, int pos, const float* k_row,
              const float* v_row) {
    if (kv_quantized(kv.dtype)) {
        kv_quant_write(kv, block_table[pos / kv.block_size], pos % kv.block_size, k_row, v_row);
        return;
    }
    for (int h = 0; h < kv.num_kv_heads; ++h) {
        for (int d = 0; d < kv.head_dim; ++d) {
            const size_t ki = kv_index(kv, block_table, 0, pos, h, d);
            const size_t vi = kv_index(kv, block_table, 1, pos, h, d);
            const float kf = k_row[h * kv.head_dim + d], vf = v_row[h * kv.head_dim + d];
            switch (kv.dtype) {
                case KvDtype::kF32:
                    static_cast<float*>(kv.k)[ki] = kf;
                    static_cast<float*>(kv.v)[vi] = vf;
                    break;
                case KvDtype::kF16:
                    static_cast<uint16_t*>(kv.k)[ki] = float_to_fp16(kf);
                    static_cast<uint16_t*>(kv.v)[vi] = float_to_fp16(vf);
                    break;
                case KvDtype::kBF16:
                    static_cast<uint16_t*>(kv.k)[ki] = float_to_bf16(kf);
                    static_cast<uint16_t*>(kv.v)[vi] = float_to_bf16(vf);
                    break;
                case KvDtype::kQ8_0:
                case KvDtype::kQ4_0: break;  // above
            }
        }
    }
}

void paged_attention(const PagedKv& kv, const AttentionShape& shape, const AttentionSeq& seq,
                     const float* q, float* out) {
    const int group = shape.num_heads / kv.num_kv_heads;
    std::vector<float> scores;
    for (int i = 0; i < seq.num_q; ++i) {
        const int n_keys = seq.q_pos0 + i + 1;
        scores.assign(size_t(n_keys), 0.0f);
        for (int h = 0; h < shape.num_heads; ++h) {
            const int kvh = h / group;
            const float* qh =
                q + size_t(i) * size_t(shape.q_stride) + size_t(h) * size_t(kv.head_dim);
            for (int t = 0; t < n_keys; ++t) {
                double dot = 0.0;
                for (int d = 0; d < kv.head_dim; ++d)
                    dot += double(qh[d]) * kv_at(kv, seq.block_table, 0, t, kvh, d);
                scores[size_t(t)] = float(dot) * shape.scale;
            }
            softmax(scores.data(), n_keys);
            float* oh =
                out + size_t(i) * size_t(shape.out_stride) + size_t(h) * size_t(kv.head_dim);
            for (int d = 0; d < kv.head_dim; ++d) {
                double acc = 0.0;
                for (int t = 0; t < n_keys; ++t)
                    acc += double(scores[size_t(t)]) * kv_at(kv, seq.block_table, 1, t, kvh, d);
                oh[d] = float(acc);
            }
        }
    }
}

}  // namespace pagoda::kernels::ref
