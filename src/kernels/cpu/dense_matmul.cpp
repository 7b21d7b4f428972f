// oneDNN matmul with weights packed once. oneDNN's C++ API throws dnnl::error: every
// call into it is wrapped here, so nothing escapes to the data path.
#include <dnnl.hpp>

#include <map>
#include <mutex>
#include <vector>

#include "base/check.h"
#include "base/half.h"
#include "base/huge_buffer.h"
#include "kernels/cpu/ops.h"
#include "kernels/ref/ops.h"

namespace pagoda::kernels::cpu {

namespace {
dnnl::engine& engine() {
    static dnnl::engine e(dnnl::engine::kind::cpu, 0);
    return e;
}
}  // namespace

struct DenseMatmul::Impl {
    int64_t n = 0, k = 0;
    dnnl::memory::data_type wtype = dnnl::memory::data_type::f32;
    dnnl::memory::desc packed_desc;
    HugeBuffer packed_buf;  // owns the packed weights (huge pages)
    dnnl::memory packed;
    mutable std::mutex mu;
    mutable std::map<int, dnnl::matmul> prims;  // by batch size; guarded by mu

    dnnl::matmul::primitive_desc make_pd(int m, bool any_weights) const {
        using dt = dnnl::memory::data_type;
        using tag = dnnl::memory::format_tag;
        const dnnl::memory::desc src({m, k}, wtype, tag::ab);
        const dnnl::memory::desc wei = any_weights ? dnnl::memory::desc({k, n}, wtype, tag::any) : packed_desc;
        const dnnl::memory::desc dst({m, n}, dt::f32, tag::ab);
        return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, dst), engine());
    }

    const dnnl::matmul& prim(int m) const {
        std::lock_guard<std::mutex> lock(mu);
        auto it = prims.find(m);
        if (it != prims.end()) return it->second;
        auto pd = make_pd(m, false);
        PAGODA_CHECK(pd.weights_desc() == packed_desc) << "oneDNN packed layout differs for batch " << m;
        return prims.emplace(m, dnnl::matmul(pd)).first->second;
    }
};

DenseMatmul::DenseMatmul() : impl_(std::make_unique<Impl>()) {}
DenseMatmul::~DenseMatmul() = default;
int64_t DenseMatmul::rows() const { return impl_->n; }
int64_t DenseMatmul::cols() const { return impl_->k; }
size_t DenseMatmul::packed_bytes() const { return impl_->packed_desc.get_size(); }

Result<std::unique_ptr<DenseMatmul>> DenseMatmul::create(const WeightView& w) {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    std::unique_ptr<DenseMatmul> mm(new DenseMatmul());
    Impl& im = *mm->impl_;
    im.n = w.rows;
    im.k = w.cols;
    try {
        // Source weights as [k][n] with n-major storage ("ba"): ggml rows are output features.
        std::vector<uint16_t> tmp16;
        std::vector<float> tmp32;
        const void* src = nullptr;
        switch (w.type) {
            case TensorType::kF32:
                im.wtype = dt::f32;
                src = w.data;
                break;
            case TensorType::kBF16:
                im.wtype = dt::bf16;
                src = w.data;
                break;
            case TensorType::kF16:  // exact in f32; bf16 would drop 3 mantissa bits
                im.wtype = dt::f32;
                tmp32.resize(size_t(w.rows * w.cols));
                for (size_t i = 0; i < tmp32.size(); ++i) tmp32[i] = fp16_to_float(reinterpret_cast<const uint16_t*>(w.data)[i]);
                src = tmp32.data();
                break;
            default:
                return make_error(ErrorCode::kUnsupported, "DenseMatmul: type {} is not dense",
                                  formats::tensor_type_name(w.type));
        }
        const dnnl::memory::desc user_desc({im.k, im.n}, im.wtype, tag::ba);
        dnnl::memory user(user_desc, engine(), const_cast<void*>(src));
        auto pd = im.make_pd(1, true);
        im.packed_desc = pd.weights_desc();
        auto buf = HugeBuffer::allocate(im.packed_desc.get_size());
        if (!buf.ok()) return buf.error();
        im.packed_buf = std::move(buf).value();
        im.packed = dnnl::memory(im.packed_desc, engine(), im.packed_buf.data());
        dnnl::stream s(engine());
        dnnl::reorder(user, im.packed).execute(s, user, im.packed);
        s.wait();
        im.prims.emplace(1, dnnl::matmul(pd));
    } catch (const dnnl::error& e) {
        return make_error(ErrorCode::kInternal, "oneDNN matmul setup failed ({}x{}): {}", w.rows, w.cols, e.what());
    }
    return mm;
}

void DenseMatmul::run(const float* x, int m, float* y) const {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    const Impl& im = *impl_;
    try {
        const dnnl::matmul& p = im.prim(m);
        std::vector<uint16_t> xb;
        void* src = const_cast<float*>(x);
        if (im.wtype == dt::bf16) {  // oneDNN 2.6 has no f32 x bf16: convert activations
            xb.resize(size_t(m) * size_t(im.k));
            for (size_t i = 0; i < xb.size(); ++i) xb[i] = float_to_bf16(x[i]);
            src = xb.data();
        }
        dnnl::memory src_m({{m, im.k}, im.wtype, tag::ab}, engine(), src);
        dnnl::memory dst_m({{m, im.n}, dt::f32, tag::ab}, engine(), y);
        dnnl::stream s(engine());
        p.execute(s, {{DNNL_ARG_SRC, src_m}, {DNNL_ARG_WEIGHTS, im.packed}, {DNNL_ARG_DST, dst_m}});
        s.wait();
    } catch (const dnnl::error& e) {
        PAGODA_CHECK(false) << "oneDNN matmul failed: " << e.what();  // shapes were validated at load
    }
}

}  // namespace pagoda::kernels::cpu
