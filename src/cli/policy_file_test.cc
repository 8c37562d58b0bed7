// The user policy tables of a config file ([quota.USER], [group.NAME],
// [fairshare]) as a core::UserPolicy, every mistake refused with its place,
// and --quota lines over them.
#include "cli/policy_file.h"

#include <gtest/gtest.h>

#include "common/quantity.h"

namespace drover::cli {
namespace {

Result<core::UserPolicy> Parse(const std::string& text) {
  Result<std::vector<proto::ConfigSection>> sections = proto::ParseConfigToml(text, "f.toml");
  if (!sections.ok()) return sections.status();
  return PolicyFromSections(*sections, "f.toml");
}

TEST(PolicyFileTest, TablesBecomeQuotasGroupsAndFairShare) {
  Result<core::UserPolicy> p = Parse(
      "[server]\nport = 7210\n"
      "[quota.\"*\"]\ngpus = 4\n"
      "[quota.ana]\ncpus = 8\ngpus = 0.5\nmem = \"64GiB\"\ntasks = 10\nqueued = 1000\n"
      "[quota.bob]\ncpus = \"500m\"\n"
      "[group.vision]\nmembers = [\"ana\", \"bob\"]\ngpus = 6\nshare_outputs = true\n"
      "share_cache = true\n"
      "[fairshare]\nhalf_life = \"1d\"\ngpu_weight = 10.0\nenabled = false\n"
      "[fairshare.shares]\nana = 2\nvision = 1.5\n");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->default_quota, core::UserQuota{.max_gpus = 400});
  EXPECT_EQ(p->quotas.at("ana"), (core::UserQuota{.max_cpus_milli = 8000,
                                                  .max_gpus = 50,
                                                  .max_tasks = 10,
                                                  .max_mem_bytes = 64 * kGiB,
                                                  .max_queued = 1000}));
  EXPECT_EQ(p->quotas.at("bob"), core::UserQuota{.max_cpus_milli = 500});
  EXPECT_EQ(p->groups.at("vision"), (std::vector<std::string>{"ana", "bob"}));
  EXPECT_EQ(p->group_quotas.at("vision"), core::UserQuota{.max_gpus = 600});
  EXPECT_EQ(p->fair_share.half_life, Seconds(24 * 3600));
  EXPECT_EQ(p->fair_share.gpu_weight, 10.0);
  EXPECT_FALSE(p->fair_share.enabled);
  EXPECT_EQ(p->sharing_groups, std::set<std::string>{"vision"});
  EXPECT_EQ(p->cache_sharing_groups, std::set<std::string>{"vision"});
  EXPECT_EQ(p->fair_share.shares, (std::map<std::string, double>{{"ana", 2}, {"vision", 1.5}}));
}

TEST(PolicyFileTest, AFileWithoutPolicyTablesGivesTheDefaults) {
  Result<core::UserPolicy> p = Parse("[server]\nport = 7210\n");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, core::UserPolicy{});
}

TEST(PolicyFileTest, EveryMistakeIsRefusedWithFileLineAndColumn) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[quota.ana]\ngpu = 2\n", "f.toml:2:1: [quota.ana] gpu: unknown key (cpus, gpus, mem"},
      {"[quota.ana]\nmem = \"64G\"\n", "f.toml:2:1: [quota.ana] mem: "},
      {"[quota.ana]\ntasks = \"ten\"\n", "f.toml:2:1: [quota.ana] tasks: expected a whole number"},
      {"[quota.ana]\ntasks = 1.5\n", "f.toml:2:1: [quota.ana] tasks: expected a whole number"},
      {"[quota.ana]\ngpus = true\n", "f.toml:2:1: [quota.ana] gpus: expected a number"},
      {"[quota.ana]\ngpus = 1.5\n", "f.toml:2:1: [quota.ana] gpus: "},
      {"[quota]\ngpus = 2\n", "f.toml:2:1: [quota] gpus: a user's limits go in their own table"},
      {"[group]\ngpus = 2\n", "f.toml:2:1: [group] gpus: a group's keys go in its own table"},
      {"[group.g]\ngpus = 2\n", "f.toml:1:8: [group.g]: a group needs members"},
      {"[group.g]\nmembers = 3\n", "f.toml:2:1: [group.g] members: expected an array"},
      {"[group.g]\nmembers = [\"ana\", 3]\n",
       "f.toml:2:1: [group.g] members: expected an array of user names (strings)"},
      {"[group.a]\nmembers = [\"ana\"]\n[group.b]\nmembers = [\"ana\"]\n",
       "f.toml:4:1: [group.b] members: ana is already a member of group a (f.toml:2)"},
      {"[group.g]\nmembers = [\"ana\"]\nshare_outputs = \"yes\"\n",
       "f.toml:3:1: [group.g] share_outputs: expected true or false"},
      {"[group.g]\nmembers = [\"ana\"]\nshare_cache = true\n",
       "f.toml:1:8: [group.g]: share_cache = true needs share_outputs = true"},
      {"[fairshare]\nhalf_life = \"0s\"\n", "f.toml:2:1: [fairshare] half_life: must be above 0"},
      {"[fairshare]\nweight = 2\n", "f.toml:2:1: [fairshare] weight: unknown key"},
      {"[fairshare.shares]\nana = 0\n",
       "f.toml:2:1: [fairshare.shares] ana: expected a number above 0"},
      {"[fairshare.other]\nana = 1\n", "f.toml:1:12: [fairshare.other]: unknown table"},
  };
  for (const auto& [text, want] : cases) {
    Result<core::UserPolicy> p = Parse(text);
    ASSERT_FALSE(p.ok()) << text;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(p.status().message().substr(0, want.size()), want) << p.status().message();
  }
}

TEST(PolicyFileTest, QuotaFlagsWinForTheUsersTheyName) {
  Result<core::UserPolicy> p = Parse(
      "[quota.\"*\"]\ngpus = 4\n[quota.ana]\ngpus = 2\n"
      "[quota.bob]\ngpus = 1\n");
  ASSERT_TRUE(p.ok());
  Result<Quotas> flags = ParseQuotas({"ana:tasks=3"});
  ASSERT_TRUE(flags.ok());
  core::UserPolicy merged = WithQuotaFlags(*p, *flags);
  EXPECT_EQ(merged.quotas.at("ana"), core::UserQuota{.max_tasks = 3});  // the flag's, whole
  EXPECT_EQ(merged.quotas.at("bob"), core::UserQuota{.max_gpus = 100});
  EXPECT_EQ(merged.default_quota, core::UserQuota{.max_gpus = 400});  // no "*" flag
  flags = ParseQuotas({"*:cpus=2"});
  EXPECT_EQ(WithQuotaFlags(*p, *flags).default_quota, core::UserQuota{.max_cpus_milli = 2000});
}

TEST(PolicyFileTest, AReloadIsDescribedByWhatChanged) {
  core::UserPolicy before;
  before.quotas["ana"] = core::UserQuota{.max_gpus = 200};
  core::UserPolicy after = before;
  EXPECT_EQ(DescribePolicy(before, after), "1 user, 0 groups; nothing changed");
  after.quotas["ana"].max_gpus = 300;
  after.quotas["bob"] = core::UserQuota{.max_tasks = 1};
  after.default_quota.max_gpus = 100;
  after.groups["vision"] = {"ana"};
  after.group_quotas["vision"] = core::UserQuota{.max_gpus = 400};
  EXPECT_EQ(DescribePolicy(before, after),
            "3 users, 1 group; changed: ana, bob, *, group vision, members of vision");
}

}  // namespace
}  // namespace drover::cli
