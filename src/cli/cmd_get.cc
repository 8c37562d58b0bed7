// `drover get TASK [NAME...] [-o DIR]`: downloads a task's outputs (the files
// it left in $DROVER_OUTPUT_DIR) from the worker that holds them. The server
// names the holder and grants the download (GET /api/v1/tasks/ID/outputs);
// the bytes come from the worker's file service, checked against their
// SHA-256 before they take their name in DIR (a partial or corrupt download
// leaves nothing behind).
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "cli/cli11.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/ids.h"
#include "common/quantity.h"
#include "core/model.h"
#include "net/http_client.h"
#include "net/sha256.h"

namespace drover::cli {

namespace {

using nlohmann::json;

struct GetOptions {
  ClientFlags client;
  std::string task;
  std::vector<std::string> names;
  std::string out = ".";
};

Status MakeParents(const std::string& path) {
  for (size_t slash = path.find('/', 1); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    const std::string dir = path.substr(0, slash);
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      return Unavailable("cannot create " + dir + ": " + std::strerror(errno));
    }
  }
  return Status::Ok();
}

// Downloads one output (an entry of the outputs route) to `dest`.
Status DownloadOne(const net::ClientOptions& api, const json& file, const std::string& dest) {
  const std::string name = file.value("name", "");
  const std::string sha = file.value("sha256", "");
  const uint64_t size = file.value("size", uint64_t{0});
  const json sources = file.value("sources", json::array());
  if (sources.empty()) {
    return Unavailable(name + ": no worker serves it now (its holder is gone or serves no files)");
  }
  RETURN_IF_ERROR(MakeParents(dest));
  std::string failures;
  for (const json& source : sources) {
    net::ClientOptions o = api;
    o.local_socket.clear();
    o.alternates.clear();
    o.tls = true;
    o.host = source.value("host", "");
    o.port = source.value("port", uint16_t{0});
    o.fingerprint = source.value("fingerprint", "");
    net::ClientRequest request;
    request.target = "/v1/files/" + sha;
    request.headers["X-Drover-Grant"] = file.value("grant", "");
    request.headers["X-Drover-Requester"] = "client";
    const std::string part = dest + ".drover-part";
    FILE* f = std::fopen(part.c_str(), "wb");
    if (f == nullptr) return Unavailable("cannot create " + part + ": " + std::strerror(errno));
    net::Sha256 hash;
    uint64_t got = 0;
    Result<net::Response> r =
        net::HttpClient(o).Download(request, [&](std::string_view chunk) -> Status {
          got += chunk.size();
          if (got > size)
            return DataLoss("more bytes than the " + std::to_string(size) + " listed");
          hash.Update(chunk);
          if (std::fwrite(chunk.data(), 1, chunk.size(), f) != chunk.size()) {
            return Unavailable("cannot write " + part + ": " + std::strerror(errno));
          }
          return Status::Ok();
        });
    const bool closed = std::fclose(f) == 0;
    Status status = r.ok() ? net::StatusFromResponse(*r) : r.status();
    if (status.ok() && !closed) status = Unavailable("cannot write " + part);
    if (status.ok() && got != size) {
      status = DataLoss("got " + std::to_string(got) + " bytes of " + std::to_string(size));
    }
    if (status.ok()) {
      const std::string digest = hash.HexDigest();
      if (digest != sha) {
        status = DataLoss("sha256 mismatch: got " + digest.substr(0, 12) + "..., want " +
                          sha.substr(0, 12) + "...");
      }
    }
    if (status.ok() && std::rename(part.c_str(), dest.c_str()) != 0) {
      status = Unavailable("cannot rename " + part + ": " + std::strerror(errno));
    }
    if (status.ok()) return Status::Ok();
    std::remove(part.c_str());
    failures += (failures.empty() ? "" : "; ") + std::string("worker ") +
                std::to_string(source.value("worker", 0)) + ": " + status.ToString();
  }
  return Unavailable(name + ": " + failures);
}

int RunGet(const GetOptions& o) {
  Result<TaskId> id = ParseTaskId(o.task);
  if (!id.ok()) return ReportError(id.status(), /*usage_on_invalid=*/true);
  Result<ApiClient> api = Connect(o.client);
  if (!api.ok()) return ReportError(api.status());
  Result<json> listed = api->Get("/api/v1/tasks/" + id->ToString() + "/outputs");
  if (!listed.ok()) return ReportError(listed.status());
  const json outputs = listed->value("outputs", json::array());
  std::set<std::string> wanted(o.names.begin(), o.names.end());
  std::set<std::string> found;
  int status = kExitOk;
  for (const json& file : outputs) {
    const std::string name = file.value("name", "");
    if (!wanted.empty() && !wanted.count(name)) continue;
    if (std::string problem = core::OutputNameProblem(name); !problem.empty()) {
      status = ReportError(InvalidArgument("the server listed an output whose name " + problem));
      continue;
    }
    found.insert(name);
    const std::string dest = o.out + "/" + name;
    Status got = DownloadOne(api->options(), file, dest);
    if (!got.ok()) {
      status = ReportError(got.WithContext("drover get " + id->ToString()));
      continue;
    }
    std::cout << dest << " (" << FormatBytes(file.value("size", uint64_t{0})) << ")\n";
  }
  for (const std::string& name : wanted) {
    if (!found.count(name)) {
      status = ReportError(NotFound("task " + id->ToString() + " has no output named " + name));
    }
  }
  if (outputs.empty()) {
    std::cerr << "drover: task " << id->ToString() << " (" << listed->value("state", "")
              << ") has no outputs\n";
  }
  return status;
}

}  // namespace

void AddGetCommand(CLI::App& root, int& exit_code) {
  auto o = std::make_shared<GetOptions>();
  CLI::App* get =
      root.add_subcommand("get", "Download a task's outputs (files it left in $DROVER_OUTPUT_DIR)");
  AddClientFlags(*get, o->client, /*with_json=*/false);
  get->add_option("task", o->task, "Task id, e.g. 12.3")->required();
  get->add_option("names", o->names, "Only these outputs (names as `drover status TASK` lists)");
  get->add_option("-o,--output", o->out, "Directory to write them in (made if missing)")
      ->capture_default_str();
  get->callback([o, &exit_code] { exit_code = RunGet(*o); });
}

}  // namespace drover::cli
