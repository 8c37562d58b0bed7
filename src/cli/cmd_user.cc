// `drover user add NAME [--role R] [--out FILE] [--address HOST:PORT]`,
// `drover user list`, `drover user revoke NAME`, `drover user rotate NAME`
// (admins; server/user_api.h), `drover whoami`, and `drover audit` (the
// audit log, admins).
//
// add and rotate write the new token into an access file for that person
// (net/access_file.h, mode 0600): the server's address and certificate as
// this command reached it (--address for the one they should use, e.g. the
// server's LAN name when this command ran on the server itself), and the
// token, which the server shows only this once.
#include <cstdint>
#include <iostream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/cli11.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/connection.h"
#include "cli/table.h"
#include "common/time.h"
#include "net/access_file.h"
#include "net/http_types.h"

namespace drover::cli {

namespace {

using json = nlohmann::json;

struct UserOptions {
  ClientFlags client;
  std::string name;
  std::string role = "user";
  std::string out;
  std::string address;
};

std::string Str(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

// Writes the access file for an answer {"name","role","token"} and says how
// to use it.
int WriteTokenFile(const UserOptions& o, const json& answer) {
  Result<net::ClientOptions> conn = ResolveConnection(o.client.connection);
  if (!conn.ok()) return ReportError(conn.status());
  net::AccessInfo info;
  info.address = o.address.empty() ? conn->host + ":" + std::to_string(conn->port) : o.address;
  info.tls = conn->tls;
  info.fingerprint = conn->fingerprint;
  info.token = Str(answer, "token");
  const std::string path = o.out.empty() ? Str(answer, "name") + ".access.json" : o.out;
  if (Status s = net::WriteAccessFile(path, info); !s.ok()) {
    std::cerr << "drover: the token for " << Str(answer, "name") << " was made, but " << s.message()
              << "\n  the token (shown once): " << info.token << std::endl;
    return kExitFailure;
  }
  if (o.client.json) {
    std::cout << json{{"name", Str(answer, "name")},
                      {"role", Str(answer, "role")},
                      {"access_file", path}}
                     .dump(2)
              << std::endl;
    return kExitOk;
  }
  std::cout << "user " << Str(answer, "name") << " (" << Str(answer, "role") << "): access file "
            << path << " (server " << info.address << ")\n";
  if (Str(answer, "role") == "worker") {
    // A worker's token joins a machine, and does nothing else.
    std::cout << "  copy it to the machine that joins, and run there `drover worker --access FILE`"
              << std::endl;
    return kExitOk;
  }
  std::cout << "  give it to " << Str(answer, "name")
            << ", who uses it with `drover COMMAND --access FILE`,\n"
            << "  DROVER_ACCESS=FILE, or as ~/.local/state/drover/access.json" << std::endl;
  return kExitOk;
}

int RunAdd(const UserOptions& o) {
  Result<ApiClient> api = Connect(o.client);
  if (!api.ok()) return ReportError(api.status());
  Result<json> answer = api->Post("/api/v1/users", json{{"name", o.name}, {"role", o.role}}.dump());
  if (!answer.ok()) return ReportError(answer.status());
  return WriteTokenFile(o, *answer);
}

int RunRotate(const UserOptions& o) {
  Result<ApiClient> api = Connect(o.client);
  if (!api.ok()) return ReportError(api.status());
  Result<json> answer = api->Post("/api/v1/users/" + o.name + "/rotate");
  if (!answer.ok()) return ReportError(answer.status());
  return WriteTokenFile(o, *answer);
}

int RunRevoke(const UserOptions& o) {
  Result<ApiClient> api = Connect(o.client);
  if (!api.ok()) return ReportError(api.status());
  Result<json> answer = api->Post("/api/v1/users/" + o.name + "/revoke");
  if (!answer.ok()) return ReportError(answer.status());
  if (o.client.json) {
    std::cout << answer->dump(2) << std::endl;
  } else {
    std::cout << "revoked " << o.name << " (" << Str(*answer, "closed")
              << " open connection(s) closed)" << std::endl;
  }
  return kExitOk;
}

int RunList(const UserOptions& o) {
  Result<ApiClient> api = Connect(o.client);
  if (!api.ok()) return ReportError(api.status());
  Result<json> answer = api->Get("/api/v1/users");
  if (!answer.ok()) return ReportError(answer.status());
  if (o.client.json) {
    std::cout << answer->dump(2) << std::endl;
    return kExitOk;
  }
  Table table({"NAME", "ROLE", "CREATED", "CHANGED", "STATE"});
  for (const json& u : answer->value("users", json::array())) {
    table.AddRow({Str(u, "name"), Str(u, "role"), Str(u, "created"), Str(u, "changed"),
                  u.value("revoked", false) ? "revoked" : "active"});
  }
  std::cout << table.Render();
  return kExitOk;
}

int RunWhoami(const ClientFlags& client) {
  Result<ApiClient> api = Connect(client);
  if (!api.ok()) return ReportError(api.status());
  Result<json> answer = api->Get("/api/v1/whoami");
  if (!answer.ok()) return ReportError(answer.status());
  if (client.json) {
    std::cout << answer->dump(2) << std::endl;
  } else {
    std::cout << Str(*answer, "name") << " (" << Str(*answer, "role") << ")" << std::endl;
  }
  return kExitOk;
}

struct AuditOptions {
  ClientFlags client;
  std::string user;
  int64_t after = 0;
  int64_t limit = 100;
};

int RunAudit(const AuditOptions& o) {
  Result<ApiClient> api = Connect(o.client);
  if (!api.ok()) return ReportError(api.status());
  std::string target = "/api/v1/audit?limit=" + std::to_string(o.limit);
  if (o.after > 0) target += "&after=" + std::to_string(o.after);
  if (!o.user.empty()) target += "&user=" + net::PercentEncode(o.user);
  Result<json> answer = api->Get(target);
  if (!answer.ok()) return ReportError(answer.status());
  if (o.client.json) {
    std::cout << answer->dump(2) << std::endl;
    return kExitOk;
  }
  Table table({"SEQ", "AT", "USER", "ROLE", "FROM", "REQUEST", "STATUS", "DETAIL"});
  for (const json& e : answer->value("entries", json::array())) {
    table.AddRow({Str(e, "seq"), Str(e, "at"), Str(e, "user"), Str(e, "role"), Str(e, "from"),
                  Str(e, "method") + " " + Str(e, "path"), Str(e, "status"), Str(e, "detail")});
  }
  std::cout << (table.rows() == 0 ? std::string("no audit entries\n") : table.Render());
  return kExitOk;
}

}  // namespace

void AddUserCommand(CLI::App& root, int& exit_code) {
  CLI::App* user = root.add_subcommand(
      "user", "Users, their roles and tokens (admins): add, list, revoke, rotate");
  user->require_subcommand(1);
  auto o = std::make_shared<UserOptions>();
  CLI::App* add =
      user->add_subcommand("add", "Add a user and write an access file with their token");
  AddClientFlags(*add, o->client, /*with_json=*/true);
  add->add_option("name", o->name, "The user's name (a Unix account name's shape)")->required();
  add->add_option("--role", o->role, "admin, user, viewer or worker")
      ->check(CLI::IsMember({"admin", "user", "viewer", "worker"}));
  add->add_option("--out", o->out, "Where to write the access file (default NAME.access.json)");
  add->add_option("--address", o->address,
                  "The server address to write into it (default: as reached now)");
  add->callback([o, &exit_code] { exit_code = RunAdd(*o); });

  CLI::App* list = user->add_subcommand("list", "Every user with their role and state");
  AddClientFlags(*list, o->client, /*with_json=*/true);
  list->callback([o, &exit_code] { exit_code = RunList(*o); });

  CLI::App* revoke =
      user->add_subcommand("revoke", "End a user's token now (their open connections close)");
  AddClientFlags(*revoke, o->client, /*with_json=*/true);
  revoke->add_option("name", o->name, "The user")->required();
  revoke->callback([o, &exit_code] { exit_code = RunRevoke(*o); });

  CLI::App* rotate =
      user->add_subcommand("rotate", "Give a user a new token (the old one stops working)");
  AddClientFlags(*rotate, o->client, /*with_json=*/true);
  rotate->add_option("name", o->name, "The user")->required();
  rotate->add_option("--out", o->out, "Where to write the access file (default NAME.access.json)");
  rotate->add_option("--address", o->address, "The server address to write into it");
  rotate->callback([o, &exit_code] { exit_code = RunRotate(*o); });
}

void AddWhoamiCommand(CLI::App& root, int& exit_code) {
  auto who = std::make_shared<ClientFlags>();
  CLI::App* whoami =
      root.add_subcommand("whoami", "Who the server takes you for: your user and role");
  AddClientFlags(*whoami, *who, /*with_json=*/true);
  whoami->callback([who, &exit_code] { exit_code = RunWhoami(*who); });
}

void AddAuditCommand(CLI::App& root, int& exit_code) {
  auto a = std::make_shared<AuditOptions>();
  CLI::App* audit =
      root.add_subcommand("audit", "The audit log: every write, who, when, from where (admins)");
  AddClientFlags(*audit, a->client, /*with_json=*/true);
  audit->add_option("--user", a->user, "Only this user's writes");
  audit->add_option("--after", a->after, "Only entries after this sequence number")
      ->check(CLI::Range(int64_t{0}, std::numeric_limits<int64_t>::max()));
  audit->add_option("--limit", a->limit, "The newest this many (default 100, at most 100000)")
      ->check(CLI::Range(int64_t{1}, int64_t{100000}));
  audit->callback([a, &exit_code] { exit_code = RunAudit(*a); });
}

}  // namespace drover::cli
