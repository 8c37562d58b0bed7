#include "worker/exec/slots.h"

#include <gtest/gtest.h>

#include "common/quantity.h"

namespace drover::worker {
namespace {

Slots FourCoresTwoGpus() { return Slots(SlotCapacity{{0, 1, 2, 3}, 8 * kGiB, {0, 1}}); }

TEST(SlotsTest, AdmitsWithinCapacityAndReleases) {
  Slots slots = FourCoresTwoGpus();
  ASSERT_TRUE(slots.Admit({1, 0}, {2000, {0, 1}, 4 * kGiB, {{0, 100}}}).ok());
  EXPECT_EQ(slots.free_milli_cpus(), 2000);
  EXPECT_EQ(slots.free_memory(), 4 * kGiB);
  EXPECT_EQ(slots.gpu_free(0), 0);
  EXPECT_FALSE(slots.core_free(0));
  EXPECT_TRUE(slots.core_free(2));
  ASSERT_TRUE(slots.Release({1, 0}).ok());
  EXPECT_EQ(slots.free_milli_cpus(), 4000);
  EXPECT_EQ(slots.free_memory(), 8 * kGiB);
  EXPECT_EQ(slots.gpu_free(0), 100);
  EXPECT_TRUE(slots.core_free(0));
  EXPECT_EQ(slots.Release({1, 0}).code(), StatusCode::kNotFound);
}

TEST(SlotsTest, RefusesACoreInUseWithTheHolderNamed) {
  Slots slots = FourCoresTwoGpus();
  ASSERT_TRUE(slots.Admit({1, 0}, {1000, {2}, 0, {}}).ok());
  Status s = slots.Admit({1, 1}, {1000, {2}, 0, {}});
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "core 2 is in use by task 1.0");
  EXPECT_EQ(slots.admitted(), 1u);
  EXPECT_EQ(slots.free_milli_cpus(), 3000);  // the refusal booked nothing
}

// Below one CPU, tasks share a core up to one CPU in all (four
// 0.25-CPU tasks on a one-core worker run at once).
TEST(SlotsTest, CoreSharesFitUpToOneCpu) {
  Slots slots(SlotCapacity{{0}, 0, {}});
  for (uint32_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(slots.Admit({1, i}, {250, {0}, 0, {}}).ok()) << i;
  }
  EXPECT_FALSE(slots.core_free(0));
  Status s = slots.Admit({1, 4}, {250, {0}, 0, {}});
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "core 0 is in use by task 1.3");
  // A whole-core task waits for every share to end.
  ASSERT_TRUE(slots.Release({1, 0}).ok());
  EXPECT_EQ(slots.Admit({2, 0}, {1000, {0}, 0, {}}).code(), StatusCode::kResourceExhausted);
  for (uint32_t i = 1; i < 4; ++i) ASSERT_TRUE(slots.Release({1, i}).ok());
  EXPECT_TRUE(slots.core_free(0));
  ASSERT_TRUE(slots.Admit({2, 0}, {1000, {0}, 0, {}}).ok());
  EXPECT_EQ(slots.Admit({2, 1}, {250, {0}, 0, {}}).code(), StatusCode::kResourceExhausted);
}

TEST(SlotsTest, RefusesAWholeGpuInUseButSharesFit) {
  Slots slots = FourCoresTwoGpus();
  ASSERT_TRUE(slots.Admit({1, 0}, {0, {}, 0, {{1, 50}}}).ok());
  ASSERT_TRUE(slots.Admit({1, 1}, {0, {}, 0, {{1, 25}}}).ok());
  Status s = slots.Admit({1, 2}, {0, {}, 0, {{1, 100}}});
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "GPU 1 has 0.25 free, the task asks 1");
  EXPECT_TRUE(slots.Admit({1, 3}, {0, {}, 0, {{1, 25}}}).ok());
  EXPECT_EQ(slots.gpu_free(1), 0);
}

TEST(SlotsTest, RefusesBeyondMemoryAndCpu) {
  Slots slots = FourCoresTwoGpus();
  Status s = slots.Admit({1, 0}, {0, {}, 9 * kGiB, {}});
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "not enough memory: 8 GiB free, the task asks 9 GiB");
  s = slots.Admit({1, 0}, {4500, {}, 0, {}});
  EXPECT_EQ(s.message(), "not enough CPU: 4 free, the task asks 4.5");
}

TEST(SlotsTest, RefusesUnknownOrDuplicateIndicesAndDoubleAdmission) {
  Slots slots = FourCoresTwoGpus();
  EXPECT_EQ(slots.Admit({1, 0}, {0, {7}, 0, {}}).message(), "core 7 does not exist on this worker");
  EXPECT_EQ(slots.Admit({1, 0}, {0, {1, 1}, 0, {}}).message(), "core 1 is named twice");
  EXPECT_EQ(slots.Admit({1, 0}, {0, {}, 0, {{2, 100}}}).message(),
            "GPU 2 does not exist on this worker");
  EXPECT_EQ(slots.Admit({1, 0}, {0, {}, 0, {{0, 0}}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(slots.admitted(), 0u);
  ASSERT_TRUE(slots.Admit({1, 0}, {0, {}, 0, {}}).ok());
  EXPECT_EQ(slots.Admit({1, 0}, {0, {}, 0, {}}).code(), StatusCode::kAlreadyExists);
}

}  // namespace
}  // namespace drover::worker
