#include "proto/api_json.h"


#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/checkpoint.h"

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace drover::proto {
namespace {

// 2023-11-14T22:13:20.250Z
constexpr Time kAt = TimeFromMicros(1'700'000'000'250'000);

TEST(ApiJsonTest, Rfc3339IsUtcWithMilliseconds) {
  EXPECT_EQ(FormatRfc3339(kAt), "2023-11-14T22:13:20.250Z");
  EXPECT_EQ(FormatRfc3339(TimeFromMicros(0)), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatRfc3339(TimeFromMicros(-1000)), "1969-12-31T23:59:59.999Z");
}

TEST(ApiJsonTest, JobInfoHasTimesTwiceAndStateCountsByName) {
  core::JobInfo job;
  job.id = 12;
  job.name = "sweep";
  job.user = "ana";
  job.submitted_at = kAt;
  job.task_count = 10;
  job.counts[static_cast<int>(core::TaskState::kRunning)] = 3;
  job.counts[static_cast<int>(core::TaskState::kQueued)] = 7;
  nlohmann::json j = JobInfoJson(job);
  EXPECT_EQ(j["submitted_at"], "2023-11-14T22:13:20.250Z");
  EXPECT_EQ(j["submitted_at_ms"], 1'700'000'000'250);
  EXPECT_EQ(j["counts"]["running"], 3);
  EXPECT_EQ(j["counts"]["canceled"], 0);
  Result<core::JobInfo> back = DecodeJobInfo(EncodeJobInfo(job));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->id, 12u);
  EXPECT_EQ(back->counts, job.counts);
  EXPECT_EQ(back->submitted_at, kAt);
  Result<std::vector<core::JobInfo>> list = DecodeJobList(EncodeJobList({job, job}));
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(list->size(), 2u);
}

TEST(ApiJsonTest, TaskInfoRoundTripsAtMillisecondPrecision) {
  core::TaskInfo task;
  task.id = {12, 3};
  task.group = "train";
  task.array_index = 3;
  task.state = core::TaskState::kFailed;
  task.attempt = 2;
  task.worker = 4;
  task.reason = "exit code 3";
  task.submitted_at = kAt;
  task.started_at = kAt + Seconds(1);
  task.finished_at = kAt + Seconds(2);
  task.outcome = core::TaskOutcome{3, 0, false, {Millis(1500), Millis(700), 123}, "r"};
  task.cores = {0, 1};
  task.gpus = {{0, 100, 0}};
  std::string text = EncodeTaskInfo(task);
  nlohmann::json j = nlohmann::json::parse(text);
  EXPECT_EQ(j["state"], "failed");
  EXPECT_EQ(j["id"], "12.3");
  EXPECT_TRUE(j["retry_at"].is_null());
  EXPECT_EQ(j["started_at"], "2023-11-14T22:13:21.250Z");
  Result<core::TaskInfo> back = DecodeTaskInfo(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->id, task.id);
  EXPECT_EQ(back->state, task.state);
  EXPECT_EQ(back->worker, task.worker);
  EXPECT_EQ(back->started_at, task.started_at);
  EXPECT_FALSE(back->retry_at.has_value());
  EXPECT_EQ(back->outcome, task.outcome);
  EXPECT_EQ(back->gpus, task.gpus);

  task.worker.reset();
  task.outcome.reset();
  Result<std::vector<core::TaskInfo>> list = DecodeTaskList(EncodeTaskList({task}));
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_FALSE(list->at(0).worker.has_value());
  EXPECT_FALSE(list->at(0).outcome.has_value());
}

TEST(ApiJsonTest, WorkerInfoRoundTrips) {
  core::WorkerInfo w;
  w.id = 3;
  w.resources.name = "gpu1";
  w.resources.cpu_cores = {0, 1, 2, 3};
  w.resources.mem_bytes = 1ULL << 36;
  w.resources.gpus = {{0, "GPU-a", "A100", 80ULL << 30}};
  w.resources.counters = {{"licenses", 2}};
  w.resources.labels = {{"os", "linux"}};
  w.drained = true;
  w.free_cores = {2, 3};
  w.free_mem_bytes = 1ULL << 35;
  w.gpu_free_share = {75};
  w.gpu_free_mem_bytes = {70ULL << 30};
  w.free_counters = {{"licenses", 1}};
  w.tasks = {{12, 3}};
  w.utilization = {50, 1ULL << 30, {{0, 99, 10ULL << 30}}};
  w.last_heartbeat = kAt;
  Result<std::vector<core::WorkerInfo>> back = DecodeWorkerList(EncodeWorkerList({w}));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  const core::WorkerInfo& b = back->at(0);
  EXPECT_EQ(b.resources, w.resources);
  EXPECT_EQ(b.drained, true);
  EXPECT_EQ(b.free_cores, w.free_cores);
  EXPECT_EQ(b.gpu_free_share, w.gpu_free_share);
  EXPECT_EQ(b.gpu_free_mem_bytes, w.gpu_free_mem_bytes);
  EXPECT_EQ(b.free_counters, w.free_counters);
  EXPECT_EQ(b.tasks, w.tasks);
  EXPECT_EQ(b.utilization, w.utilization);
  EXPECT_EQ(b.last_heartbeat, kAt);
}

TEST(ApiJsonTest, TaskEventRoundTrips) {
  core::TaskStateChanged change{
      {12, 3}, core::TaskState::kQueued, core::TaskState::kAssigned, 1, "retrying"};
  std::string text = EncodeTaskEvent(change, kAt);
  EXPECT_NE(text.find("\"type\":\"task_state\""), std::string::npos);
  Result<TaskEvent> back = DecodeTaskEvent(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->change, change);
  EXPECT_EQ(back->at, kAt);
}

// Another user's task as the queue shows it: what only its job's readers
// see is gone from the task, its attempts, its spec and a watcher's event.
TEST(ApiJsonTest, HideContentsLeavesTheQueueAndTakesTheContents) {
  core::TaskInfo task;
  task.id = {12, 3};
  task.state = core::TaskState::kSucceeded;
  task.attempt = 1;
  task.reason = "";
  task.outcome = core::TaskOutcome{0, 0, false, {Millis(1500), Millis(700), 123}, "secret result"};
  task.outcome->outputs = {{"secret-name.bin", 5, std::string(64, 'a')}};
  task.outcome->outputs_on = 2;
  task.outcome->replicas = {3};
  auto cp = std::make_shared<core::Checkpoint>();
  cp->attempt = 1;
  cp->worker = 2;
  cp->saved_at = kAt;
  cp->files = {{"secret-step.ckpt", 7, std::string(64, 'b')}};
  task.checkpoint = cp;
  nlohmann::json j = TaskInfoJson(task);
  j["attempts"] = nlohmann::json::array({nlohmann::json{{"attempt", 1}, {"outcome", j["outcome"]}}});
  j["spec"] = {{"command", {"train"}},
               {"env", {{"TOKEN", "secret-env"}}},
               {"input_files", {{{"name", "secret-input"}}}}};
  ASSERT_NE(j.dump().find("secret"), std::string::npos);
  HideContents(j);
  const std::string text = j.dump();
  EXPECT_EQ(text.find("secret"), std::string::npos) << text;
  EXPECT_EQ(j["contents_hidden"], true);
  EXPECT_EQ(j["outcome"]["exit_code"], 0);
  EXPECT_EQ(j["outcome"]["wall_ms"], 1500);
  EXPECT_EQ(j["outcome"]["result"], "");
  EXPECT_TRUE(j["outcome"]["outputs"].empty());
  EXPECT_FALSE(j["outcome"].contains("outputs_on"));
  EXPECT_EQ(j["checkpoint"]["attempt"], 1);
  EXPECT_EQ(j["spec"]["command"][0], "train");
  EXPECT_EQ(j["state"], "succeeded");
  // Still a task to the decoder.
  Result<core::TaskInfo> back = DecodeTaskInfo(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->outcome->result, "");

  core::TaskStateChanged change{
      {12, 3}, core::TaskState::kRunning, core::TaskState::kSucceeded, 1, ""};
  EXPECT_NE(EncodeTaskEvent(change, kAt, task).find("secret result"), std::string::npos);
  const std::string hidden = EncodeTaskEvent(change, kAt, task, /*hide_contents=*/true);
  EXPECT_EQ(hidden.find("secret"), std::string::npos) << hidden;
  EXPECT_NE(hidden.find("\"contents_hidden\":true"), std::string::npos) << hidden;
}

TEST(ApiJsonTest, ErrorBody) {
  std::string text =
      EncodeErrorBody(InvalidArgument("memory is ambiguous"), "task[1].resources.mem");
  EXPECT_EQ(
      text,
      R"({"error":{"code":"invalid_argument","field":"task[1].resources.mem","message":"memory is ambiguous"}})");
  Result<ApiError> back = DecodeErrorBody(text);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->code, "invalid_argument");
  EXPECT_EQ(back->field, "task[1].resources.mem");
  EXPECT_EQ(EncodeErrorBody(NotFound("no job 7")),
            R"({"error":{"code":"not_found","message":"no job 7"}})");
  back = DecodeErrorBody(R"({"error":{"code":"x"}})");
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.status().message(), "error: missing \"message\"");
}

TEST(AllocQueueRequestTest, ReadsAQueueAndNamesWhatIsWrong) {
  Result<AllocQueueRequest> q = ParseAllocQueueRequest(
      R"({"kind":"slurm","max_workers":3,"time_limit":"2h","sbatch_args":["-p","gpu"],
          "worker_args":["--label","site=hpc"]})");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->max_workers, 3u);
  EXPECT_EQ(q->time_limit, Seconds(7200));
  EXPECT_EQ(q->idle_timeout, Seconds(300));  // the default
  EXPECT_EQ(q->sbatch_args, (std::vector<std::string>{"-p", "gpu"}));
  EXPECT_EQ(q->worker_args, (std::vector<std::string>{"--label", "site=hpc"}));
  for (const auto& [body, message] : std::vector<std::pair<std::string, std::string>>{
           {R"({"kind":"pbs","max_workers":1,"time_limit":"1h"})", "only \"slurm\""},
           {R"({"kind":"slurm","max_workers":0,"time_limit":"1h"})", "max_workers: must be 1 to"},
           {R"({"kind":"slurm","max_workers":1})", "time_limit"},
           {R"({"kind":"slurm","max_workers":1,"time_limit":"4GB"})", "time_limit"},
           {R"({"kind":"slurm","max_workers":1,"time_limit":"400d"})", "from 1s to 366d"},
           {R"({"kind":"slurm","max_workers":1,"time_limit":"1h","sbatch_args":"-p"})",
            "sbatch_args"},
           {R"({"kind":"slurm","max_workers":1,"time_limit":"1h","max_worker":2})",
            "unknown key \"max_worker\""},
           {"[1]", ""},
           {"\xff", ""}}) {
    Result<AllocQueueRequest> bad = ParseAllocQueueRequest(body);
    ASSERT_FALSE(bad.ok()) << body;
    EXPECT_THAT(bad.status().message(), ::testing::HasSubstr(message)) << body;
  }
}

// A task's isolation and its disk I/O counts reach the API and read back.
TEST(ApiJsonTest, ATasksIsolationAndDiskIoCountsRoundTrip) {
  core::TaskInfo task;
  task.id = {12, 3};
  task.state = core::TaskState::kSucceeded;
  task.attempt = 1;
  task.outcome = core::TaskOutcome{0, 0, false, {Millis(1500), Millis(700), 123}, ""};
  task.outcome->usage.io_read_bytes = 4096;
  task.outcome->usage.io_write_bytes = 200ULL << 20;
  task.private_network = true;
  task.disk_bytes = 20ULL << 30;
  task.io.write_bps = 10 << 20;
  const std::string text = EncodeTaskInfo(task);
  for (const char* want : {"\"network\":\"none\"", "\"disk\":21474836480", "\"write_bps\":10485760",
                           "\"io_read_bytes\":4096", "\"io_write_bytes\":209715200"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want << " in " << text;
  }
  Result<core::TaskInfo> back = DecodeTaskInfo(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->private_network);
  EXPECT_EQ(back->disk_bytes, 20ULL << 30);
  EXPECT_EQ(back->io, task.io);
  EXPECT_EQ(back->outcome->usage.io_read_bytes, 4096u);
  EXPECT_EQ(back->outcome->usage.io_write_bytes, 200ULL << 20);
  // Its image, and the digest of the one its attempt ran.
  task.image = "docker.io/library/debian:12";
  task.outcome->image_digest = "sha256:" + std::string(64, 'c');
  const std::string imaged = EncodeTaskInfo(task);
  EXPECT_NE(imaged.find("\"image\":\"docker.io/library/debian:12\""), std::string::npos) << imaged;
  EXPECT_NE(imaged.find("\"image_digest\":\"sha256:cccc"), std::string::npos) << imaged;
  back = DecodeTaskInfo(imaged);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->image, task.image);
  EXPECT_EQ(back->outcome->image_digest, task.outcome->image_digest);
  // A task without any: none of the keys.
  core::TaskInfo plain;
  plain.id = {12, 4};
  const std::string bare = EncodeTaskInfo(plain);
  for (const char* key : {"network", "disk", "\"io\"", "io_read_bytes", "image"}) {
    EXPECT_EQ(bare.find(key), std::string::npos) << key << " in " << bare;
  }
}

}  // namespace
}  // namespace drover::proto
