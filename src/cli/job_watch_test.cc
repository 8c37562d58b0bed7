#include "cli/job_watch.h"

#include <gtest/gtest.h>

namespace drover::cli {
namespace {

TaskEventView Ev(std::string task, std::string to, uint32_t attempt = 1) {
  return TaskEventView{std::move(task), "", std::move(to), attempt, ""};
}

TEST(JobWatchTest, DecodesTaskStateEvents) {
  Result<TaskEventView> e = DecodeTaskEventView(
      R"({"type":"task_state","task":"12.3","from":"running","to":"failed","attempt":2,)"
      R"("reason":"exit code 3","at":"2024-05-01T12:00:00.250Z","at_ms":1})");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->task, "12.3");
  EXPECT_EQ(e->from, "running");
  EXPECT_EQ(e->to, "failed");
  EXPECT_EQ(e->attempt, 2u);
  EXPECT_EQ(e->reason, "exit code 3");
}

TEST(JobWatchTest, SkipsOtherTypesAndRejectsGarbage) {
  EXPECT_EQ(DecodeTaskEventView(R"({"type":"hello"})").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(DecodeTaskEventView("not json").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeTaskEventView(R"({"type":"task_state","task":3,"to":"queued"})").status().code(),
            StatusCode::kInvalidArgument);
}

TEST(JobWatchTest, DecodesOneEventOrABatchOfThemInOrder) {
  Result<std::vector<TaskEventView>> one =
      DecodeTaskEvents(R"({"type":"task_state","task":"1.0","to":"queued"})");
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].task, "1.0");
  Result<std::vector<TaskEventView>> batch = DecodeTaskEvents(
      R"([{"type":"task_state","task":"1.0","to":"running","attempt":1},)"
      R"({"type":"hello"},{"type":"task_state","task":"1.1","to":"failed","reason":"exit 3"}])");
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  ASSERT_EQ(batch->size(), 2u) << "the element of another type is skipped";
  EXPECT_EQ((*batch)[0].to, "running");
  EXPECT_EQ((*batch)[1].task, "1.1");
  EXPECT_EQ((*batch)[1].reason, "exit 3");
  EXPECT_TRUE(DecodeTaskEvents(R"({"type":"hello"})")->empty());
  EXPECT_EQ(DecodeTaskEvents("[1]").status().code(), StatusCode::kInvalidArgument);
  // Found by fuzz/events_fuzz.cc: an empty task would count as one of the job's.
  EXPECT_EQ(DecodeTaskEvents(R"([{"type":"task_state","task":"","to":"failed"}])").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeTaskEventView(R"({"type":"task_state","task":"1.0","to":""})").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeTaskEvents("[").status().code(), StatusCode::kInvalidArgument);
}

TEST(JobWatchTest, DoneOnlyWhenEveryTaskIsSeenAndTerminal) {
  JobWatch w(3);
  EXPECT_TRUE(w.Apply(Ev("1.0", "succeeded")));
  EXPECT_TRUE(w.Apply(Ev("1.1", "failed")));
  EXPECT_FALSE(w.done()) << "1.2 not seen yet";
  EXPECT_TRUE(w.Apply(Ev("1.2", "running")));
  EXPECT_FALSE(w.done());
  EXPECT_TRUE(w.Apply(Ev("1.2", "canceled")));
  EXPECT_TRUE(w.done());
  EXPECT_FALSE(w.succeeded());
  EXPECT_EQ(w.count("failed"), 1u);
}

TEST(JobWatchTest, RepeatedSnapshotEntriesChangeNothing) {
  JobWatch w(1);
  EXPECT_TRUE(w.Apply(Ev("4.0", "running", 1)));
  EXPECT_FALSE(w.Apply(Ev("4.0", "running", 1)));
  EXPECT_TRUE(w.Apply(Ev("4.0", "running", 2))) << "a new attempt is news";
  EXPECT_TRUE(w.Apply(Ev("4.0", "succeeded", 2)));
  EXPECT_TRUE(w.succeeded());
}

// The counts follow each task from state to state, a retried task
// leaving the terminal ones (done turns false again).
TEST(JobWatchTest, CountsFollowEachTaskThroughItsStates) {
  JobWatch w(2);
  w.Apply(Ev("5.0", "queued"));
  w.Apply(Ev("5.1", "queued"));
  EXPECT_EQ(w.count("queued"), 2u);
  w.Apply(Ev("5.0", "running"));
  w.Apply(Ev("5.0", "succeeded"));
  w.Apply(Ev("5.1", "failed"));
  EXPECT_TRUE(w.done());
  EXPECT_EQ(w.count("queued"), 0u);
  EXPECT_EQ(w.count("running"), 0u);
  EXPECT_EQ(w.count("succeeded"), 1u);
  w.Apply(Ev("5.1", "queued", 2));  // retried
  EXPECT_FALSE(w.done());
  EXPECT_EQ(w.count("failed"), 0u);
  EXPECT_EQ(w.count("queued"), 1u);
  w.Apply(Ev("5.1", "succeeded", 2));
  EXPECT_TRUE(w.succeeded());
  EXPECT_EQ(w.EndLine(), "2 succeeded");
}

TEST(JobWatchTest, ProgressLineCountsStates) {
  JobWatch w(4);
  w.Apply(Ev("1.0", "succeeded"));
  w.Apply(Ev("1.1", "running"));
  w.Apply(Ev("1.2", "queued"));
  EXPECT_EQ(w.ProgressLine(8), "[##......] 1/4 done  1 running  1 queued");
}

}  // namespace
}  // namespace drover::cli
