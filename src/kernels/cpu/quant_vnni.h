#pragma once
// Q8_0 and Q4_0 x Q8 matmul with AVX-512 VNNI (vpdpbusd: 64 int8 products per
// instruction), chosen at run time when the CPU has it; the Highway kernels serve every
// other CPU. Pure functions; thread-safe.
//
// Weights are repacked once into panels of 32 rows laid out for vpdpbusd, which
// multiplies unsigned bytes (the weights) by signed bytes (the activations) and sums
// groups of four into 32-bit lanes. Per 32-block a panel holds, for rows 0-15 then rows
// 16-31, vectors of [16 rows][4 consecutive columns], then the block's 16 + 16 fp16
// scales (as stored in the file):
//   Q8_0: 8 vectors per half of w + 128 (1088 bytes a block, 17 cache lines);
//   Q4_0: 4 vectors per half, each byte the file's own nibble pair (low nibble column
//         c, high nibble column c + 16; values w + 8), unpacked in registers with one
//         AND and one shift (576 bytes a block, 9 cache lines).
// A panel is one linear stream and panels follow each other, so decode reads the matrix
// front to back. The activation is broadcast four bytes at a time: there is no
// horizontal sum, each output row lives in one lane, and the weight offset is removed
// by starting the integer accumulator at -offset * sum(x) of the block (one value per
// activation row and block, computed when the activations are quantized).

#include <cstddef>
#include <cstdint>

namespace pagoda::kernels::cpu {

bool have_avx512_vnni();

constexpr int kVnniPanelRows = 32;

enum class VnniWeights { kQ8_0, kQ4_0, kQ4_K, kQ5_K, kQ6_K };

// K-quants (Q4_K, Q5_K, Q6_K) are packed per 256-column super-block: a header with the
// 32 rows' super-block scales (f32: d[32], then dmin[32] for Q4_K/Q5_K), then its eight
// 32-blocks, each the values as above followed by 64 bytes of per-row sub-block scales:
//   Q4_K: Q4_0's nibble vectors (q in 0..15), then sc[32], m[32] (u8, 6 bits):
//         w = d sc q - dmin m; 4864 bytes a super-block;
//   Q5_K: the low four bits as Q4_K's nibble vectors (256 bytes a half), then per half
//         one vector of the fifth bits (bit k of a lane's byte j belongs to column
//         4k + j for k < 4, to column 16 + 4(k - 4) + j for k >= 4), then sc[32], m[32]:
//         w = d sc q - dmin m with q in 0..31; 5888 bytes (5.75 bits a weight);
//   Q6_K: the low four bits as Q4_K's nibble vectors (256 bytes a half), then per half two
//         vectors of the high two bits (columns 0-15, then 16-31: bits 2k..2k+1 of a
//         lane's byte j belong to column 4k + j of the group), then sc[32] of columns 0-15
//         and sc[32] of columns 16-31 (int8): w = d sc (q - 32); 6784 bytes.
// Scales stay integers as in the file and are multiplied by d in f32 (as ggml does); the
// dot products of the quants with the int8 activations are exact.
constexpr bool vnni_is_k(VnniWeights t) { return t >= VnniWeights::kQ4_K; }
constexpr size_t vnni_panel_block_bytes(VnniWeights t) {  // per 32 columns (32-block types)
    return t == VnniWeights::kQ8_0 ? 1088 : 576;
}
constexpr size_t vnni_panel_superblock_bytes(VnniWeights t) {  // per 256 columns (K-quants)
    return t == VnniWeights::kQ4_K ? 4864 : t == VnniWeights::kQ5_K ? 5888 : 6784;
}
inline size_t vnni_panel_bytes(VnniWeights t, int64_t cols) {
    return vnni_is_k(t) ? size_t(cols / 256) * vnni_panel_superblock_bytes(t)
                        : size_t(cols / 32) * vnni_panel_block_bytes(t);
}
// The offset the packed weights carry: corr = -offset * sum(x) per block (Q8_0, Q4_0).
// For Q4_K/Q5_K corr is sum(x) per 32-block (the mins are applied in f32); for Q6_K it
// is -32 * sum(x) per 16 columns (two per 32-block).
inline int vnni_weight_offset(VnniWeights t) { return t == VnniWeights::kQ8_0 ? 128 : 8; }
inline int vnni_corr_per_block(VnniWeights t) { return t == VnniWeights::kQ6_K ? 2 : 1; }

// Packs up to 32 rows (src_rows[r] = row r's blocks as in the file; rows from
// valid_rows on are zero with scale 0) into `dst` (vnni_panel_bytes bytes).
void pack_vnni_panel(VnniWeights t, const uint8_t* const* src_rows, int valid_rows, int64_t cols,
                     uint8_t* dst);

// y[i][r] for panels [p0, p1) against m activation rows: qx signed int8 (row stride
// cols), dx one scale per 32-block, corr as above (vnni_corr_per_block values per
// 32-block and row). y row stride `rows`; rows past `rows` in the last panel are not written.
// Every output value is computed by the same sequence of operations whatever m or the
// panel range (greedy decoding stays batch-invariant).
void vnni_gemm(VnniWeights t, const uint8_t* packed, int64_t rows, int64_t cols, const int8_t* qx,
               const float* dx, const int32_t* corr, int m, float* y, int64_t p0, int64_t p1);

}  // namespace pagoda::kernels::cpu
