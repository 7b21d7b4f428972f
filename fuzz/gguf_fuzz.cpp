// libFuzzer target: the GGUF parser must reject or accept any byte string without
// reading out of bounds, and whatever it accepts must be readable (metadata printing,
// tokenizer construction, the first row of every tensor of a computed type dequantized,
// K-quants included: any bytes are a valid block).
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "formats/gguf.h"
#include "kernels/ref/ops.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    auto g = pagoda::formats::GgufFile::parse(std::span<const uint8_t>(data, size), "fuzz");
    if (!g.ok()) return 0;
    for (const auto& [k, v] : g->metadata()) (void)v.to_string();
    for (const auto& t : g->tensors()) {
        volatile uint8_t sink = t.data.empty() ? 0 : t.data[t.data.size() - 1];
        (void)sink;
        using pagoda::formats::TensorType;
        const bool computed = t.type == TensorType::kF32 || t.type == TensorType::kF16 ||
                              t.type == TensorType::kBF16 || t.type == TensorType::kQ8_0 ||
                              t.type == TensorType::kQ4_0 || pagoda::formats::is_k_quant(t.type);
        if (!computed || t.dims.empty() || t.dims[0] == 0 || t.dims[0] > (1u << 20)) continue;
        const pagoda::kernels::WeightView w{t.type, 1, int64_t(t.dims[0]), t.data.data()};
        std::vector<float> row(static_cast<size_t>(t.dims[0]));
        pagoda::kernels::ref::dequantize_row(w, 0, row.data());
    }
    auto tok = pagoda::tokenizer::Tokenizer::from_gguf(*g);
    if (tok.ok()) (void)tok->encode("Hello world 123 é");
    return 0;
}
