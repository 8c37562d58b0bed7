// The JSON of GET /api/v1/quotas[/USER] (src/server/README.md).
#include "server/quota_api.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/scheduler.h"

namespace drover::server {
namespace {

core::QuotaReport Report() {
  core::QuotaReport report;
  core::QuotaLine ana;
  ana.name = "ana";
  ana.max_gpus = 200;
  ana.max_mem_bytes = 1 << 30;
  ana.use.gpus = 150;
  ana.use.cpus_milli = 500;
  ana.use.tasks = 2;
  ana.use.queued = 3;
  ana.related = {"vision"};
  report.users.push_back(ana);
  core::QuotaLine vision;
  vision.name = "vision";
  vision.max_queued = 10;
  vision.use.queued = 3;
  vision.related = {"ana", "bob"};
  report.groups.push_back(vision);
  return report;
}

TEST(QuotaApiTest, LimitsSetAndUseInTheJobFilesUnits) {
  const nlohmann::json j = QuotaReportJson(Report(), core::UserQuota{.max_tasks = 5});
  EXPECT_EQ(j["default"], (nlohmann::json{{"tasks", 5}}));
  ASSERT_EQ(j["users"].size(), 1u);
  EXPECT_EQ(j["users"][0], nlohmann::json::parse(R"({
      "name": "ana", "default": false, "groups": ["vision"],
      "limits": {"gpus": "2", "mem_bytes": 1073741824},
      "use": {"cpus": "0.5", "gpus": "1.5", "mem_bytes": 0, "tasks": 2, "queued": 3}})"));
  EXPECT_EQ(j["groups"][0]["members"], (nlohmann::json{"ana", "bob"}));
  EXPECT_EQ(j["groups"][0]["limits"], (nlohmann::json{{"queued", 10}}));
}

TEST(QuotaApiTest, OneUserWithItsGroupsOrTheDefaultLimitsWhenItHasNoLine) {
  nlohmann::json j = QuotaReportJson(Report(), core::UserQuota{.max_tasks = 5}, "ana");
  ASSERT_EQ(j["users"].size(), 1u);
  EXPECT_EQ(j["users"][0]["name"], "ana");
  EXPECT_EQ(j["groups"].size(), 1u);
  // Bob holds nothing and has no line: the default's limits, zero use, and
  // the group the policy puts him in.
  j = QuotaReportJson(Report(), core::UserQuota{.max_tasks = 5}, "bob");
  ASSERT_EQ(j["users"].size(), 1u);
  EXPECT_EQ(j["users"][0]["default"], true);
  EXPECT_EQ(j["users"][0]["limits"], (nlohmann::json{{"tasks", 5}}));
  EXPECT_EQ(j["users"][0]["use"]["tasks"], 0);
  EXPECT_EQ(j["users"][0]["groups"], (nlohmann::json{"vision"}));
  EXPECT_EQ(j["groups"].size(), 1u);
  j = QuotaReportJson(Report(), core::UserQuota{}, "carl");
  EXPECT_EQ(j["groups"].size(), 0u);
}

}  // namespace
}  // namespace drover::server
