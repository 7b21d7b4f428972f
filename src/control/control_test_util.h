#pragma once
// Helpers of the control tests: a fresh state directory per test, and the bundled model
// (the engine tests' helper). Tests only.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "engine/engine_test_util.h"

namespace pagoda::control::test_util {

using engine::test_util::stories;  // the bundled model, loaded once

inline std::string fresh_dir(const std::string& name) {
    const auto d = std::filesystem::path(::testing::TempDir()) /
                   fmt::format("pagoda-control-{}-{}", name, ::getpid());
    std::filesystem::remove_all(d);
    return d.string();
}

}  // namespace pagoda::control::test_util
