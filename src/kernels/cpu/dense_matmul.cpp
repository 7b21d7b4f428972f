// oneDNN matmul with weights packed once. oneDNN's C++ API throws dnnl::error: every
// call into it is wrapped here, so nothing escapes to the data path.
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <dnnl.hpp>
#include <map>
#include <mutex>
#include <vector>

#include "base/check.h"
#include "base/half.h"
#include "base/huge_buffer.h"
#include "kernels/cpu/half_panels.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant_vnni.h"
#include "kernels/cpu/simd_dispatch.h"
#include "kernels/ref/ops.h"

namespace pagoda::kernels::cpu {

namespace {
dnnl::engine& engine() {
    static dnnl::engine e(dnnl::engine::kind::cpu, 0);
    return e;
}

// Primitives are shared by every matrix of the same shape and type (they do not hold the
// weights): one per (n, k, type, batch bucket).
struct PrimKey {
    int64_t n, k;
    int type, m;
    auto operator<=>(const PrimKey&) const = default;
};
std::mutex g_prims_mu;
std::map<PrimKey, dnnl::matmul>& g_prims() {
    static std::map<PrimKey, dnnl::matmul> m;
    return m;
}
}  // namespace

std::string packed_layout_key() {
    const dnnl_version_t* v = dnnl_version();
    return fmt::format(
        "layout={};vnni={};avx512_half={};avx512_bf16={};portable={};onednn={}.{}.{}",
        kPackedLayoutVersion, int(have_avx512_vnni()), int(have_avx512_half()),
        int(have_avx512_bf16()), int(force_portable_kernels()), v->major, v->minor, v->patch);
}

int DenseMatmul::bucket(int m) {
    if (m <= 64) {
        int b = 1;
        while (b < m) b *= 2;
        return b;
    }
    return (m + 63) / 64 * 64;
}

struct DenseMatmul::Impl {
    int64_t n = 0, k = 0;
    // F16/BF16: the file's 16-bit rows, computed by half_rows (f32 products and sums)
    // instead of oneDNN: decode streams 2 bytes a weight, and oneDNN 2.6 has no f16 on
    // these CPUs (its f32 copy of an F16 file doubled the bytes read).
    bool half = false, bf16 = false;
    bool panels = false;   // AVX-512: 16-row panels (half_panels.h); else plain rows
    bool bf16dot = false;  // BF16 with AVX512_BF16: pair panels, bf16 activations
    HugeBuffer half_rows;
    dnnl::memory::data_type wtype = dnnl::memory::data_type::f32;
    dnnl::memory::desc packed_desc;
    HugeBuffer packed_buf;  // owns the packed weights (huge pages)
    dnnl::memory packed;
    dnnl::matmul::primitive_desc make_pd(int m, bool any_weights) const {
        using dt = dnnl::memory::data_type;
        using tag = dnnl::memory::format_tag;
        const dnnl::memory::desc src({m, k}, wtype, tag::ab);
        const dnnl::memory::desc wei =
            any_weights ? dnnl::memory::desc({k, n}, wtype, tag::any) : packed_desc;
        const dnnl::memory::desc dst({m, n}, dt::f32, tag::ab);
        return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, dst), engine());
    }

    // The primitive for batch bucket `m` (created on first use; map nodes are stable).
    const dnnl::matmul& prim(int m) const {
        const PrimKey key{n, k, int(wtype), m};
        std::lock_guard<std::mutex> lock(g_prims_mu);
        auto it = g_prims().find(key);
        if (it != g_prims().end()) return it->second;
        auto pd = make_pd(m, false);
        PAGODA_CHECK(pd.weights_desc() == packed_desc)
            << "oneDNN packed layout differs for batch " << m;
        return g_prims().emplace(key, dnnl::matmul(pd)).first->second;
    }
};

DenseMatmul::DenseMatmul() : impl_(std::make_unique<Impl>()) {}
DenseMatmul::~DenseMatmul() = default;
int64_t DenseMatmul::rows() const { return impl_->n; }
int64_t DenseMatmul::cols() const { return impl_->k; }
size_t DenseMatmul::packed_bytes() const {
    return impl_->half ? impl_->half_rows.size() : impl_->packed_desc.get_size();
}

std::span<const uint8_t> DenseMatmul::packed_data() const {
    const HugeBuffer& b = impl_->half ? impl_->half_rows : impl_->packed_buf;
    return {b.data(), b.size()};
}

Result<size_t> DenseMatmul::layout(Impl& im, TensorType type, int64_t rows, int64_t cols) {
    im.n = rows;
    im.k = cols;
    if (type == TensorType::kF16 || type == TensorType::kBF16) {
        im.half = true;
        im.bf16 = type == TensorType::kBF16;
        im.panels = have_avx512_half() && !force_portable_kernels();
        im.bf16dot = im.panels && im.bf16 && have_avx512_bf16();
        const int64_t panels = (rows + kHalfPanelRows - 1) / kHalfPanelRows;
        const size_t panel_bytes = im.bf16dot ? bf16_panel_bytes(cols) : half_panel_bytes(cols);
        return im.panels ? panel_bytes * size_t(panels) : size_t(rows * cols) * 2;
    }
    if (type != TensorType::kF32) {
        return make_error(ErrorCode::kUnsupported, "DenseMatmul: type {} is not dense",
                          formats::tensor_type_name(type));
    }
    im.wtype = dnnl::memory::data_type::f32;
    try {
        im.packed_desc = im.make_pd(1, true).weights_desc();
    } catch (const dnnl::error& e) {
        return make_error(ErrorCode::kInternal, "oneDNN matmul setup failed ({}x{}): {}", rows,
                          cols, e.what());
    }
    return im.packed_desc.get_size();
}

Result<std::unique_ptr<DenseMatmul>> DenseMatmul::create(const WeightView& w) {
    std::unique_ptr<DenseMatmul> mm(new DenseMatmul());
    Impl& im = *mm->impl_;
    PAGODA_ASSIGN_OR_RETURN(const size_t bytes, layout(im, w.type, w.rows, w.cols));
    if (im.half) {
        PAGODA_ASSIGN_OR_RETURN(im.half_rows, HugeBuffer::allocate(bytes));
        const auto* src = reinterpret_cast<const uint16_t*>(w.data);
        auto* dst = reinterpret_cast<uint16_t*>(im.half_rows.data());
        if (!im.panels) {
            std::memcpy(dst, src, bytes);
            return mm;
        }
        const int64_t panels = (w.rows + kHalfPanelRows - 1) / kHalfPanelRows;
        const size_t panel_bytes = bytes / size_t(panels);
#pragma omp parallel for schedule(static)
        for (int64_t p = 0; p < panels; ++p) {
            uint16_t* out = dst + size_t(p) * panel_bytes / 2;
            if (im.bf16dot) {
                pack_bf16_pair_panel(src, w.rows, w.cols, p, out);
            } else {
                pack_half_panel(src, w.rows, w.cols, p, out);
            }
        }
        return mm;
    }
    PAGODA_ASSIGN_OR_RETURN(im.packed_buf, HugeBuffer::allocate(bytes));
    try {
        // Source weights as [k][n] with n-major storage ("ba"): ggml rows are output features.
        const dnnl::memory::desc user_desc({im.k, im.n}, im.wtype, dnnl::memory::format_tag::ba);
        dnnl::memory user(user_desc, engine(), const_cast<uint8_t*>(w.data));
        im.packed = dnnl::memory(im.packed_desc, engine(), im.packed_buf.data());
        dnnl::stream s(engine());
        dnnl::reorder(user, im.packed).execute(s, user, im.packed);
        s.wait();
        im.prim(1);
    } catch (const dnnl::error& e) {
        return make_error(ErrorCode::kInternal, "oneDNN matmul setup failed ({}x{}): {}", w.rows,
                          w.cols, e.what());
    }
    return mm;
}

Result<std::unique_ptr<DenseMatmul>> DenseMatmul::adopt(TensorType type, int64_t rows, int64_t cols,
                                                        HugeBuffer packed) {
    std::unique_ptr<DenseMatmul> mm(new DenseMatmul());
    Impl& im = *mm->impl_;
    PAGODA_ASSIGN_OR_RETURN(const size_t bytes, layout(im, type, rows, cols));
    if (packed.size() != bytes) {
        return make_error(ErrorCode::kInvalidArgument,
                          "packed {} matrix {}x{} has {} bytes; its layout here needs {}",
                          formats::tensor_type_name(type), rows, cols, packed.size(), bytes);
    }
    if (im.half) {
        im.half_rows = std::move(packed);
        return mm;
    }
    im.packed_buf = std::move(packed);
    try {
        im.packed = dnnl::memory(im.packed_desc, engine(), im.packed_buf.data());
        im.prim(1);
    } catch (const dnnl::error& e) {
        return make_error(ErrorCode::kInternal, "oneDNN matmul setup failed ({}x{}): {}", rows,
                          cols, e.what());
    }
    return mm;
}

int DenseMatmul::prepare(int max_m) const {
    int made = 0;
    if (impl_->half) return 0;
    try {
        for (int m = 1; m <= bucket(max_m); m = bucket(m + 1)) {
            impl_->prim(m);
            ++made;
        }
    } catch (const dnnl::error& e) {
        PAGODA_CHECK(false) << "oneDNN primitive creation failed: " << e.what();
    }
    return made;
}

void DenseMatmul::run(const float* x, int m, float* y) const {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    const Impl& im = *impl_;
    if (im.half && im.panels) {
        const auto* w = reinterpret_cast<const uint16_t*>(im.half_rows.data());
        const int64_t panels = (im.n + kHalfPanelRows - 1) / kHalfPanelRows;
        // Decode: a few ranges of panels per thread, handed out dynamically (as
        // QuantMatmul); larger batches: two panels per task.
        const int64_t ranges = m <= 64
                                   ? std::min<int64_t>(panels, int64_t(omp_get_max_threads()) * 4)
                                   : (panels + 1) / 2;
        thread_local std::vector<uint32_t> xb;  // the caller's; the pool reads it via xbp
        if (im.bf16dot) {
            xb.resize(size_t(m) * size_t(bf16_pairs(im.k)));
            bf16_pair_activations(x, m, im.k, xb.data());
        }
        const uint32_t* xbp = xb.data();
#pragma omp parallel for schedule(dynamic, 1)
        for (int64_t c = 0; c < ranges; ++c) {
            int64_t p0 = panels * c / ranges, p1 = panels * (c + 1) / ranges;
            if (im.bf16dot) {
                bf16_panels_gemm(w, im.n, im.k, xbp, m, y, p0, p1);
            } else {
                half_panels_gemm(w, im.bf16, im.n, im.k, x, m, y, p0, p1);
            }
        }
        return;
    }
    if (im.half) {
        const auto* w = reinterpret_cast<const uint16_t*>(im.half_rows.data());
        // Decode streams the rows: a few ranges per thread, handed out dynamically (as
        // QuantMatmul); larger batches in 64-row chunks.
        const int64_t chunk =
            m <= 4 ? std::max<int64_t>(16, im.n / (omp_get_max_threads() * 4)) : 64;
        const int64_t chunks = (im.n + chunk - 1) / chunk;
#pragma omp parallel for schedule(dynamic, 1)
        for (int64_t c = 0; c < chunks; ++c)
            half_rows(w, im.bf16, im.n, im.k, x, m, y, c * chunk, std::min(im.n, (c + 1) * chunk));
        return;
    }
    // Batches run in buckets (padded with zero rows) so a bounded set of primitives,
    // created at warmup, serves every batch size; rows never mix, so a row's result
    // does not depend on the batch.
    const int mb = bucket(m);
    thread_local std::vector<float> xpad, ypad;
    try {
        const dnnl::matmul& p = im.prim(mb);
        const size_t in = size_t(m) * size_t(im.k), in_pad = size_t(mb) * size_t(im.k);
        void* src = const_cast<float*>(x);
        if (mb != m) {  // (only F32 runs through oneDNN)
            xpad.resize(in_pad);
            std::copy(x, x + in, xpad.begin());
            std::fill(xpad.begin() + ptrdiff_t(in), xpad.end(), 0.0f);
            src = xpad.data();
        }
        float* dst = y;
        if (mb != m) {
            ypad.resize(size_t(mb) * size_t(im.n));
            dst = ypad.data();
        }
        dnnl::memory src_m({{mb, im.k}, im.wtype, tag::ab}, engine(), src);
        dnnl::memory dst_m({{mb, im.n}, dt::f32, tag::ab}, engine(), dst);
        dnnl::stream s(engine());
        p.execute(s, {{DNNL_ARG_SRC, src_m}, {DNNL_ARG_WEIGHTS, im.packed}, {DNNL_ARG_DST, dst_m}});
        s.wait();
        if (mb != m) std::copy(ypad.begin(), ypad.begin() + ptrdiff_t(size_t(m) * size_t(im.n)), y);
    } catch (const dnnl::error& e) {
        PAGODA_CHECK(false) << "oneDNN matmul failed: "
                            << e.what();  // shapes were validated at load
    }
}

}  // namespace pagoda::kernels::cpu
