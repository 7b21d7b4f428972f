// Views the kernels compute on: the implementation (the contract is in kernels/types.h).
#include "kernels/types.h"

#include "base/check.h"

namespace pagoda::kernels {

size_t WeightView::row_bytes() const {
    const auto tr = formats::tensor_type_traits(uint32_t(type));
    PAGODA_CHECK(tr.has_value()) << "bad type " << uint32_t(type);
    return size_t(cols) / tr->block_elems * tr->block_bytes;
}

size_t kv_dtype_bytes(KvDtype t) { return t == KvDtype::kF32 ? 4 : 2; }

}  // namespace pagoda::kernels
