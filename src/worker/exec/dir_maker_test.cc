// DirMaker runs its jobs on a thread of its own, in order, and hands their
// outcomes back through done_fd(), and ends only after the job in
// progress; the executor's PrepareDirsAsync makes a
// task's directories there and a later Start uses them.
#include "worker/exec/dir_maker.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>

#include <filesystem>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "worker/exec/exec_test_util.h"
#include "worker/exec/executor.h"

namespace drover::worker {
namespace {

using testing::Harness;
using testing::Put;
using testing::ReadFile;

bool Readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, timeout_ms) == 1;
}

TEST(DirMakerTest, AJobThatWaitsHoldsOnlyTheMakersThreadAndOutcomesComeInOrder) {
  Result<std::unique_ptr<DirMaker>> made = DirMaker::Create();
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  DirMaker& maker = **made;
  std::promise<void> go;
  std::shared_future<void> gate = go.get_future().share();
  std::thread::id ran_on;
  maker.Add(1, [&] {
    ran_on = std::this_thread::get_id();
    gate.wait();
    return Status::Ok();
  });
  maker.Add(2, [] { return Unavailable("cannot create /x: No space left on device"); });
  // The caller goes on while the first job waits: nothing is done yet.
  EXPECT_FALSE(Readable(maker.done_fd(), 50));
  go.set_value();
  std::vector<std::pair<uint64_t, Status>> outcomes;
  while (outcomes.size() < 2) {
    ASSERT_TRUE(Readable(maker.done_fd(), 10000));
    for (auto& o : maker.TakeDone()) outcomes.push_back(std::move(o));
  }
  EXPECT_NE(ran_on, std::this_thread::get_id());
  EXPECT_EQ(outcomes[0].first, 1u);
  EXPECT_TRUE(outcomes[0].second.ok());
  EXPECT_EQ(outcomes[1].first, 2u);
  EXPECT_EQ(outcomes[1].second.message(), "cannot create /x: No space left on device");
  EXPECT_FALSE(Readable(maker.done_fd(), 0));  // taken: not readable again
}

TEST(DirMakerTest, EndsOnlyAfterTheJobInProgress) {
  // The executor ends its maker first: a job must not outlive it.
  Result<std::unique_ptr<DirMaker>> made = DirMaker::Create();
  ASSERT_TRUE(made.ok());
  std::promise<void> go;
  std::promise<void> started;
  std::shared_future<void> gate = go.get_future().share();
  bool finished = false;
  (*made)->Add(1, [&] {
    started.set_value();
    gate.wait();
    finished = true;
    return Status::Ok();
  });
  started.get_future().wait();
  std::thread release([&] { go.set_value(); });
  made->reset();
  release.join();
  EXPECT_TRUE(finished);
}

TEST(ExecutorDirsTest, DirectoriesMadeOffTheLoopServeTheStartAndADiscardRemovesThem) {
  Harness h(MakeNoIsolator());
  TaskSpec spec;
  spec.id = TaskId{7, 1};
  spec.attempt = 1;
  spec.argv = {"sh", "-c", "touch \"$DROVER_OUTPUT_DIR/made\" && cat \"$DROVER_INPUTS/7.0\""};
  bool called = false;
  Status outcome = Internal("not called");
  h.executor().PrepareDirsAsync(spec.id, 1, /*with_inputs=*/true, "", [&](Status s) {
    called = true;
    outcome = std::move(s);
  });
  EXPECT_FALSE(called);  // from the loop, later
  ASSERT_TRUE(h.loop().RunUntil([&] { return called; }, Seconds(30)).ok());
  ASSERT_TRUE(outcome.ok()) << outcome.ToString();
  // As PrepareDirs would have made them; asked again, it makes nothing.
  const std::string task = h.dir() + "/work/7/1.1";
  struct stat output {};
  ASSERT_EQ(stat((task + "/output").c_str(), &output), 0);
  EXPECT_EQ(output.st_mode & 0777, 0700u);
  Result<TaskDirs> dirs = h.executor().PrepareDirs(spec.id, 1, /*with_inputs=*/true);
  ASSERT_TRUE(dirs.ok());
  EXPECT_EQ(dirs->task, task);
  EXPECT_EQ(dirs->inputs, task + "/inputs");
  Put(dirs->inputs + "/7.0", "from 7.0\n");
  TaskResult r = h.Run(spec);
  EXPECT_EQ(r.outcome, TaskOutcome::kSucceeded) << ReadFile(r.dirs.stderr_path);
  EXPECT_EQ(ReadFile(r.dirs.stdout_path), "from 7.0\n");
  struct stat used {};
  ASSERT_EQ(stat((task + "/output").c_str(), &used), 0);
  EXPECT_EQ(used.st_ino, output.st_ino);

  // One that will not start: its directories go, the checkpoint's stays.
  called = false;
  h.executor().PrepareDirsAsync(TaskId{7, 2}, 1, false, "", [&](Status) { called = true; });
  ASSERT_TRUE(h.loop().RunUntil([&] { return called; }, Seconds(30)).ok());
  ASSERT_TRUE(std::filesystem::exists(h.dir() + "/work/7/2.1/output"));
  h.executor().DiscardPrepared(TaskId{7, 2}, 1);
  EXPECT_FALSE(std::filesystem::exists(h.dir() + "/work/7/2.1"));
}

}  // namespace
}  // namespace drover::worker
