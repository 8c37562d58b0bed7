// The example pipeline on `drover up`, and what a malformed job file does.
#include <signal.h>

#include <regex>

#include <gtest/gtest.h>

#include "cluster.h"
#include "net/http_client.h"

namespace drover::testing {
namespace {

// `drover up --workers 2` with its own state dir and access file; waits for
// its readiness line.
class UpCluster {
 public:
  UpCluster() {
    up_ = std::make_unique<Process>(std::vector<std::string>{
        cluster_.binary(), "up", "--workers", "2", "--port", "0", "--state-dir",
        cluster_.dir() + "/state", "--access-file", cluster_.access_file(), "--isolation",
        "none"});
    if (!up_->WaitForLine("drover: listening on", In(kStartTimeout))) {
      ADD_FAILURE() << "drover up did not start:\n" << up_->output();
    }
  }
  ~UpCluster() {
    up_->Signal(SIGTERM);
    EXPECT_EQ(up_->Wait(In(kStartTimeout)), 0) << up_->output();
  }
  Cluster& cluster() { return cluster_; }
  // Its output so far.
  const std::string& output() const { return up_->output(); }

 private:
  Cluster cluster_;
  std::unique_ptr<Process> up_;
};

TEST(PipelineTest, ExamplePipelineCompletesWithDependenciesRespectedAndInputsAggregated) {
  UpCluster up;
  Cluster& c = up.cluster();
  RunResult run = c.Drover({"run", std::string(EXAMPLES_DIR) + "/pipeline.toml"});
  ASSERT_EQ(run.status, 0) << run.output;
  // Submitted once `up` said it was ready: its workers were there.
  EXPECT_EQ(run.output.find("warning"), std::string::npos) << run.output;
  const uint64_t job = RunJobId(run.output);
  ASSERT_GT(job, 0u) << run.output;

  nlohmann::json info = c.Get("/api/v1/jobs/" + std::to_string(job));
  ASSERT_TRUE(info["done"].get<bool>()) << info.dump(2);
  ASSERT_EQ(info["tasks"].size(), 9u);
  int64_t last_sample_end = 0;
  nlohmann::json combine;
  for (const nlohmann::json& t : info["tasks"]) {
    EXPECT_EQ(t["state"], "succeeded") << t.dump();
    if (t["group"] == "sample") {
      last_sample_end = std::max(last_sample_end, t["finished_at_ms"].get<int64_t>());
    } else {
      combine = t;
    }
  }
  ASSERT_EQ(combine["group"], "combine") << info.dump(2);
  // The dependent started only after every dependency had finished.
  EXPECT_GE(combine["started_at_ms"].get<int64_t>(), last_sample_end) << info.dump(2);
  // $DROVER_INPUTS held the eight sample results, which combine summed.
  const std::string result = combine["outcome"]["result"].get<std::string>();
  EXPECT_NE(result.find("from 8000000 samples in 8 tasks"), std::string::npos) << result;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(result, m, std::regex("pi ~ ([0-9.]+)"))) << result;
  EXPECT_NEAR(std::stod(m[1]), 3.14159, 0.01);

  // The table views show the same thing.
  RunResult status = c.Drover({"status", combine["id"].get<std::string>()});
  EXPECT_EQ(status.status, 0) << status.output;
  EXPECT_NE(status.output.find("pi ~ "), std::string::npos) << status.output;
  RunResult workers = c.Drover({"workers"});
  EXPECT_EQ(workers.status, 0) << workers.output;
  EXPECT_NE(workers.output.find("-2 "), std::string::npos) << "two local workers\n"
                                                          << workers.output;
  // They reached the server inside its process, not over a socket, and
  // both were in before the readiness line: a job submitted once it is
  // printed finds its workers.
  const std::string& out = up.output();
  const size_t ready = out.find("drover: listening on");
  ASSERT_NE(ready, std::string::npos) << out;
  size_t joined = 0;
  for (size_t at = out.find(") joined from "); at != std::string::npos;
       at = out.find(") joined from ", at + 1)) {
    ++joined;
    EXPECT_LT(at, ready) << out;
    EXPECT_EQ(out.compare(at, 24, ") joined from in-process"), 0) << out.substr(at, 40);
  }
  EXPECT_EQ(joined, 2u) << out;
}

TEST(PipelineTest, MalformedJobFileExitsWithStatus2AndItsLineAndSendsNothing) {
  Cluster c;
  c.StartServer();
  const std::string file = c.WriteFile("bad.toml",
                                       "name = \"bad\"\n"
                                       "\n"
                                       "[[task]]\n"
                                       "id = \"a\"\n"
                                       "comand = [\"true\"]\n");
  RunResult run = c.Drover({"run", file});
  EXPECT_EQ(run.status, 2) << run.output;
  EXPECT_NE(run.output.find("bad.toml:5"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("comand"), std::string::npos) << run.output;
  nlohmann::json jobs = c.Get("/api/v1/jobs");
  EXPECT_TRUE(jobs["jobs"].empty()) << jobs.dump();

  // The API refuses the same mistake with 400 and names the field.
  net::HttpClient http(c.Api().options());
  Result<net::Response> post =
      http.Post("/api/v1/jobs", R"({"name":"bad","task":[{"id":"a","comand":["true"]}]})");
  ASSERT_TRUE(post.ok()) << post.status().ToString();
  EXPECT_EQ(post->status, 400) << post->body;
  nlohmann::json error = nlohmann::json::parse(post->body, nullptr, false);
  EXPECT_EQ(error["error"]["code"], "invalid_argument") << post->body;
  EXPECT_EQ(error["error"]["field"], "task[0]") << post->body;
  EXPECT_NE(error["error"]["message"].get<std::string>().find("comand"), std::string::npos);
  EXPECT_TRUE(c.Get("/api/v1/jobs")["jobs"].empty());

  // A bad flag of submit is refused the same way.
  RunResult submit = c.Drover({"submit", "--mem", "4G", "--", "true"});
  EXPECT_EQ(submit.status, 2) << submit.output;
  EXPECT_NE(submit.output.find("--mem"), std::string::npos) << submit.output;
  EXPECT_TRUE(c.Get("/api/v1/jobs")["jobs"].empty());
}

}  // namespace
}  // namespace drover::testing
