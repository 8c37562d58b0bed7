// Preemption by priority with real processes: two one-core workers full of
// low-priority work; a task of high priority arrives. With --preempt-priority
// it starts at once on a worker whose task was vacated (its vacate signal,
// then requeued without using a retry); without, it waits for the room.
#include <algorithm>
#include <climits>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "cluster.h"

namespace drover::testing {
namespace {

nlohmann::json Task(Cluster& c, const std::string& id) { return c.Get("/api/v1/tasks/" + id); }

// Polls `pred` until it holds or 20 s pass (a condition with a deadline).
template <typename Pred>
bool WaitUntil(Pred pred) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

// Two low-priority tasks, each holding a worker's one core until DIR/go
// exists; the vacate signal (SIGUSR1) leaves a line in DIR/vacated. Each
// writes a line to DIR/ready once its handler is set (a signal before that
// would end it without the handler, as it would any program).
nlohmann::json LowJob(const std::string& dir) {
  return {{"name", "low"},
          {"task",
           {{{"id", "sweep"},
             {"array", "0-1"},
             {"priority", 0},
             {"vacate_signal", "SIGUSR1"},
             {"command",
              "trap 'echo $DROVER_TASK_ID >> " + dir + "/vacated; exit 0' USR1\n"
              "echo $DROVER_TASK_ID >> " + dir + "/ready\n"
              "while [ ! -e " + dir + "/go ]; do sleep 0.02; done\n"}}}}};
}

nlohmann::json UrgentJob() {
  return {{"name", "urgent"}, {"task", {{{"id", "now"}, {"priority", 90}, {"command", "true"}}}}};
}

TEST(PreemptionTest, AnUrgentTaskVacatesALowOneAndStartsAtOnce) {
  Cluster c({"--preempt-priority", "50"});
  c.StartServer();
  Process& a = c.StartWorker("a", {"--cpus", "0"});
  Process& b = c.StartWorker("b", {"--cpus", "1"});
  const uint64_t low = Post(c, LowJob(c.dir()));
  ASSERT_GT(low, 0u);
  const std::string prefix = std::to_string(low) + ".";
  {
    EventTap tap(c.Api().options(), low);
    ASSERT_TRUE(tap.WaitForTasksIn("running", 2));
  }
  ASSERT_TRUE(WaitUntil([&] { return Lines(c.dir() + "/ready").size() == 2; }));
  const uint64_t urgent = Post(c, UrgentJob());
  ASSERT_GT(urgent, 0u);
  // It runs and ends while both low tasks would still hold their cores
  // (no go file yet): one of them made room.
  EventTap tap(c.Api().options(), urgent);
  ASSERT_TRUE(tap.WaitForState(std::to_string(urgent) + ".0", "succeeded", 1));
  std::vector<std::string> vacated = Lines(c.dir() + "/vacated");
  ASSERT_EQ(vacated.size(), 1u) << "exactly one low task is vacated: "
                                << Task(c, prefix + "0").dump(2) << Task(c, prefix + "1").dump(2)
                                << Task(c, std::to_string(urgent) + ".0").dump(2) << a.output()
                                << b.output();
  nlohmann::json victim = Task(c, vacated[0]);
  // Requeued and placed again (a later attempt: it may move between the
  // workers while it waits behind the other low task).
  EXPECT_GE(victim["attempt"].get<int>(), 2) << victim.dump(2);
  const nlohmann::json& attempts = victim["attempts"];
  ASSERT_GE(attempts.size(), 1u) << victim.dump(2);
  EXPECT_EQ(attempts[0]["state"], "preempted") << victim.dump(2);
  EXPECT_EQ(attempts[0]["reason"],
            "preempted by " + std::to_string(urgent) + ".0 (priority 90)")
      << victim.dump(2);
  // Both low tasks end well, the vacated one in a later attempt, with no
  // retry used (it has none).
  std::ofstream(c.dir() + "/go") << "go\n";
  RunResult wait = c.Drover({"wait", std::to_string(low)});
  EXPECT_EQ(wait.status, 0) << wait.output;
  for (const std::string& id : {prefix + "0", prefix + "1"}) {
    EXPECT_EQ(Task(c, id)["state"], "succeeded") << Task(c, id).dump(2);
  }
}

TEST(PreemptionTest, WithoutPreemptionTheUrgentTaskWaitsForTheRoom) {
  Cluster c;
  c.StartServer();
  c.StartWorker("a", {"--cpus", "0"});
  c.StartWorker("b", {"--cpus", "1"});
  const uint64_t low = Post(c, LowJob(c.dir()));
  ASSERT_GT(low, 0u);
  {
    EventTap tap(c.Api().options(), low);
    ASSERT_TRUE(tap.WaitForTasksIn("running", 2));
  }
  const uint64_t urgent = Post(c, UrgentJob());
  ASSERT_GT(urgent, 0u);
  const std::string now = std::to_string(urgent) + ".0";
  EventTap tap(c.Api().options(), urgent);
  // Placed behind a running task at most (queue-ahead), not started: the
  // order of the starts and ends below shows it waited.
  nlohmann::json waiting = Task(c, now);
  EXPECT_TRUE(waiting["state"] == "queued" || waiting["state"] == "assigned") << waiting.dump(2);
  std::ofstream(c.dir() + "/go") << "go\n";
  ASSERT_TRUE(tap.WaitForState(now, "succeeded"))  // attempt 2 if withdrawn from a queue
      << Task(c, now).dump(2) << Task(c, std::to_string(low) + ".0").dump(2)
      << Task(c, std::to_string(low) + ".1").dump(2);
  EXPECT_FALSE(std::filesystem::exists(c.dir() + "/vacated")) << "nothing was vacated";
  // It started only once a low task had ended.
  const int64_t started = Task(c, now)["started_at_ms"].get<int64_t>();
  int64_t first_end = INT64_MAX;
  for (const char* i : {"0", "1"}) {
    nlohmann::json t = Task(c, std::to_string(low) + "." + i);
    if (t["finished_at_ms"].is_number()) first_end = std::min(first_end, t["finished_at_ms"].get<int64_t>());
  }
  EXPECT_GE(started, first_end);
}

}  // namespace
}  // namespace drover::testing
