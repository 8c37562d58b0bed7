#include "server/paging.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace drover::server {
namespace {

net::Request With(std::map<std::string, std::string> query) {
  net::Request r;
  r.query = std::move(query);
  return r;
}

TEST(PagingTest, DefaultsAndValues) {
  Result<Page> p = ParsePage(With({}));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->offset, 0u);
  EXPECT_EQ(p->limit, kDefaultPageTasks);
  p = ParsePage(With({{"offset", "2000"}, {"limit", "1000"}}));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->offset, 2000u);
  EXPECT_EQ(p->limit, kMaxPageTasks);
}

TEST(PagingTest, ALimitOverTheCapIsRefusedNamingIt) {
  Result<Page> p = ParsePage(With({{"limit", "1001"}}));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(p.status().message(), "limit: at most 1000 tasks per page, got 1001");
}

TEST(PagingTest, BadNumbersAndUnknownParametersAreRefused) {
  for (const char* bad : {"", "-1", "1x", "4294967296", " 1", "0x10"}) {
    Result<Page> p = ParsePage(With({{"offset", bad}}));
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().message(),
              std::string("offset: expected an unsigned integer, got \"") + bad + "\"");
  }
  Result<Page> p = ParsePage(With({{"ofset", "3"}}));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(), "unknown query parameter \"ofset\" (known: offset, limit)");
  p = ParsePage(With({{"state", "x"}}), {"state"});
  EXPECT_TRUE(p.ok());
  p = ParsePage(With({{"stat", "x"}}), {"state"});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(),
            "unknown query parameter \"stat\" (known: offset, limit, state)");
}

TEST(PagingTest, NextOffsetAtPageBoundaries) {
  EXPECT_EQ(NextOffset({0, 1000}, 2500), 1000u);
  EXPECT_EQ(NextOffset({1000, 1000}, 2500), 2000u);
  EXPECT_EQ(NextOffset({2000, 1000}, 2500), std::nullopt);  // the last, short page
  EXPECT_EQ(NextOffset({1500, 1000}, 2500), std::nullopt);  // ends exactly at the end
  EXPECT_EQ(NextOffset({3000, 1000}, 2500), std::nullopt);  // past the end: empty
  EXPECT_EQ(NextOffset({0, 0}, 2500), std::nullopt);        // counts only
  EXPECT_EQ(NextOffset({4294967295u, 1000}, 4294967295u), std::nullopt);
  nlohmann::json body;
  PutPage(body, {0, 1000}, 2500);
  EXPECT_EQ(body, (nlohmann::json{{"offset", 0}, {"limit", 1000}, {"next_offset", 1000}}));
  PutPage(body, {2000, 1000}, 2500);
  EXPECT_TRUE(body["next_offset"].is_null());
}

}  // namespace
}  // namespace drover::server
