// `drover alloc add slurm ...`, `drover alloc list`, `drover alloc remove
// ID`: the server's allocation queues, workers it borrows from Slurm
// (server/alloc.h, docs/deploy.md "Workers from Slurm").
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/cli11.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/table.h"

namespace drover::cli {

namespace {

struct AllocFlags {
  ClientFlags client;
  std::string kind;
  uint32_t max_workers = 0;
  std::string time_limit;
  std::string idle_timeout = "5m";
  std::string server_address;
  std::vector<std::string> sbatch_args;
  std::vector<std::string> worker_args;
  std::string queue;  // remove
};

int RunAllocAdd(const AllocFlags& f) {
  nlohmann::json body{{"kind", f.kind},
                      {"max_workers", f.max_workers},
                      {"time_limit", f.time_limit},
                      {"idle_timeout", f.idle_timeout},
                      {"sbatch_args", f.sbatch_args},
                      {"worker_args", f.worker_args}};
  if (!f.server_address.empty()) body["server_address"] = f.server_address;
  Result<ApiClient> api = Connect(f.client);
  if (!api.ok()) return ReportError(api.status());
  Result<nlohmann::json> answer = api->Post("/api/v1/allocs", body.dump());
  if (!answer.ok()) return ReportError(answer.status());
  if (f.client.json) {
    std::cout << answer->dump(2) << std::endl;
  } else {
    std::cout << "allocation queue " << answer->value("id", 0) << ": up to " << f.max_workers
              << " Slurm allocations of " << f.time_limit << " while work waits (drover alloc list)"
              << std::endl;
  }
  return kExitOk;
}

std::string AllocText(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "-";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

int RunAllocList(const AllocFlags& f) {
  Result<ApiClient> api = Connect(f.client);
  if (!api.ok()) return ReportError(api.status());
  Result<nlohmann::json> answer = api->Get("/api/v1/allocs");
  if (!answer.ok()) return ReportError(answer.status());
  if (f.client.json) {
    std::cout << answer->dump(2) << std::endl;
    return kExitOk;
  }
  const nlohmann::json queues = answer->value("queues", nlohmann::json::array());
  if (queues.empty()) {
    std::cout << "no allocation queues (drover alloc add slurm ...)" << std::endl;
    return kExitOk;
  }
  for (const nlohmann::json& q : queues) {
    std::string args;
    for (const auto& a : q.value("sbatch_args", nlohmann::json::array())) {
      args += " " + a.get<std::string>();
    }
    std::cout << "queue " << AllocText(q, "id") << ": " << AllocText(q, "kind") << ", at most "
              << AllocText(q, "max_workers") << " workers, " << AllocText(q, "time_limit")
              << " each (a worker lives " << AllocText(q, "worker_lifetime") << ", leaves after "
              << AllocText(q, "idle_timeout") << " idle)" << (args.empty() ? "" : ", sbatch" + args)
              << "\n";
    if (q.value("failures", 0) > 0) {
      std::cout << "  submission failed " << AllocText(q, "failures")
                << " time(s) in a row: " << AllocText(q, "last_error") << "; next try at "
                << AllocText(q, "retry_at") << "\n";
    }
    Table table({"JOB", "STATE", "WORKER", "SUBMITTED", "ENDED"});
    for (const nlohmann::json& a : q.value("allocations", nlohmann::json::array())) {
      table.AddRow({AllocText(a, "job"), AllocText(a, "slurm_state"), AllocText(a, "worker"),
                    AllocText(a, "submitted_at"), AllocText(a, "ended_at")});
    }
    if (table.rows() == 0) {
      std::cout << "  no allocations yet\n";
    } else {
      std::cout << table.Render();
    }
  }
  std::cout << std::flush;
  return kExitOk;
}

int RunAllocRemove(const AllocFlags& f) {
  Result<ApiClient> api = Connect(f.client);
  if (!api.ok()) return ReportError(api.status());
  Result<nlohmann::json> answer = api->Post("/api/v1/allocs/" + f.queue + "/remove");
  if (!answer.ok()) return ReportError(answer.status());
  std::cout << (f.client.json
                    ? answer->dump(2)
                    : "removed allocation queue " + f.queue + "; its allocations are canceled")
            << std::endl;
  return kExitOk;
}

}  // namespace

void AddAllocCommand(CLI::App& root, int& exit_code) {
  auto f = std::make_shared<AllocFlags>();
  CLI::App* alloc = root.add_subcommand(
      "alloc", "Workers borrowed from Slurm: allocation queues (add, list, remove)");
  alloc->require_subcommand(1);

  CLI::App* add = alloc->add_subcommand(
      "add", "Let the server submit `drover worker` allocations to Slurm while work waits");
  AddClientFlags(*add, f->client, /*with_json=*/true);
  add->add_option("kind", f->kind, "The scheduler to borrow from: slurm")
      ->required()
      ->check(CLI::IsMember({"slurm"}));
  add->add_option("sbatch_args", f->sbatch_args, "Arguments for sbatch, after --");
  add->add_option("--max-workers", f->max_workers, "Allocations (one worker each) at once")
      ->required();
  add->add_option("--time-limit", f->time_limit,
                  "Each allocation's time limit (sbatch --time), e.g. 1h; its worker takes only "
                  "tasks whose timeout ends within it")
      ->required();
  add->add_option("--idle-timeout", f->idle_timeout,
                  "An allocated worker with nothing to do leaves after this long")
      ->capture_default_str();
  add->add_option("--server-address", f->server_address,
                  "HOST:PORT the allocated workers reach the server at (default: this server's "
                  "host name and port)");
  add->add_option("--worker-arg", f->worker_args,
                  "A flag for the allocated `drover worker`, e.g. --worker-arg=--label=site=hpc "
                  "(repeatable)")
      ->allow_extra_args(false);  // one value each: what follows is not its
  add->callback([f, &exit_code] { exit_code = RunAllocAdd(*f); });

  CLI::App* list = alloc->add_subcommand("list", "The allocation queues and their allocations");
  AddClientFlags(*list, f->client, /*with_json=*/true);
  list->callback([f, &exit_code] { exit_code = RunAllocList(*f); });

  CLI::App* remove =
      alloc->add_subcommand("remove", "Remove an allocation queue and cancel its allocations");
  AddClientFlags(*remove, f->client, /*with_json=*/true);
  remove->add_option("queue", f->queue, "Queue id (see drover alloc list)")->required();
  remove->callback([f, &exit_code] { exit_code = RunAllocRemove(*f); });
}

}  // namespace drover::cli
