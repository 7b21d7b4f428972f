#pragma once
// tokenizer.json (+ tokenizer_config.json, generation_config.json) as GGUF tokenizer.*
// keys, as llama.cpp's converter writes them: byte-level BPE ("gpt2": vocabulary, merges,
// the pre-tokenizer named by its regex) and SentencePiece-style BPE with byte fallback
// ("llama": pieces with "▁", <0xNN> byte tokens, scores from the merge ranks); added and
// special tokens typed control or user-defined; BOS/EOS/UNK/PAD/EOT ids; add_bos from the
// config or the post-processor; the chat template. Other tokenizer models (WordPiece,
// Unigram) and unrecognised pre-tokenizer regexes are errors naming the file and field.

#include <string>

#include "base/result.h"
#include "formats/gguf_writer.h"

namespace pagoda::hf {

// `dir`'s tokenizer, or `override_path`'s (a Hugging Face directory, or a GGUF file whose
// tokenizer.* keys are copied). `vocab_rows`: the embedding's rows (the token list may be
// shorter, and is padded to them); 0: the tokenizer's own size. With `generation_config`,
// generation_config.json's sampling defaults are written as pagoda.generation.* keys.
Status write_tokenizer(const std::string& dir, const std::string& override_path, int vocab_rows,
                       bool generation_config, formats::GgufWriter& w);

}  // namespace pagoda::hf
