#pragma once
// A Hugging Face model directory (config.json, *.safetensors with or without
// model.safetensors.index.json, tokenizer.json, tokenizer_config.json,
// generation_config.json) written as one GGUF file, as llama.cpp's converter names and
// lays out its tensors: `pagoda model convert`, and what `-m DIR` loads (converted once
// into a cache folder, then mapped like any GGUF file; the weight cache packs it as usual).

#include <functional>
#include <string>
#include <vector>

#include "base/result.h"

namespace pagoda::hf {

struct ConvertOptions {
    // Matrix type: "auto" (the checkpoint's: F32, F16 or BF16), f32, f16, bf16, q8_0, q4_0.
    // Norms, biases and the experts' router stay F32.
    std::string dtype = "auto";
    // Whose tokenizer: empty (the directory's tokenizer.json), another Hugging Face
    // directory, or a GGUF file (its tokenizer.* keys). vLLM's --tokenizer.
    std::string tokenizer;
    // Apply generation_config.json's sampling defaults (written as pagoda.generation.*).
    bool generation_config = true;
};

// True if `path` is a directory with a config.json.
bool is_hf_dir(const std::string& path);

// A vocab-only GGUF image (tokenizer.* keys, no tensors) of `dir`'s tokenizer.json and
// tokenizer_config.json: what `pagoda tokenize -m DIR` reads.
Result<std::vector<uint8_t>> tokenizer_gguf(const std::string& dir);

// Writes `out` (a GGUF file; written to a temporary name, then renamed).
Status convert(const std::string& dir, const std::string& out, const ConvertOptions& o,
               const std::function<void(size_t, size_t)>& progress = {});

// The GGUF file for `dir` under `cache_dir`, converted there when absent or stale (the
// name carries a fingerprint of the directory's files and the options). Returns its path.
Result<std::string> resolve(const std::string& dir, const std::string& cache_dir,
                            const ConvertOptions& o);

// The folder converted directories go to when the caller has none:
// $XDG_CACHE_HOME/pagoda/hf, else ~/.cache/pagoda/hf.
std::string default_cache_dir();

}  // namespace pagoda::hf
