#include "sim/sim_command.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>


namespace drover::sim {
namespace {

// A scratch directory removed with its files at the end of each test.
class SimCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/drover-sim-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    cluster_ = Write("cluster.json",
                     R"({"workers":[{"name":"g","count":2,"cpus":32,"mem":"256GiB","gpus":4}]})");
  }
  void TearDown() override {
    for (const std::string& f : files_) std::remove(f.c_str());
    rmdir(dir_.c_str());
  }
  std::string Path(const std::string& name) {
    files_.push_back(dir_ + "/" + name);
    return files_.back();
  }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = Path(name);
    std::ofstream(path) << text;
    return path;
  }
  int Run(SimCommandOptions options) {
    out_.str("");
    err_.str("");
    return RunSimCommand(options, out_, err_);
  }
  std::string GenerateTrace(uint64_t tasks) {
    SimCommandOptions g;
    g.generate_path = Path("trace.jsonl");
    g.generate = GenerateOptions{5, tasks, 8, 1.3};
    EXPECT_EQ(Run(g), kSimExitOk) << err_.str();
    return g.generate_path;
  }

  std::string dir_;
  std::string cluster_;
  std::vector<std::string> files_;
  std::ostringstream out_;
  std::ostringstream err_;
};

TEST_F(SimCommandTest, ReplaysAGeneratedTraceAsTextAndJson) {
  SimCommandOptions o;
  o.trace_path = GenerateTrace(200);
  o.cluster_path = cluster_;
  ASSERT_EQ(Run(o), kSimExitOk) << err_.str();
  const std::string text = out_.str();
  EXPECT_EQ(text.rfind("policy spread: 200 tasks", 0), 0u) << text;
  EXPECT_NE(text.find("x the lower bound"), std::string::npos);
  EXPECT_NE(text.find("GPU idle while a fitting task waited: 0.0 GPU-s outside reservations"),
            std::string::npos)
      << text;
  EXPECT_TRUE(err_.str().empty());

  o.json = true;
  ASSERT_EQ(Run(o), kSimExitOk);
  const std::string json = out_.str();
  EXPECT_EQ(json.rfind("{\"policy\":\"spread\",\"reservations\":true,\"tasks\":200,", 0), 0u)
      << json;
  EXPECT_EQ(std::count(json.begin(), json.end(), '\n'), 1);
  // Determinism: the same command prints the same bytes.
  ASSERT_EQ(Run(o), kSimExitOk);
  EXPECT_EQ(out_.str(), json);
}

TEST_F(SimCommandTest, AllPoliciesPrintOneTable) {
  SimCommandOptions o;
  o.trace_path = GenerateTrace(150);
  o.cluster_path = cluster_;
  o.policy = "all";
  ASSERT_EQ(Run(o), kSimExitOk) << err_.str();
  std::istringstream lines(out_.str());
  std::string line;
  std::vector<std::string> rows;
  while (std::getline(lines, line)) rows.push_back(line);
  ASSERT_EQ(rows.size(), 5u) << out_.str();
  EXPECT_EQ(rows[0].rfind("lower bound ", 0), 0u);
  EXPECT_EQ(rows[1].rfind("policy ", 0), 0u);
  EXPECT_EQ(rows[2].rfind("spread ", 0), 0u);
  EXPECT_EQ(rows[3].rfind("pack ", 0), 0u);
  EXPECT_EQ(rows[4].rfind("round-robin ", 0), 0u);

  o.json = true;
  ASSERT_EQ(Run(o), kSimExitOk);
  const std::string json = out_.str();  // one string: str() returns a copy each call
  EXPECT_EQ(std::count(json.begin(), json.end(), '\n'), 3);
}

TEST_F(SimCommandTest, BadInputIsAUsageErrorThatSaysWhere) {
  SimCommandOptions o;
  o.cluster_path = cluster_;
  EXPECT_EQ(Run(o), kSimExitUsage);
  EXPECT_EQ(err_.str().rfind("drover sim: a TRACE and --cluster", 0), 0u) << err_.str();

  o.trace_path = Write("bad.jsonl", "{\"submit\":0,\"duration\":1}\n{\"submit\":0,\"duration\":1,"
                                    "\"gpus\":\"lots\"}\n");
  EXPECT_EQ(Run(o), kSimExitUsage);
  EXPECT_EQ(err_.str().rfind("drover sim: " + o.trace_path + ":2: gpus: ", 0), 0u) << err_.str();
  EXPECT_TRUE(out_.str().empty());

  o.trace_path = GenerateTrace(10);
  o.policy = "fastest";
  EXPECT_EQ(Run(o), kSimExitUsage);
  EXPECT_EQ(err_.str().rfind("drover sim: --policy: ", 0), 0u) << err_.str();
}

TEST_F(SimCommandTest, FairShareFlagsAreCheckedAndTheReportNamesEachUser) {
  SimCommandOptions o;
  o.cluster_path = cluster_;
  o.trace_path = GenerateTrace(40);
  o.shares = {"u1=2", "bob"};
  EXPECT_EQ(Run(o), kSimExitUsage);
  EXPECT_EQ(err_.str(), "drover sim: --share bob: expected USER=N, e.g. ann=2\n");
  o.shares = {"u1=0"};
  EXPECT_EQ(Run(o), kSimExitUsage);
  EXPECT_EQ(err_.str(), "drover sim: --share u1=0: 0 is not a number above 0\n");
  o.shares = {"u1=2x"};
  EXPECT_EQ(Run(o), kSimExitUsage);
  EXPECT_EQ(err_.str(), "drover sim: --share u1=2x: 2x is not a number above 0\n");
  o.shares = {"u1=2"};
  o.half_life = "0";
  EXPECT_EQ(Run(o), kSimExitUsage);
  EXPECT_EQ(err_.str(), "drover sim: --half-life: 0: expected a duration above 0, e.g. 1d\n");
  o.half_life = "soon";
  EXPECT_EQ(Run(o), kSimExitUsage);
  EXPECT_EQ(err_.str().rfind("drover sim: --half-life: ", 0), 0u) << err_.str();

  o.half_life = "6h";
  ASSERT_EQ(Run(o), kSimExitOk) << err_.str();
  EXPECT_NE(out_.str().find("\nusers       fair share on\n  u"), std::string::npos) << out_.str();
  o.no_fair_share = true;
  o.json = true;
  ASSERT_EQ(Run(o), kSimExitOk) << err_.str();
  EXPECT_NE(out_.str().find("\"fair_share\":false,\"users\":[{\"user\":\"u"), std::string::npos)
      << out_.str();
}

}  // namespace
}  // namespace drover::sim
