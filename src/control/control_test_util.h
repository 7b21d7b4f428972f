#pragma once
// Helpers of the control tests: a fresh state directory per test, and the bundled model
// loaded once per test program. Tests only.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "base/check.h"
#include "model/model.h"
#include "testdata/stories260k_golden.h"

namespace pagoda::control::test_util {

inline std::string fresh_dir(const std::string& name) {
    const auto d = std::filesystem::path(::testing::TempDir()) /
                   fmt::format("pagoda-control-{}-{}", name, ::getpid());
    std::filesystem::remove_all(d);
    return d.string();
}

inline model::Model& stories() {
    static std::unique_ptr<model::Model> m = [] {
        auto r = model::Model::load(testdata::kStoriesPath);
        PAGODA_CHECK(r.ok()) << r.error().message;
        return std::move(r).value();
    }();
    return *m;
}

}  // namespace pagoda::control::test_util
