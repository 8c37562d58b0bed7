#include "net/sha256.h"

#include <gtest/gtest.h>

#include "worker/files/test_dir.h"

namespace drover::worker {

using net::IsSha256Hex;
using net::Sha256;
using net::Sha256OfFile;
namespace {

using testing::Pattern;
using testing::Sha256Of;
using testing::TempDir;
using testing::WriteFile;

TEST(Sha256Test, KnownVectors) {
  EXPECT_EQ(Sha256Of(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Of("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256Test, UpdatesInPiecesEqualOneUpdate) {
  Sha256 sha;
  sha.Update("a");
  sha.Update("");
  sha.Update("bc");
  EXPECT_EQ(sha.HexDigest(), Sha256Of("abc"));
}

TEST(Sha256Test, FileOfSeveralBuffersMatchesItsBytes) {
  TempDir dir;
  const std::string content = Pattern(3 * (1 << 20) + 17);
  WriteFile(dir / "f", content);
  Result<std::string> sha = Sha256OfFile(dir / "f");
  ASSERT_TRUE(sha.ok()) << sha.status().ToString();
  EXPECT_EQ(*sha, Sha256Of(content));
}

TEST(Sha256Test, MissingFileIsNotFound) {
  TempDir dir;
  Result<std::string> sha = Sha256OfFile(dir / "nope");
  ASSERT_FALSE(sha.ok());
  EXPECT_EQ(sha.status().code(), StatusCode::kNotFound);
  EXPECT_NE(sha.status().message().find(dir / "nope"), std::string::npos);
}

TEST(Sha256Test, IsSha256Hex) {
  EXPECT_TRUE(IsSha256Hex(Sha256Of("abc")));
  EXPECT_FALSE(IsSha256Hex(""));
  EXPECT_FALSE(IsSha256Hex(Sha256Of("abc").substr(1)));
  EXPECT_FALSE(IsSha256Hex(Sha256Of("abc") + "0"));
  std::string upper = Sha256Of("abc");
  upper[0] = 'B';
  EXPECT_FALSE(IsSha256Hex(upper));
  std::string other = Sha256Of("abc");
  other[5] = 'g';
  EXPECT_FALSE(IsSha256Hex(other));
}

}  // namespace
}  // namespace drover::worker
