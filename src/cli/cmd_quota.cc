// `drover quota [USER]`: each user's and group's quota limits beside what
// they hold and queue now (GET /api/v1/quotas[/USER]), or the JSON with
// --json.
//
//   USER  IN USE/LIMIT               QUEUED  GROUPS
//   ana   gpus 2/2  cpus 2/8  tasks 2/10  1/1000  vision
//   bob*  gpus 1  cpus 1  tasks 1       0       vision
//   GROUP   IN USE/LIMIT             QUEUED  MEMBERS
//   vision  gpus 3/6  cpus 3  tasks 3   1       ana, bob
//
// A resource with a limit shows use/limit, one without only its use;
// memory only when limited or used. `*`: the user has no line of its own
// and the default limits ([quota."*"]) apply.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/cli11.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/table.h"
#include "common/quantity.h"

namespace drover::cli {

namespace {

struct QuotaOptions {
  ClientFlags client;
  std::string user;
};

std::string Joined(const nlohmann::json& names) {
  std::string out;
  for (const nlohmann::json& n : names) out += (out.empty() ? "" : ", ") + n.get<std::string>();
  return out.empty() ? "-" : out;
}

// "gpus 2/2  cpus 2/8  memory 1 GiB  tasks 2/10" from a line's use and limits.
std::string UseAgainstLimits(const nlohmann::json& line) {
  const nlohmann::json& use = line["use"];
  const nlohmann::json& limits = line["limits"];
  std::string out;
  auto add = [&out](const std::string& name, const std::string& used, const std::string& limit) {
    out += (out.empty() ? "" : "  ") + name + " " + used + (limit.empty() ? "" : "/" + limit);
  };
  add("gpus", use.value("gpus", "0"), limits.value("gpus", ""));
  add("cpus", use.value("cpus", "0"), limits.value("cpus", ""));
  const uint64_t mem_used = use.value("mem_bytes", uint64_t{0});
  const uint64_t mem_limit = limits.value("mem_bytes", uint64_t{0});
  if (mem_used != 0 || mem_limit != 0) {
    add("memory", FormatBytes(mem_used), mem_limit == 0 ? "" : FormatBytes(mem_limit));
  }
  add("tasks", std::to_string(use.value("tasks", 0u)),
      limits.contains("tasks") ? std::to_string(limits["tasks"].get<uint64_t>()) : "");
  return out;
}

std::string Queued(const nlohmann::json& line) {
  std::string out = std::to_string(line["use"].value("queued", uint64_t{0}));
  if (line["limits"].contains("queued")) {
    out += "/" + std::to_string(line["limits"]["queued"].get<uint64_t>());
  }
  return out;
}

int RunQuota(const QuotaOptions& o) {
  Result<ApiClient> api = Connect(o.client);
  if (!api.ok()) return ReportError(api.status());
  Result<nlohmann::json> answer =
      api->Get(o.user.empty() ? "/api/v1/quotas" : "/api/v1/quotas/" + o.user);
  if (!answer.ok()) return ReportError(answer.status());
  if (o.client.json) {
    std::cout << answer->dump(2) << std::endl;
    return kExitOk;
  }
  const nlohmann::json& users = (*answer)["users"];
  const nlohmann::json& groups = (*answer)["groups"];
  if (users.empty() && groups.empty()) {
    std::cout << "no quotas set and nothing held or queued" << std::endl;
    return kExitOk;
  }
  bool defaults = false;
  if (!users.empty()) {
    Table t({"USER", "IN USE/LIMIT", "QUEUED", "GROUPS"});
    for (const nlohmann::json& line : users) {
      const bool by_default = line.value("default", false);
      defaults = defaults || by_default;
      t.AddRow({line["name"].get<std::string>() + (by_default ? "*" : ""), UseAgainstLimits(line),
                Queued(line), Joined(line["groups"])});
    }
    std::cout << t.Render();
  }
  if (!groups.empty()) {
    Table t({"GROUP", "IN USE/LIMIT", "QUEUED", "MEMBERS"});
    for (const nlohmann::json& line : groups) {
      t.AddRow({line["name"].get<std::string>(), UseAgainstLimits(line), Queued(line),
                Joined(line["members"])});
    }
    std::cout << t.Render();
  }
  if (defaults) std::cout << "*: no limits of their own; the default ones apply" << std::endl;
  return kExitOk;
}

}  // namespace

void AddQuotaCommand(CLI::App& root, int& exit_code) {
  auto o = std::make_shared<QuotaOptions>();
  CLI::App* quota = root.add_subcommand(
      "quota", "Quota limits and what each user and group holds and queues now");
  AddClientFlags(*quota, o->client, /*with_json=*/true);
  quota->add_option("USER", o->user, "Only this user (and its groups)");
  quota->callback([o, &exit_code] { exit_code = RunQuota(*o); });
}

}  // namespace drover::cli
