// DirectorySizer: what a directory holds, measured on the sizer's thread.
#include "worker/exec/directory_sizer.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "worker/exec/exec_test_util.h"

namespace drover::worker {
namespace {

using testing::Put;
using testing::TempDir;

TEST(DirectorySizerTest, CountsAllocatedBlocksEachInodeOnceAndLeavesOutTheSkippedDirectory) {
  TempDir dir;
  const std::string root = dir.path() + "/task";
  std::filesystem::create_directories(root + "/inputs");
  std::filesystem::create_directories(root + "/output/deep");
  Put(root + "/output/deep/a", std::string(1 << 20, 'a'));
  Put(root + "/inputs/big", std::string(4 << 20, 'i'));                          // left out
  ASSERT_EQ(link((root + "/output/deep/a").c_str(), (root + "/b").c_str()), 0);  // counted once
  std::filesystem::create_symlink("/usr", root + "/usr");                        // not followed
  const uint64_t bytes = DirectorySizer::DirectoryBytes(root, root + "/inputs");
  EXPECT_GE(bytes, 1u << 20);
  EXPECT_LT(bytes, (1u << 20) + (256u << 10));  // the file once, plus a few directory blocks
  EXPECT_GE(DirectorySizer::DirectoryBytes(root, ""), 5u << 20);  // with the inputs
  EXPECT_EQ(DirectorySizer::DirectoryBytes(root + "/missing", ""), 0u);
}

TEST(DirectorySizerTest, AnswersOnItsDescriptorInTheOrderAsked) {
  TempDir dir;
  std::filesystem::create_directories(dir.path() + "/one");
  Put(dir.path() + "/one/f", std::string(2 << 20, 'x'));
  std::filesystem::create_directories(dir.path() + "/two");
  auto sizer = DirectorySizer::Create();
  ASSERT_TRUE(sizer.ok()) << sizer.status().ToString();
  (*sizer)->Measure(TaskId{3, 1}, 2, dir.path() + "/one", "");
  (*sizer)->Measure(TaskId{3, 2}, 1, dir.path() + "/two", "");
  std::vector<DirectorySizer::Done> done;
  while (done.size() < 2) {
    pollfd p{(*sizer)->done_fd(), POLLIN, 0};
    ASSERT_EQ(poll(&p, 1, 10000), 1);
    for (DirectorySizer::Done& d : (*sizer)->TakeDone()) done.push_back(d);
  }
  EXPECT_EQ(done[0].task, (TaskId{3, 1}));
  EXPECT_EQ(done[0].attempt, 2u);
  EXPECT_GE(done[0].bytes, 2u << 20);
  EXPECT_EQ(done[1].task, (TaskId{3, 2}));
  EXPECT_LT(done[1].bytes, 64u << 10);
}

}  // namespace
}  // namespace drover::worker
