#include "net/token.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "net/net_test_util.h"
#include "net/private_file.h"

namespace drover::net {
namespace {

using testing::TempDir;

TEST(TokenTest, GeneratesDistinct256BitHexTokens) {
  Result<std::string> a = GenerateToken();
  Result<std::string> b = GenerateToken();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 64u);
  EXPECT_EQ(a->find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(*a, *b);
}

TEST(TokenTest, CreatedOnceWithMode0600ThenLoaded) {
  TempDir dir;
  const std::string path = dir / "state/token";
  Result<std::string> first = LoadOrCreateToken(path);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  Result<std::string> second = LoadOrCreateToken(path);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*first, *second);
}

TEST(TokenTest, BadFilesAreNamed) {
  TempDir dir;
  const std::string empty = dir / "empty";
  ASSERT_TRUE(WritePrivateFile(empty, "  \n").ok());
  Result<std::string> r = LoadToken(empty);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(empty), std::string::npos);

  const std::string junk = dir / "junk";
  ASSERT_TRUE(WritePrivateFile(junk, "not a token").ok());
  EXPECT_EQ(LoadToken(junk).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadToken(dir / "missing").status().code(), StatusCode::kNotFound);
}

TEST(TokenTest, EqualityIsExact) {
  EXPECT_TRUE(TokenEquals("abc123", "abc123"));
  EXPECT_FALSE(TokenEquals("abc123", "abc124"));
  EXPECT_FALSE(TokenEquals("abc123", "abc1234"));
  EXPECT_FALSE(TokenEquals("abc", ""));
}

}  // namespace
}  // namespace drover::net
