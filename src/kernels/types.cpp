// Views the kernels compute on: the implementation (the contract is in kernels/types.h).
#include "kernels/types.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "base/half.h"
#include "kernels/ref/ops.h"

namespace pagoda::kernels {

size_t WeightView::row_bytes() const {
    const auto tr = formats::tensor_type_traits(uint32_t(type));
    PAGODA_CHECK(tr.has_value()) << "bad type " << uint32_t(type);
    return size_t(cols) / tr->block_elems * tr->block_bytes;
}

size_t kv_dtype_bytes(KvDtype t) {
    PAGODA_CHECK(!kv_quantized(t)) << "a quantized KV type has no element size: use kv_row_bytes";
    return t == KvDtype::kF32 ? 4 : 2;
}

size_t kv_row_bytes(KvDtype t, int head_dim) {
    if (t == KvDtype::kQ8_0) return size_t(head_dim / kKvQ8Block) * kKvQ8BlockBytes;
    if (t == KvDtype::kQ4_0) return size_t(head_dim / kKvQ8Block) * kKvQ4BlockBytes;
    return size_t(head_dim) * kv_dtype_bytes(t);
}

void kv_q8_quantize_row(const float* x, int n, uint8_t* out) {
    for (int b = 0; b < n / kKvQ8Block; ++b) {
        const float* xb = x + b * kKvQ8Block;
        uint8_t* ob = out + b * kKvQ8BlockBytes;
        float amax = 0;
        for (int i = 0; i < kKvQ8Block; ++i) amax = std::max(amax, std::fabs(xb[i]));
        const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
        const uint16_t dh = float_to_fp16(d);
        std::memcpy(ob, &dh, 2);
        for (int i = 0; i < kKvQ8Block; ++i) ob[2 + i] = uint8_t(int8_t(std::lround(xb[i] * id)));
    }
}

void kv_quant_write(const PagedKv& kv, int32_t block, int slot, const float* k_row,
                    const float* v_row) {
    // q4_0: the GGUF weight quantizer's blocks, as llama.cpp's q4_0 cache writes them.
    auto q4 = [](const float* x, int n, uint8_t* out) {
        ref::quantize_row(TensorType::kQ4_0, x, n, out);
    };
    auto quantize = kv.dtype == KvDtype::kQ4_0 ? +q4 : kv_q8_quantize_row;
    for (int h = 0; h < kv.num_kv_heads; ++h) {
        const size_t off = size_t(h) * size_t(kv.head_dim);
        quantize(k_row + off, kv.head_dim,
                 const_cast<uint8_t*>(kv.quant_row(kv.k, block, h, slot)));
        quantize(v_row + off, kv.head_dim,
                 const_cast<uint8_t*>(kv.quant_row(kv.v, block, h, slot)));
    }
}

float kv_quant_value(KvDtype t, const uint8_t* row, int i) {
    const int in = i % kKvQ8Block;
    const uint8_t* b =
        row + (i / kKvQ8Block) * (t == KvDtype::kQ4_0 ? kKvQ4BlockBytes : kKvQ8BlockBytes);
    uint16_t dh;
    std::memcpy(&dh, b, 2);
    if (t == KvDtype::kQ8_0) return fp16_to_float(dh) * float(int8_t(b[2 + in]));
    constexpr int kHalf = kKvQ8Block / 2;
    const uint8_t byte = b[2 + in % kHalf];
    const int q = in < kHalf ? byte & 15 : byte >> 4;
    return fp16_to_float(dh) * float(q - 8);
}

}  // namespace pagoda::kernels
