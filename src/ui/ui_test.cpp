#include "ui/ui.h"

#include <gtest/gtest.h>

namespace pagoda::ui {
namespace {

TEST(Ui, RootAndUiRedirectToThePage) {
    for (const char* p : {"/", "/ui"}) {
        auto r = serve(p, Kind::kReplica);
        ASSERT_TRUE(r) << p;
        EXPECT_EQ(r->status, 302);
        ASSERT_FALSE(r->headers.empty());
        EXPECT_EQ(r->headers[0].second, "/ui/");
    }
}

TEST(Ui, PageKnowsWhichProcessServesIt) {
    auto replica = serve("/ui/", Kind::kReplica);
    auto router = serve("/ui/", Kind::kRouter);
    ASSERT_TRUE(replica && router);
    EXPECT_EQ(replica->content_type, "text/html; charset=utf-8");
    EXPECT_NE(replica->body.find("data-kind=\"replica\""), std::string::npos);
    EXPECT_NE(router->body.find("data-kind=\"router\""), std::string::npos);
}

TEST(Ui, AssetsAreEmbeddedWithTheirTypes) {
    auto js = serve("/ui/console.js", Kind::kReplica);
    ASSERT_TRUE(js);
    EXPECT_EQ(js->status, 200);
    EXPECT_EQ(js->content_type, "text/javascript; charset=utf-8");
    auto uplot = serve("/ui/uPlot.iife.min.js", Kind::kReplica);
    ASSERT_TRUE(uplot);
    EXPECT_GT(uplot->body.size(), 10000u);  // the vendored library, whole
    EXPECT_EQ(serve("/ui/uPlot.min.css", Kind::kReplica)->content_type, "text/css; charset=utf-8");
}

TEST(Ui, UnknownFilesAre404AndOtherPathsNotTheConsoles) {
    EXPECT_EQ(serve("/ui/nope.js", Kind::kReplica)->status, 404);
    EXPECT_EQ(serve("/ui/../etc/passwd", Kind::kReplica)->status, 404);
    EXPECT_FALSE(serve("/metrics", Kind::kReplica));
    EXPECT_FALSE(serve("/uix", Kind::kReplica));
}

}  // namespace
}  // namespace pagoda::ui
