#include "proto/record_codec.h"

#include <gtest/gtest.h>

#include <memory>

#include "proto/function_task.h"
#include "proto/job_file.h"

namespace drover::proto {
namespace {

core::JobSpec FullSpec() {
  core::JobSpec spec;
  spec.name = "sweep";
  spec.user = "ana";
  spec.after_jobs = {3};
  spec.after_tasks = {{4, 1}};
  core::TaskGroupSpec prep;
  prep.name = "prep";
  prep.command = {"sh", "-c", "echo hi"};
  prep.env = {{"A", "1"}};
  prep.resources.cpus_milli = 2500;
  prep.resources.mem_bytes = 3'000'000'000;
  prep.resources.labels = {{"os", "linux"}};
  prep.resources.counters = {{"licenses", 2}};
  core::TaskGroupSpec train;
  train.name = "train";
  train.command = {"python", "train.py", "{index}"};
  train.array = core::ArrayRange{0, 8, 1};
  train.resources.gpus = 200;
  train.resources.gpu_mem_bytes = 16ULL << 30;
  train.resources.gpu_types = {"A100"};
  train.depends_on = {"prep"};
  train.retries = 2;
  train.retry_backoff = Seconds(30);
  train.timeout = Seconds(7200);
  train.priority = 5;
  train.replicas = 2;
  spec.groups = {prep, train};
  return spec;
}

TEST(RecordCodecTest, JobRecordWithAFullSpecRoundTrips) {
  core::JobRecord job{12, std::make_shared<const core::JobSpec>(FullSpec()),
                      TimeFromMicros(1'700'000'000'123'457)};
  std::string bytes = EncodeRecord(job);
  Result<core::Record> back = DecodeRecord(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << bytes;
  const auto& decoded = std::get<core::JobRecord>(*back);
  EXPECT_EQ(decoded.job, 12u);
  EXPECT_EQ(decoded.at, job.at);
  ASSERT_NE(decoded.spec, nullptr);
  EXPECT_EQ(*decoded.spec, *job.spec);
}

// A task that runs the function runner is journaled as `python_runner`,
// not with the runner's 5 KiB, and reads back with its whole command.
TEST(RecordCodecTest, ARunnerTaskIsJournaledWithoutTheRunner) {
  core::JobSpec spec = FullSpec();
  spec.groups[0].command = RunnerCommand("/opt/venv/bin/python");
  spec.groups[0].env["DROVER_CALL"] = "gASVAA==";
  core::JobRecord job{3, std::make_shared<const core::JobSpec>(spec), TimeFromMicros(1)};
  const std::string bytes = EncodeRecord(job);
  EXPECT_NE(bytes.find("\"python_runner\":\"/opt/venv/bin/python\""), std::string::npos) << bytes;
  EXPECT_EQ(bytes.find("-c"), std::string::npos) << bytes;
  EXPECT_LT(bytes.size(), 2048u);
  Result<core::Record> back = DecodeRecord(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*std::get<core::JobRecord>(back.value()).spec, spec);
}

TEST(RecordCodecTest, NullSpecRoundTrips) {
  Result<core::Record> back = DecodeRecord(EncodeRecord(core::JobRecord{1, nullptr, {}}));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(std::get<core::JobRecord>(*back).spec, nullptr);
}

TEST(RecordCodecTest, TaskRecordsOfEveryStateRoundTrip) {
  for (int s = 0; s < core::kTaskStateCount; ++s) {
    core::TaskRecord task;
    task.task = {12, 4};
    task.state = static_cast<core::TaskState>(s);
    task.attempt = 2;
    task.worker = 3;
    task.at = TimeFromMicros(1'700'000'000'000'001 + s);
    task.reason = s == 5 ? "exit code 3" : "";
    if (s == 5) task.kind = core::EndKind::kFailed;
    task.failures = 1;
    task.cores = {0, 7};
    task.gpus = {{1, 100, 0}, {2, 25, 1ULL << 30}};
    if (s == 2) {  // queued on the worker behind 12.3#1 (queue-ahead)
      task.after = {12, 3};
      task.after_attempt = 1;
    }
    for (const std::string& bytes : {EncodeRecord(task), EncodeRecordJson(task)}) {
      Result<core::Record> back = DecodeRecord(bytes);
      ASSERT_TRUE(back.ok()) << back.status().ToString();
      EXPECT_EQ(std::get<core::TaskRecord>(*back), task);
    }
  }
}

TEST(RecordCodecTest, AnAfterLinkNeedsItsAttempt) {
  Result<core::Record> r = DecodeRecord(
      R"({"v":1,"type":"task","task":"1.2","state":"assigned","attempt":1,"worker":1,)"
      R"("at_us":0,"after":"1.1","after_attempt":0})");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("after_attempt: must be at least 1"), std::string::npos)
      << r.status().message();
}

TEST(RecordCodecTest, OutcomeRecordRoundTrips) {
  core::OutcomeRecord outcome;
  outcome.task = {9, 0};
  outcome.attempt = 1;
  outcome.outcome = {-1, 9, true, {Micros(5), Micros(6), 7}, "result"};
  outcome.at = TimeFromMicros(42);
  for (const std::string& bytes : {EncodeRecord(outcome), EncodeRecordJson(outcome)}) {
    Result<core::Record> back = DecodeRecord(bytes);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(std::get<core::OutcomeRecord>(*back), outcome);
  }
}

// Task and outcome records are written in the binary form: every field
// comes back, in a fraction of the JSON's bytes.
TEST(RecordCodecTest, HotRecordsAreBinaryAndEveryFieldRoundTrips) {
  core::TaskRecord task;
  task.task = {1ULL << 40, 123456};
  task.state = core::TaskState::kFailed;
  task.attempt = 4;
  task.worker = 77;
  task.at = TimeFromMicros(1'764'000'000'123'456);
  task.reason = "exit code 3";
  task.failures = 2;
  task.cores = {3, 4, 31};
  task.gpus = {{0, 100, 1ULL << 34}, {3, 25, 0}};
  task.after = {1ULL << 40, 5};
  task.after_attempt = 2;
  task.started = TimeFromMicros(-5);
  task.kind = core::EndKind::kFailed;
  core::OutcomeRecord outcome;
  outcome.task = {7, 8};
  outcome.attempt = 3;
  outcome.at = TimeFromMicros(1'764'000'000'000'000);
  outcome.outcome = {-1, 9, true, {Micros(5), Micros(6), 7}, "result", "no space left"};
  outcome.outcome.outputs = {{"model.bin", 10, std::string(64, 'f')},
                             {"d/log", 0, std::string(64, '0')}};
  outcome.outcome.outputs_on = 3;
  outcome.outcome.replicas = {5, 7};
  outcome.outcome.cached_from = {2, 9};
  outcome.outcome.cached_ended = TimeFromMicros(99);
  outcome.outcome.cached_ran = Micros(1234);
  outcome.outcome.uncached = true;
  outcome.outcome.usage.io_read_bytes = 0;
  outcome.outcome.usage.io_write_bytes = 200ULL << 20;
  for (const core::Record& record : {core::Record(task), core::Record(outcome)}) {
    const std::string bytes = EncodeRecord(record);
    ASSERT_FALSE(bytes.empty());
    EXPECT_NE(bytes[0], '{');
    EXPECT_LT(bytes.size() * 2, EncodeRecordJson(record).size());
    Result<core::Record> back = DecodeRecord(bytes);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    ASSERT_EQ(back->index(), record.index());
    if (const auto* t = std::get_if<core::TaskRecord>(&record)) {
      EXPECT_EQ(std::get<core::TaskRecord>(*back), *t);
    } else {
      EXPECT_EQ(std::get<core::OutcomeRecord>(*back), std::get<core::OutcomeRecord>(record));
    }
  }
}

// A binary record cut short, with a byte too many, or with a value out of
// range is DataLoss naming the field; a later form is FailedPrecondition.
TEST(RecordCodecTest, DamagedBinaryRecordsAreDataLossNamingTheField) {
  core::OutcomeRecord outcome;
  outcome.task = {9, 0};
  outcome.outcome.outputs = {core::OutputFile{"model.bin", 10, std::string(64, 'f')}};
  outcome.outcome.replicas = {5};
  core::TaskRecord task;
  task.task = {3, 1};
  task.cores = {1, 2};
  for (const std::string& bytes : {EncodeRecord(task), EncodeRecord(outcome)}) {
    for (size_t n = 1; n < bytes.size(); ++n) {
      Result<core::Record> r = DecodeRecord(bytes.substr(0, n));
      ASSERT_FALSE(r.ok()) << n;
      EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << n;
      EXPECT_NE(r.status().message().find("record (binary): "), std::string::npos)
          << r.status().message();
    }
    Result<core::Record> longer = DecodeRecord(bytes + '\0');
    ASSERT_FALSE(longer.ok());
    EXPECT_NE(longer.status().message().find("bytes left"), std::string::npos)
        << longer.status().message();
    std::string later = bytes;
    later[1] = 4;
    EXPECT_EQ(DecodeRecord(later).status().code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(DecodeRecord(later).status().message(),
              "journal record has binary version 4; this build reads versions 1 to 3");
  }
  std::string bytes = EncodeRecord(task);
  bytes[4] = 9;  // tag, version, job 3, index 1, state
  EXPECT_EQ(DecodeRecord(bytes).status().message(),
            "task record (binary): state: unknown task state 9");
  // A count of cores far beyond the bytes left is refused before anything
  // is allocated for it.
  bytes = EncodeRecord(task);
  const std::string cores = std::string(1, '\x02') + '\x01' + '\x02';
  ASSERT_NE(bytes.find(cores), std::string::npos);
  bytes.replace(bytes.find(cores), 1, "\xff\xff\xff\xff\x0f");
  Result<core::Record> forged = DecodeRecord(bytes);
  ASSERT_FALSE(forged.ok());
  EXPECT_NE(forged.status().message().find("cores: 4294967295 elements cannot fit"),
            std::string::npos)
      << forged.status().message();
  // A replica of worker 0, and an output name that escapes its directory.
  outcome.outcome.replicas = {0};
  EXPECT_NE(
      DecodeRecord(EncodeRecord(outcome)).status().message().find("replicas: is not a worker id"),
      std::string::npos);
  outcome.outcome.replicas = {};
  outcome.outcome.outputs[0].name = "../x";
  EXPECT_NE(DecodeRecord(EncodeRecord(outcome)).status().message().find("outputs.name"),
            std::string::npos);
}

// A journal written before outcomes carried I/O counts (binary version 1)
// reads back as outcomes without them, one written before they carried an
// image's digest (version 2) as outcomes without one; a version 2 outcome
// says which counts it has in one byte, and a bad one is refused.
TEST(RecordCodecTest, AVersion1OutcomeReadsAsOneWithoutIoCounts) {
  core::OutcomeRecord outcome;
  outcome.task = {4, 2};
  outcome.attempt = 1;
  outcome.outcome.exit_code = 3;
  outcome.outcome.usage.wall = Micros(10);
  std::string bytes = EncodeRecord(outcome);
  ASSERT_EQ(bytes[1], 3);
  ASSERT_EQ(bytes.substr(bytes.size() - 2), std::string(2, '\0'));  // no counts, no digest
  std::string v1 = bytes.substr(0, bytes.size() - 2);
  v1[1] = 1;
  Result<core::Record> back = DecodeRecord(v1);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(std::get<core::OutcomeRecord>(*back), outcome);
  std::string v2 = bytes.substr(0, bytes.size() - 1);
  v2[1] = 2;
  back = DecodeRecord(v2);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(std::get<core::OutcomeRecord>(*back), outcome);
  outcome.outcome.image_digest = "sha256:" + std::string(64, 'a');
  back = DecodeRecord(EncodeRecord(outcome));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(std::get<core::OutcomeRecord>(*back), outcome);
  outcome.outcome.image_digest.clear();
  bytes = v2;
  bytes.back() = 4;
  EXPECT_EQ(DecodeRecord(bytes).status().message(),
            "outcome record (binary): io: expected 0 to 3, found 4");
  outcome.outcome.usage.io_write_bytes = 5;  // written alone
  back = DecodeRecord(EncodeRecord(outcome));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(std::get<core::OutcomeRecord>(*back), outcome);
  EXPECT_FALSE(std::get<core::OutcomeRecord>(*back).outcome.usage.io_read_bytes.has_value());
}

// Where a success's files are: the holder and the workers with copies.
TEST(RecordCodecTest, AnOutcomeWithCopiesRoundTripsAndBadWorkerListsAreRefused) {
  core::OutcomeRecord outcome;
  outcome.task = {9, 0};
  outcome.attempt = 2;
  outcome.outcome.outputs = {core::OutputFile{"model.bin", 10, std::string(64, 'f')}};
  outcome.outcome.outputs_on = 3;
  outcome.outcome.replicas = {5, 7};
  std::string bytes = EncodeRecordJson(outcome);
  Result<core::Record> back = DecodeRecord(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(std::get<core::OutcomeRecord>(*back), outcome);
  for (const std::string& bad :
       {std::string("[0]"), std::string("[1,2,3,4,5]"), std::string("[\"w\"]"), std::string("7")}) {
    std::string damaged = bytes;
    const std::string key = "\"replicas\":[5,7]";
    ASSERT_NE(damaged.find(key), std::string::npos) << bytes;
    damaged.replace(damaged.find(key), key.size(), "\"replicas\":" + bad);
    Result<core::Record> refused = DecodeRecord(damaged);
    EXPECT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.status().message().find("replicas"), std::string::npos)
        << refused.status().message();
  }
}

TEST(RecordCodecTest, CheckpointRecordRoundTrips) {
  core::CheckpointRecord record;
  record.task = {9, 2};
  record.checkpoint.attempt = 3;
  record.checkpoint.worker = 5;
  record.checkpoint.saved_at = TimeFromMicros(77);
  record.checkpoint.files = {{"step", 2, std::string(64, 'a')},
                             {"d/state", 9, std::string(64, 'b')}};
  Result<core::Record> back = DecodeRecord(EncodeRecord(record));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(std::get<core::CheckpointRecord>(*back), record);
}

TEST(RecordCodecTest, DamagedRecordsAreDataLoss) {
  std::string bytes = EncodeRecordJson(core::TaskRecord{});
  for (size_t n = 0; n < bytes.size(); ++n) {
    Result<core::Record> r = DecodeRecord(bytes.substr(0, n));
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << n;
  }
  Result<core::Record> r = DecodeRecord(
      R"({"v":1,"type":"task","task":"1.2","state":"sleeping","attempt":0,"worker":0,"at_us":0})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "task record: state: unknown task state \"sleeping\"");
  r = DecodeRecord(
      R"({"v":1,"type":"task","task":"1.2","state":"queued","attempt":1,"worker":0,"at_us":0,)"
      R"("kind":"bored"})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "task record: kind: unknown reason kind \"bored\"");
  r = DecodeRecord(R"({"v":1,"type":"job","job":1,"at_us":0,"spec":{"name":"x","task":[]}})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "job record: spec.task: a job needs at least one [[task]]");
  r = DecodeRecord(R"({"v":1,"type":"lease"})");
  EXPECT_EQ(r.status().message(), "journal record has unknown type \"lease\"");
  r = DecodeRecord(R"({"v":2,"type":"task"})");
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace drover::proto
