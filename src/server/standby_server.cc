#include "server/standby_server.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <array>
#include <nlohmann/json.hpp>
#include <string_view>

#include "net/json_text.h"
#include "net/private_file.h"
#include "net/server.h"
#include "proto/api_json.h"
#include "proto/messages.h"
#include "proto/record_codec.h"
#include "server/access.h"
#include "server/rest_api.h"
#include "server/users_file.h"

namespace drover::server {

using nlohmann::json;

namespace {
// A read-only copy places nothing and sees no worker attach: no restart
// placement hold (its Explain would name one that never ends).
core::SchedulerConfig ViewConfig(core::SchedulerConfig config) {
  config.restore_settle = Duration::zero();
  return config;
}
}  // namespace

struct StandbyServer::State {
  State(net::EventLoop& l, StandbyOptions o) : loop(l), options(std::move(o)) {}

  Time Now() { return options.clock->Now(); }

  // Milliseconds since the last successful read; -1 before the first.
  int64_t LagMs() {
    if (!read_once) return -1;
    return std::chrono::duration_cast<std::chrono::milliseconds>(Now() - last_read).count();
  }

  bool Fresh() {
    const int64_t lag = LagMs();
    return lag >= 0 && std::chrono::milliseconds(lag) <= options.max_lag;
  }

  void AddHeaders(net::Response& r) {
    r.headers["X-Drover-Role"] = "standby";
    if (!leader.empty()) r.headers["X-Drover-Leader"] = leader;
    r.headers["X-Drover-Lag-Ms"] = std::to_string(LagMs());
  }

  std::string StandbyMessage() const {
    return leader.empty() ? std::string("this server is a standby and the leader's address is not "
                                        "known now (none advertised, or a takeover is under way); "
                                        "retry")
                          : "this server is a standby; the leader is at " + leader;
  }

  // 307 to the leader, or 503 when its address is not known.
  net::Response Redirect(const net::Request& request) {
    json error{{"code", "unavailable"}, {"message", StandbyMessage()}};
    if (!leader.empty()) error["leader"] = leader;
    net::Response r = net::JsonResponse(net::JsonText(json{{"error", error}}), leader.empty() ? 503 : 307);
    if (!leader.empty()) {
      r.headers["Location"] =
          std::string(options.tls ? "https://" : "http://") + leader + request.target;
    }
    AddHeaders(r);
    return r;
  }

  // Wraps a read handler: refused while the copy is too old, else answered
  // with the standby headers.
  net::Handler Checked(net::Handler inner) {
    return [this, inner = std::move(inner)](const net::Request& request, net::Responder done) {
      if (!Fresh()) {
        const int64_t lag = LagMs();
        json error{{"code", "unavailable"},
                   {"message", "this standby's copy of the state is " +
                                   (lag < 0 ? std::string("not read yet")
                                            : std::to_string(lag) + " ms old") +
                                   " (the bound is " +
                                   std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                      options.max_lag)
                                                      .count()) +
                                   " ms): Redis is unreachable from it; ask the leader" +
                                   (leader.empty() ? std::string() : " at " + leader)}};
        if (!leader.empty()) error["leader"] = leader;
        net::Response r = net::JsonResponse(net::JsonText(json{{"error", error}}), 503);
        AddHeaders(r);
        return done(std::move(r));
      }
      inner(request, [this, done](net::Response r) {
        AddHeaders(r);
        done(std::move(r));
      });
    };
  }

  bool Rebuild() {
    auto copy = std::make_unique<core::Scheduler>(ViewConfig(options.scheduler));
    for (const core::Record& record : journal->Snapshot()) {
      if (Status s = copy->Restore(record); !s.ok()) {
        spdlog::error("standby: cannot rebuild the state from the journal: {}", s.ToString());
        return false;
      }
    }
    core::Outbox ignored;  // a copy: its timers and commands go nowhere
    copy->FinishRestore(Now(), ignored);
    view = std::move(copy);
    ++rebuilds;
    return true;
  }

  // The users file again when its size or modification time changed since
  // the last read; one that does not parse keeps the users read before
  // (the leader writes it whole, by rename, so a half-written one is rare).
  void ReloadUsers() {
    struct stat st {};
    if (::stat(options.users_file.c_str(), &st) != 0) return;
    const int64_t mtime_ns = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
    if (users_read && mtime_ns == users_mtime_ns && st.st_size == users_size) return;
    Status ok = CheckUsersFileSize(static_cast<uint64_t>(st.st_size), options.users_file);
    Result<std::string> text =
        ok.ok() ? net::ReadWholeFile(options.users_file) : Result<std::string>(ok);
    Result<UserMap> parsed =
        text.ok() ? ParseUsersFile(*text, options.users_file) : Result<UserMap>(text.status());
    if (!parsed.ok()) {
      spdlog::warn("standby: keeping the users read before: {}", parsed.status().ToString());
      return;
    }
    by_hash.clear();
    for (const auto& [name, user] : *parsed) {
      if (!user.revoked) by_hash[user.token_sha256] = net::Identity{user.name, user.role};
    }
    users_read = true;
    users_mtime_ns = mtime_ns;
    users_size = st.st_size;
  }

  std::optional<net::Identity> Authenticate(std::string_view token) {
    ReloadUsers();
    if (!users_read) {
      if (!token.empty() && token == options.token) return net::Identity{"", net::Role::kAdmin};
      return std::nullopt;
    }
    if (token.size() != 64) return std::nullopt;
    auto it = by_hash.find(TokenHash(token));
    if (it == by_hash.end()) return std::nullopt;
    return it->second;
  }

  void RefuseSession(const std::shared_ptr<net::WsSession>& session) {
    proto::Error error{"unavailable", StandbyMessage(), leader};
    session->OnText([](std::string) {});
    session->OnBinary([](std::string) {});
    session->OnClose([](const Status&) {});
    session->SendText(proto::Encode(proto::ServerMessage{error}));
    session->Close(StandbyMessage());
  }

  net::EventLoop& loop;
  StandbyOptions options;
  std::unique_ptr<net::Server> server;
  // Every record read so far, replayed (a scheduler that never finishes
  // restoring); `view` is rebuilt from its snapshot.
  std::unique_ptr<core::Scheduler> journal =
      std::make_unique<core::Scheduler>(ViewConfig(options.scheduler));
  std::unique_ptr<core::Scheduler> view;
  std::string leader;        // address
  std::string leader_owner;  // the lease owner, for status
  std::string workers;       // JSON
  bool read_once = false;
  Time last_read;
  std::string last_error;
  uint64_t rebuilds = 0;
  bool stopped = false;
  // Users (StandbyOptions::users_file): identity by token hash, as read.
  std::map<std::string, net::Identity> by_hash;
  bool users_read = false;
  int64_t users_mtime_ns = 0;
  int64_t users_size = 0;
  std::unique_ptr<Access> access;
};

std::string StandbyServer::LeaderAddress(const std::string& owner) {
  const size_t slash = owner.find('/');
  return slash == std::string::npos ? std::string() : owner.substr(0, slash);
}

Result<std::unique_ptr<StandbyServer>> StandbyServer::Start(net::EventLoop& loop,
                                                            StandbyOptions options) {
  auto st = std::make_unique<State>(loop, std::move(options));
  State* s = st.get();
  s->view = std::make_unique<core::Scheduler>(ViewConfig(s->options.scheduler));
  {
    core::Outbox ignored;
    s->view->FinishRestore(s->Now(), ignored);
  }
  net::ServerOptions sopts;
  sopts.bind_address = s->options.bind_address;
  sopts.port = s->options.port;
  sopts.tls = s->options.tls;
  sopts.cert_dir = s->options.cert_dir;
  sopts.token = s->options.token;
  if (!s->options.users_file.empty()) {
    // As the leader: a token is a user's, and the access rules apply (a
    // standby serves reads only; writes are sent to the leader).
    AccessOptions access;
    access.hide_others = s->options.hide_others;
    access.owner_of = [s](JobId job) -> std::optional<std::string> {
      Result<core::JobInfo> info = s->view->GetJob(job);
      if (!info.ok()) return std::nullopt;
      return info->user;
    };
    access.shares_contents = [s](const std::string& reader, const std::string& owner) {
      return SharesContents(s->view->config().users, reader, owner);
    };
    s->access = std::make_unique<Access>(std::move(access));
    sopts.authenticate = [s](std::string_view token) { return s->Authenticate(token); };
    sopts.authorize = [s](const net::Request& r) { return s->access->Authorize(r); };
  }
  s->server = std::make_unique<net::Server>(loop, sopts);
  net::Server& server = *s->server;

  for (const char* path :
       {"/api/v1/worker", "/api/v1/events", "/api/v1/tasks/{id}/logs/follow"}) {
    // As on the leader: only the browser's streams take ?token=.
    const net::WsToken token = std::string_view(path) == "/api/v1/worker"
                                   ? net::WsToken::kHeader
                                   : net::WsToken::kHeaderOrQuery;
    server.WebSocketRoute(
        path,
        [s](std::shared_ptr<net::WsSession> session, const net::Request&) {
          s->RefuseSession(session);
        },
        token);
  }
  // The dashboard lives on the leader (it needs the event stream and
  // writes): a browser pointed at a standby is sent there, the token in the
  // URL's fragment going along (browsers keep it across a redirect).
  for (const char* path : {"/", "/index.html", "/assets/*"}) {
    server.Route("GET", path, [s](const net::Request& request, net::Responder done) {
      done(s->Redirect(request));
    });
    server.AllowPublic(path);
  }
  AddStateReadRoutes(
      server, [s]() -> const core::Scheduler& { return *s->view; },
      [s](net::Handler h) { return s->Checked(std::move(h)); }, /*explain=*/false, s->access.get());
  server.Route("GET", "/api/v1/workers",
               s->Checked([s](const net::Request& request, net::Responder done) {
                 if (s->workers.empty()) return done(s->Redirect(request));
                 done(net::JsonResponse(s->workers));
               }));
  server.Route("GET", "/api/v1/status", [s](const net::Request&, net::Responder done) {
    std::array<uint64_t, core::kTaskStateCount> totals{};
    const std::vector<JobId> jobs = s->view->Jobs();
    for (JobId id : jobs) {
      Result<core::JobInfo> info = s->view->GetJob(id);
      if (!info.ok()) continue;
      for (int i = 0; i < core::kTaskStateCount; ++i) totals[i] += info->counts[i];
    }
    json counts = json::object();
    for (int i = 0; i < core::kTaskStateCount; ++i) {
      counts[std::string(core::TaskStateName(static_cast<core::TaskState>(i)))] = totals[i];
    }
    json body{{"version", s->options.version},
              {"role", "standby"},
              {"leader", s->leader},
              {"leader_id", s->leader_owner},
              {"lag_ms", s->LagMs()},
              {"fresh", s->Fresh()},
              {"jobs", jobs.size()},
              {"tasks", counts},
              {"rebuilds", s->rebuilds}};
    if (!s->last_error.empty()) body["last_error"] = s->last_error;
    net::Response r = net::JsonResponse(net::JsonText(body));
    s->AddHeaders(r);
    done(std::move(r));
  });
  server.Route("GET", "/healthz", [](const net::Request&, net::Responder done) {
    done(net::TextResponse("standby\n"));
  });
  server.AllowPublic("/healthz");
  for (const char* method : {"GET", "POST", "PUT", "PATCH", "DELETE"}) {
    server.Route(method, "/*", [s](const net::Request& request, net::Responder done) {
      done(s->Redirect(request));
    });
  }
  RETURN_IF_ERROR(server.Start());
  return std::unique_ptr<StandbyServer>(new StandbyServer(std::move(st)));
}

StandbyServer::StandbyServer(std::unique_ptr<State> state) : state_(std::move(state)) {}

StandbyServer::~StandbyServer() { Stop(); }

void StandbyServer::Stop() {
  if (state_->stopped) return;
  state_->stopped = true;
  state_->server->Stop();
}

void StandbyServer::Apply(bool reset, const std::vector<std::string>& records,
                          const std::string& leader_owner, std::string workers) {
  State& s = *state_;
  if (reset) s.journal = std::make_unique<core::Scheduler>(ViewConfig(s.options.scheduler));
  bool ok = true;
  for (size_t i = 0; i < records.size() && ok; ++i) {
    Result<core::Record> record = proto::DecodeRecord(records[i]);
    if (!record.ok()) {
      spdlog::error("standby: a journal record does not decode: {}", record.status().ToString());
      ok = false;
      break;
    }
    if (Status restored = s.journal->Restore(*record); !restored.ok()) {
      spdlog::error("standby: a journal record does not apply: {}", restored.ToString());
      ok = false;
      break;
    }
  }
  // Otherwise the copy stays as it was and ages: reads are refused once it
  // is older than max_lag, until a later read (a compaction resets it).
  if (!ok) return;
  if ((reset || !records.empty()) && !s.Rebuild()) return;
  const std::string address = LeaderAddress(leader_owner);
  if (address != s.leader || leader_owner != s.leader_owner) {
    spdlog::info("standby: the leader is {}{}", leader_owner.empty() ? "(none)" : leader_owner,
                 address.empty() ? "" : " at " + address);
  }
  s.leader = address;
  s.leader_owner = leader_owner;
  s.workers = std::move(workers);
  s.read_once = true;
  s.last_read = s.Now();
  s.last_error.clear();
}

void StandbyServer::ReadFailed(const Status& why) {
  State& s = *state_;
  if (why.ToString() != s.last_error) {
    spdlog::warn("standby: cannot read Redis: {}", why.ToString());
  }
  s.last_error = why.ToString();
}

uint16_t StandbyServer::port() const { return state_->server->port(); }
const std::string& StandbyServer::leader() const { return state_->leader; }
uint64_t StandbyServer::rebuilds() const { return state_->rebuilds; }

}  // namespace drover::server
