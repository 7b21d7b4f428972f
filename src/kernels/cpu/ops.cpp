// Optimised CPU kernels: the implementation (the contract is in kernels/cpu/ops.h).
#include "kernels/cpu/ops.h"

#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <vector>

#include "base/check.h"
#include "base/half.h"
#include "kernels/cpu/quant_vnni.h"
#include "kernels/cpu/simd_dispatch.h"
#include "kernels/ref/ops.h"

namespace pagoda::kernels::cpu {

namespace {
bool g_force_portable = false;
std::atomic<int> g_num_threads{0};  // 0: OpenMP's default (OMP_NUM_THREADS or the CPU count)
VnniWeights vnni_of(TensorType t) {
    switch (t) {
        case TensorType::kQ8_0: return VnniWeights::kQ8_0;
        case TensorType::kQ4_K: return VnniWeights::kQ4_K;
        case TensorType::kQ5_K: return VnniWeights::kQ5_K;
        case TensorType::kQ6_K: return VnniWeights::kQ6_K;
        default: return VnniWeights::kQ4_0;
    }
}

// The integer corrections the VNNI kernels start from (quant_vnni.h), for one
// activation row quantized into qi[cols].
void vnni_corrections(VnniWeights t, const int8_t* qi, int64_t cols, int32_t* corr) {
    const int64_t nb = cols / 32;
    for (int64_t b = 0; b < nb; ++b) {
        int32_t lo = 0, hi = 0;
        for (int c = 0; c < 16; ++c) lo += qi[b * 32 + c];
        for (int c = 16; c < 32; ++c) hi += qi[b * 32 + c];
        if (t == VnniWeights::kQ6_K) {
            corr[2 * b] = -32 * lo;
            corr[2 * b + 1] = -32 * hi;
        } else if (vnni_is_k(t)) {
            corr[b] = lo + hi;
        } else {
            corr[b] = -vnni_weight_offset(t) * (lo + hi);
        }
    }
}
}  // namespace

void set_force_portable_kernels(bool on) { g_force_portable = on; }
bool force_portable_kernels() { return g_force_portable; }

int num_threads() {
    const int n = g_num_threads.load();
    return n > 0 ? n : omp_get_max_threads();
}
void set_num_threads(int n) {
    g_num_threads.store(n);
    omp_set_num_threads(n);
}
void adopt_num_threads() {
    const int n = g_num_threads.load();
    if (n > 0 && omp_get_max_threads() != n) omp_set_num_threads(n);
}

void matmul(const WeightView& w, const float* x, int m, float* y) {
    if (formats::is_k_quant(w.type) && have_avx512_vnni() && !force_portable_kernels()) {
        auto q = QuantMatmul::create(w);
        PAGODA_CHECK(q.ok()) << q.error().message;
        (*q)->run(x, m, y);
        return;
    }
    if (w.type != TensorType::kQ8_0 && w.type != TensorType::kQ4_0) {
        // Dense types normally go through DenseMatmul; this path serves odd shapes only.
        std::vector<float> row(static_cast<size_t>(w.cols));
        for (int64_t r = 0; r < w.rows; ++r) {
            ref::dequantize_row(w, r, row.data());
            for (int i = 0; i < m; ++i) {
                y[size_t(i) * size_t(w.rows) + size_t(r)] =
                    dot_f32(row.data(), x + size_t(i) * size_t(w.cols), int(w.cols));
            }
        }
        return;
    }
    auto q = QuantMatmul::create(w);
    PAGODA_CHECK(q.ok()) << q.error().message;
    (*q)->run(x, m, y);
}

Result<std::unique_ptr<QuantMatmul>> QuantMatmul::create(const WeightView& w) {
    std::vector<const uint8_t*> rows(static_cast<size_t>(w.rows));
    for (int64_t r = 0; r < w.rows; ++r) rows[size_t(r)] = w.row(r);
    return create_rows(w.type, w.cols, rows);
}

Result<size_t> QuantMatmul::layout(QuantMatmul& q, TensorType type, int64_t rows, int64_t cols) {
    const bool k = formats::is_k_quant(type);
    const bool vnni = have_avx512_vnni() && !force_portable_kernels();
    if ((type != TensorType::kQ8_0 && type != TensorType::kQ4_0 && !k) ||
        cols % (k ? 256 : 32) != 0) {
        return make_error(ErrorCode::kUnsupported,
                          "QuantMatmul: {} with {} columns is not Q8_0/Q4_0 in 32-blocks or "
                          "Q4_K/Q5_K/Q6_K in 256-blocks",
                          formats::tensor_type_name(type), cols);
    }
    if (k && !vnni) {
        return make_error(ErrorCode::kUnsupported,
                          "QuantMatmul: {} needs AVX-512 VNNI (elsewhere it runs dequantized)",
                          formats::tensor_type_name(type));
    }
    q.type_ = type;
    q.use_vnni_ = vnni;
    q.rows_ = rows;
    q.cols_ = cols;
    if (vnni) {  // panels of 32 rows in the vpdpbusd layout (see quant_vnni.h)
        q.row_stride_ = vnni_panel_bytes(vnni_of(type), cols);
        return q.row_stride_ * size_t((rows + kVnniPanelRows - 1) / kVnniPanelRows);
    }
    const int64_t nb = cols / 32;  // values, then the blocks' f32 scales
    q.row_stride_ = size_t(nb) * (type == TensorType::kQ8_0 ? 32 : 16) + size_t(nb) * 4;
    return q.row_stride_ * size_t(rows);
}

Result<std::unique_ptr<QuantMatmul>> QuantMatmul::adopt(TensorType type, int64_t rows, int64_t cols,
                                                        HugeBuffer packed) {
    std::unique_ptr<QuantMatmul> q(new QuantMatmul());
    PAGODA_ASSIGN_OR_RETURN(const size_t bytes, layout(*q, type, rows, cols));
    if (packed.size() != bytes) {
        return make_error(ErrorCode::kInvalidArgument,
                          "packed {} matrix {}x{} has {} bytes; its layout here needs {}",
                          formats::tensor_type_name(type), rows, cols, packed.size(), bytes);
    }
    q->packed_ = std::move(packed);
    return q;
}

Result<std::unique_ptr<QuantMatmul>> QuantMatmul::create_rows(
    TensorType type, int64_t cols, const std::vector<const uint8_t*>& row_data) {
    const int64_t rows = int64_t(row_data.size());
    std::unique_ptr<QuantMatmul> q(new QuantMatmul());
    PAGODA_ASSIGN_OR_RETURN(const size_t bytes, layout(*q, type, rows, cols));
    PAGODA_ASSIGN_OR_RETURN(q->packed_, HugeBuffer::allocate(bytes));
    if (q->use_vnni_) {
        const VnniWeights vt = vnni_of(type);
        const int64_t panels = (rows + kVnniPanelRows - 1) / kVnniPanelRows;
#pragma omp parallel for schedule(static)
        for (int64_t p = 0; p < panels; ++p) {
            const uint8_t* src[kVnniPanelRows];
            const int valid = int(std::min<int64_t>(kVnniPanelRows, rows - p * kVnniPanelRows));
            for (int r = 0; r < valid; ++r) src[r] = row_data[size_t(p * kVnniPanelRows + r)];
            pack_vnni_panel(vt, src, valid, cols, q->packed_.data() + size_t(p) * q->row_stride_);
        }
        return q;
    }
    const bool q8 = type == TensorType::kQ8_0;
    const int64_t nb = cols / 32;
    const size_t values = size_t(nb) * (q8 ? 32 : 16);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const uint8_t* src = row_data[size_t(r)];
        uint8_t* dst = q->packed_.data() + size_t(r) * q->row_stride_;
        auto* scales = reinterpret_cast<float*>(dst + values);
        for (int64_t b = 0; b < nb; ++b) {
            if (q8) {
                const auto* blk = reinterpret_cast<const formats::BlockQ8_0*>(src) + b;
                scales[b] = fp16_to_float(blk->d);
                std::memcpy(dst + b * 32, blk->qs, 32);
            } else {
                const auto* blk = reinterpret_cast<const formats::BlockQ4_0*>(src) + b;
                scales[b] = fp16_to_float(blk->d);
                std::memcpy(dst + b * 16, blk->qs, 16);
            }
        }
    }
    return q;
}

void QuantMatmul::run(const float* x, int m, float* y) const {
    const int nb = int(cols_ / 32);
    std::vector<int8_t> qx(size_t(m) * size_t(cols_));
    std::vector<float> dx(size_t(m) * size_t(nb));
    const VnniWeights vt = vnni_of(type_);
    const size_t corr_row = size_t(nb) * size_t(vnni_corr_per_block(vt));
    std::vector<int32_t> corr(use_vnni_ ? size_t(m) * corr_row : 0);
#pragma omp parallel for schedule(static) if (m > 1)
    for (int i = 0; i < m; ++i) {
        int8_t* qi = qx.data() + size_t(i) * size_t(cols_);
        // One scale per 32 values for every weight type. llama.cpp takes one per 256 for
        // K-quants (Q8_K); per 32 is finer, and closer to llama.cpp's own greedy outputs
        // on the K-quant parity files (tests/generate_test.cpp, docs/performance.md).
        quantize_q8(x + size_t(i) * size_t(cols_), int(cols_), qi,
                    dx.data() + size_t(i) * size_t(nb));
        if (use_vnni_) vnni_corrections(vt, qi, cols_, corr.data() + size_t(i) * corr_row);
    }
    if (use_vnni_) {
        const int64_t panels = (rows_ + kVnniPanelRows - 1) / kVnniPanelRows;
        // Decode batches (m <= 64) stream weights from DRAM: a few contiguous ranges of
        // panels per thread (one stream each; the kernel prefetches the next panel of its
        // range), handed out dynamically so a thread slowed by its neighbours on the host
        // does not hold the other at the barrier. Prefill is compute-bound: one panel at a time.
        constexpr int kRangesPerThread = 4;
        const int64_t ranges =
            m <= 64 ? std::min<int64_t>(panels, int64_t(omp_get_max_threads()) * kRangesPerThread)
                    : panels;
#pragma omp parallel for schedule(dynamic, 1)
        for (int64_t c = 0; c < ranges; ++c) {
            vnni_gemm(vt, packed_.data(), rows_, cols_, qx.data(), dx.data(), corr.data(), m, y,
                      panels * c / ranges, panels * (c + 1) / ranges);
        }
        return;
    }
    const int64_t tile = m > 4 ? 16 : 64;
    const int64_t num_tiles = (rows_ + tile - 1) / tile;
    auto tile_rows = [&](int64_t t) {
        const int64_t r0 = t * tile, r1 = std::min(rows_, r0 + tile);
        quant_rows(uint32_t(type_), packed_.data(), row_stride_, rows_, cols_, qx.data(), dx.data(),
                   m, y, r0, r1);
    };
    if (m <= 4) {
#pragma omp parallel for schedule(static)
        for (int64_t t = 0; t < num_tiles; ++t) tile_rows(t);
    } else {
#pragma omp parallel for schedule(dynamic, 1)
        for (int64_t t = 0; t < num_tiles; ++t) tile_rows(t);
    }
}

void QuantMatmul::run_many(std::span<const Job> jobs) {
    bool vnni = true;
    for (const Job& j : jobs) vnni = vnni && j.w->use_vnni_;
    if (!vnni) {  // the portable path: one run each
        for (const Job& j : jobs) j.w->run(j.x, j.m, j.y);
        return;
    }
    // Every job's quantized activations in buffers that only grow (this thread's: the
    // caller is the engine thread), so a prefill does not fault in fresh pages per layer.
    struct Prepared {
        size_t qx = 0, dx = 0, corr = 0;  // offsets into the buffers
        int64_t panels = 0;
    };
    thread_local std::vector<int8_t> qx_all;
    thread_local std::vector<float> dx_all;
    thread_local std::vector<int32_t> corr_all;
    std::vector<Prepared> prep(jobs.size());
    size_t nq = 0, nd = 0, nc = 0;
    int64_t total_rows = 0;
    for (size_t k = 0; k < jobs.size(); ++k) {
        const QuantMatmul& w = *jobs[k].w;
        const size_t m = size_t(jobs[k].m), nb = size_t(w.cols_ / 32);
        prep[k] = {nq, nd, nc, (w.rows_ + kVnniPanelRows - 1) / kVnniPanelRows};
        nq += m * size_t(w.cols_);
        nd += m * nb;
        nc += m * nb * size_t(vnni_corr_per_block(vnni_of(w.type_)));
        total_rows += jobs[k].m;
    }
    if (qx_all.size() < nq) qx_all.resize(nq);
    if (dx_all.size() < nd) dx_all.resize(nd);
    if (corr_all.size() < nc) corr_all.resize(nc);
    int8_t* qx = qx_all.data();
    float* dx = dx_all.data();
    int32_t* corr = corr_all.data();
    struct Range {
        size_t job;
        int64_t p0, p1;
    };
    std::vector<Range> ranges;
    constexpr int kRangesPerThread = 2;  // per job: the queue spans all jobs
    // Activations quantized job by job (in parallel when there are many rows, as in prefill).
#pragma omp parallel for schedule(dynamic, 1) if (total_rows > 64)
    for (size_t k = 0; k < jobs.size(); ++k) {
        const Job& j = jobs[k];
        const QuantMatmul& w = *j.w;
        const int nb = int(w.cols_ / 32);
        const VnniWeights vt = vnni_of(w.type_);
        const size_t corr_row = size_t(nb) * size_t(vnni_corr_per_block(vt));
        const Prepared& p = prep[k];
        for (int i = 0; i < j.m; ++i) {
            int8_t* qi = qx + p.qx + size_t(i) * size_t(w.cols_);
            quantize_q8(j.x + size_t(i) * size_t(w.cols_), int(w.cols_), qi,
                        dx + p.dx + size_t(i) * size_t(nb));
            vnni_corrections(vt, qi, w.cols_, corr + p.corr + size_t(i) * corr_row);
        }
    }
    for (size_t k = 0; k < jobs.size(); ++k) {
        const Prepared& p = prep[k];
        // Decode-sized jobs stream weights: a few ranges each; larger ones are compute-bound:
        // one panel per range, so the queue balances.
        const int64_t n =
            jobs[k].m > 64
                ? p.panels
                : std::min<int64_t>(p.panels, int64_t(omp_get_max_threads()) * kRangesPerThread);
        for (int64_t c = 0; c < n; ++c)
            ranges.push_back({k, p.panels * c / n, p.panels * (c + 1) / n});
    }
#pragma omp parallel for schedule(dynamic, 1)
    for (size_t r = 0; r < ranges.size(); ++r) {
        const Range& g = ranges[r];
        const Job& j = jobs[g.job];
        const Prepared& p = prep[g.job];
        vnni_gemm(vnni_of(j.w->type_), j.w->packed_.data(), j.w->rows_, j.w->cols_, qx + p.qx,
                  dx + p.dx, corr + p.corr, j.m, j.y, g.p0, g.p1);
    }
}

void rope(float* x, int num_heads, int head_dim, int pos, const RopeParams& p) {
    const int half = p.rot_dim / 2;
    // Angles in double like the reference, so positions in the tens of thousands stay exact.
    float cs[256], sn[256];
    PAGODA_CHECK(half <= 256) << half;
    for (int i = 0; i < half; ++i) {
        double theta = double(pos) * double(p.freq_scale) *
                       std::pow(double(p.freq_base), -2.0 * i / p.rot_dim);
        if (p.freq_factors) theta /= double(p.freq_factors[i]);
        cs[i] = float(std::cos(theta));
        sn[i] = float(std::sin(theta));
    }
    for (int h = 0; h < num_heads; ++h) {
        float* v = x + size_t(h) * size_t(head_dim);
        if (p.style == RopeStyle::kNormal) {
            for (int i = 0; i < half; ++i) {
                const float x0 = v[2 * i], x1 = v[2 * i + 1];
                v[2 * i] = x0 * cs[i] - x1 * sn[i];
                v[2 * i + 1] = x0 * sn[i] + x1 * cs[i];
            }
        } else {
            for (int i = 0; i < half; ++i) {
                const float x0 = v[i], x1 = v[i + half];
                v[i] = x0 * cs[i] - x1 * sn[i];
                v[i + half] = x0 * sn[i] + x1 * cs[i];
            }
        }
    }
}

void kv_write(const PagedKv& kv, const int32_t* block_table, int pos, const float* k_row,
              const float* v_row) {
    const int32_t block = block_table[pos / kv.block_size];
    const int slot = pos % kv.block_size;
    if (kv_quantized(kv.dtype)) {  // K and V one quantized row each
        kv_quant_write(kv, block, slot, k_row, v_row);
        return;
    }
    for (int h = 0; h < kv.num_kv_heads; ++h) {
        const size_t head = size_t(block) * kv.block_stride() + size_t(h) * kv.head_stride();
        const size_t kb = head + size_t(slot), vb = head + size_t(slot) * size_t(kv.head_dim);
        const size_t bs = size_t(kv.block_size);  // K is [head_dim][slot]: one column
        const float* ks = k_row + size_t(h) * size_t(kv.head_dim);
        const float* vs = v_row + size_t(h) * size_t(kv.head_dim);
        switch (kv.dtype) {
            case KvDtype::kF32:
                for (int d = 0; d < kv.head_dim; ++d)
                    static_cast<float*>(kv.k)[kb + size_t(d) * bs] = ks[d];
                std::memcpy(static_cast<float*>(kv.v) + vb, vs, size_t(kv.head_dim) * 4);
                break;
            case KvDtype::kF16:
                for (int d = 0; d < kv.head_dim; ++d) {
                    static_cast<uint16_t*>(kv.k)[kb + size_t(d) * bs] = float_to_fp16(ks[d]);
                    static_cast<uint16_t*>(kv.v)[vb + size_t(d)] = float_to_fp16(vs[d]);
                }
                break;
            case KvDtype::kBF16:
                for (int d = 0; d < kv.head_dim; ++d) {
                    static_cast<uint16_t*>(kv.k)[kb + size_t(d) * bs] = float_to_bf16(ks[d]);
                    static_cast<uint16_t*>(kv.v)[vb + size_t(d)] = float_to_bf16(vs[d]);
                }
                break;
            case KvDtype::kQ8_0:
            case KvDtype::kQ4_0: break;  // above
        }
    }
}

double measure_read_bandwidth(size_t bytes, int reps) {
    auto mem = HugeBuffer::allocate(bytes);
    if (!mem.ok()) return 0;
    const int64_t n = int64_t(bytes / sizeof(float));
    float* buf = mem->as<float>();
    std::fill(buf, buf + n, 1.0f);
    adopt_num_threads();
    const int chunks = 64;
    double best = 0;
    for (int r = 0; r < reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        double total = 0;
#pragma omp parallel for reduction(+ : total) schedule(static)
        for (int c = 0; c < chunks; ++c) total += sum_f32(buf + c * (n / chunks), n / chunks);
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (total > 0 && s > 0) best = std::max(best, double(bytes) / s);
    }
    return best;
}

namespace {
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}
}  // namespace

double spin_pool(const std::function<bool()>& done, double* cpu_s) {
    adopt_num_threads();
    const auto t0 = std::chrono::steady_clock::now();
    std::atomic<bool> stop{false};
    std::atomic<int64_t> cpu_ns{0};
#pragma omp parallel
    {
        timespec c0{}, c1{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
        // The spinners run at SCHED_IDLE: any other runnable thread (the HTTP I/O thread
        // with a new request, a load generator on the same host) preempts them at once, so
        // the spin only ever takes CPU nobody else wants. They yield between short spins too.
        const sched_param idle{};
        const bool demoted = pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle) == 0;
        if (omp_get_thread_num() == 0) {
            while (!done()) {
                for (int i = 0; i < 32; ++i) cpu_relax();
                sched_yield();
            }
            stop.store(true, std::memory_order_release);
        } else {
            while (!stop.load(std::memory_order_acquire)) {
                for (int i = 0; i < 32; ++i) cpu_relax();
                sched_yield();
            }
        }
        const sched_param normal{};
        if (demoted) pthread_setschedparam(pthread_self(), SCHED_OTHER, &normal);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
        cpu_ns.fetch_add(int64_t(c1.tv_sec - c0.tv_sec) * 1'000'000'000 +
                         (c1.tv_nsec - c0.tv_nsec));
    }
    if (cpu_s != nullptr) *cpu_s = double(cpu_ns.load()) / 1e9;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace pagoda::kernels::cpu
