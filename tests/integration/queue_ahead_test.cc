// Queue-ahead with real processes: on a one-core worker the next task is
// assigned behind the running one and started by the worker the moment that
// one exits; the two never overlap, a canceled waiter never runs, and a
// server restart keeps the waiter in its place; a waiter moves to a worker
// that frees before its predecessor ends.
#include <signal.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "cluster.h"

namespace drover::testing {
namespace {

// A task that fails the "overlap" check if another task of the test holds
// the lock directory (mkdir is atomic), records its run like HoldingTask and
// holds until `go` exists.
std::vector<std::string> ExclusiveHoldingTask(const std::string& dir) {
  return {"sh", "-c",
          "mkdir " + dir + "/lock 2>/dev/null || echo $DROVER_TASK_ID >> " + dir +
              "/overlaps; echo run >> " + dir + "/runs.$DROVER_TASK_INDEX; while [ ! -e " +
              dir + "/go ]; do sleep 0.02; done; rmdir " + dir + "/lock"};
}

nlohmann::json Task(Cluster& c, uint64_t job, int index) {
  return c.Get("/api/v1/tasks/" + std::to_string(job) + "." + std::to_string(index));
}

TEST(QueueAheadTest, TheNextTaskWaitsOnTheWorkerAndACanceledOneNeverRuns) {
  Cluster c;
  c.StartServer();
  c.StartWorker("solo", {"--cpus", "0"});
  const uint64_t job =
      SubmittedJob(c.Drover(Submit({"--array", "0-3"}, ExclusiveHoldingTask(c.dir()))));
  ASSERT_GT(job, 0u);
  const std::string prefix = std::to_string(job) + ".";
  EventTap tap(c.Api().options(), job);
  ASSERT_TRUE(tap.WaitForState(prefix + "0", "running", 1));
  ASSERT_TRUE(tap.WaitForState(prefix + "1", "assigned", 1));
  nlohmann::json waiting = Task(c, job, 1);
  EXPECT_EQ(waiting["state"], "assigned") << waiting.dump(2);
  EXPECT_EQ(waiting["after"], prefix + "0") << waiting.dump(2);
  EXPECT_EQ(Task(c, job, 2)["state"], "queued");

  // Canceled while it waits on the worker: it never starts, and the next
  // task takes its place.
  RunResult cancel = c.Drover({"cancel", prefix + "1"});
  ASSERT_EQ(cancel.status, 0) << cancel.output;
  ASSERT_TRUE(tap.WaitForState(prefix + "1", "canceled", 1));
  ASSERT_TRUE(tap.WaitForState(prefix + "2", "assigned", 1));
  EXPECT_EQ(Task(c, job, 2)["after"], prefix + "0");

  std::ofstream(c.dir() + "/go") << "go\n";
  ASSERT_TRUE(tap.WaitForState(prefix + "3", "succeeded", 1));
  for (int i : {0, 2, 3}) {
    nlohmann::json t = Task(c, job, i);
    EXPECT_EQ(t["state"], "succeeded") << t.dump(2);
    EXPECT_EQ(t["attempt"], 1) << t.dump(2);
    EXPECT_EQ(Lines(c.dir() + "/runs." + std::to_string(i)).size(), 1u) << i;
  }
  EXPECT_FALSE(std::filesystem::exists(c.dir() + "/runs.1"));
  EXPECT_FALSE(std::filesystem::exists(c.dir() + "/overlaps"))
      << "tasks overlapped on one core: " << ::testing::PrintToString(Lines(c.dir() + "/overlaps"));
}

TEST(QueueAheadTest, AServerRestartKeepsTheWaiterInItsPlace) {
  // A lease far above a restart, so this is about the restart, not fencing.
  Cluster c({"--heartbeat", "500ms", "--lease-ttl", "20s"});
  c.StartServer();
  Process& solo = c.StartWorker("solo", {"--cpus", "0"});
  const uint64_t job =
      SubmittedJob(c.Drover(Submit({"--array", "0-2"}, ExclusiveHoldingTask(c.dir()))));
  ASSERT_GT(job, 0u);
  const std::string prefix = std::to_string(job) + ".";
  {
    EventTap tap(c.Api().options(), job);
    ASSERT_TRUE(tap.WaitForState(prefix + "0", "running", 1));
    ASSERT_TRUE(tap.WaitForState(prefix + "1", "assigned", 1));
  }
  c.KillServer(SIGKILL);
  c.StartServer();
  // The worker logs its attachment after the server handled its report.
  ASSERT_TRUE(solo.WaitForLine("attached as worker", In(kStartTimeout))) << solo.output();
  // Whether or not its record was durable, the waiter is back behind 0.0
  // (restored, or reported by the worker and put back), not re-run.
  EventTap tap(c.Api().options(), job);
  nlohmann::json waiting = Task(c, job, 1);
  EXPECT_EQ(waiting["state"], "assigned") << waiting.dump(2);
  EXPECT_EQ(waiting["after"], prefix + "0") << waiting.dump(2);
  std::ofstream(c.dir() + "/go") << "go\n";
  ASSERT_TRUE(tap.WaitForState(prefix + "2", "succeeded"));
  for (int i = 0; i < 3; ++i) {
    nlohmann::json t = Task(c, job, i);
    EXPECT_EQ(t["state"], "succeeded") << t.dump(2);
    EXPECT_EQ(t["attempt"], 1) << t.dump(2);
    EXPECT_EQ(Lines(c.dir() + "/runs." + std::to_string(i)).size(), 1u) << i;
  }
  EXPECT_FALSE(std::filesystem::exists(c.dir() + "/overlaps"))
      << "tasks overlapped on one core: " << ::testing::PrintToString(Lines(c.dir() + "/overlaps"));
}

// Holds until `dir/name` exists.
std::vector<std::string> HoldUntil(const std::string& dir, const std::string& name) {
  return {"sh", "-c", "while [ ! -e " + dir + "/" + name + " ]; do sleep 0.02; done"};
}

TEST(QueueAheadTest, AWaiterMovesToTheWorkerThatFreesFirst) {
  Cluster c;
  c.StartServer();
  c.StartWorker("a", {"--cpus", "0"});
  c.StartWorker("b", {"--cpus", "1"});
  const uint64_t long_job = SubmittedJob(c.Drover(Submit({}, HoldUntil(c.dir(), "go-long"))));
  ASSERT_GT(long_job, 0u);
  const std::string long_task = std::to_string(long_job) + ".0";
  {
    EventTap tap(c.Api().options(), long_job);
    ASSERT_TRUE(tap.WaitForState(long_task, "running", 1));
  }
  const uint64_t short_job = SubmittedJob(c.Drover(Submit({}, HoldUntil(c.dir(), "go-short"))));
  ASSERT_GT(short_job, 0u);
  {
    EventTap tap(c.Api().options(), short_job);
    ASSERT_TRUE(tap.WaitForState(std::to_string(short_job) + ".0", "running", 1));
  }
  // Both cores busy: the next task waits behind the one running longest.
  const uint64_t job = SubmittedJob(
      c.Drover(Submit({}, {"sh", "-c", "echo $DROVER_ATTEMPT >> " + c.dir() + "/runs"})));
  ASSERT_GT(job, 0u);
  const std::string waiter = std::to_string(job) + ".0";
  EventTap tap(c.Api().options(), job);
  ASSERT_TRUE(tap.WaitForState(waiter, "assigned", 1));
  nlohmann::json t = Task(c, job, 0);
  ASSERT_EQ(t["after"], long_task) << t.dump(2);

  // The short task ends first: the waiter moves there and runs while the
  // long one still holds its worker.
  std::ofstream(c.dir() + "/go-short") << "go\n";
  ASSERT_TRUE(tap.WaitForState(waiter, "succeeded", 2));
  t = Task(c, job, 0);
  EXPECT_EQ(t["attempt"], 2) << t.dump(2);
  ASSERT_EQ(t["attempts"].size(), 2u) << t.dump(2);
  EXPECT_NE(t["attempts"][0]["reason"].get<std::string>().find("withdrawn before it started"),
            std::string::npos)
      << t.dump(2);
  EXPECT_EQ(Task(c, long_job, 0)["state"], "running");
  EXPECT_EQ(Lines(c.dir() + "/runs"), std::vector<std::string>{"2"});
  std::ofstream(c.dir() + "/go-long") << "go\n";
  EventTap long_tap(c.Api().options(), long_job);
  ASSERT_TRUE(long_tap.WaitForState(long_task, "succeeded"));
}

// "Higher runs first" holds with queue-ahead on: the low task
// waiting behind the running one makes way for a later task of higher
// priority, which then starts first.
TEST(QueueAheadTest, AHigherPriorityTaskStartsBeforeALowerOneQueuedAhead) {
  Cluster c;
  c.StartServer();
  c.StartWorker("solo", {"--cpus", "0"});
  const std::string order = c.dir() + "/order";
  const std::vector<std::string> task = {
      "sh", "-c",
      "echo $DROVER_TASK_ID >> " + order + "; while [ ! -e " + c.dir() +
          "/go ]; do sleep 0.02; done"};
  const uint64_t low = SubmittedJob(c.Drover(Submit({"--array", "0-1"}, task)));
  ASSERT_GT(low, 0u);
  const std::string l = std::to_string(low) + ".";
  EventTap low_tap(c.Api().options(), low);
  ASSERT_TRUE(low_tap.WaitForState(l + "0", "running", 1));
  ASSERT_TRUE(low_tap.WaitForState(l + "1", "assigned", 1));

  const uint64_t high = SubmittedJob(c.Drover(Submit({"--priority", "10"}, task)));
  ASSERT_GT(high, 0u);
  const std::string h = std::to_string(high) + ".0";
  EventTap high_tap(c.Api().options(), high);
  // The low waiter goes back to the queue; the high one takes its place.
  ASSERT_TRUE(low_tap.WaitForState(l + "1", "queued"));
  ASSERT_TRUE(high_tap.WaitForState(h, "assigned", 1));
  EXPECT_EQ(c.Get("/api/v1/tasks/" + h)["after"], l + "0");

  std::ofstream(c.dir() + "/go") << "go\n";
  ASSERT_TRUE(low_tap.WaitForState(l + "1", "succeeded"));
  EXPECT_EQ(Lines(order), (std::vector<std::string>{l + "0", h, l + "1"}));
  nlohmann::json moved = Task(c, low, 1);
  EXPECT_EQ(moved["attempts"].size(), 2u) << moved.dump(2);
  EXPECT_NE(moved["attempts"][0]["reason"].get<std::string>().find("withdrawn before it started"),
            std::string::npos)
      << moved.dump(2);
}

}  // namespace
}  // namespace drover::testing
