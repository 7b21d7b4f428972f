// KvPool: the implementation (the contract is in kvcache/kv_pool.h).
#include "kvcache/kv_pool.h"

#include <cstdlib>
#include <cstring>

#include "base/check.h"

namespace pagoda::kvcache {

Status KvCacheConfig::validate() const {
    PAGODA_TRY(settings::check("block_size", block_size));
    if (num_blocks < 0)
        return make_error(ErrorCode::kInvalidArgument, "num_blocks must be >= 0, got {}",
                          num_blocks);
    if (num_blocks == 0 && memory_bytes <= 0) {
        return make_error(ErrorCode::kInvalidArgument, "KV cache memory must be > 0 bytes, got {}",
                          memory_bytes);
    }
    return ok_status();
}

Result<KvDtype> parse_kv_dtype(const std::string& s) {
    if (s == "f32" || s == "float32" || s == "auto") return KvDtype::kF32;
    if (s == "f16" || s == "fp16" || s == "float16") return KvDtype::kF16;
    if (s == "bf16" || s == "bfloat16") return KvDtype::kBF16;
    if (s == "q8_0") return KvDtype::kQ8_0;
    if (s == "q4_0") return KvDtype::kQ4_0;
    return make_error(ErrorCode::kInvalidArgument,
                      "KV cache dtype '{}' is not supported (allowed: f32, f16, bf16, q8_0, q4_0)",
                      s);
}

const char* kv_dtype_name(KvDtype t) {
    switch (t) {
        case KvDtype::kF32: return "f32";
        case KvDtype::kF16: return "f16";
        case KvDtype::kBF16: return "bf16";
        case KvDtype::kQ8_0: return "q8_0";
        case KvDtype::kQ4_0: return "q4_0";
    }
    return "?";
}

size_t KvPool::bytes_per_block() const {
    return size_t(2) * size_t(num_layers_) * size_t(num_kv_heads_) * size_t(cfg_.block_size) *
           kernels::kv_row_bytes(cfg_.dtype, head_dim_);
}

Result<KvPool> KvPool::create(const KvCacheConfig& cfg, int num_layers, int num_kv_heads,
                              int head_dim) {
    PAGODA_TRY(cfg.validate());
    if (kernels::kv_quantized(cfg.dtype) && head_dim % kernels::kKvQ8Block != 0) {
        return make_error(ErrorCode::kInvalidArgument,
                          "KV cache dtype {} quantizes each head's row in blocks of {} values; "
                          "this model's head dimension is {} (use f32, f16 or bf16)",
                          kv_dtype_name(cfg.dtype), kernels::kKvQ8Block, head_dim);
    }
    KvPool p;
    p.cfg_ = cfg;
    p.num_layers_ = num_layers;
    p.num_kv_heads_ = num_kv_heads;
    p.head_dim_ = head_dim;
    const size_t per_block = p.bytes_per_block();
    p.num_blocks_ =
        cfg.num_blocks > 0 ? cfg.num_blocks : int64_t(size_t(cfg.memory_bytes) / per_block);
    if (p.num_blocks_ < 1) {
        return make_error(ErrorCode::kInvalidArgument,
                          "KV cache memory {} bytes holds no block of {} bytes (block size {}); "
                          "raise --kv-cache-memory",
                          cfg.memory_bytes, per_block, cfg.block_size);
    }
    if (cfg.virtual_memory) return p;
    auto mem = HugeBuffer::allocate(per_block * size_t(p.num_blocks_));
    if (!mem.ok()) return make_error(ErrorCode::kOutOfRange, "KV cache: {}", mem.error().message);
    p.memory_ = std::move(mem).value();
    return p;
}

kernels::PagedKv KvPool::layer(int l) const {
    PAGODA_CHECK(l >= 0 && l < num_layers_) << l;
    const size_t pool_bytes = bytes_per_block() / size_t(2 * num_layers_) * size_t(num_blocks_);
    if (cfg_.virtual_memory) {
        return kernels::PagedKv{nullptr,         nullptr,       cfg_.dtype,
                                cfg_.block_size, num_kv_heads_, head_dim_};
    }
    uint8_t* base = memory_.data() + size_t(2 * l) * pool_bytes;
    return kernels::PagedKv{base,          base + pool_bytes, cfg_.dtype, cfg_.block_size,
                            num_kv_heads_, head_dim_};
}

void KvPool::copy_block(BlockId src_id, BlockId dst_id) {
    const int32_t src = src_id.value(), dst = dst_id.value();
    PAGODA_CHECK(src >= 0 && src < num_blocks_ && dst >= 0 && dst < num_blocks_)
        << src << " " << dst;
    if (cfg_.virtual_memory) return;
    const size_t block_bytes = bytes_per_block() / size_t(2 * num_layers_);
    const size_t pool_bytes = block_bytes * size_t(num_blocks_);
    for (int p = 0; p < 2 * num_layers_; ++p) {
        uint8_t* base = memory_.data() + size_t(p) * pool_bytes;
        std::memcpy(base + size_t(dst) * block_bytes, base + size_t(src) * block_bytes,
                    block_bytes);
    }
}

void KvPool::copy_tokens_from(const KvPool& from, const std::vector<int32_t>& from_table,
                              const std::vector<int32_t>& to_table, int64_t tokens) {
    PAGODA_CHECK(from.dtype() == dtype() && from.num_layers_ == num_layers_ &&
                 from.num_kv_heads_ == num_kv_heads_ && from.head_dim_ == head_dim_)
        << "KV copy between pools of different shapes";
    if (cfg_.virtual_memory || from.cfg_.virtual_memory) return;
    const size_t fb = size_t(from.block_size()), tb = size_t(block_size());
    PAGODA_CHECK(from_table.size() * fb >= size_t(tokens) && to_table.size() * tb >= size_t(tokens))
        << "block tables shorter than " << tokens << " tokens";
    // Inside a block and head (kernels/cpu/ops.cpp kv_write): K is [head_dim][slot] (one
    // column per token), V is [slot][head_dim] (one row per token); a quantized K is a row
    // as V.
    if (kernels::kv_quantized(dtype())) return copy_rows_from(from, from_table, to_table, tokens);
    const size_t esz = kernels::kv_dtype_bytes(dtype()), hd = size_t(head_dim_);
    const size_t heads = size_t(num_kv_heads_);
    for (int l = 0; l < num_layers_; ++l) {
        const kernels::PagedKv a = from.layer(l), b = layer(l);
        const auto* ks = static_cast<const uint8_t*>(a.k);
        const auto* vs = static_cast<const uint8_t*>(a.v);
        auto* kd = static_cast<uint8_t*>(b.k);
        auto* vd = static_cast<uint8_t*>(b.v);
        for (int64_t t = 0; t < tokens; ++t) {
            const size_t fblock = size_t(from_table[size_t(t) / fb]), fslot = size_t(t) % fb;
            const size_t tblock = size_t(to_table[size_t(t) / tb]), tslot = size_t(t) % tb;
            for (size_t h = 0; h < heads; ++h) {
                const size_t fhead = (fblock * heads + h) * fb * hd;  // elements
                const size_t thead = (tblock * heads + h) * tb * hd;
                std::memcpy(vd + (thead + tslot * hd) * esz, vs + (fhead + fslot * hd) * esz,
                            hd * esz);
                for (size_t d = 0; d < hd; ++d) {
                    std::memcpy(kd + (thead + d * tb + tslot) * esz,
                                ks + (fhead + d * fb + fslot) * esz, esz);
                }
            }
        }
    }
}

void KvPool::copy_rows_from(const KvPool& from, const std::vector<int32_t>& from_table,
                            const std::vector<int32_t>& to_table, int64_t tokens) {
    const int fb = from.block_size(), tb = block_size();
    for (int l = 0; l < num_layers_; ++l) {
        const kernels::PagedKv a = from.layer(l), b = layer(l);
        const size_t row = a.row_bytes();
        for (int64_t t = 0; t < tokens; ++t) {
            const int32_t fblock = from_table[size_t(t / fb)], tblock = to_table[size_t(t / tb)];
            const int fslot = int(t % fb), tslot = int(t % tb);
            for (int h = 0; h < num_kv_heads_; ++h) {
                for (int which = 0; which < 2; ++which) {
                    const void* src = which == 0 ? a.k : a.v;
                    void* dst = which == 0 ? b.k : b.v;
                    std::memcpy(const_cast<uint8_t*>(b.quant_row(dst, tblock, h, tslot)),
                                a.quant_row(src, fblock, h, fslot), row);
                }
            }
        }
    }
}

BlockAllocator::BlockAllocator(int64_t num_blocks) : total_(num_blocks) {
    free_.reserve(size_t(num_blocks));
    for (int64_t b = num_blocks - 1; b >= 0; --b) free_.push_back(int32_t(b));
}

int32_t BlockAllocator::allocate() {
    if (free_.empty()) return kNoBlock;
    const int32_t b = free_.back();
    free_.pop_back();
    return b;
}

void BlockAllocator::free(int32_t block) {
    PAGODA_CHECK(block >= 0 && block < total_) << block;
    free_.push_back(block);
}

}  // namespace pagoda::kvcache
