#pragma once
// Optimised CPU kernels: Highway SIMD (AVX2/AVX-512 chosen at run time) and OpenMP over
// the one compute pool. Same signatures as kernels/ref; each is tested against it.
// Functions are thread-safe; each call may use the whole OpenMP pool.

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/huge_buffer.h"
#include "base/result.h"
#include "kernels/types.h"

namespace pagoda::kernels::cpu {

// y[m][w.rows] = x[m][w.cols] * W^T for Q8_0 and Q4_0 weights: activations are quantized
// to 8 bits per 32-block (as llama.cpp does) and dotted with int8 SIMD.
// It repacks the weights on every call: for tests and one-off use. The model packs once
// (QuantMatmul / DenseMatmul); for F32/F16/BF16 this falls back to dequantizing.
void matmul(const WeightView& w, const float* x, int m, float* y);
void rmsnorm(const float* x, const float* weight, int n, float eps, float* out);
void swiglu(const float* gate, const float* up, int n, float* out);
void softmax(float* x, int n);
void rope(float* x, int num_heads, int head_dim, int pos, const RopeParams& p);
void paged_attention(const PagedKv& kv, const AttentionShape& shape, const AttentionSeq& seq,
                     const float* q, float* out);
// Several sequences at once, parallel over sequences x query rows x heads.
void paged_attention_batch(const PagedKv& kv, const AttentionShape& shape,
                           const std::vector<AttentionSeq>& seqs,
                           const std::vector<int>& row_offsets, const float* q, float* out);
void kv_write(const PagedKv& kv, const int32_t* block_table, int pos, const float* k_row,
              const float* v_row);

// Name of the SIMD target Highway picked on this machine (e.g. "AVX3").
const char* simd_target_name();

// Tests: make kernels created afterwards use the portable Highway paths even where a
// CPU-specific one exists (so both are checked against the reference).
void set_force_portable_kernels(bool on);
bool force_portable_kernels();

// Number of threads in the compute pool (OpenMP). OpenMP keeps the thread count per
// thread: set_num_threads records it for the process, and every thread that opens
// parallel regions (the engine loop, load-time workers) calls adopt_num_threads() first.
int num_threads();
void set_num_threads(int n);
void adopt_num_threads();

// SIMD building blocks (exposed for benchmarks and tests).
float dot_f32(const float* a, const float* b, int n);
void axpy_f32(float a, const float* x, float* y, int n);  // y += a * x
float sum_f32(const float* a, int64_t n);                 // streaming read
// Memory read bandwidth in bytes/s: the best of `reps` parallel sums over a huge-page
// buffer of `bytes` (far beyond the caches), on the compute pool. 0 if it cannot allocate.
// `pagoda serve` measures it at start for the bandwidth metrics (about 0.2 s).
double measure_read_bandwidth(size_t bytes = size_t(256) << 20, int reps = 3);
// Keeps every thread of the compute pool busy (spinning with a pause instruction) until
// `done()` returns true; thread 0, the caller, checks it about every 10 microseconds. A
// halted CPU takes a while to come back (a VM's vCPU especially), and every parallel
// region of a forward pass pays it after an idle pause: spinning between steps keeps the
// pool awake for the next one. Returns the wall seconds spun; `cpu_s`, when given, gets the
// CPU seconds the pool's threads spent in it (less than wall x threads when other work
// preempted the spinners).
double spin_pool(const std::function<bool()>& done, double* cpu_s = nullptr);
// What the packed layouts below depend on, for a cache of packed weights (model/
// weight_cache.h): a layout version (bump kPackedLayoutVersion whenever a packing format
// changes: quant_vnni.h, half_panels.h, the portable rows), the CPU features that choose
// the kernels, and oneDNN's version. Equal strings mean packed bytes are interchangeable.
inline constexpr int kPackedLayoutVersion = 2;  // 2: Q5_K as nibbles + a bit plane
std::string packed_layout_key();

// Quantizes x[n] (n % 32 == 0) to int8 with one float scale per 32 values.
void quantize_q8(const float* x, int n, int8_t* q, float* d);

// Q8_0/Q4_0 (and, with AVX-512 VNNI only, Q4_K/Q5_K/Q6_K) matmul with weights repacked
// once: on CPUs with AVX-512 VNNI into 32-row panels for vpdpbusd (quant_vnni.h);
// otherwise rows of values apart from f32 scales for the Highway kernels. run() is
// thread-safe.
class QuantMatmul {
  public:
    static Result<std::unique_ptr<QuantMatmul>> create(const WeightView& w);
    // The same from one pointer per row (rows of one type and width from several tensors:
    // the fused Q/K/V and gate/up matrices are packed without joining them first).
    static Result<std::unique_ptr<QuantMatmul>> create_rows(
        TensorType type, int64_t cols, const std::vector<const uint8_t*>& rows);
    // One made from bytes another QuantMatmul of the same type and shape packed on a CPU
    // with the same packed_layout_key() (`packed` may borrow them from a mapped file).
    static Result<std::unique_ptr<QuantMatmul>> adopt(TensorType type, int64_t rows, int64_t cols,
                                                      HugeBuffer packed);
    void run(const float* x, int m, float* y) const;
    // Several matmuls as one parallel pass (a mixture's experts: each decode step runs a
    // few small matrices, whose thread start-ups and barriers would cost more than their
    // reads): every job's activations quantized, then all jobs' panel ranges handed out
    // from one queue. Each y is what run() writes.
    struct Job {
        const QuantMatmul* w;
        const float* x;
        int m;
        float* y;
    };
    static void run_many(std::span<const Job> jobs);
    size_t packed_bytes() const { return packed_.size(); }
    std::span<const uint8_t> packed_data() const { return {packed_.data(), packed_.size()}; }

  private:
    QuantMatmul() = default;
    // Checks the type and shape and sets the layout fields; returns the packed size.
    static Result<size_t> layout(QuantMatmul& q, TensorType type, int64_t rows, int64_t cols);
    TensorType type_ = TensorType::kQ8_0;
    bool use_vnni_ = false;  // AVX-512 VNNI path (decided once, at creation)
    int64_t rows_ = 0, cols_ = 0;
    size_t row_stride_ = 0;  // bytes per packed row (per 32-row panel for the VNNI path)
    // Portable: one stream per row: values (int8 for Q8_0, 16 bytes of nibbles per block
    // for Q4_0), then cols/32 f32 scales. VNNI: panels as quant_vnni.h describes.
    HugeBuffer packed_;
};

// Dense matmul: F32 through oneDNN with weights packed once at creation (one primitive
// per batch bucket, built on first use and cached); F16/BF16 on a copy of the file's
// 16-bit rows with SIMD dot products in f32 (half_rows). run() is thread-safe.
class DenseMatmul {
  public:
    static Result<std::unique_ptr<DenseMatmul>> create(const WeightView& w);
    // One made from the packed_data() of a DenseMatmul of the same type and shape created
    // on a CPU with the same packed_layout_key() (`packed` may borrow from a mapped file).
    static Result<std::unique_ptr<DenseMatmul>> adopt(TensorType type, int64_t rows, int64_t cols,
                                                      HugeBuffer packed);
    ~DenseMatmul();
    void run(const float* x, int m, float* y) const;
    // Creates the primitives for every batch bucket up to max_m (warmup); returns how many
    // buckets that is. Primitives are shared between matrices of one shape and type.
    int prepare(int max_m) const;
    // Batch sizes run padded to a bucket: powers of two up to 64, then multiples of 64.
    static int bucket(int m);
    int64_t rows() const;
    int64_t cols() const;
    size_t packed_bytes() const;
    std::span<const uint8_t> packed_data() const;

  private:
    DenseMatmul();
    struct Impl;
    // Sets the layout fields for type and shape; returns the packed size.
    static Result<size_t> layout(Impl& im, TensorType type, int64_t rows, int64_t cols);
    std::unique_ptr<Impl> impl_;
};

}  // namespace pagoda::kernels::cpu
