// Views the kernels compute on: the implementation (the contract is in kernels/types.h).
#include "kernels/types.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "base/half.h"

namespace pagoda::kernels {

size_t WeightView::row_bytes() const {
    const auto tr = formats::tensor_type_traits(uint32_t(type));
    PAGODA_CHECK(tr.has_value()) << "bad type " << uint32_t(type);
    return size_t(cols) / tr->block_elems * tr->block_bytes;
}

size_t kv_dtype_bytes(KvDtype t) {
    PAGODA_CHECK(t != KvDtype::kQ8_0) << "q8_0 KV has no element size: use kv_row_bytes";
    return t == KvDtype::kF32 ? 4 : 2;
}

size_t kv_row_bytes(KvDtype t, int head_dim) {
    if (t == KvDtype::kQ8_0) return size_t(head_dim / kKvQ8Block) * kKvQ8BlockBytes;
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

void kv_q8_write(const PagedKv& kv, int32_t block, int slot, const float* k_row,
                 const float* v_row) {
    for (int h = 0; h < kv.num_kv_heads; ++h) {
        const size_t off = size_t(h) * size_t(kv.head_dim);
        kv_q8_quantize_row(k_row + off, kv.head_dim,
                           const_cast<uint8_t*>(kv.q8_row(kv.k, block, h, slot)));
        kv_q8_quantize_row(v_row + off, kv.head_dim,
                           const_cast<uint8_t*>(kv.q8_row(kv.v, block, h, slot)));
    }
}

float kv_q8_value(const uint8_t* row, int i) {
    const uint8_t* b = row + (i / kKvQ8Block) * kKvQ8BlockBytes;
    uint16_t dh;
    std::memcpy(&dh, b, 2);
    return fp16_to_float(dh) * float(int8_t(b[2 + i % kKvQ8Block]));
}

}  // namespace pagoda::kernels
