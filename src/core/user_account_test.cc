#include "core/user_account.h"

#include <gtest/gtest.h>

namespace drover::core {
namespace {

ResourceRequest Ask(int64_t cpus_milli, int64_t gpus = 0) {
  ResourceRequest r;
  r.cpus_milli = cpus_milli;
  r.gpus = gpus;
  return r;
}

TEST(UserAccountTest, EachLimitIsCheckedAndNamedGpusFirst) {
  UserAccount a("u1", UserQuota{.max_cpus_milli = 4000, .max_gpus = 200, .max_tasks = 3});
  EXPECT_EQ(a.Exceeds(Ask(1000, 100)), QuotaLimit::kNone);
  a.Take(Ask(1000, 100));
  a.Take(Ask(1000, 100));
  // Both GPUs held: a GPU request passes the GPU limit, a CPU-only one fits.
  EXPECT_EQ(a.Exceeds(Ask(1000, 50)), QuotaLimit::kGpus);
  EXPECT_EQ(a.Explain(QuotaLimit::kGpus), "quota: user u1 at 2/2 gpus");
  EXPECT_EQ(a.Exceeds(Ask(1000)), QuotaLimit::kNone);
  EXPECT_EQ(a.Exceeds(Ask(3000)), QuotaLimit::kCpus);
  EXPECT_EQ(a.Explain(QuotaLimit::kCpus), "quota: user u1 at 2/4 cpus");
  a.Take(Ask(500));
  EXPECT_EQ(a.Exceeds(Ask(500)), QuotaLimit::kTasks);
  EXPECT_EQ(a.Explain(QuotaLimit::kTasks), "quota: user u1 at 3/3 tasks");
  // What is given back is free again; the usage never goes below zero.
  a.Give(Ask(500));
  a.Give(Ask(1000, 100));
  a.Give(Ask(1000, 100));
  EXPECT_EQ(a.used().tasks, 0u);
  EXPECT_EQ(a.used().cpus_milli, 0);
  EXPECT_EQ(a.used().gpus, 0);
  EXPECT_EQ(a.Exceeds(Ask(4000, 200)), QuotaLimit::kNone);
}

TEST(UserAccountTest, ZeroIsNoLimitAndAProjectedUsageIsChecked) {
  UserAccount open("u2", UserQuota{});
  QuotaUsage lots{.cpus_milli = 1'000'000, .gpus = 10'000, .tasks = 100'000};
  EXPECT_EQ(open.Exceeds(Ask(64'000, 800), lots), QuotaLimit::kNone);
  UserAccount capped("u3", UserQuota{.max_tasks = 2});
  QuotaUsage projected;
  projected.Add(Ask(1000));
  EXPECT_EQ(capped.Exceeds(Ask(1000), projected), QuotaLimit::kNone);
  projected.Add(Ask(1000));
  EXPECT_EQ(capped.Exceeds(Ask(1000), projected), QuotaLimit::kTasks);
  EXPECT_EQ(capped.Exceeds(Ask(1000)), QuotaLimit::kNone);  // nothing held yet
}

}  // namespace
}  // namespace drover::core
