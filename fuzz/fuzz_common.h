#pragma once
// Shared by the fuzz targets: load a GGUF file's tokenizer once (aborts if it cannot, since a
// fuzz run without its fixture is meaningless).
#include <cstdlib>
#include <memory>
#include <string>

#include "base/mapped_file.h"
#include "formats/gguf.h"
#include "tokenizer/tokenizer.h"

namespace pagoda_fuzz {

struct Loaded {
    pagoda::MappedFile file;
    std::unique_ptr<pagoda::formats::GgufFile> gguf;
    std::unique_ptr<pagoda::tokenizer::Tokenizer> tok;
};

inline std::unique_ptr<Loaded> load(const std::string& path) {
    auto l = std::make_unique<Loaded>();
    auto f = pagoda::MappedFile::open(path);
    if (!f.ok()) std::abort();
    l->file = std::move(f).value();
    auto g = pagoda::formats::GgufFile::parse(l->file.bytes(), path);
    if (!g.ok()) std::abort();
    l->gguf = std::make_unique<pagoda::formats::GgufFile>(std::move(g).value());
    auto t = pagoda::tokenizer::Tokenizer::from_gguf(*l->gguf);
    if (!t.ok()) std::abort();
    l->tok = std::make_unique<pagoda::tokenizer::Tokenizer>(std::move(t).value());
    return l;
}

}  // namespace pagoda_fuzz
