#include "core/reasons.h"

#include <gtest/gtest.h>

namespace drover::core {
namespace {

TEST(ReasonsTest, EveryKindHasAStableNameThatReadsBack) {
  for (int i = 0; i < kEndKindCount; ++i) {
    const auto kind = static_cast<EndKind>(i);
    const std::string_view name = EndKindName(kind);
    ASSERT_FALSE(name.empty()) << i;
    EXPECT_EQ(EndKindFromName(name), kind) << name;
  }
  EXPECT_EQ(EndKindName(EndKind::kTimedOut), "timed_out");
  EXPECT_EQ(EndKindFromName("sleepy"), std::nullopt);
}

TEST(ReasonsTest, AFailureIsRenderedFromTheOutcome) {
  TaskOutcome o;
  EXPECT_TRUE(why::Failed(o, 0).empty());  // a success has no reason
  o.exit_code = 3;
  EXPECT_EQ(why::Failed(o, 0), (Reason{EndKind::kFailed, "exit code 3"}));
  o.reason = "stdout not saved: no space left on device (/w/stdout)";
  EXPECT_EQ(why::Failed(o, 0).text,
            "exit code 3; stdout not saved: no space left on device (/w/stdout)");
  o = TaskOutcome{};
  o.exit_code = -1;  // no exit status: only the worker's words
  o.reason = "cannot start: no such file";
  EXPECT_EQ(why::Failed(o, 0).text, "cannot start: no such file");
  o = TaskOutcome{};
  o.oom_killed = true;
  o.signal = 9;
  o.usage.peak_mem_bytes = 1ull << 30;
  EXPECT_EQ(why::Failed(o, 1ull << 30).text, "OOM-killed (limit 1 GiB, peak 1 GiB)");
  EXPECT_EQ(why::WithRetry(why::Failed(o, 0), 1, 3, Seconds(2)).text,
            "OOM-killed (limit none, peak 1 GiB); retry 1 of 3 in 2s");
}

TEST(ReasonsTest, TheKindNotTheWordsSaysWhy) {
  // The same opening words, different kinds: code reads the kind.
  EXPECT_EQ(why::PreemptedBy(TaskId{2, 0}, 90).kind, EndKind::kPreempted);
  EXPECT_EQ(why::Vacated(why::OwnerReturnedText("ws-ana")),
            (Reason{EndKind::kVacated, "preempted: owner returned on ws-ana"}));
  EXPECT_EQ(why::Vacated("").text, "preempted: vacated by its worker");
  EXPECT_EQ(why::Rerun({3, 5}), (Reason{EndKind::kRerun, "rerun: outputs lost with workers 3, 5"}));
  EXPECT_EQ(why::DependencyEnded(TaskId{12, 0}, TaskState::kFailed),
            (Reason{EndKind::kDependency, "dependency 12.0 failed"}));
  EXPECT_EQ(why::LeaseRejected(true).kind, EndKind::kLeaseLost);
  EXPECT_EQ(why::LeaseRejected(false).kind, EndKind::kNotStarted);
  EXPECT_EQ(why::Resized(3, false).text, "worker 3 no longer offers its cores, memory or GPUs");
  EXPECT_EQ(why::Resized(3, true).kind, EndKind::kResized);
}

}  // namespace
}  // namespace drover::core
