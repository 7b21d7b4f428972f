#pragma once
// The bundled model's reference greedy continuation (models/README.md): prompt
// "Once upon a time" (ids 1 403 407 261 378), 32 new tokens at temperature 0, as produced
// by llama.cpp and by an independent NumPy port of the llama2.c forward pass.
// Included by tests only.

#include <cstdint>
#include <string>
#include <vector>

namespace pagoda::testdata {

inline const std::string kStoriesPath = PAGODA_SOURCE_DIR "/models/stories260K.gguf";
inline const std::vector<int32_t> kStoriesPromptIds = {1, 403, 407, 261, 378};
inline const std::vector<int32_t> kStoriesGoldenIds = {
    432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337,
    410, 408, 419, 292, 411, 322, 265, 282, 295, 433, 426, 385, 328, 432, 358, 394};
inline const char* const kStoriesGoldenText =
    ", there was a little girl named Lily. She loved to play outside in the park. One day, she saw";

}  // namespace pagoda::testdata
