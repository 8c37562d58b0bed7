#include "cli/views.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace drover::cli {
namespace {

using nlohmann::json;

TEST(ViewsTest, FormatSpan) {
  EXPECT_EQ(FormatSpan(1234), "1.2s");
  EXPECT_EQ(FormatSpan(184'000), "3m04s");
  EXPECT_EQ(FormatSpan(7'500'000), "2h05m");
  EXPECT_EQ(FormatSpan(-1), "-");
}

TEST(ViewsTest, CountsSummaryInLifecycleOrder) {
  EXPECT_EQ(CountsSummary(json{{"failed", 1}, {"running", 2}, {"queued", 0}}),
            "2 running, 1 failed");
  EXPECT_EQ(CountsSummary(json::object()), "-");
}

TEST(ViewsTest, JobViewListsTasksWithTimesAndReasons) {
  json job = json::parse(R"({
    "id": 7, "name": "pi", "user": "ana", "task_count": 2, "done": true,
    "submitted_at": "2024-05-01T12:00:00.250Z",
    "counts": {"succeeded": 1, "failed": 1},
    "tasks": [
      {"id": "7.0", "group": "sample", "array_index": 0, "state": "succeeded", "attempt": 1,
       "worker": 2, "reason": "", "started_at_ms": 1000, "finished_at_ms": 3500},
      {"id": "7.1", "group": "sample", "array_index": 1, "state": "failed", "attempt": 2,
       "worker": null, "reason": "exit code 3", "started_at_ms": 1000, "finished_at_ms": null}
    ]})");
  const std::string text = JobView(job, /*now_ms=*/4000);
  EXPECT_NE(text.find("job 7 \"pi\" (ana), 2 tasks: done, 1 succeeded, 1 failed"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("2024-05-01 12:00:00Z"), std::string::npos) << text;
  // No user: no empty parentheses.
  json anonymous = job;
  anonymous["user"] = "";
  EXPECT_NE(JobView(anonymous, 4000).find("job 7 \"pi\", 2 tasks: done"), std::string::npos)
      << JobView(anonymous, 4000);
  EXPECT_NE(text.find("7.0   sample  0      succeeded  1        2       2.5s  -"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("7.1   sample  1      failed     2        -       3.0s  exit code 3"),
            std::string::npos)
      << text;
  // A task assigned behind another on its worker (queue-ahead) says so.
  json waiting = job;
  waiting["tasks"][1] = json::parse(R"({"id": "7.1", "group": "sample", "array_index": 1,
      "state": "assigned", "attempt": 1, "worker": 2, "reason": "", "after": "7.0"})");
  const std::string shown = JobView(waiting, 4000);
  EXPECT_NE(shown.find("assigned   1        2       -     waits on its worker behind 7.0"),
            std::string::npos)
      << shown;
  EXPECT_NE(TaskView(waiting["tasks"][1], 4000).find("waits on its worker behind 7.0"),
            std::string::npos);
}

TEST(ViewsTest, TaskViewShowsOutcomeResultAndExplain) {
  json task = json::parse(R"({
    "id": "7.8", "group": "combine", "array_index": 0, "state": "succeeded", "attempt": 1,
    "worker": 1, "reason": "", "started_at_ms": 0, "finished_at_ms": 500,
    "outcome": {"exit_code": 0, "signal": 0, "oom_killed": false, "cpu_ms": 20,
                "peak_mem_bytes": 1048576, "result": "pi ~ 3.1416"},
    "explain": "finished"})");
  const std::string text = TaskView(task, 0);
  // The names column is as wide as its longest name ("submitted").
  EXPECT_NE(text.find("\nexit       code 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\npeak mem   1 MiB\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("disk io"), std::string::npos) << text;  // not counted: no row
  task["outcome"]["io_write_bytes"] = 200 << 20;
  EXPECT_NE(TaskView(task, 0).find("\ndisk io    read -, written 200 MiB\n"), std::string::npos)
      << TaskView(task, 0);
  task["outcome"].erase("io_write_bytes");
  EXPECT_NE(text.find("\ncpu time   0.0s\n"), std::string::npos) << text;
  EXPECT_NE(text.find("result:\npi ~ 3.1416\n"), std::string::npos) << text;
  EXPECT_NE(text.find("explain:\nfinished\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("private"), std::string::npos) << text;
  // Another user's task, as the server shows it: says why there is no result.
  task["contents_hidden"] = true;
  task["outcome"]["result"] = "";
  const std::string hidden = TaskView(task, 0);
  EXPECT_NE(hidden.find("\ncontents: private (a job's logs, result and files are for its user, "
                        "admins and viewers)\n"),
            std::string::npos)
      << hidden;
  EXPECT_EQ(hidden.find("result:"), std::string::npos) << hidden;
}

TEST(ViewsTest, TaskViewShowsAnImageOnlyForATaskThatHasOne) {
  json task = json::parse(R"({"id": "7.0", "group": "g", "state": "succeeded", "attempt": 1,
                              "outcome": {"exit_code": 0}})");
  EXPECT_EQ(TaskView(task, 0).find("image"), std::string::npos) << TaskView(task, 0);
  task["image"] = "docker.io/library/python:3.12";
  EXPECT_NE(TaskView(task, 0).find("\nimage      docker.io/library/python:3.12\n"),
            std::string::npos)
      << TaskView(task, 0);
  task["outcome"]["image_digest"] = "sha256:ab";
  EXPECT_NE(TaskView(task, 0).find("\nimage      docker.io/library/python:3.12 (sha256:ab)\n"),
            std::string::npos)
      << TaskView(task, 0);
}

TEST(ViewsTest, TaskViewSaysWhatAPythonCallsPickledResultIs) {
  json task = json::parse(R"({"id": "7.0", "group": "g", "state": "succeeded", "attempt": 1,
                              "outcome": {"exit_code": 0, "result": "drover-call:v1:value:gASV"}})");
  EXPECT_NE(TaskView(task, 0).find("result:\na Python value, pickled (4 bytes of base64), for "
                                   "the Python client that made the call\n"),
            std::string::npos)
      << TaskView(task, 0);
  task["outcome"]["result"] = "drover-call:v1:error:gASV";
  EXPECT_NE(TaskView(task, 0).find("its traceback: drover logs --stderr 7.0\n"), std::string::npos)
      << TaskView(task, 0);
  task["outcome"]["result"] = "drover-call:v1:file";
  EXPECT_NE(TaskView(task, 0).find("in its output drover-value.pkl (drover get 7.0)\n"),
            std::string::npos)
      << TaskView(task, 0);
}

TEST(ViewsTest, TaskViewShowsANetworkOfItsOwnAndDiskLimitsOnlyWhenAskedFor) {
  json task = json::parse(R"({"id": "7.0", "group": "g", "state": "running", "attempt": 1})");
  EXPECT_EQ(TaskView(task, 0).find("isolation"), std::string::npos);
  task["network"] = "none";
  task["io"] = {{"read_bps", 0}, {"write_bps", 10 << 20}, {"weight", 200}};
  const std::string text = TaskView(task, 0);
  EXPECT_NE(text.find("\nisolation  network none (loopback only); disk writes 10 MiB/s, weight "
                      "200\n"),
            std::string::npos)
      << text;
}

TEST(ViewsTest, TaskViewListsEveryAttemptWhenThereWereSeveral) {
  json task = json::parse(R"({
    "id": "7.8", "group": "g", "array_index": 0, "state": "succeeded", "attempt": 2,
    "attempts": [
      {"attempt": 1, "worker": 3, "state": "retried", "reason": "worker lost",
       "started_at": "2026-11-30T10:00:00.000Z", "finished_at": "2026-11-30T10:00:05.000Z",
       "outcome": null},
      {"attempt": 2, "worker": 4, "state": "succeeded", "reason": "",
       "started_at": "2026-11-30T10:00:06.000Z", "finished_at": "2026-11-30T10:00:07.000Z",
       "outcome": {"exit_code": 0, "signal": 0}}]})");
  const std::string text = TaskView(task, 0);
  EXPECT_NE(text.find("attempts:\nATTEMPT  WORKER  STARTED"), std::string::npos) << text;
  EXPECT_NE(text.find("1        3       2026-11-30 10:00:00Z  2026-11-30 10:00:05Z  retried    "
                      "-     worker lost"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("2        4       2026-11-30 10:00:06Z  2026-11-30 10:00:07Z  succeeded  0"),
            std::string::npos)
      << text;
  // One attempt: nothing more than the fields above.
  task["attempts"].erase(0);
  EXPECT_EQ(TaskView(task, 0).find("attempts:"), std::string::npos);
}

TEST(ViewsTest, WorkersAndEmptyListsAndOddShapes) {
  json workers = json::parse(R"({"workers":[{"id":1,"name":"a","cpu_cores":[0,1],
    "free_cores":[1],"mem_bytes":2147483648,"free_mem_bytes":1073741824,"gpus":[],
    "drained":true,"lost":false,"tasks":["3.1"],"utilization":{"cpu_percent":40}}]})");
  const std::string text = WorkersView(workers);
  EXPECT_NE(
      text.find("1   a     drained  1/2 free  1 GiB free of 2 GiB  -          -     1      40"),
      std::string::npos)
      << text;
  workers["workers"][0]["disk_free_bytes"] = 5ll << 30;
  EXPECT_NE(WorkersView(workers).find("1 GiB free of 2 GiB  5 GiB      -     1      40"),
            std::string::npos)
      << WorkersView(workers);
  workers["workers"][0].erase("disk_free_bytes");
  // A worker that leaves at a set time says when.
  workers["workers"][0]["drained"] = false;
  workers["workers"][0]["ends_at"] = "2026-12-02T12:00:00.000Z";
  workers["workers"][0]["ends_at_ms"] = 1796212800000;
  EXPECT_NE(WorkersView(workers).find("ready (leaves 2026-12-02 12:00:00Z)"), std::string::npos)
      << WorkersView(workers);
  // Its own checks fail; a GPU of it is sick; quarantined as a black hole.
  workers["workers"][0].erase("ends_at");
  workers["workers"][0].erase("ends_at_ms");
  workers["workers"][0]["unhealthy"] = "/scratch not mounted";
  workers["workers"][0]["unhealthy_since"] = "2026-12-02T12:00:00.000Z";
  workers["workers"][0]["unhealthy_since_ms"] = 1796212800000;
  EXPECT_NE(WorkersView(workers).find(
                "unhealthy (/scratch not mounted, since 2026-12-02 12:00:00Z)"),
            std::string::npos)
      << WorkersView(workers);
  workers["workers"][0].erase("unhealthy");
  workers["workers"][0]["quarantined"] = "5 of its last 5 attempts failed in under 30s";
  workers["workers"][0]["quarantined_until"] = "2026-12-02T12:10:00.000Z";
  workers["workers"][0]["quarantined_until_ms"] = 1796213400000;
  EXPECT_NE(WorkersView(workers).find("quarantined (until 2026-12-02 12:10:00Z: 5 of its last 5 "
                                      "attempts failed in under 30s)"),
            std::string::npos)
      << WorkersView(workers);
  workers["workers"][0]["gpus"] = json::array(
      {{{"index", 1}, {"model", "A100"}, {"sick", "2 uncorrectable ECC errors"}}});
  EXPECT_NE(WorkersView(workers).find("1:A100 (sick: 2 uncorrectable ECC errors)"),
            std::string::npos)
      << WorkersView(workers);
  EXPECT_EQ(WorkersView(json{{"workers", json::array()}}), "no workers\n");
  EXPECT_EQ(JobsView(json::object()), "no jobs\n");
  // A field of an unexpected type prints as "-" instead of failing.
  EXPECT_NE(JobsView(json{{"jobs", {{{"id", "x"}, {"name", 3.5}, {"counts", 1}}}}}).find("x"),
            std::string::npos);
}

}  // namespace
}  // namespace drover::cli
