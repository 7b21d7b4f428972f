#pragma once
// The flags for models as Hugging Face directories, shared by `serve` and `generate`:
// --quantization (vLLM's name for on-load quantization), --tokenizer (vLLM's), and
// --generation-config (vLLM's: auto applies generation_config.json's sampling defaults).

#include <CLI/CLI.hpp>

#include "hf/hf_convert.h"

namespace pagoda::app {

void add_hf_flags(CLI::App* c, hf::ConvertOptions& o);

}  // namespace pagoda::app
