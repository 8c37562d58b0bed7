// Many users, one pool: identities with roles, each person acting
// on their own work (cancel, retry), revocation, and the audit log; real
// processes over TLS.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>

#include "cli/connection.h"
#include "cluster.h"
#include "net/http_client.h"
#include "net/sha256.h"
#include "net/ws_client.h"

namespace drover::testing {
namespace {

using nlohmann::json;

// `drover ARGS` as the holder of the access file `access`.
RunResult As(Cluster& c, const std::string& access, std::vector<std::string> args) {
  std::vector<std::string> argv = {c.binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunToEnd(argv, In(kJobTimeout), {"DROVER_ACCESS=" + access});
}

// Adds a user through the CLI as the cluster's admin; the access file's path.
std::string AddUser(Cluster& c, const std::string& name, const std::string& role) {
  const std::string path = c.dir() + "/" + name + ".access.json";
  RunResult r = c.Drover({"user", "add", name, "--role", role, "--out", path});
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("user " + name + " (" + role + "): access file " + path),
            std::string::npos)
      << r.output;
  return path;
}

net::ClientOptions OptionsOf(const std::string& access) {
  cli::ConnectionFlags flags;
  flags.access = access;
  Result<net::ClientOptions> o = cli::ResolveConnection(flags);
  EXPECT_TRUE(o.ok()) << o.status().ToString();
  return o.ok() ? *o : net::ClientOptions{};
}

// The audit entries (as the admin) whose method and path are these.
size_t AuditCount(Cluster& c, const std::string& user, const std::string& method,
                  const std::string& path, int status) {
  json entries = c.Get("/api/v1/audit?limit=100000")["entries"];
  size_t n = 0;
  for (const json& e : entries) {
    if (e["user"] == user && e["method"] == method && e["path"] == path && e["status"] == status)
      ++n;
  }
  return n;
}

TEST(UsersTest, EachPersonActsOnTheirOwnWorkAndEveryWriteIsAuditedOnce) {
  Cluster c({"--hide-others"});
  c.StartServer();
  c.StartWorker("w1", {"--cpus", "0-1"});
  const std::string admin = c.Get("/api/v1/whoami")["name"];
  EXPECT_EQ(c.Get("/api/v1/whoami")["role"], "admin");

  const std::string ana = AddUser(c, "ana", "user");
  const std::string bob = AddUser(c, "bob", "user");
  const std::string vera = AddUser(c, "vera", "viewer");
  const std::string w2 = AddUser(c, "w2", "worker");
  RunResult who = As(c, ana, {"whoami"});
  EXPECT_EQ(who.status, 0) << who.output;
  EXPECT_NE(who.output.find("ana (user)"), std::string::npos) << who.output;

  const std::string go = c.dir() + "/go";
  const std::vector<std::string> hold = {
      "sh", "-c", "while [ ! -e " + go + " ]; do sleep 0.05; done; echo out"};
  const uint64_t job_a = SubmittedJob(As(c, ana, Submit({}, hold)));
  const uint64_t job_b = SubmittedJob(As(c, bob, Submit({}, hold)));
  ASSERT_NE(job_a, 0u);
  ASSERT_NE(job_b, 0u);
  EXPECT_EQ(c.Get("/api/v1/jobs/" + std::to_string(job_a))["user"], "ana");
  const std::string b = std::to_string(job_b);

  // ana may not cancel, retry or read the logs of bob's job (hidden).
  RunResult cancel = As(c, ana, {"cancel", b});
  EXPECT_EQ(cancel.status, 1) << cancel.output;
  EXPECT_NE(cancel.output.find("ana may not cancel job " + b +
                               " of bob: a user may cancel, retry and change only their own jobs"),
            std::string::npos)
      << cancel.output;
  net::HttpClient ana_http(OptionsOf(ana));
  Result<net::Response> retry = ana_http.Post("/api/v1/jobs/" + b + "/retry", "{}");
  ASSERT_TRUE(retry.ok());
  EXPECT_EQ(retry->status, 403) << retry->body;
  EXPECT_NE(retry->body.find("ana may not retry job " + b + " of bob"), std::string::npos)
      << retry->body;
  RunResult logs = As(c, ana, {"logs", b + ".0"});
  EXPECT_EQ(logs.status, 1) << logs.output;
  EXPECT_NE(logs.output.find("ana may not read the logs of task " + b +
                             ".0 of bob: the server hides other users' jobs (--hide-others)"),
            std::string::npos)
      << logs.output;
  RunResult status = As(c, ana, {"status", "--json"});
  EXPECT_EQ(status.status, 0) << status.output;
  EXPECT_NE(status.output.find("\"user\": \"ana\""), std::string::npos) << status.output;
  EXPECT_EQ(status.output.find("\"user\": \"bob\""), std::string::npos) << status.output;
  // The viewer reads everyone's jobs, and writes nothing.
  RunResult seen = As(c, vera, {"status", b});
  EXPECT_EQ(seen.status, 0) << seen.output;
  RunResult vera_submit = As(c, vera, Submit({}, {"true"}));
  EXPECT_EQ(vera_submit.status, 1) << vera_submit.output;
  EXPECT_NE(
      vera_submit.output.find("vera (viewer) may not POST /api/v1/jobs: only admins and users may"),
      std::string::npos)
      << vera_submit.output;
  EXPECT_EQ(As(c, vera, {"cancel", b}).status, 1);
  // A worker's token joins as a worker, and submits nothing.
  RunResult w2_submit = As(c, w2, Submit({}, {"true"}));
  EXPECT_EQ(w2_submit.status, 1) << w2_submit.output;
  EXPECT_NE(w2_submit.output.find("w2 (worker) may not POST /api/v1/jobs"), std::string::npos)
      << w2_submit.output;
  // A job naming another user is refused; the admin may submit on bob's behalf.
  Result<net::Response> as_bob = ana_http.Post(
      "/api/v1/jobs", R"({"name":"x","user":"bob","task":[{"id":"t","command":["true"]}]})");
  ASSERT_TRUE(as_bob.ok());
  EXPECT_EQ(as_bob->status, 403) << as_bob->body;
  EXPECT_NE(as_bob->body.find("the job names user \\\"bob\\\" but the token is ana's"),
            std::string::npos)
      << as_bob->body;
  const uint64_t for_bob = SubmittedJob(c.Drover(Submit({"--user", "bob"}, {"true"})));
  ASSERT_NE(for_bob, 0u);
  EXPECT_EQ(c.Get("/api/v1/jobs/" + std::to_string(for_bob))["user"], "bob");

  // Nor may she follow the events of bob's job: the stream is closed
  // before any of them (the reason, "another user's", is in the close
  // frame).
  {
    net::EventLoop loop;
    bool closed = false;
    size_t texts = 0;
    std::shared_ptr<net::WsSession> peek;
    net::ConnectWebSocket(loop, OptionsOf(ana), "/api/v1/events?job=" + b,
                          [&](Result<std::shared_ptr<net::WsSession>> s) {
                            if (!s.ok()) {
                              closed = true;
                              return loop.Stop();
                            }
                            peek = *s;
                            peek->OnText([&](std::string) { ++texts; });
                            peek->OnClose([&](const Status&) {
                              closed = true;
                              loop.Stop();
                            });
                          });
    net::Timer give_up(loop);
    give_up.ArmAfter(Seconds(30), [&] { loop.Stop(); });
    loop.Run();
    EXPECT_TRUE(closed) << "ana follows the events of bob's job";
    EXPECT_EQ(texts, 0u);
  }

  // ana acts on her own job: its logs, then cancel.
  const std::string a = std::to_string(job_a);
  RunResult own = As(c, ana, {"cancel", a});
  EXPECT_EQ(own.status, 0) << own.output;
  // ...and retries it once its cancel has ended: it runs again, to success
  // when the file it waits for exists. A job with nothing left to run
  // again is refused, saying so.
  EXPECT_EQ(As(c, ana, {"wait", "-q", a}).status, 1);  // canceled
  RunResult again = As(c, ana, {"retry", a});
  EXPECT_EQ(again.status, 0) << again.output;
  EXPECT_NE(again.output.find("job " + a + ": 1 task queued again"), std::string::npos)
      << again.output;
  EXPECT_EQ(c.Get("/api/v1/tasks/" + a + ".0")["reason"], "retried by ana");
  c.WriteFile("go", "");
  RunResult ran = As(c, ana, {"wait", a});
  EXPECT_EQ(ran.status, 0) << ran.output;
  RunResult nothing = As(c, ana, {"retry", a});
  EXPECT_EQ(nothing.status, 1) << nothing.output;
  EXPECT_NE(nothing.output.find("job " + a + " has no failed or canceled tasks"),
            std::string::npos)
      << nothing.output;

  // Revoking bob refuses his token at once and closes his open event stream.
  net::EventLoop loop;
  std::atomic<bool> closed{false};
  std::shared_ptr<net::WsSession> stream;
  net::ConnectWebSocket(loop, OptionsOf(bob), "/api/v1/events",
                        [&](Result<std::shared_ptr<net::WsSession>> s) {
                          ASSERT_TRUE(s.ok()) << s.status().ToString();
                          stream = *s;
                          stream->OnText([](std::string) {});
                          stream->OnClose([&](const Status&) {
                            closed = true;
                            loop.Stop();
                          });
                          loop.Stop();  // open: back to the test
                        });
  loop.Run();
  ASSERT_TRUE(stream);
  RunResult revoke = c.Drover({"user", "revoke", "bob"});
  EXPECT_EQ(revoke.status, 0) << revoke.output;
  EXPECT_NE(revoke.output.find("revoked bob (1 open connection(s) closed)"), std::string::npos)
      << revoke.output;
  net::Timer give_up(loop);
  give_up.ArmAfter(Seconds(30), [&] { loop.Stop(); });
  loop.Run();  // until the close arrives (or 30 s)
  EXPECT_TRUE(closed) << "bob's event stream stayed open after his token was revoked";
  net::HttpClient bob_http(OptionsOf(bob));
  Result<net::Response> refused = bob_http.Get("/api/v1/jobs");
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->status, 401) << refused->body;
  // An admin cannot revoke themselves (nor the last admin: user_book_test).
  RunResult self = c.Drover({"user", "revoke", admin});
  EXPECT_EQ(self.status, 1) << self.output;
  EXPECT_NE(self.output.find("you cannot revoke your own access"), std::string::npos)
      << self.output;
  RunResult users = c.Drover({"user", "list"});
  EXPECT_NE(users.output.find("revoked"), std::string::npos) << users.output;

  // The audit log: each write once, refused ones included; it survives a
  // server restart, whose own writes continue the numbering.
  EXPECT_EQ(AuditCount(c, "ana", "POST", "/api/v1/jobs/" + b + "/cancel", 403), 1u);
  EXPECT_EQ(AuditCount(c, "ana", "POST", "/api/v1/jobs/" + b + "/retry", 403), 1u);
  EXPECT_EQ(AuditCount(c, "ana", "POST", "/api/v1/jobs/" + a + "/cancel", 200), 1u);
  EXPECT_EQ(AuditCount(c, "ana", "POST", "/api/v1/jobs/" + a + "/retry", 200), 1u);
  EXPECT_EQ(AuditCount(c, "ana", "POST", "/api/v1/jobs/" + a + "/retry", 412), 1u);
  EXPECT_EQ(AuditCount(c, "vera", "POST", "/api/v1/jobs", 403), 1u);
  EXPECT_EQ(AuditCount(c, "w2", "POST", "/api/v1/jobs", 403), 1u);
  EXPECT_EQ(AuditCount(c, admin, "POST", "/api/v1/users/bob/revoke", 200), 1u);
  EXPECT_EQ(AuditCount(c, admin, "POST", "/api/v1/users", 200), 4u);
  json before = c.Get("/api/v1/audit?limit=100000");
  bool on_behalf = false;
  for (const json& e : before["entries"]) {
    if (e["detail"] == "job " + std::to_string(for_bob) + " for bob" && e["user"] == admin)
      on_behalf = true;
  }
  EXPECT_TRUE(on_behalf) << before.dump(1);
  c.KillServer(SIGKILL);
  c.StartServer();
  json after = c.Get("/api/v1/audit?limit=100000");
  EXPECT_EQ(after["entries"].size(), before["entries"].size());
  EXPECT_EQ(AuditCount(c, "ana", "POST", "/api/v1/jobs/" + b + "/cancel", 403), 1u);
  // Users survive the restart too: ana's token works, bob's does not.
  EXPECT_EQ(As(c, ana, {"whoami"}).status, 0);
  EXPECT_EQ(As(c, bob, {"whoami"}).status, 1);
  RunResult audit = c.Drover({"audit", "--user", "ana"});
  EXPECT_EQ(audit.status, 0) << audit.output;
  EXPECT_NE(audit.output.find("POST /api/v1/jobs/" + b + "/cancel"), std::string::npos)
      << audit.output;
  EXPECT_EQ(As(c, ana, {"audit"}).status, 1);  // admins only
  RunResult none = c.Drover({"audit", "--user", "nobody"});
  EXPECT_EQ(none.status, 0) << none.output;
  EXPECT_EQ(none.output, "no audit entries\n");
  RunResult odd = c.Drover({"audit", "--user", "a b&limit=1"});  // sent encoded
  EXPECT_EQ(odd.output, "no audit entries\n");
  RunResult negative = c.Drover({"audit", "--limit", "-1"});
  EXPECT_EQ(negative.status, 2) << negative.output;
  EXPECT_NE(negative.output.find("--limit: Value -1 not in range 1 to 100000"), std::string::npos)
      << negative.output;
}

// HEAD /api/v1/files/SHA as the holder of `access`: the HTTP status.
int HeadFile(const std::string& access, const std::string& sha) {
  net::ClientRequest head;
  head.method = "HEAD";
  head.target = "/api/v1/files/" + sha;
  Result<net::Response> r = net::HttpClient(OptionsOf(access)).Send(head);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r->status : 0;
}

// The first text message of the event stream opened with ?watch=true after
// sending `watch` ({"watch":"12.3"}), as the holder of `access`; empty when
// none came in 30 s or the stream closed.
std::string FirstWatched(const std::string& access, const std::string& watch) {
  net::EventLoop loop;
  std::string first;
  std::shared_ptr<net::WsSession> stream;
  net::ConnectWebSocket(loop, OptionsOf(access), "/api/v1/events?watch=true",
                        [&](Result<std::shared_ptr<net::WsSession>> s) {
                          if (!s.ok()) return loop.Stop();
                          stream = *s;
                          stream->OnText([&](std::string text) {
                            if (first.empty()) first = std::move(text);
                            loop.Stop();
                          });
                          stream->OnClose([&](const Status&) { loop.Stop(); });
                          stream->SendText(watch);
                        });
  net::Timer give_up(loop);
  give_up.ArmAfter(Seconds(30), [&] { loop.Stop(); });
  loop.Run();
  if (stream) stream->Close("done");
  return first;
}

// A job's contents are its user's: without --hide-others everyone sees the
// queue (who runs what, states, times, reasons) but only the job's user,
// the members of a group that shares its contents, admins and viewers read
// its logs, result, outputs, uploaded inputs and environment, through every
// route, the event stream and the CLI.
TEST(UsersTest, AJobsContentsAreItsUsersTheQueueIsEveryones) {
  const std::string config = ::testing::TempDir() + "/drover-share-" +
                             std::to_string(::getpid()) + ".toml";
  {
    std::ofstream out(config);
    out << "[group.lab]\nmembers = [\"ana\", \"cy\"]\nshare_outputs = true\n";
  }
  Cluster c({"--config", config});
  c.StartServer();
  c.StartWorker("w1", {"--cpus", "0-1"});
  const std::string ana = AddUser(c, "ana", "user");
  const std::string bob = AddUser(c, "bob", "user");
  const std::string cy = AddUser(c, "cy", "user");
  const std::string vera = AddUser(c, "vera", "viewer");

  const std::string input_text = "ana-secret-input\n";
  const std::string input = c.WriteFile("ana-input.txt", input_text);
  net::Sha256 hash;
  hash.Update(input_text);
  const std::string input_sha = hash.HexDigest();
  const uint64_t job = SubmittedJob(As(
      c, ana,
      Submit({"--input", input, "--env", "ANA_KEY=ana-secret"},
             {"sh", "-c",
              "echo $ANA_KEY-log; echo $ANA_KEY-result > \"$DROVER_RESULT\"; "
              "echo data > \"$DROVER_OUTPUT_DIR/$ANA_KEY-output.txt\""})));
  ASSERT_NE(job, 0u);
  const std::string j = std::to_string(job);
  const std::string t = j + ".0";
  ASSERT_EQ(As(c, ana, {"wait", j}).status, 0);

  // ana reads all of it.
  RunResult own = As(c, ana, {"status", t});
  EXPECT_NE(own.output.find("ana-secret-result"), std::string::npos) << own.output;
  EXPECT_NE(own.output.find("ana-secret-output.txt"), std::string::npos) << own.output;
  EXPECT_NE(As(c, ana, {"logs", t}).output.find("ana-secret-log"), std::string::npos);

  // bob sees the queue: the job, its user, its state.
  RunResult queue = As(c, bob, {"status"});
  EXPECT_EQ(queue.status, 0) << queue.output;
  EXPECT_NE(queue.output.find("ana"), std::string::npos) << queue.output;
  RunResult task = As(c, bob, {"status", t});
  EXPECT_EQ(task.status, 0) << task.output;
  EXPECT_NE(task.output.find("succeeded"), std::string::npos) << task.output;
  EXPECT_NE(task.output.find("contents: private"), std::string::npos) << task.output;
  // ...and none of its contents, through any route.
  const std::string refused =
      "a job's logs, results and files are for its user, admins and viewers";
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"logs", t}, {"logs", "-f", t}, {"get", t, "-o",
                                                                              c.dir() + "/bob"}}) {
    RunResult r = As(c, bob, args);
    EXPECT_EQ(r.status, 1) << args[0] << ": " << r.output;
    EXPECT_NE(r.output.find("bob may not"), std::string::npos) << args[0] << ": " << r.output;
    EXPECT_NE(r.output.find(refused), std::string::npos) << args[0] << ": " << r.output;
    EXPECT_EQ(r.output.find("ana-secret"), std::string::npos) << args[0] << ": " << r.output;
  }
  net::HttpClient bob_http(OptionsOf(bob));
  for (const std::string& route :
       {"/api/v1/jobs/" + j, "/api/v1/tasks/" + t, "/api/v1/jobs/" + j + "/report",
        std::string("/metrics"), std::string("/api/v1/jobs"), std::string("/api/v1/status")}) {
    Result<net::Response> r = bob_http.Get(route);
    ASSERT_TRUE(r.ok()) << route;
    EXPECT_EQ(r->status, 200) << route << ": " << r->body;
    EXPECT_EQ(r->body.find("ana-secret"), std::string::npos) << route << ": " << r->body;
    EXPECT_EQ(r->body.find(input_sha), std::string::npos) << route << ": " << r->body;
  }
  for (const std::string& route :
       {"/api/v1/tasks/" + t + "/logs", "/api/v1/tasks/" + t + "/outputs"}) {
    Result<net::Response> r = bob_http.Get(route);
    ASSERT_TRUE(r.ok()) << route;
    EXPECT_EQ(r->status, 403) << route << ": " << r->body;
  }
  EXPECT_EQ(HeadFile(bob, input_sha), 404) << "bob reads the file ana uploaded for her job";
  RunResult waited = As(c, bob, {"wait", "--json", j});
  EXPECT_EQ(waited.status, 0) << waited.output;
  EXPECT_NE(waited.output.find("contents_hidden"), std::string::npos) << waited.output;
  EXPECT_EQ(waited.output.find("ana-secret"), std::string::npos) << waited.output;
  const std::string watched = FirstWatched(bob, R"({"watch":")" + t + R"("})");
  EXPECT_NE(watched.find("\"contents_hidden\":true"), std::string::npos) << watched;
  EXPECT_EQ(watched.find("ana-secret"), std::string::npos) << watched;
  EXPECT_NE(FirstWatched(ana, R"({"watch":")" + t + R"("})").find("ana-secret-result"),
            std::string::npos);
  // Nor may he have it handed to a task of his: a task named in --after
  // gives its result and outputs; a job named there is only waited for.
  RunResult after = As(c, bob, Submit({"--after", t}, {"true"}));
  EXPECT_EQ(after.status, 1) << after.output;
  EXPECT_NE(after.output.find("after " + t + ": that task is ana's"), std::string::npos)
      << after.output;
  EXPECT_NE(SubmittedJob(As(c, bob, Submit({"--after", j}, {"true"}))), 0u);

  // The viewer and the admin read it; so does cy, in ana's sharing group.
  for (const std::string& reader : {vera, cy, c.access_file()}) {
    RunResult r = As(c, reader, {"status", t});
    EXPECT_NE(r.output.find("ana-secret-result"), std::string::npos) << reader << r.output;
    EXPECT_NE(As(c, reader, {"logs", t}).output.find("ana-secret-log"), std::string::npos)
        << reader;
  }
  EXPECT_EQ(HeadFile(cy, input_sha), 200) << "cy reads the files of her group";
  RunResult got = As(c, cy, {"get", t, "-o", c.dir() + "/cy"});
  EXPECT_EQ(got.status, 0) << got.output;
  std::remove(config.c_str());
}

// A user reads only the uploaded files they hold (with or without
// --hide-others): to ana, bob's file is absent (she cannot confirm its
// content by its hash nor name it in a job); she holds it once she uploads
// the same bytes herself, and still after a restart (from her job's record
// in the journal).
TEST(UsersTest, AUserReadsOnlyTheFilesTheyHold) {
  Cluster c;
  c.StartServer();
  c.StartWorker("w1", {"--cpus", "0-1"});
  const std::string ana = AddUser(c, "ana", "user");
  const std::string bob = AddUser(c, "bob", "user");
  const std::string cy = AddUser(c, "cy", "user");
  const std::string text = "bob's notes\n";
  const std::string notes = c.WriteFile("notes.txt", text);
  net::Sha256 hash;
  hash.Update(text);
  const std::string sha = hash.HexDigest();

  const uint64_t by_bob =
      SubmittedJob(As(c, bob, Submit({"--input", notes}, {"cat", "notes.txt"})));
  ASSERT_NE(by_bob, 0u);
  EXPECT_EQ(As(c, bob, {"wait", std::to_string(by_bob)}).status, 0);
  EXPECT_EQ(HeadFile(bob, sha), 200);
  EXPECT_EQ(HeadFile(ana, sha), 404) << "ana learns that bob's file is on the server";
  Result<net::Response> got = net::HttpClient(OptionsOf(ana)).Get("/api/v1/files/" + sha);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->status, 404) << "ana reads bob's file by its hash";
  EXPECT_EQ(got->body.find(text), std::string::npos);
  // Nor may she name it in a job without uploading it.
  const json named = {
      {"name", "peek"},
      {"task",
       {{{"id", "t"},
         {"command", {"cat", "notes.txt"}},
         {"input_files", {{{"name", "notes.txt"}, {"size", text.size()}, {"sha256", sha}}}}}}}};
  Result<net::Response> peek = net::HttpClient(OptionsOf(ana)).Post("/api/v1/jobs", named.dump());
  ASSERT_TRUE(peek.ok());
  EXPECT_EQ(peek->status, 412) << peek->body;
  EXPECT_NE(peek->body.find("is not on the server: upload it first"), std::string::npos)
      << peek->body;
  // With the same bytes of her own she uploads them (a no-op on the disk)
  // and holds them.
  const std::string mine = c.WriteFile("mine.txt", text);
  const uint64_t by_ana = SubmittedJob(As(c, ana, Submit({"--input", mine}, {"cat", "mine.txt"})));
  ASSERT_NE(by_ana, 0u);
  EXPECT_EQ(As(c, ana, {"wait", std::to_string(by_ana)}).status, 0);
  EXPECT_EQ(HeadFile(ana, sha), 200);
  EXPECT_EQ(HeadFile(c.access_file(), sha), 200) << "the admin is not filtered";
  // cy's own upload of the same bytes answers as a new file (201), then
  // as one she has (200).
  net::ClientRequest put;
  put.method = "PUT";
  put.target = "/api/v1/files/" + sha;
  put.content_type = "application/octet-stream";
  for (int expected : {201, 200}) {
    Result<net::Response> sent = net::HttpClient(OptionsOf(cy)).Upload(put, notes);
    ASSERT_TRUE(sent.ok()) << sent.status().ToString();
    EXPECT_EQ(sent->status, expected) << sent->body;
  }
  EXPECT_EQ(HeadFile(cy, sha), 200);

  c.KillServer(SIGKILL);
  c.StartServer();
  EXPECT_EQ(HeadFile(ana, sha), 200) << "her job's record makes her a holder again";
  EXPECT_EQ(HeadFile(bob, sha), 200);
  EXPECT_EQ(HeadFile(cy, sha), 404) << "an upload no job names is held until a restart";
}

// A worker's access file is for joining: `drover user add` says how, and
// `drover worker --access FILE` joins with it.
TEST(UsersTest, AWorkersAccessFileJoinsAMachine) {
  Cluster c;
  c.StartServer();
  const std::string path = c.dir() + "/w9.access.json";
  RunResult added = c.Drover({"user", "add", "w9", "--role", "worker", "--out", path});
  ASSERT_EQ(added.status, 0) << added.output;
  EXPECT_NE(added.output.find("run there `drover worker --access FILE`"), std::string::npos)
      << added.output;
  Process worker({c.binary(), "worker", "--access", path, "--name", "w9", "--workdir",
                  c.dir() + "/w9", "--isolation", "none", "--run-as-root"});
  ASSERT_TRUE(worker.WaitForLine("attached as worker", In(kStartTimeout))) << worker.output();
  EXPECT_EQ(c.Get("/api/v1/workers")["workers"][0]["name"], "w9");
  // Revoked: its session closes and its next connection is refused, saying so.
  ASSERT_EQ(c.Drover({"user", "revoke", "w9"}).status, 0);
  EXPECT_TRUE(worker.WaitForLine("refused the token (not this cluster's, or revoked or rotated)",
                                 In(kStartTimeout)))
      << worker.output();
}

}  // namespace
}  // namespace drover::testing
