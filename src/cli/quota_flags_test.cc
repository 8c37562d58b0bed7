#include "cli/quota_flags.h"

#include <gtest/gtest.h>

namespace drover::cli {
namespace {

TEST(QuotaFlagsTest, PerUserAndEveryone) {
  Result<Quotas> q = ParseQuotas({"ana:cpus=8,gpus=0.5,tasks=10", "*:gpus=4", "bo:tasks=1"});
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  const core::UserQuota& ana = q->per_user.at("ana");
  EXPECT_EQ(ana.max_cpus_milli, 8000);
  EXPECT_EQ(ana.max_gpus, 50);
  EXPECT_EQ(ana.max_tasks, 10u);
  EXPECT_EQ(q->per_user.at("bo").max_tasks, 1u);
  EXPECT_EQ(q->per_user.at("bo").max_gpus, 0);  // not limited
  EXPECT_EQ(q->everyone.max_gpus, 400);
  EXPECT_TRUE(ParseQuotas({})->per_user.empty());
}

TEST(QuotaFlagsTest, ErrorsNameTheFlagAndWhatIsWrong) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"ana", "expected USER:LIMIT=VALUE"},
      {"ana:", "expected USER:LIMIT=VALUE"},
      {"ana:gpu=2", "unknown limit \"gpu\""},
      {"ana:gpus=two", "gpus: "},
      {"ana:tasks=-1", "tasks: expected a whole number"},
      {"ana:cpus", "expected LIMIT=VALUE"},
  };
  for (const auto& [flag, want] : cases) {
    Result<Quotas> q = ParseQuotas({flag});
    ASSERT_FALSE(q.ok()) << flag;
    EXPECT_EQ(q.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(q.status().message().rfind("--quota " + flag + ": ", 0), 0u) << q.status().message();
    EXPECT_NE(q.status().message().find(want), std::string::npos) << q.status().message();
  }
  EXPECT_FALSE(ParseQuotas({"ana:tasks=1", "ana:gpus=1"}).ok());
  EXPECT_FALSE(ParseQuotas({"*:tasks=1", "*:gpus=1"}).ok());
}

}  // namespace
}  // namespace drover::cli
