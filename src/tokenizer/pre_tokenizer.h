#pragma once
// PreTokenizer: splits text into words before byte-level BPE, by the regex list that
// `tokenizer.ggml.pre` names. Each regex splits the pieces the previous one produced;
// text between matches is kept as its own piece. Immutable after creation; thread-safe
// (match data is allocated per call).

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace pagoda::tokenizer {

class PreTokenizer {
  public:
    static Result<PreTokenizer> create(const std::string& pre_name);
    // Names accepted by create(), for error messages and docs.
    static std::vector<std::string> known_names();

    PreTokenizer(PreTokenizer&&) noexcept;
    PreTokenizer& operator=(PreTokenizer&&) noexcept;
    ~PreTokenizer();

    std::vector<std::string_view> split(std::string_view text) const;
    // True for pre-tokenizers whose words are looked up whole before merging (llama3).
    bool ignore_merges() const { return ignore_merges_; }

  private:
    PreTokenizer();
    struct Regex;
    std::vector<std::unique_ptr<Regex>> regexes_;
    bool ignore_merges_ = false;
};

}  // namespace pagoda::tokenizer
