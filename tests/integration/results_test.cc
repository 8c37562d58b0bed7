// Task results ($DROVER_RESULT, up to 64 KiB) through the whole path: the
// worker reads them, the server journals and serves them, a dependent finds
// them under $DROVER_INPUTS. And --json on the read commands.
#include <regex>

#include <gtest/gtest.h>

#include "cluster.h"

namespace drover::testing {
namespace {

constexpr size_t kLimit = 64 * 1024;

nlohmann::json ParseOrNull(const std::string& text) {
  return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
}

TEST(ResultsTest, ResultsUpTo64KiBReachTheApiAndDependentsAndLongerOnesAreCutVisibly) {
  Cluster c;
  c.StartServer();
  c.StartWorker("w");
  const std::string file = c.WriteFile("results.toml", R"(name = "results"

[[task]]
id = "exact"
command = "head -c 65536 /dev/zero | tr '\\0' x > \"$DROVER_RESULT\""

[[task]]
id = "over"
command = "head -c 70000 /dev/zero | tr '\\0' y > \"$DROVER_RESULT\""

[[task]]
id = "sizes"
depends_on = ["exact", "over"]
command = "cd \"$DROVER_INPUTS\" && wc -c * > \"$DROVER_RESULT\""
)");
  RunResult run = c.Drover({"run", file});
  ASSERT_EQ(run.status, 0) << run.output;
  const uint64_t job = RunJobId(run.output);
  ASSERT_GT(job, 0u) << run.output;
  const std::string j = std::to_string(job);

  // Exactly the limit: kept whole.
  nlohmann::json exact = c.Get("/api/v1/tasks/" + j + ".0");
  EXPECT_EQ(exact["outcome"]["result"], std::string(kLimit, 'x'));
  // Over it: cut to the limit, ending in a note that says so.
  nlohmann::json over = c.Get("/api/v1/tasks/" + j + ".1");
  const std::string cut = over["outcome"]["result"].get<std::string>();
  EXPECT_EQ(cut.size(), kLimit);
  EXPECT_TRUE(cut.ends_with("y\n[drover: result truncated at 64 KiB]\n")) << cut.substr(kLimit - 80);
  // The dependent found both, byte for byte, named by task id.
  nlohmann::json sizes = c.Get("/api/v1/tasks/" + j + ".2");
  const std::string listing = sizes["outcome"]["result"].get<std::string>();
  EXPECT_TRUE(std::regex_search(listing, std::regex("\\b65536 " + j + "\\.0\\b"))) << listing;
  EXPECT_TRUE(std::regex_search(listing, std::regex("\\b65536 " + j + "\\.1\\b"))) << listing;

  // --json on the read commands prints the API's JSON.
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"status", "--json"},
                                             {"status", j, "--json"},
                                             {"status", j + ".2", "--json"},
                                             {"workers", "--json"},
                                             {"wait", j, "--json"}}) {
    RunResult r = c.Drover(args);
    ASSERT_EQ(r.status, 0) << args[0] << " " << args[1] << "\n" << r.output;
    nlohmann::json parsed = ParseOrNull(r.output);
    ASSERT_FALSE(parsed.is_discarded()) << r.output;
    if (args.size() == 2 && args[0] == "status") {
      ASSERT_EQ(parsed["jobs"].size(), 1u) << r.output;
      EXPECT_EQ(parsed["jobs"][0]["id"], job);
    } else if (args[0] == "workers") {
      ASSERT_EQ(parsed["workers"].size(), 1u) << r.output;
      EXPECT_EQ(parsed["workers"][0]["name"], "w");
    } else if (args[1] == j) {
      EXPECT_TRUE(parsed["done"].get<bool>()) << r.output;
      EXPECT_EQ(parsed["tasks"].size(), 3u) << r.output;
    } else {
      EXPECT_EQ(parsed["outcome"]["result"], listing);
    }
  }
}

// The worker's --log-cap: a task's output is kept up to it, then a marker
// line says where it was cut; a malformed value is refused by name.
TEST(ResultsTest, WorkerLogCapCutsOutputAtTheGivenSize) {
  Cluster c;
  c.StartServer();
  RunResult bad = c.Drover({"worker", "--name", "w", "--log-cap", "4K"});
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("--log-cap"), std::string::npos) << bad.output;
  c.StartWorker("w", {"--log-cap", "1KiB"});
  RunResult run = c.Drover({"submit", "--wait", "--", "sh", "-c", "head -c 5000 /dev/zero | tr '\\0' z"});
  ASSERT_EQ(run.status, 0) << run.output;
  const std::string job = run.output.substr(0, run.output.find('\n'));
  RunResult logs = c.Drover({"logs", job + ".0"});
  ASSERT_EQ(logs.status, 0) << logs.output;
  EXPECT_EQ(logs.output, std::string(1024, 'z') + "\n[drover: output truncated at 1 KiB]\n");
}

// `drover logs` of a task that never started says so, with its reason,
// instead of the worker's "no such task on this worker": one that failed
// before its program ran, and one still queued.
TEST(ResultsTest, LogsOfATaskThatNeverStartedSayWhyThereAreNone) {
  Cluster c;
  c.StartServer();
  c.StartWorker("w", {"--cpus", "0"});
  const uint64_t failed = SubmittedJob(c.Drover(Submit({}, {"drover-no-such-command"})));
  ASSERT_NE(failed, 0u);
  EXPECT_EQ(c.Drover({"wait", "-q", std::to_string(failed)}).status, 1);
  const std::string t = std::to_string(failed) + ".0";
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"logs", t}, {"logs", "--stderr", t}, {"logs", "-f", t}}) {
    RunResult logs = c.Drover(args);
    EXPECT_EQ(logs.status, 1) << logs.output;
    EXPECT_NE(logs.output.find("task " + t + " wrote no output: it never started (failed: "),
              std::string::npos)
        << logs.output;
    EXPECT_NE(logs.output.find("command not found: drover-no-such-command"), std::string::npos)
        << logs.output;
    EXPECT_EQ(logs.output.find("no such task"), std::string::npos) << logs.output;
  }
  // Two CPUs on a one-CPU pool: queued for good.
  const uint64_t queued = SubmittedJob(c.Drover(Submit({"--cpus", "2"}, {"true"})));
  ASSERT_NE(queued, 0u);
  const std::string q = std::to_string(queued) + ".0";
  RunResult waiting = c.Drover({"logs", q});
  EXPECT_EQ(waiting.status, 1) << waiting.output;
  EXPECT_NE(waiting.output.find("task " + q + " has written no output: it has not started yet (queued"),
            std::string::npos)
      << waiting.output;
  EXPECT_EQ(c.Drover({"cancel", std::to_string(queued)}).status, 0);
}

}  // namespace
}  // namespace drover::testing
