#include "store/redis_url.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace drover::store {
namespace {

using ::testing::HasSubstr;

TEST(RedisUrlTest, ParsesEveryPart) {
  auto url = ParseRedisUrl("redis://:s3cret@10.0.0.5:6380/2");
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  EXPECT_EQ(url->host, "10.0.0.5");
  EXPECT_EQ(url->port, 6380);
  EXPECT_EQ(url->password, "s3cret");
  EXPECT_EQ(url->user, "");
  EXPECT_EQ(url->db, 2);
  EXPECT_EQ(url->Redacted(), "redis://:***@10.0.0.5:6380/2");
}

TEST(RedisUrlTest, DefaultsPortAndDatabase) {
  auto url = ParseRedisUrl("redis://cache.lan");
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(url->host, "cache.lan");
  EXPECT_EQ(url->port, 6379);
  EXPECT_EQ(url->db, 0);
  EXPECT_EQ(ParseRedisUrl("redis://h/")->db, 0);
}

TEST(RedisUrlTest, AclUserPercentEncodingAndIpv6) {
  auto url = ParseRedisUrl("redis://drover:p%40ss%2Fw@[::1]:7000/3");
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  EXPECT_EQ(url->user, "drover");
  EXPECT_EQ(url->password, "p@ss/w");
  EXPECT_EQ(url->host, "::1");
  EXPECT_EQ(url->port, 7000);
  EXPECT_EQ(url->Endpoint(), "[::1]:7000");
}

TEST(RedisUrlTest, ErrorsSayWhatIsWrong) {
  struct Case {
    const char* url;
    const char* says;
  };
  const Case cases[] = {
      {"", "must start with redis://"},
      {"http://h:6379/0", "must start with redis://"},
      {"rediss://h:6379/0", "TLS"},
      {"unix:///tmp/redis.sock", "unix sockets"},
      {"redis://", "no host"},
      {"redis://:pw@/0", "no host"},
      {"redis://h:/0", "empty port"},
      {"redis://h:99999/0", "port \"99999\" is not in 1..65535"},
      {"redis://h:0/0", "not in 1..65535"},
      {"redis://h:12ab/0", "port \"12ab\""},
      {"redis://h:6379/x", "database \"x\""},
      {"redis://h:6379/-1", "database \"-1\""},
      {"redis://pw@h:6379/0", "credentials"},
      {"redis://:@h:6379/0", "empty password"},
      {"redis://:p%zz@h/0", "percent-encoding"},
      {"redis://[::1/0", "unclosed '['"},
      {"redis://h:6379/0?timeout=1", "query parameters"},
  };
  for (const Case& c : cases) {
    auto url = ParseRedisUrl(c.url);
    ASSERT_FALSE(url.ok()) << c.url;
    EXPECT_EQ(url.status().code(), StatusCode::kInvalidArgument) << c.url;
    EXPECT_THAT(url.status().message(), HasSubstr(c.says)) << c.url;
    EXPECT_THAT(url.status().message(), HasSubstr(std::string("\"") + c.url + "\"")) << c.url;
  }
}

}  // namespace
}  // namespace drover::store
