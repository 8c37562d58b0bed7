#include "net/router.h"

#include <gtest/gtest.h>

namespace drover::net {
namespace {

TEST(RouterTest, CapturesParamsAndPrefersFirstMatch) {
  Router<int> r;
  r.Add("GET", "/api/v1/jobs/{id}", 1);
  r.Add("POST", "/api/v1/jobs/{id}/cancel", 2);
  r.Add("GET", "/api/v1/jobs/latest", 3);  // shadowed by {id}
  auto m = r.Find("GET", "/api/v1/jobs/12");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(*m->target, 1);
  EXPECT_EQ(m->params.at("id"), "12");
  auto c = r.Find("POST", "/api/v1/jobs/12/cancel/");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c->target, 2);
  EXPECT_EQ(*r.Find("GET", "/api/v1/jobs/latest")->target, 1);
}

TEST(RouterTest, WildcardTakesTheRest) {
  Router<int> r;
  r.Add("GET", "/assets/*", 7);
  auto m = r.Find("GET", "/assets/js/app.js");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->params.at("*"), "js/app.js");
  EXPECT_EQ(r.Find("GET", "/assets")->params.at("*"), "");
}

TEST(RouterTest, UnknownPathIsNotFoundWrongMethodIsDistinct) {
  Router<int> r;
  r.Add("GET", "/a/{x}", 1);
  EXPECT_EQ(r.Find("GET", "/b").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.Find("GET", "/a/1/2").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.Find("DELETE", "/a/1").status().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace drover::net
