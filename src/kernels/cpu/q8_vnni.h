#pragma once
// Q8_0 x Q8 matmul with AVX-512 VNNI (vpdpbusd: 64 int8 products per instruction),
// chosen at run time when the CPU has it; the Highway kernels serve every other CPU.
// Pure functions; thread-safe.
//
// Weights are repacked once into panels of 32 rows laid out for vpdpbusd. Per 32-block
// a panel holds 1088 bytes (17 cache lines): for rows 0-15 then rows 16-31, 8 vectors of
// [16 rows][4 consecutive columns] as unsigned bytes (w + 128), so one instruction
// accumulates 4 columns for 16 output rows in 16 lanes; then the 16 + 16 fp16 scales of
// the block (as stored in the file). A panel is one linear stream, and panels follow
// each other, so decode reads the whole matrix front to back. The activation is
// broadcast (4 bytes at a time): there is no horizontal sum, each output row lives in
// one lane, and the +128 offset is removed by starting the integer accumulator at
// -128 * sum(x) of the block (one value per activation row and block, computed once
// when the activations are quantized).

#include <cstddef>
#include <cstdint>

namespace pagoda::kernels::cpu {

bool have_avx512_vnni();

constexpr int kQ8PanelRows = 32;
constexpr size_t kQ8PanelBlockBytes = 2 * 512 + 2 * 32;

// Bytes of one packed panel (32 rows x cols): a multiple of 64.
inline size_t q8_vnni_panel_bytes(int64_t cols) { return size_t(cols / 32) * kQ8PanelBlockBytes; }

// Packs up to 32 rows (src_rows[r] = row r's Q8_0 blocks; rows from valid_rows on are
// zero with scale 0) into `dst` (q8_vnni_panel_bytes(cols) bytes).
void pack_q8_vnni_panel(const uint8_t* const* src_rows, int valid_rows, int64_t cols, uint8_t* dst);

// y[i][r] for panels [p0, p1) against m activation rows: qx signed int8 (row stride
// cols), dx one scale per 32-block, corr = -128 * sum(qx) per 32-block (row stride
// cols/32). y row stride `rows`; rows past `rows` in the last panel are not written.
// Every output value is computed by the same sequence of operations whatever m or the
// panel range (greedy decoding stays batch-invariant).
void q8_vnni_gemm(const uint8_t* packed, int64_t rows, int64_t cols, const int8_t* qx, const float* dx,
                  const int32_t* corr, int m, float* y, int64_t p0, int64_t p1);

}  // namespace pagoda::kernels::cpu
