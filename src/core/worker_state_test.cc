#include "core/worker_state.h"

#include <gtest/gtest.h>

#include "core/testing/test_cluster.h"

namespace drover::core {
namespace {

using testing::TaskBuilder;
using testing::WorkerBuilder;

TEST(WorkerStateTest, HandsOutDistinctCoresAndTakesExactlyThoseBack) {
  WorkerState w(1, WorkerBuilder().Cpus(4).Build());
  ResourceRequest half = TaskBuilder().Cpus(0.5).Build().resources;
  ResourceRequest two = TaskBuilder().Cpus(1.5).Build().resources;
  Allocation a, b, c;
  ASSERT_TRUE(w.Allocate(half, false, a));
  ASSERT_TRUE(w.Allocate(two, false, b));
  EXPECT_EQ(a.cores, std::vector<uint32_t>{0});
  EXPECT_EQ(b.cores, (std::vector<uint32_t>{1, 2}));
  EXPECT_FALSE(w.Allocate(two, false, c));  // one core left, needs ceil(1.5) = 2
  EXPECT_TRUE(c.cores.empty());
  w.Free(half, a);
  EXPECT_EQ(w.free_cores(), (std::vector<uint32_t>{0, 3}));
  ASSERT_TRUE(w.Allocate(two, false, c));
  EXPECT_EQ(c.cores, (std::vector<uint32_t>{0, 3}));
}

// Below one CPU, requests share a core: the fullest shared core
// with room first, up to one CPU on a core; a whole-core request never gets
// a shared core, and a core comes back whole when its last share ends.
TEST(WorkerStateTest, CoreSharesFillOneCoreBeforeTakingAnother) {
  WorkerState w(1, WorkerBuilder().Cpus(2).Build());
  ResourceRequest quarter = TaskBuilder().Cpus(0.25).Build().resources;
  ResourceRequest half = TaskBuilder().Cpus(0.5).Build().resources;
  ResourceRequest one = TaskBuilder().Cpus(1).Build().resources;
  Allocation a[5];
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(w.Allocate(quarter, false, a[i])) << i;
    EXPECT_EQ(a[i].cores, std::vector<uint32_t>{0}) << i;
  }
  EXPECT_EQ(w.free_cores(), std::vector<uint32_t>{1});
  ASSERT_TRUE(w.Allocate(half, false, a[4]));
  EXPECT_EQ(a[4].cores, std::vector<uint32_t>{1});
  Allocation whole;
  EXPECT_FALSE(w.Fits(one, false));
  EXPECT_EQ(w.Shortfall(one), uint32_t{kDimCores});
  EXPECT_TRUE(w.Fits(half, false));  // core 1 has half a CPU left
  w.Free(half, a[4]);
  EXPECT_EQ(w.free_cores(), std::vector<uint32_t>{1});
  ASSERT_TRUE(w.Allocate(one, false, whole));
  EXPECT_EQ(whole.cores, std::vector<uint32_t>{1});
  for (int i = 0; i < 3; ++i) w.Free(quarter, a[i]);
  EXPECT_TRUE(w.free_cores().empty());  // a quarter still uses core 0
  EXPECT_FALSE(w.AllocateExact(one, Allocation{{0}, {}, 0}));
  EXPECT_TRUE(w.AllocateExact(half, Allocation{{0}, {}, 0}));  // a restored share
  w.Free(half, Allocation{{0}, {}, 0});
  w.Free(quarter, a[3]);
  EXPECT_EQ(w.free_cores(), std::vector<uint32_t>{0});
}

TEST(WorkerStateTest, WholeGpusOnlyOnUnsharedGpusAndSharesKeepMemoryInBounds) {
  WorkerState w(1, WorkerBuilder().Cpus(8).Gpus(2, "A100", 40 * kGiB).Build());
  ResourceRequest share = TaskBuilder().Cpus(0).Gpus(0.5).GpuMem(30 * kGiB).Build().resources;
  ResourceRequest whole = TaskBuilder().Cpus(0).Gpus(2).Build().resources;
  Allocation s1, s2, s3, g;
  ASSERT_TRUE(w.Allocate(share, false, s1));
  ASSERT_TRUE(w.Allocate(share, false, s2));  // 30 + 30 > 40: second GPU
  EXPECT_EQ(s1.gpus[0].index, 0u);
  EXPECT_EQ(s2.gpus[0].index, 1u);
  EXPECT_FALSE(w.Allocate(share, false, s3));  // both GPUs have only 10 GiB left
  EXPECT_FALSE(w.Allocate(whole, false, g));
  EXPECT_EQ(w.Shortfall(whole), kDimGpus);
  w.Free(share, s1);
  w.Free(share, s2);
  ASSERT_TRUE(w.Allocate(whole, false, g));
  EXPECT_EQ(g.gpus.size(), 2u);
  EXPECT_FALSE(w.Fits(share, false));
}

TEST(WorkerStateTest, CountersAndLabels) {
  WorkerState w(1, WorkerBuilder().Counter("licenses", 2).Label("os", "linux").Build());
  ResourceRequest lic = TaskBuilder().Cpus(0).Counter("licenses", 2).Build().resources;
  ResourceRequest mac = TaskBuilder().Label("os", "macos").Build().resources;
  Allocation a, b;
  EXPECT_TRUE(w.Allocate(lic, false, a));
  EXPECT_FALSE(w.Fits(lic, false));
  EXPECT_TRUE(w.CanEverFit(lic));
  EXPECT_FALSE(w.CanEverFit(mac));
  EXPECT_FALSE(w.Allocate(mac, false, b));
  w.Free(lic, a);
  EXPECT_TRUE(w.Fits(lic, false));
}

}  // namespace
}  // namespace drover::core
