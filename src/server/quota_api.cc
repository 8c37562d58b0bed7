#include "server/quota_api.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/quantity.h"
#include "net/json_text.h"

namespace drover::server {

namespace {

using nlohmann::json;

json LimitsJson(int64_t cpus_milli, int64_t gpus, uint64_t mem_bytes, uint32_t tasks,
                uint64_t queued) {
  json j = json::object();
  if (cpus_milli != 0) j["cpus"] = FormatCpus(cpus_milli);
  if (gpus != 0) j["gpus"] = FormatGpus(gpus);
  if (mem_bytes != 0) j["mem_bytes"] = mem_bytes;
  if (tasks != 0) j["tasks"] = tasks;
  if (queued != 0) j["queued"] = queued;
  return j;
}

}  // namespace

json QuotaLineJson(const core::QuotaLine& line, bool group) {
  json j = {
      {"name", line.name},
      {"limits", LimitsJson(line.max_cpus_milli, line.max_gpus, line.max_mem_bytes, line.max_tasks,
                            line.max_queued)},
      {"use",
       {{"cpus", FormatCpus(line.use.cpus_milli)},
        {"gpus", FormatGpus(line.use.gpus)},
        {"mem_bytes", line.use.mem_bytes},
        {"tasks", line.use.tasks},
        {"queued", line.use.queued}}},
  };
  if (group) {
    j["members"] = line.related;
  } else {
    j["default"] = !line.own;
    j["groups"] = line.related;
  }
  return j;
}

json QuotaReportJson(const core::QuotaReport& report, const core::UserQuota& everyone,
                     const std::string& user) {
  json users = json::array();
  json groups = json::array();
  std::vector<std::string> wanted_groups;
  for (const core::QuotaLine& line : report.users) {
    if (!user.empty() && line.name != user) continue;
    users.push_back(QuotaLineJson(line, false));
    wanted_groups = line.related;
  }
  if (!user.empty() && users.empty()) {
    // Holding nothing and without a line of its own: the default's limits.
    core::QuotaLine line;
    line.name = user;
    line.own = false;
    line.max_cpus_milli = everyone.max_cpus_milli;
    line.max_gpus = everyone.max_gpus;
    line.max_mem_bytes = everyone.max_mem_bytes;
    line.max_tasks = everyone.max_tasks;
    line.max_queued = everyone.max_queued;
    for (const core::QuotaLine& g : report.groups) {
      if (std::find(g.related.begin(), g.related.end(), user) != g.related.end()) {
        line.related.push_back(g.name);
      }
    }
    wanted_groups = line.related;
    users.push_back(QuotaLineJson(line, false));
  }
  for (const core::QuotaLine& line : report.groups) {
    if (!user.empty() &&
        std::find(wanted_groups.begin(), wanted_groups.end(), line.name) == wanted_groups.end()) {
      continue;
    }
    groups.push_back(QuotaLineJson(line, true));
  }
  return {{"users", users},
          {"groups", groups},
          {"default", LimitsJson(everyone.max_cpus_milli, everyone.max_gpus, everyone.max_mem_bytes,
                                 everyone.max_tasks, everyone.max_queued)}};
}

void AddQuotaRoutes(net::Server& server, CoreDriver& driver) {
  auto answer = [&driver](const std::string& user) {
    const core::Scheduler& sched = driver.scheduler();
    return net::JsonResponse(
        net::JsonText(QuotaReportJson(sched.Quotas(), sched.config().users.default_quota, user)));
  };
  server.Route("GET", "/api/v1/quotas",
               [answer](const net::Request&, net::Responder done) { done(answer("")); });
  server.Route("GET", "/api/v1/quotas/{user}",
               [answer](const net::Request& r, net::Responder done) {
                 done(answer(r.path_params.at("user")));
               });
}

}  // namespace drover::server
