// Python functions named by reference, through real processes: `drover
// call module:name --args JSON` and `function = ...` in a job file run the
// worker's python3 on a module it can import (here on PYTHONPATH), and
// print or keep the JSON of the return value.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>

#include "cluster.h"

namespace drover::testing {
namespace {

constexpr char kModule[] = R"(def heavy(n, k, scale=1):
    return {"product": n * k * scale, "n": n}


class Runner:
    @staticmethod
    def go(word):
        return word.upper()


def fails():
    raise RuntimeError("broken on purpose")


def pid(i):
    import os
    return [i, os.getpid()]
)";

TEST(FunctionCallTest, CallPrintsTheReturnValueAndJobFilesNameFunctions) {
  Cluster c;
  c.StartServer();
  c.StartWorker("w");
  c.WriteFile("mytasks.py", kModule);
  const std::string path = "PYTHONPATH=" + c.dir();

  RunResult call = c.Drover({"call", "mytasks:heavy", "--args", "[3, 1000]", "--kwargs",
                             R"({"scale": 2})", "--env", path});
  ASSERT_EQ(call.status, 0) << call.output;
  EXPECT_EQ(nlohmann::json::parse(call.output), (nlohmann::json{{"product", 6000}, {"n", 3}}))
      << call.output;
  RunResult each = c.Drover({"call", "mytasks:Runner.go", "--args", R"(["w{index}"])", "--array",
                             "0-1", "--env", path});
  ASSERT_EQ(each.status, 0) << each.output;
  EXPECT_NE(each.output.find(".0: \"W0\"\n"), std::string::npos) << each.output;
  EXPECT_NE(each.output.find(".1: \"W1\"\n"), std::string::npos) << each.output;

  // "{index}" where a number goes is the index as a number (the text is
  // expanded per call, then parsed); in a string it stays a string.
  RunResult numbered = c.Drover(
      {"call", "mytasks:heavy", "--args", "[{index}, 10]", "--array", "0-1", "--env", path});
  ASSERT_EQ(numbered.status, 0) << numbered.output;
  EXPECT_NE(numbered.output.find(".0: {\"product\": 0, \"n\": 0}\n"), std::string::npos)
      << numbered.output;
  EXPECT_NE(numbered.output.find(".1: {\"product\": 10, \"n\": 1}\n"), std::string::npos)
      << numbered.output;

  // Calls by name run in warm interpreters, as the Executor's do: six
  // calls (two slots at most at once) share fewer interpreters than that,
  // and each still gets its own {index}.
  RunResult pids = c.Drover(
      {"call", "mytasks:pid", "--args", R"(["{index}"])", "--array", "0-5", "--env", path});
  ASSERT_EQ(pids.status, 0) << pids.output;
  std::set<int64_t> interpreters;
  std::set<std::string> indexes;
  for (size_t at = 0; (at = pids.output.find(": [", at)) != std::string::npos; ++at) {
    const nlohmann::json pair =
        nlohmann::json::parse(pids.output.substr(at + 2, pids.output.find('\n', at) - at - 2));
    indexes.insert(pair[0].get<std::string>());
    interpreters.insert(pair[1].get<int64_t>());
  }
  EXPECT_EQ(indexes, (std::set<std::string>{"0", "1", "2", "3", "4", "5"})) << pids.output;
  EXPECT_LT(interpreters.size(), 6u) << pids.output;

  // A remote exception: exit 1, the task named, its log at hand.
  RunResult failed = c.Drover({"call", "mytasks:fails", "--env", path});
  EXPECT_EQ(failed.status, 1) << failed.output;
  EXPECT_NE(failed.output.find("failed: exit code 1"), std::string::npos) << failed.output;

  // A job file naming functions; one that does not import fails with the
  // import error as its result.
  const std::string file = c.WriteFile("calls.toml", R"(name = "calls"

[[task]]
id = "heavy"
function = "mytasks:heavy"
args = [2, 21]
env = { PYTHONPATH = ")" + c.dir() + R"(" }

[[task]]
id = "missing"
function = "nosuchmodule:run"
)");
  RunResult run = c.Drover({"run", file});
  EXPECT_EQ(run.status, 1) << run.output;
  const uint64_t job = RunJobId(run.output);
  ASSERT_GT(job, 0u) << run.output;
  const nlohmann::json heavy = c.Get("/api/v1/tasks/" + std::to_string(job) + ".0");
  EXPECT_EQ(heavy["state"], "succeeded") << heavy.dump(2);
  EXPECT_EQ(nlohmann::json::parse(heavy["outcome"]["result"].get<std::string>()),
            (nlohmann::json{{"product", 42}, {"n", 2}}));
  const nlohmann::json missing = c.Get("/api/v1/tasks/" + std::to_string(job) + ".1");
  EXPECT_EQ(missing["state"], "failed") << missing.dump(2);
  EXPECT_EQ(missing["reason"], "exit code 2") << missing.dump(2);
  EXPECT_EQ(missing["outcome"]["result"],
            "function nosuchmodule:run cannot be imported: ModuleNotFoundError: No module named "
            "'nosuchmodule'");

  // Bad input is refused before anything is sent, naming what is wrong.
  RunResult bad = c.Drover({"call", "mytasks:heavy", "--args", "{\"n\": 3}"});
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("--args: expected a JSON array, as in '[3, 1000]', got object"),
            std::string::npos)
      << bad.output;
  RunResult broken = c.Drover({"call", "mytasks:heavy", "--args", "[{index}, 10"});
  EXPECT_EQ(broken.status, 2) << broken.output;
  EXPECT_NE(broken.output.find("--args: not JSON: [{index}, 10 (for example '[3, 1000]')"),
            std::string::npos)
      << broken.output;
  RunResult name = c.Drover({"call", "heavy"});
  EXPECT_EQ(name.status, 2) << name.output;
  EXPECT_NE(name.output.find("\"heavy\" is not a function name"), std::string::npos)
      << name.output;
}

}  // namespace
}  // namespace drover::testing
