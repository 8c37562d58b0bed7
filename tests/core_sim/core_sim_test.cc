// The seeded simulation: several fixed seeds in ctest, any other through
// DROVER_SIM_SEED (one seed) and DROVER_SIM_EVENTS (events per run), e.g.
//   DROVER_SIM_SEED=42 DROVER_SIM_EVENTS=1000000 build/tests/core_sim_test
// DROVER_SIM_TRACE=1 prints every event and command (use with few events).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core_sim/sim_driver.h"
#include "gtest/gtest.h"

namespace drover::core_sim {
namespace {

uint64_t EnvOr(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v == nullptr || *v == '\0' ? fallback : std::strtoull(v, nullptr, 10);
}

void RunSeed(uint64_t seed, bool preempt = false) {
  SimOptions options;
  options.seed = seed;
  options.preempt = preempt;
  options.events = EnvOr("DROVER_SIM_EVENTS", 100'000);
  options.trace = EnvOr("DROVER_SIM_TRACE", 0) != 0;
  SimDriver driver(options);
  Status st = driver.Run();
  ASSERT_TRUE(st.ok()) << st.ToString()
                       << "\nrerun: DROVER_SIM_SEED=" << seed << " DROVER_SIM_EVENTS=" << options.events
                       << " DROVER_SIM_TRACE=1 core_sim_test --gtest_filter='*Seeded*'";
  const SimReport& r = driver.report();
  std::printf("seed %llu: %s\n", static_cast<unsigned long long>(seed), r.ToString().c_str());
  // The run must have exercised what it claims to.
  EXPECT_GE(r.random_events, options.events);
  if (options.events >= 100'000) {
    EXPECT_GT(r.losses, 10u);
    EXPECT_GT(r.expiries, 10u);
    EXPECT_GT(r.rejections, 10u);
    EXPECT_GT(r.kills, 10u);
    EXPECT_GT(r.jumps, 5u);
    EXPECT_GE(r.restore_checks, 4u);
    EXPECT_GE(r.sliced_snapshots, 3u);
    EXPECT_GT(r.transitions[static_cast<int>(core::TaskState::kSucceeded)], 1000u);
    EXPECT_GT(r.transitions[static_cast<int>(core::TaskState::kFailed)], 10u);
    EXPECT_GT(r.transitions[static_cast<int>(core::TaskState::kCanceled)], 10u);
    EXPECT_GT(r.reruns, 0u);
    EXPECT_GT(r.retried_tasks, 10u);
    if (preempt) {
      EXPECT_GT(r.vacates, 100u);
    }
  }
}

TEST(CoreSimTest, SeededRuns) {
  std::vector<uint64_t> seeds = {1, 2, 3, 20240601};
  if (const char* s = std::getenv("DROVER_SIM_SEED"); s != nullptr && *s != '\0') {
    seeds = {std::strtoull(s, nullptr, 10)};
  }
  for (uint64_t seed : seeds) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    RunSeed(seed);
    if (HasFatalFailure()) return;
  }
}

// The same invariants with preemption by priority on: victims' room kept
// for their preemptor, nothing booked twice, every task ends.
TEST(CoreSimTest, SeededRunsWithPreemption) {
  std::vector<uint64_t> seeds = {1, 2};
  if (const char* s = std::getenv("DROVER_SIM_SEED"); s != nullptr && *s != '\0') {
    seeds = {std::strtoull(s, nullptr, 10)};
  }
  for (uint64_t seed : seeds) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    RunSeed(seed, /*preempt=*/true);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace drover::core_sim
