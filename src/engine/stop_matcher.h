#pragma once
// StopMatcher: stop strings over a sample's decoded text. Text that may be the start of a
// stop string is held back until it is not; once a stop string appears, the text before it
// is released and the sample ends. Engine thread only; one per sample with stop strings.

#include <span>
#include <string>
#include <string_view>

namespace pagoda::engine {

class StopMatcher {
  public:
    explicit StopMatcher(std::span<const std::string> stops) : stops_(stops) {}

    struct Result {
        std::string text;         // released now
        const std::string* stop;  // the stop string that matched (earliest), or nullptr
    };
    // Before min_tokens a stop string does not end the sample (kNotYet), but a possible
    // prefix is still withheld.
    enum class Matching { kActive, kNotYet };
    // Adds newly decoded text.
    Result push(std::string_view text, Matching matching);
    // The text still held back (at the end of a sample that did not stop on a string).
    std::string flush();

  private:
    std::span<const std::string> stops_;
    std::string held_;
};

}  // namespace pagoda::engine
