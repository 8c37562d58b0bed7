#include "worker/exec/command_cache.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "worker/exec/exec_test_util.h"

namespace drover::worker {
namespace {

using testing::TempDir;

class CommandCacheTest : public ::testing::Test {
 protected:
  CommandCacheTest()
      : a_(dir_.path() + "/a"),
        b_(dir_.path() + "/b"),
        c_(dir_.path() + "/c"),
        path_(a_ + ":" + b_ + ":" + c_),
        cache_(Seconds(2), clock_) {
    for (const std::string* d : {&a_, &b_, &c_}) mkdir(d->c_str(), 0755);
  }

  static void Install(const std::string& path, mode_t mode = 0755) {
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    ASSERT_GE(fd, 0) << path;
    close(fd);
    chmod(path.c_str(), mode);
  }

  Result<std::string> Resolve(const std::string& command) {
    return cache_.Resolve(command, path_, "/");
  }

  SimulatedClock clock_;
  TempDir dir_;
  std::string a_, b_, c_, path_;
  CommandCache cache_;
};

TEST_F(CommandCacheTest, AMissIsNotRememberedSoACommandInstalledLaterIsFound) {
  EXPECT_EQ(Resolve("tool").status().message(), "command not found: tool");
  Install(b_ + "/tool");
  Result<std::string> found = Resolve("tool");
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(*found, b_ + "/tool");
}

TEST_F(CommandCacheTest, AHitIsCheckedAgainAndSearchedForWhenGone) {
  Install(b_ + "/tool");
  ASSERT_EQ(*Resolve("tool"), b_ + "/tool");
  EXPECT_EQ(cache_.size(), 1u);
  // Removed: the next directory's copy is found at once.
  Install(c_ + "/tool");
  unlink((b_ + "/tool").c_str());
  ASSERT_EQ(*Resolve("tool"), c_ + "/tool");
  // No longer executable and nothing else on PATH: the search's own error,
  // and nothing remembered.
  chmod((c_ + "/tool").c_str(), 0644);
  EXPECT_EQ(Resolve("tool").status().message(), "permission denied: tool");
  EXPECT_EQ(cache_.size(), 0u);
  unlink((c_ + "/tool").c_str());
  EXPECT_EQ(Resolve("tool").status().message(), "command not found: tool");
}

TEST_F(CommandCacheTest, AHitIsTrustedForMaxAgeThenPathIsSearchedAgain) {
  Install(b_ + "/tool");
  ASSERT_EQ(*Resolve("tool"), b_ + "/tool");
  // A copy earlier on PATH: the remembered hit is still used within max_age
  // (that is what saves the search)...
  Install(a_ + "/tool");
  clock_.Advance(Seconds(1));
  EXPECT_EQ(*Resolve("tool"), b_ + "/tool");
  // ...and the search finds the earlier copy once it is older.
  clock_.Advance(Seconds(2));
  EXPECT_EQ(*Resolve("tool"), a_ + "/tool");
}

TEST_F(CommandCacheTest, ThePathIsPartOfTheKey) {
  Install(b_ + "/tool");
  Install(c_ + "/tool");
  EXPECT_EQ(*cache_.Resolve("tool", a_ + ":" + b_, "/"), b_ + "/tool");
  EXPECT_EQ(*cache_.Resolve("tool", a_ + ":" + c_, "/"), c_ + "/tool");
  EXPECT_EQ(*cache_.Resolve("tool", a_ + ":" + b_, "/"), b_ + "/tool");
}

TEST_F(CommandCacheTest, RelativeEntriesAndPathsAreNeverCached) {
  Install(b_ + "/tool");
  EXPECT_EQ(*cache_.Resolve("tool", a_ + "::" + b_, dir_.path()), b_ + "/tool");
  EXPECT_EQ(*cache_.Resolve("tool", "a:" + b_, dir_.path()), b_ + "/tool");
  EXPECT_EQ(*cache_.Resolve("b/tool", path_, dir_.path()), dir_.path() + "/b/tool");
  EXPECT_EQ(cache_.size(), 0u);
}

}  // namespace
}  // namespace drover::worker
