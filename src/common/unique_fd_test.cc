#include "common/unique_fd.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <utility>

namespace drover {
namespace {

bool IsOpen(int fd) { return fcntl(fd, F_GETFD) != -1; }

int OpenDevNull() { return open("/dev/null", O_RDONLY | O_CLOEXEC); }

TEST(UniqueFdTest, ClosesWhenDestroyed) {
  const int raw = OpenDevNull();
  ASSERT_GE(raw, 0);
  {
    UniqueFd fd(raw);
    EXPECT_TRUE(fd.valid());
    EXPECT_EQ(fd.fd(), raw);
    EXPECT_TRUE(IsOpen(raw));
  }
  EXPECT_FALSE(IsOpen(raw));
}

TEST(UniqueFdTest, AMoveHandsOverWithoutClosing) {
  const int raw = OpenDevNull();
  UniqueFd first(raw);
  UniqueFd second(std::move(first));
  EXPECT_FALSE(first.valid());  // NOLINT(bugprone-use-after-move): the point
  EXPECT_EQ(second.fd(), raw);
  EXPECT_TRUE(IsOpen(raw));
  UniqueFd third;
  third = std::move(second);
  EXPECT_EQ(third.fd(), raw);
  EXPECT_TRUE(IsOpen(raw));
}

TEST(UniqueFdTest, AssignmentAndResetCloseWhatWasHeld) {
  const int a = OpenDevNull();
  const int b = OpenDevNull();
  UniqueFd fd(a);
  fd = UniqueFd(b);
  EXPECT_FALSE(IsOpen(a));
  EXPECT_TRUE(IsOpen(b));
  fd.Reset();
  EXPECT_FALSE(IsOpen(b));
  EXPECT_FALSE(fd.valid());
}

TEST(UniqueFdTest, ReleaseGivesItUpOpen) {
  const int raw = OpenDevNull();
  int given = -1;
  {
    UniqueFd fd(raw);
    given = fd.Release();
    EXPECT_FALSE(fd.valid());
  }
  EXPECT_EQ(given, raw);
  EXPECT_TRUE(IsOpen(raw));
  close(raw);
}

}  // namespace
}  // namespace drover
