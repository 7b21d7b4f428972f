// add_hf_flags: the implementation (the contract is in apps/hf_flags.h).
#include "apps/hf_flags.h"

#include <memory>

namespace pagoda::app {

void add_hf_flags(CLI::App* c, hf::ConvertOptions& o) {
    c->add_option("--quantization,-q", o.dtype,
                  "For a Hugging Face directory: the matrices' type once converted: auto (the "
                  "checkpoint's F32/F16/BF16), q8_0, q4_0, f16, bf16, f32 (GGUF files load as "
                  "they are)")
        ->capture_default_str()
        ->check(CLI::IsMember({"auto", "none", "f32", "f16", "bf16", "q8_0", "q4_0"}))
        ->each([&o](const std::string& v) {
            if (v == "none") o.dtype = "auto";
        });
    c->add_option("--tokenizer", o.tokenizer,
                  "For a Hugging Face directory: take the tokenizer from this Hugging Face "
                  "directory or GGUF file (for directories that ship weights without one)")
        ->check(CLI::ExistingPath);
    auto gen = std::make_shared<std::string>("auto");
    c->add_option("--generation-config", *gen,
                  "auto: a Hugging Face directory's generation_config.json sets the default "
                  "temperature, top_p, top_k, min_p and repetition penalty of requests that do "
                  "not give them; vllm: ignore it")
        ->capture_default_str()
        ->check(CLI::IsMember({"auto", "vllm"}))
        ->each([&o, gen](const std::string& v) {  // gen: kept alive with the option
            o.generation_config = v == "auto";
        });
}

}  // namespace pagoda::app
