#include "core/user_account.h"

#include <gtest/gtest.h>

#include "common/quantity.h"

namespace drover::core {
namespace {

ResourceRequest Ask(int64_t cpus_milli, int64_t gpus = 0, uint64_t mem = 0) {
  ResourceRequest r;
  r.cpus_milli = cpus_milli;
  r.gpus = gpus;
  r.mem_bytes = mem;
  return r;
}

TEST(UserAccountTest, EachLimitIsCheckedAndNamedGpusFirst) {
  UserAccount a(
      "u1",
      UserQuota{
          .max_cpus_milli = 4000, .max_gpus = 200, .max_tasks = 3, .max_mem_bytes = 8 * kGiB});
  EXPECT_EQ(a.Exceeds(Ask(1000, 100)), QuotaLimit::kNone);
  a.Take(Ask(1000, 100, 2 * kGiB));
  a.Take(Ask(1000, 100, 2 * kGiB));
  // Both GPUs held: a GPU request passes the GPU limit, a CPU-only one fits.
  EXPECT_EQ(a.Exceeds(Ask(1000, 50)), QuotaLimit::kGpus);
  EXPECT_EQ(a.Explain(Ask(1000, 50)), "quota: gpus 2/2 for u1");
  EXPECT_EQ(a.Exceeds(Ask(1000)), QuotaLimit::kNone);
  EXPECT_EQ(a.Exceeds(Ask(3000)), QuotaLimit::kCpus);
  EXPECT_EQ(a.Explain(Ask(3000)), "quota: cpus 2/4 for u1");
  EXPECT_EQ(a.Exceeds(Ask(1000, 0, 5 * kGiB)), QuotaLimit::kMemory);
  EXPECT_EQ(a.Explain(Ask(1000, 0, 5 * kGiB)), "quota: memory 4 GiB/8 GiB for u1");
  a.Take(Ask(500));
  EXPECT_EQ(a.Exceeds(Ask(500)), QuotaLimit::kTasks);
  EXPECT_EQ(a.Explain(Ask(500)), "quota: tasks 3/3 for u1");
  // What is given back is free again; the usage never goes below zero.
  a.Give(Ask(500));
  a.Give(Ask(1000, 100, 2 * kGiB));
  a.Give(Ask(1000, 100, 2 * kGiB));
  EXPECT_EQ(a.used().tasks, 0u);
  EXPECT_EQ(a.used().cpus_milli, 0);
  EXPECT_EQ(a.used().gpus, 0);
  EXPECT_EQ(a.used().mem_bytes, 0u);
  EXPECT_EQ(a.Exceeds(Ask(4000, 200, 8 * kGiB)), QuotaLimit::kNone);
  EXPECT_EQ(a.Explain(Ask(1000)), "quota: waiting for room in u1's quota");
}

TEST(UserAccountTest, ZeroIsNoLimitAndAProjectedUsageIsChecked) {
  UserAccount open("u2", UserQuota{});
  QuotaUsage lots{
      .cpus_milli = 1'000'000, .gpus = 10'000, .mem_bytes = 1ull << 50, .tasks = 100'000};
  EXPECT_EQ(open.Exceeds(Ask(64'000, 800, kGiB), lots), QuotaLimit::kNone);
  UserAccount capped("u3", UserQuota{.max_tasks = 2});
  QuotaUsage projected;
  projected.Add(Ask(1000));
  EXPECT_EQ(capped.Exceeds(Ask(1000), projected), QuotaLimit::kNone);
  projected.Add(Ask(1000));
  EXPECT_EQ(capped.Exceeds(Ask(1000), projected), QuotaLimit::kTasks);
  EXPECT_EQ(capped.Exceeds(Ask(1000)), QuotaLimit::kNone);  // nothing held yet
}

TEST(UserAccountTest, AResourceNotAskedForIsNotHeldBackByItsLimit) {
  // A limit lowered below what the user holds (a reload) holds back only
  // requests that ask for that resource.
  UserAccount a("ana", UserQuota{.max_cpus_milli = 1000, .max_gpus = 100, .max_mem_bytes = kGiB});
  a.Take(Ask(2000, 200, 2 * kGiB));
  EXPECT_EQ(a.Exceeds(Ask(0)), QuotaLimit::kNone);
  EXPECT_EQ(a.Exceeds(Ask(0, 0, 1)), QuotaLimit::kMemory);
  EXPECT_EQ(a.Exceeds(Ask(1)), QuotaLimit::kCpus);
  EXPECT_EQ(a.Exceeds(Ask(0, 1)), QuotaLimit::kGpus);
}

TEST(UserAccountTest, AGroupBoundsItsMembersTogether) {
  auto vision = std::make_shared<GroupAccount>();
  vision->name = "vision";
  vision->quota.max_gpus = 400;
  vision->quota.max_tasks = 3;
  UserAccount ana("ana", UserQuota{.max_gpus = 300}, {vision});
  UserAccount bob("bob", UserQuota{}, {vision});
  ana.Take(Ask(1000, 200));
  bob.Take(Ask(1000, 200));
  EXPECT_EQ(vision->used.gpus, 400);
  EXPECT_EQ(vision->used.tasks, 2u);
  // Ana's own limit has room (2/3) but the group's is full (4/4).
  EXPECT_EQ(ana.Exceeds(Ask(1000, 100)), QuotaLimit::kGpus);
  EXPECT_EQ(ana.Explain(Ask(1000, 100)), "quota: gpus 4/4 for group vision (ana)");
  EXPECT_EQ(ana.Exceeds(Ask(1000)), QuotaLimit::kNone);
  // The user's own limit is named before the group's.
  ana.Take(Ask(1000, 100));
  EXPECT_EQ(ana.Explain(Ask(1000, 100)), "quota: gpus 3/3 for ana");
  ana.Give(Ask(1000, 100));
  bob.Give(Ask(1000, 200));
  EXPECT_EQ(ana.Exceeds(Ask(1000, 100)), QuotaLimit::kNone);
  // A projected usage (Unpark taking tasks back) charges the group too:
  // ana holds 1 task, the group 1 of 3; two taken back make the group full.
  QuotaUsage projected = ana.used();
  projected.Add(Ask(1000));
  EXPECT_EQ(ana.Exceeds(Ask(1000), projected), QuotaLimit::kNone);
  projected.Add(Ask(1000));
  EXPECT_EQ(ana.Exceeds(Ask(1000), projected), QuotaLimit::kTasks);
  EXPECT_EQ(ana.Exceeds(Ask(1000)), QuotaLimit::kNone);
}

TEST(UserAccountTest, QueuedTasksAreAdmittedUpToTheLimitNamingWhoIsFull) {
  auto vision = std::make_shared<GroupAccount>();
  vision->name = "vision";
  vision->quota.max_queued = 12;
  UserAccount ana("ana", UserQuota{.max_queued = 10}, {vision});
  UserAccount bob("bob", UserQuota{}, {vision});
  EXPECT_TRUE(ana.AdmitQueued(10).ok());
  ana.AddQueued(8);
  Status s = ana.AdmitQueued(5);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "quota: queued tasks 8/10 for ana (this job adds 5)");
  EXPECT_TRUE(ana.AdmitQueued(2).ok());
  bob.AddQueued(3);
  EXPECT_EQ(vision->queued, 11);
  s = ana.AdmitQueued(2);
  EXPECT_EQ(s.message(), "quota: queued tasks 11/12 for group vision (ana; this job adds 2)");
  ana.AddQueued(-8);
  EXPECT_TRUE(bob.AdmitQueued(9).ok());
}

}  // namespace
}  // namespace drover::core
