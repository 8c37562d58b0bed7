#include "sim/generate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "sim/trace.h"

namespace drover::sim {
namespace {

std::string Generate(GenerateOptions options) {
  std::ostringstream out;
  Status s = WriteSyntheticTrace(options, out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out.str();
}

Trace ParseOrDie(const std::string& text) {
  std::istringstream in(text);
  Result<Trace> t = ParseTrace(in, "generated");
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return std::move(t).value();
}

TEST(GenerateTest, SameSeedSameBytesOtherSeedOtherTrace) {
  const std::string a = Generate({1, 500, 16, 1.2});
  EXPECT_EQ(a, Generate({1, 500, 16, 1.2}));
  EXPECT_NE(a, Generate({2, 500, 16, 1.2}));
}

TEST(GenerateTest, TraceHasTheDocumentedMix) {
  const Trace t = ParseOrDie(Generate({1, 5000, 16, 1.2}));
  ASSERT_EQ(t.tasks.size(), 5000u);
  std::set<int64_t> gpu_sizes;
  std::vector<int64_t> durations;
  std::set<int64_t> submits;
  uint64_t cpu_only = 0, with_priority = 0;
  double gpu_seconds = 0;
  for (const TraceTask& task : t.tasks) {
    const core::ResourceRequest& r = t.RequestOf(task);
    gpu_sizes.insert(r.gpus);
    cpu_only += r.gpus == 0;
    with_priority += task.priority != 0;
    durations.push_back(task.duration.count());
    submits.insert(task.submit.count());
    gpu_seconds +=
        static_cast<double>(r.gpus) / 100 * static_cast<double>(task.duration.count()) / 1e6;
    EXPECT_GE(task.duration, Seconds(30));
    EXPECT_LE(task.duration, Seconds(4 * 3600));
  }
  EXPECT_EQ(gpu_sizes, (std::set<int64_t>{0, 50, 100, 200, 400}));
  // About 30% CPU-only by design, plus the prep tasks of pipelines.
  EXPECT_GT(cpu_only, 5000u * 20 / 100);
  EXPECT_LT(cpu_only, 5000u * 45 / 100);
  EXPECT_GT(with_priority, 0u);
  EXPECT_FALSE(t.deps.empty());
  // Bursts: many tasks share a submit instant.
  EXPECT_LT(submits.size(), t.tasks.size() / 3);
  // Log-normal with a 10-minute median.
  std::nth_element(durations.begin(), durations.begin() + 2500, durations.end());
  EXPECT_NEAR(static_cast<double>(durations[2500]) / 1e6, 600.0, 90.0);
  // Arrivals end when the offered GPU work is 1.2x what 16 GPUs do by then.
  const double window = static_cast<double>(t.tasks.back().submit.count()) / 1e6;
  EXPECT_NEAR(window, gpu_seconds / (16 * 1.2), gpu_seconds / (16 * 1.2) * 0.01);
}

TEST(GenerateTest, LimitsAreRoundValuesAtOrAboveTheDuration) {
  const Trace t = ParseOrDie(Generate({1, 2000, 16, 1.2}));
  std::set<int64_t> limits;
  for (const TraceTask& task : t.tasks) {
    EXPECT_GE(task.limit, task.duration);
    EXPECT_LT(task.limit, task.duration * 3 + Seconds(60));
    limits.insert(task.limit.count());
  }
  EXPECT_LE(limits.size(), 13u);  // 1m, 2m, 5m, ... 4h: array groups still form
  EXPECT_TRUE(limits.count(Seconds(600).count()));

  GenerateOptions none{1, 2000, 16, 1.2};
  none.limits = false;
  const std::string text = Generate(none);
  EXPECT_EQ(text.find("limit"), std::string::npos);
  for (const TraceTask& task : ParseOrDie(text).tasks) EXPECT_EQ(task.limit, Duration::zero());
}

TEST(GenerateTest, RejectsBadOptions) {
  std::ostringstream out;
  EXPECT_EQ(WriteSyntheticTrace({1, 0, 16, 1.2}, out).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteSyntheticTrace({1, 10, 0, 1.2}, out).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteSyntheticTrace({1, 10, 16, 0}, out).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(out.str().empty());
}

TEST(GenerateTest, OutputsGoOnPipelinePrepsAndChangeNothingElse) {
  GenerateOptions plain{1, 2000, 16, 1.2};
  GenerateOptions with = plain;
  with.outputs = true;
  const Trace a = ParseOrDie(Generate(plain));
  const Trace b = ParseOrDie(Generate(with));
  ASSERT_EQ(a.tasks.size(), b.tasks.size());
  uint64_t producers = 0;
  for (size_t i = 0; i < b.tasks.size(); ++i) {
    EXPECT_EQ(a.tasks[i].submit, b.tasks[i].submit);
    EXPECT_EQ(a.tasks[i].duration, b.tasks[i].duration);
    EXPECT_EQ(a.tasks[i].deps_count, b.tasks[i].deps_count);
    EXPECT_EQ(a.tasks[i].output_bytes, 0u);
    if (b.tasks[i].output_bytes == 0) continue;
    ++producers;
    EXPECT_GE(b.tasks[i].output_bytes, 1ull << 30);
    EXPECT_LE(b.tasks[i].output_bytes, 16ull << 30);
    // A producer is a prep: the next line depends on it.
    ASSERT_LT(i + 1, b.tasks.size());
    ASSERT_EQ(b.tasks[i + 1].deps_count, 1u);
    EXPECT_EQ(b.deps[b.tasks[i + 1].deps_begin], i);
  }
  EXPECT_GT(producers, 5u);
}

// --resubmit: a share of the bursts repeat an earlier one's tasks (same
// user, shape, duration and key) with exactly one key new; without it the
// trace has no keys. Out of range is refused.
TEST(GenerateTest, ResubmittedBurstsRepeatEarlierWorkWithOneTaskChanged) {
  GenerateOptions options{1, 2000, 16, 1.2};
  options.resubmit = 0.33;
  const Trace t = ParseOrDie(Generate(options));
  ASSERT_EQ(t.tasks.size(), 2000u);
  EXPECT_TRUE(ParseOrDie(Generate({1, 2000, 16, 1.2})).keys.empty());
  // A key seen again: the same work, by the same user.
  std::map<uint32_t, size_t> first;
  uint64_t repeated = 0;
  for (size_t i = 0; i < t.tasks.size(); ++i) {
    ASSERT_NE(t.tasks[i].key, TraceTask::kNoKey);
    auto [it, fresh] = first.emplace(t.tasks[i].key, i);
    if (fresh) continue;
    ++repeated;
    const TraceTask& was = t.tasks[it->second];
    EXPECT_EQ(t.tasks[i].duration, was.duration);
    EXPECT_EQ(t.tasks[i].request, was.request);
    EXPECT_EQ(t.tasks[i].user, was.user);
  }
  // About a third of the bursts, each but one task a repeat.
  EXPECT_GT(repeated, 300u);
  EXPECT_LT(repeated, 1000u);
  std::ostringstream out;
  options.resubmit = 0.95;
  EXPECT_EQ(WriteSyntheticTrace(options, out).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace drover::sim
