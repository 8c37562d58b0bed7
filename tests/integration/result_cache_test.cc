// The result cache through real processes (core/result_cache.h): a
// three-stage pipeline with `cache = true` run again reruns nothing; an
// edited code file reruns its stage and what depends on it; a changed
// uploaded input likewise; a cached producer's outputs reach dependents on
// both workers; another user's job runs its own; a restart keeps the cache;
// `--no-cache` runs everything; a code pattern that matches nothing is
// refused at submit, naming it.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cluster.h"

namespace drover::testing {
namespace {

// How many times each stage ran: one line per run in `ledger`.
std::map<std::string, int> Runs(const std::string& ledger) {
  std::map<std::string, int> runs;
  std::ifstream in(ledger);
  std::string line;
  while (std::getline(in, line)) ++runs[line];
  return runs;
}

class ResultCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    c_.StartServer();
    w1_ = &c_.StartWorker("w1", {"--cpus", "1"});
    w2_ = &c_.StartWorker("w2", {"--cpus", "1"});
    ledger_ = c_.dir() + "/ledger";
    // prep turns raw.txt into data.txt; each train multiplies its sum by
    // its index; eval joins the trains' models. Each writes to the ledger
    // when it runs.
    Code("prep.sh", "echo prep >> " + ledger_ + "; cat raw.txt > $DROVER_OUTPUT_DIR/data.txt\n");
    Code("train.sh", "echo train >> " + ledger_ +
                         "; s=0; for x in $(cat $DROVER_INPUTS/*/data.txt); do s=$((s + x)); "
                         "done; echo $((s * $1)) > $DROVER_OUTPUT_DIR/model.txt\n");
    Code("eval.sh", "echo eval >> " + ledger_ +
                        "; cat $DROVER_INPUTS/*/model.txt | sort -n | tr '\\n' ' ' > "
                        "$DROVER_RESULT\n");
    c_.WriteFile("raw.txt", "1 2 3\n");
    c_.WriteFile("README.md", "eval reads this\n");
    Job("pipeline.toml", "");
  }

  void Code(const std::string& name, const std::string& text) { c_.WriteFile(name, text); }
  // The job file, with `user` when not empty.
  void Job(const std::string& name, const std::string& user) {
    const std::string d = c_.dir();
    c_.WriteFile(name, "name = \"pipe\"\n" + (user.empty() ? "" : "user = \"" + user + "\"\n") +
                           R"(
[[task]]
id = "prep"
command = ["sh", ")" + d + R"(/prep.sh"]
input_files = ["raw.txt"]
cache = true
code = ["prep.sh"]

[[task]]
id = "train"
array = "1-2"
command = ["sh", ")" + d + R"(/train.sh", "{index}"]
depends_on = ["prep"]
cache = true
code = ["train.sh"]

[[task]]
id = "eval"
command = ["sh", ")" + d + R"(/eval.sh"]
depends_on = ["train"]
cache = true
code = ["eval.sh", "*.md"]
)");
  }

  // Runs the job file; its job's JSON.
  nlohmann::json Run(std::vector<std::string> extra = {},
                     const std::string& file = "pipeline.toml") {
    std::vector<std::string> args{"run", "--plain", c_.dir() + "/" + file};
    args.insert(args.end(), extra.begin(), extra.end());
    RunResult run = c_.Drover(args);
    EXPECT_EQ(run.status, 0) << run.output;
    const uint64_t job = RunJobId(run.output);
    EXPECT_GT(job, 0u) << run.output;
    last_output_ = run.output;
    return c_.Get("/api/v1/jobs/" + std::to_string(job));
  }
  static std::string EvalResult(const nlohmann::json& job) {
    return job["tasks"][3]["outcome"]["result"].get<std::string>();
  }

  Cluster c_;
  Process* w1_ = nullptr;
  Process* w2_ = nullptr;
  std::string ledger_;
  std::string last_output_;
};

TEST_F(ResultCacheTest, APipelineRunAgainRerunsOnlyWhatChanged) {
  nlohmann::json first = Run();
  EXPECT_EQ(EvalResult(first), "6 12 ");
  EXPECT_EQ(Runs(ledger_), (std::map<std::string, int>{{"eval", 1}, {"prep", 1}, {"train", 2}}));

  // The same again: nothing runs, every task says where its result is from.
  nlohmann::json again = Run();
  EXPECT_EQ(Runs(ledger_), (std::map<std::string, int>{{"eval", 1}, {"prep", 1}, {"train", 2}}));
  EXPECT_EQ(again["cached"], 4) << again.dump(2);
  EXPECT_NE(last_output_.find("4 succeeded (4 from the cache, without running)"), std::string::npos)
      << last_output_;
  EXPECT_EQ(EvalResult(again), "6 12 ");
  const std::string eval = std::to_string(again["id"].get<uint64_t>()) + ".3";
  RunResult status = c_.Drover({"status", eval});
  EXPECT_NE(
      status.output.find("same inputs as " + std::to_string(first["id"].get<uint64_t>()) + ".3 ("),
      std::string::npos)
      << status.output;
  RunResult logs = c_.Drover({"logs", eval});
  EXPECT_NE(logs.output.find("did not run: its result came from the cache"), std::string::npos)
      << logs.output;

  // train.sh edited (it now adds 1): train and eval run, prep is reused,
  // and each train, on either worker, gets the cached prep's data.txt.
  Code("train.sh", "echo train >> " + ledger_ +
                       "; s=1; for x in $(cat $DROVER_INPUTS/*/data.txt); do s=$((s + x)); "
                       "done; echo $((s * $1)) > $DROVER_OUTPUT_DIR/model.txt\n");
  nlohmann::json edited = Run();
  EXPECT_EQ(Runs(ledger_), (std::map<std::string, int>{{"eval", 2}, {"prep", 1}, {"train", 4}}));
  EXPECT_EQ(EvalResult(edited), "7 14 ");
  std::set<std::string> train_workers;
  for (int i : {1, 2}) train_workers.insert(edited["tasks"][i]["worker"].dump());
  EXPECT_EQ(train_workers.size(), 2u) << edited.dump(2);  // one fetched from the other worker

  // A file eval's code pattern matches changes: only eval runs.
  c_.WriteFile("README.md", "eval reads this, and more\n");
  Run();
  EXPECT_EQ(Runs(ledger_), (std::map<std::string, int>{{"eval", 3}, {"prep", 1}, {"train", 4}}));

  // The uploaded input changed: everything runs.
  c_.WriteFile("raw.txt", "1 2 3 4\n");
  nlohmann::json input = Run();
  EXPECT_EQ(Runs(ledger_), (std::map<std::string, int>{{"eval", 4}, {"prep", 2}, {"train", 6}}));
  EXPECT_EQ(EvalResult(input), "11 22 ");

  // --no-cache runs everything, whatever is known.
  Run({"--no-cache"});
  EXPECT_EQ(Runs(ledger_), (std::map<std::string, int>{{"eval", 5}, {"prep", 3}, {"train", 8}}));
}

TEST_F(ResultCacheTest, AnotherUserRunsTheirOwnAndARestartKeepsTheCache) {
  Run();
  Job("bob.toml", "bob");
  Run({}, "bob.toml");
  EXPECT_EQ(Runs(ledger_), (std::map<std::string, int>{{"eval", 2}, {"prep", 2}, {"train", 4}}));

  c_.KillServer(SIGKILL);
  c_.StartServer();
  // An entry counts once the worker holding its outputs is back.
  for (Process* w : {w1_, w2_}) {
    ASSERT_TRUE(w->WaitForLine("attached as worker", In(kStartTimeout))) << w->output();
  }
  nlohmann::json after = Run();
  EXPECT_EQ(Runs(ledger_), (std::map<std::string, int>{{"eval", 2}, {"prep", 2}, {"train", 4}}));
  EXPECT_EQ(after["cached"], 4) << after.dump(2);
}

TEST_F(ResultCacheTest, ForgottenResultsRunAgain) {
  nlohmann::json first = Run();
  const std::string job = std::to_string(first["id"].get<uint64_t>());
  RunResult one = c_.Drover({"cache", "forget", job + ".3"});
  ASSERT_EQ(one.status, 0) << one.output;
  EXPECT_EQ(one.output, "forgot 1 cache entry\n");
  Run();
  EXPECT_EQ(Runs(ledger_), (std::map<std::string, int>{{"eval", 2}, {"prep", 1}, {"train", 2}}));
  RunResult all = c_.Drover({"cache", "forget", "--all"});
  ASSERT_EQ(all.status, 0) << all.output;
  EXPECT_EQ(all.output, "forgot 4 cache entries\n");  // prep, 2 trains, the new eval
  Run();
  EXPECT_EQ(Runs(ledger_), (std::map<std::string, int>{{"eval", 3}, {"prep", 2}, {"train", 4}}));
  RunResult none = c_.Drover({"cache", "forget"});
  EXPECT_EQ(none.status, 2) << none.output;
  EXPECT_NE(none.output.find("name a task (12.3), --job 12, or --all"), std::string::npos)
      << none.output;
}

TEST_F(ResultCacheTest, SubmitAndCallTakeCacheToo) {
  const std::vector<std::string> submit{"submit", "--cache", "--code", c_.dir() + "/prep.sh",
                                        "--wait", "--", "sh", "-c", "echo once >> " + ledger_};
  for (int i = 0; i < 2; ++i) {
    RunResult run = c_.Drover(submit);
    ASSERT_EQ(run.status, 0) << run.output;
  }
  EXPECT_EQ(Runs(ledger_), (std::map<std::string, int>{{"once", 1}}));
  c_.WriteFile("calls.py", "def twice(x):\n    open('" + ledger_ + "', 'a').write('call\\n')\n"
                           "    return 2 * x\n");
  const std::vector<std::string> call{"call", "calls:twice", "--args", "[21]", "--cache",
                                      "--code", c_.dir() + "/calls.py", "--env",
                                      "PYTHONPATH=" + c_.dir()};
  for (int i = 0; i < 2; ++i) {
    RunResult run = c_.Drover(call);
    ASSERT_EQ(run.status, 0) << run.output;
    EXPECT_EQ(run.output, "42\n");
  }
  EXPECT_EQ(Runs(ledger_), (std::map<std::string, int>{{"call", 1}, {"once", 1}}));
  RunResult no_code = c_.Drover({"submit", "--code", "x.py", "--", "true"});
  EXPECT_EQ(no_code.status, 2) << no_code.output;
  EXPECT_NE(no_code.output.find("--code: only with --cache"), std::string::npos) << no_code.output;
}

// A reused task whose outputs come to a dependent with other bytes than
// their SHA-256 (worker c3 corrupts every file it serves): the dependent's
// refusal says so, the task runs after all (here on the worker with the
// dependent), and the dependent runs on its output; the next job reuses
// that run, not the corrupt copy.
TEST(ResultCacheCorruptTest, OutputsThatFailTheirHashRerunTheReusedTask) {
  Cluster c;
  c.StartServer();
  c.StartWorker("c3", {"--label", "node=a"}, {"DROVER_TEST_CORRUPT_SERVES=1000"});
  c.StartWorker("c4", {"--label", "node=b"});
  const nlohmann::json prep = {{"id", "prep"},
                               {"command", "head -c 65536 /dev/zero > $DROVER_OUTPUT_DIR/x.bin"},
                               {"cache", true}};
  nlohmann::json first_prep = prep;
  first_prep["resources"] = {{"labels", {{"node", "a"}}}};
  const uint64_t first = Post(c, {{"name", "first"}, {"task", {first_prep}}});
  ASSERT_GT(first, 0u);
  ASSERT_EQ(c.Drover({"wait", std::to_string(first)}).status, 0);
  std::string holder;
  const nlohmann::json workers = c.Get("/api/v1/workers");
  for (const nlohmann::json& w : workers["workers"]) {
    if (w["name"] == "c3") holder = std::to_string(w["id"].get<uint64_t>());
  }
  ASSERT_FALSE(holder.empty()) << workers.dump(2);
  ASSERT_EQ(c.Drover({"drain", holder}).status, 0);  // serves files still, takes no work

  const nlohmann::json use = {{"id", "use"},
                              {"depends_on", {"prep"}},
                              {"resources", {{"labels", {{"node", "b"}}}}},
                              {"command", "test $(cat $DROVER_INPUTS/*/x.bin | wc -c) = 65536"}};
  const uint64_t second = Post(c, {{"name", "second"}, {"task", {prep, use}}});
  ASSERT_GT(second, 0u);
  RunResult wait = c.Drover({"wait", std::to_string(second)});
  ASSERT_EQ(wait.status, 0) << wait.output;
  const nlohmann::json rerun = c.Get("/api/v1/tasks/" + std::to_string(second) + ".0");
  EXPECT_EQ(rerun["attempt"], 1) << rerun.dump(2);
  EXPECT_FALSE(rerun["outcome"].contains("cached_from")) << rerun.dump(2);
  EXPECT_NE(
      rerun.dump().find("rerun: its outputs failed their SHA-256 check from worker " + holder),
      std::string::npos)
      << rerun.dump(2);
  const uint64_t third = Post(c, {{"name", "third"}, {"task", {prep, use}}});
  ASSERT_EQ(c.Drover({"wait", std::to_string(third)}).status, 0);
  const nlohmann::json again = c.Get("/api/v1/tasks/" + std::to_string(third) + ".0");
  EXPECT_EQ(again["outcome"]["cached_from"], std::to_string(second) + ".0") << again.dump(2);
}

TEST_F(ResultCacheTest, ACodePatternThatMatchesNothingIsRefusedNamingIt) {
  c_.WriteFile("bad.toml", R"(name = "bad"
[[task]]
id = "train"
command = ["true"]
cache = true
code = ["src/*.py"]
)");
  RunResult run = c_.Drover({"run", c_.dir() + "/bad.toml"});
  EXPECT_EQ(run.status, 2) << run.output;
  EXPECT_NE(run.output.find("code pattern \"src/*.py\" of task \"train\" matches no file"),
            std::string::npos)
      << run.output;
  // Through the API a code entry must be hashed: the server never reads it.
  Result<nlohmann::json> refused = c_.Api().Post(
      "/api/v1/jobs", R"({"name":"x","task":[{"id":"t","command":["true"],"cache":true,)"
                      R"("code":["train.sh"]}]})");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(
                "code file \"train.sh\" is a pattern on the client, not a hashed file"),
            std::string::npos)
      << refused.status().ToString();
}

}  // namespace
}  // namespace drover::testing
