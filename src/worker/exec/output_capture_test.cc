#include "worker/exec/output_capture.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "worker/exec/exec_test_util.h"

namespace drover::worker {
namespace {

using testing::ReadFile;
using testing::TempDir;

void WriteAll(int fd, const std::string& s) {
  ASSERT_EQ(write(fd, s.data(), s.size()), static_cast<ssize_t>(s.size()));
}

TEST(OutputCaptureTest, KeepsTheHeadAndMarksTruncationOnce) {
  TempDir dir;
  auto cap = OutputCapture::Create(dir.path() + "/out", 10);
  ASSERT_TRUE(cap.ok());
  WriteAll((*cap)->write_fd(), "0123456789abc");
  EXPECT_FALSE((*cap)->Drain());
  WriteAll((*cap)->write_fd(), "more");
  EXPECT_FALSE((*cap)->Drain());
  (*cap)->CloseWriteEnd();
  EXPECT_TRUE((*cap)->Drain());
  EXPECT_TRUE((*cap)->truncated());
  EXPECT_EQ((*cap)->bytes_seen(), 17u);
  EXPECT_EQ((*cap)->bytes_written(), 10u);
  EXPECT_EQ(ReadFile(dir.path() + "/out"), "0123456789\n[drover: output truncated at 10 B]\n");
}

TEST(OutputCaptureTest, OutputExactlyAtTheCapIsNotMarked) {
  TempDir dir;
  auto cap = OutputCapture::Create(dir.path() + "/out", 4);
  ASSERT_TRUE(cap.ok());
  WriteAll((*cap)->write_fd(), "abcd");
  (*cap)->CloseWriteEnd();
  EXPECT_TRUE((*cap)->Drain());
  EXPECT_FALSE((*cap)->truncated());
  EXPECT_EQ(ReadFile(dir.path() + "/out"), "abcd");
}

}  // namespace
}  // namespace drover::worker
