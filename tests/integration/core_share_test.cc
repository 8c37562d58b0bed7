// Tasks below one CPU share a core: four 0.25-CPU tasks on a one-core
// worker run at the same time.
#include <gtest/gtest.h>

#include "cluster.h"

namespace drover::testing {
namespace {

TEST(CoreShareTest, FourQuarterCpuTasksRunAtOnceOnOneCore) {
  Cluster c;
  c.StartServer();
  c.StartWorker("solo", {"--cpus", "0"});
  // Each task checks in, then waits (bounded) until all four have: one
  // run after another, the first would give up and fail.
  const std::string dir = c.dir() + "/in";
  const std::string script = "mkdir -p " + dir + " && touch " + dir +
                             "/$DROVER_TASK_INDEX && for i in $(seq 400); do "
                             "[ $(ls " + dir + " | wc -l) -ge 4 ] && echo $DROVER_CPUS > "
                             "\"$DROVER_RESULT\" && exit 0; sleep 0.05; done; exit 1";
  RunResult run =
      c.Drover({"submit", "--wait", "--cpus", "0.25", "--array", "0-3", "--", "sh", "-c", script});
  ASSERT_EQ(run.status, 0) << run.output;
  const std::string job = run.output.substr(0, run.output.find('\n'));
  for (int i = 0; i < 4; ++i) {
    nlohmann::json t = c.Get("/api/v1/tasks/" + job + "." + std::to_string(i));
    EXPECT_EQ(t["state"], "succeeded") << t.dump(2);
    EXPECT_EQ(t["outcome"]["result"], "0\n") << t.dump(2);
  }
}

}  // namespace
}  // namespace drover::testing
