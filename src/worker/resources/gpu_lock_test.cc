#include "worker/resources/gpu_lock.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "worker/resources/resources_test_util.h"

namespace drover::worker {
namespace {

const std::vector<GpuInfo> kGpus = {{0, "GPU-fake-0000", "A100", 0}, {1, "GPU-fake-0001", "A100", 0}};

TEST(GpuLocksTest, ASecondHolderGetsNoneOfTheGpusTheFirstHolds) {
  testing::TempDir dir;
  std::vector<GpuInfo> kept;
  std::vector<std::string> refused;
  Result<GpuLocks> first = GpuLocks::Acquire(dir.path(), {kGpus[0]}, &kept, &refused);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->size(), 1u);
  EXPECT_TRUE(refused.empty());

  // flock is per open file: a second Acquire, even in this process, is
  // another holder (as another worker process would be).
  Result<GpuLocks> second = GpuLocks::Acquire(dir.path(), kGpus, &kept, &refused);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].index, 1);
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_NE(refused[0].find("GPU 0 (GPU-fake-0000) is offered by another drover worker"),
            std::string::npos)
      << refused[0];

  // Once the first holder is gone, its GPU is free again.
  *first = GpuLocks();
  refused.clear();
  Result<GpuLocks> third = GpuLocks::Acquire(dir.path(), {kGpus[0]}, &kept, &refused);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(kept.size(), 1u);
  EXPECT_TRUE(refused.empty());
}

TEST(GpuLocksTest, AKilledHolderLeavesNothingBehind) {
  testing::TempDir dir;
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::vector<GpuInfo> kept;
    std::vector<std::string> refused;
    Result<GpuLocks> held = GpuLocks::Acquire(dir.path(), kGpus, &kept, &refused);
    const char ok = held.ok() && held->size() == 2 ? '1' : '0';
    (void)!write(ready[1], &ok, 1);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char ok = 0;
  ASSERT_EQ(read(ready[0], &ok, 1), 1);
  close(ready[0]);
  ASSERT_EQ(ok, '1');
  std::vector<GpuInfo> kept;
  std::vector<std::string> refused;
  ASSERT_TRUE(GpuLocks::Acquire(dir.path(), kGpus, &kept, &refused).ok());
  EXPECT_TRUE(kept.empty());
  EXPECT_EQ(refused.size(), 2u);

  kill(child, SIGKILL);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  refused.clear();
  Result<GpuLocks> after = GpuLocks::Acquire(dir.path(), kGpus, &kept, &refused);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->size(), 2u);
  EXPECT_TRUE(refused.empty());
}

TEST(GpuLocksTest, AMissingDirectoryIsAnError) {
  std::vector<GpuInfo> kept;
  std::vector<std::string> refused;
  EXPECT_EQ(GpuLocks::Acquire("/nonexistent/drover", kGpus, &kept, &refused).status().code(),
            StatusCode::kUnavailable);
  EXPECT_TRUE(GpuLocks::Acquire("/nonexistent/drover", {}, &kept, &refused).ok());
}

}  // namespace
}  // namespace drover::worker
