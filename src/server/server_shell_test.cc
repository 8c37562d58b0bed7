// End-to-end tests of the server shell: a real ServerShell on 127.0.0.1
// (plain and TLS), REST through net::HttpClient and a fake worker that
// speaks proto messages over a real WebSocket.

#include "server/server_shell.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "server/server_test_util.h"

namespace drover::server {
namespace {

using nlohmann::json;
using testing::FakeWorker;
using testing::Inbox;
using testing::LoopThread;
using testing::MakeHello;
using testing::TempDir;

constexpr char kPipeline[] = R"({"name": "pipe", "task": [
  {"id": "prep", "command": ["echo", "{index}"], "resources": {"cpus": 2}},
  {"id": "use", "command": ["cat"], "depends_on": ["prep"]}]})";

class ServerShellTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    loop_thread_ = std::make_unique<LoopThread>(loop_);
    StartShell();
  }
  void TearDown() override { StopShell(); }

  void StartShell() {
    ServerConfig cfg;
    cfg.state_dir = dir_ / "state";
    cfg.bind_address = "127.0.0.1";
    cfg.port = 0;
    cfg.tls = GetParam();
    cfg.access_file = dir_ / "access.json";
    cfg.keep_finished = keep_finished_;
    cfg.keep_outputs = keep_outputs_;
    auto shell = loop_thread_->Call([&] { return ServerShell::Start(loop_, cfg); });
    ASSERT_TRUE(shell.ok()) << shell.status().ToString();
    shell_ = std::move(*shell);
  }
  void StopShell() {
    if (!shell_) return;
    loop_thread_->Call([&] {
      shell_->Stop();
      shell_.reset();
    });
  }

  net::ClientOptions Client(std::string token = {}) {
    net::ClientOptions o;
    o.port = shell_->port();
    o.tls = GetParam();
    o.fingerprint = shell_->fingerprint();
    o.token = token.empty() ? shell_->token() : token;
    o.timeout = Seconds(20);
    return o;
  }

  json Get(const std::string& target, int want_status = 200) {
    net::HttpClient http(Client());
    Result<net::Response> r = http.Get(target);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return json();
    EXPECT_EQ(r->status, want_status) << r->body;
    return json::parse(r->body, nullptr, false);
  }
  json Post(const std::string& target, std::string body, int want_status = 200) {
    net::HttpClient http(Client());
    Result<net::Response> r = http.Post(target, std::move(body));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return json();
    EXPECT_EQ(r->status, want_status) << r->body;
    return json::parse(r->body, nullptr, false);
  }

  // An event stream (`target`) and the text messages it brings. `events`
  // is shared with the session's callback, which may run after the test.
  struct Subscription {
    std::shared_ptr<net::WsSession> session;  // null when it did not open
    std::shared_ptr<Inbox<std::string>> events = std::make_shared<Inbox<std::string>>();
  };
  Subscription Subscribe(const std::string& target) {
    Subscription sub;
    Inbox<Status> opened;
    loop_.Post([&] {
      net::ConnectWebSocket(loop_, Client(), target,
                            [&, events = sub.events](Result<std::shared_ptr<net::WsSession>> s) {
                              if (s.ok()) {
                                sub.session = *s;
                                sub.session->OnText([events](std::string t) { events->Push(t); });
                              }
                              opened.Push(s.ok() ? Status::Ok() : s.status());
                            });
    });
    auto st = opened.Pop();
    EXPECT_TRUE(st && st->ok()) << target;
    if (!st || !st->ok()) sub.session.reset();
    return sub;
  }

  std::unique_ptr<FakeWorker> Worker(const std::string& name,
                                     std::vector<proto::RunningTask> running = {}) {
    auto w = std::make_unique<FakeWorker>(loop_, Client());
    EXPECT_TRUE(w->status().ok()) << w->status().ToString();
    proto::Hello hello = MakeHello(name);
    hello.running = std::move(running);
    w->Send(hello);
    auto ack = w->Expect<proto::HelloAck>();
    EXPECT_TRUE(ack.has_value());
    if (ack) worker_id_ = ack->worker;
    return w;
  }

  // Returns once the server handled every message `w` sent before: a
  // finished result for an attempt the server does not know is ignored by
  // the core but still acknowledged, after everything sent earlier.
  void Barrier(FakeWorker& w) {
    proto::FinishedTask stale{TaskId{999, 0}, 1, {}, TimeFromMicros(3)};
    w.Send(proto::Finished{{stale}});
    auto ack = w.ExpectPassing<proto::Ack>();
    ASSERT_TRUE(ack.has_value());
    EXPECT_EQ(ack->tasks.at(0).task, (TaskId{999, 0}));
  }

  // Reports one attempt started and finished with `result`; returns the Ack.
  void RunToSuccess(FakeWorker& w, const proto::Assignment& a, const std::string& result) {
    w.Send(proto::Started{{{a.task, a.attempt, TimeFromMicros(1)}}});
    proto::FinishedTask f{a.task, a.attempt, {}, TimeFromMicros(2)};
    f.outcome.result = result;
    w.Send(proto::Finished{{f}});
    auto ack = w.ExpectPassing<proto::Ack>();
    ASSERT_TRUE(ack.has_value());
    EXPECT_EQ(ack->tasks, (std::vector<proto::TaskAttempt>{{a.task, a.attempt}}));
  }

  // Runs job 1's one task on `w` to success with one output, o.bin.
  void RunWithAnOutput(FakeWorker& w) {
    ASSERT_EQ(
        Post("/api/v1/jobs", R"({"name": "o", "task": [{"id": "a", "command": ["x"]}]})")["id"], 1);
    auto assign = w.Expect<proto::Assign>();
    ASSERT_TRUE(assign.has_value());
    const proto::Assignment& a = assign->tasks.at(0);
    w.Send(proto::Started{{{a.task, a.attempt, TimeFromMicros(1)}}});
    proto::FinishedTask f{a.task, a.attempt, {}, TimeFromMicros(2)};
    f.outcome.outputs = {{"o.bin", 3, std::string(64, 'a')}};
    w.Send(proto::Finished{{f}});
    ASSERT_TRUE(w.ExpectPassing<proto::Ack>().has_value());
  }

  TempDir dir_;
  net::EventLoop loop_;
  std::unique_ptr<LoopThread> loop_thread_;
  std::unique_ptr<ServerShell> shell_;
  WorkerId worker_id_ = 0;
  Duration keep_finished_ = Seconds(7 * 24 * 3600);
  Duration keep_outputs_ = Seconds(24 * 3600);
};

TEST_P(ServerShellTest, PipelineRunsOnAWorkerAndPassesResultsToDependents) {
  auto w = Worker("w1");
  EXPECT_EQ(worker_id_, 1u);
  json submitted = Post("/api/v1/jobs", kPipeline);
  ASSERT_EQ(submitted["id"], 1);

  auto assign = w->Expect<proto::Assign>();
  ASSERT_TRUE(assign.has_value());
  ASSERT_EQ(assign->tasks.size(), 1u);
  const proto::Assignment prep = assign->tasks[0];
  EXPECT_EQ(prep.task, (TaskId{1, 0}));
  EXPECT_EQ(prep.attempt, 1u);
  EXPECT_EQ(prep.argv, (std::vector<std::string>{"echo", "0"}));
  EXPECT_EQ(prep.cores.size(), 2u);
  EXPECT_EQ(prep.job_name, "pipe");
  EXPECT_EQ(prep.group_name, "prep");
  EXPECT_TRUE(prep.inputs.empty());
  RunToSuccess(*w, prep, "forty-two");

  assign = w->Expect<proto::Assign>();
  ASSERT_TRUE(assign.has_value());
  ASSERT_EQ(assign->tasks.size(), 1u);
  const proto::Assignment use = assign->tasks[0];
  EXPECT_EQ(use.task, (TaskId{1, 1}));
  EXPECT_EQ(use.argv, (std::vector<std::string>{"cat"}));
  EXPECT_EQ(use.inputs, (std::map<TaskId, std::string>{{TaskId{1, 0}, "forty-two"}}));
  RunToSuccess(*w, use, "");

  json job = Get("/api/v1/jobs/1");
  EXPECT_EQ(job["done"], true);
  EXPECT_EQ(job["counts"]["succeeded"], 2);
  ASSERT_EQ(job["tasks"].size(), 2u);
  EXPECT_EQ(job["tasks"][0]["outcome"]["result"], "forty-two");
  json task = Get("/api/v1/tasks/1.1");
  EXPECT_EQ(task["state"], "succeeded");
  EXPECT_TRUE(task.contains("explain"));
  json workers = Get("/api/v1/workers");
  ASSERT_EQ(workers["workers"].size(), 1u);
  EXPECT_EQ(workers["workers"][0]["name"], "w1");
  json status = Get("/api/v1/status");
  EXPECT_EQ(status["jobs"], 1);
  EXPECT_EQ(status["workers_connected"], 1);
  EXPECT_EQ(status["journal_discarded_bytes"], 0);
}

TEST_P(ServerShellTest, RequestsWithoutTheTokenAreRefused) {
  net::HttpClient http(Client(std::string(64, 'f')));
  Result<net::Response> r = http.Get("/api/v1/jobs");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 401);
  FakeWorker w(loop_, Client(std::string(64, 'f')));
  EXPECT_EQ(w.status().code(), StatusCode::kUnauthenticated);
  // The public health check needs none.
  Result<net::Response> health = http.Get("/healthz");
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(health->status, 200);
}

TEST_P(ServerShellTest, StateDirectoryHoldsAPrivateTokenAndTheAccessFile) {
  struct stat st{};
  ASSERT_EQ(::stat((dir_ / "state/token").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  Result<net::AccessInfo> access = net::ReadAccessFile(dir_ / "access.json");
  ASSERT_TRUE(access.ok()) << access.status().ToString();
  EXPECT_EQ(access->token, shell_->token());
  EXPECT_EQ(access->address, "127.0.0.1:" + std::to_string(shell_->port()));
  const std::string join = shell_->JoinCommand();
  EXPECT_NE(join.find("drover worker --server 127.0.0.1:"), std::string::npos) << join;
  EXPECT_NE(join.find("--token " + shell_->token()), std::string::npos) << join;
}

TEST_P(ServerShellTest, AMalformedMessageClosesOnlyItsConnection) {
  auto good = Worker("good");
  FakeWorker bad(loop_, Client());
  ASSERT_TRUE(bad.status().ok());
  bad.SendRaw("{\"v\": 1, \"type\": \"hello\", \"worker_name\": 7}");
  auto error = bad.Expect<proto::Error>();
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code, "invalid_argument");
  ASSERT_TRUE(bad.WaitClosed().has_value());

  // A message before hello is refused the same way.
  FakeWorker early(loop_, Client());
  ASSERT_TRUE(early.status().ok());
  early.Send(proto::Heartbeat{});
  ASSERT_TRUE(early.Expect<proto::Error>().has_value());
  ASSERT_TRUE(early.WaitClosed().has_value());

  Post("/api/v1/jobs", kPipeline);
  auto assign = good->Expect<proto::Assign>();
  ASSERT_TRUE(assign.has_value());
  EXPECT_EQ(assign->tasks.at(0).task, (TaskId{1, 0}));
}

TEST_P(ServerShellTest, BadSubmissionsAndUnknownIdsAreErrors) {
  json err = Post("/api/v1/jobs", R"({"name": "x", "task": [{"id": "a"}]})", 400);
  EXPECT_EQ(err["error"]["code"], "invalid_argument");
  Get("/api/v1/jobs/9", 404);
  Get("/api/v1/tasks/nope", 400);
  Post("/api/v1/jobs/9/cancel", "", 404);
}

// A batch is submitted in order, each job answered on its own, and made
// durable as a whole before the answer (a restart keeps the accepted ones).
TEST_P(ServerShellTest, ABatchOfJobsIsAnsweredJobByJobAndSurvivesARestart) {
  const std::string bad = R"({"name": "x", "task": [{"id": "a", "command": ["true"],
                              "resources": {"mem": "4G"}}]})";
  json answer = Post("/api/v1/jobs/batch",
                     std::string(R"({"jobs": [)") + kPipeline + "," + bad + "," + kPipeline + "]}");
  ASSERT_EQ(answer["jobs"].size(), 3u) << answer.dump();
  EXPECT_EQ(answer["jobs"][0]["id"], 1);
  EXPECT_EQ(answer["jobs"][1]["error"]["code"], "invalid_argument");
  EXPECT_EQ(answer["jobs"][1]["error"]["field"], "task[0].resources.mem");
  EXPECT_EQ(answer["jobs"][2]["id"], 2);
  for (const char* body :
       {"{}", R"({"jobs": []})", R"({"jobs": {}})", R"({"jobs": [], "x": 1})", "[1]", "not json"}) {
    json err = Post("/api/v1/jobs/batch", body, 400);
    EXPECT_EQ(err["error"]["code"], "invalid_argument") << body;
  }
  StopShell();
  StartShell();
  EXPECT_EQ(Get("/api/v1/jobs")["jobs"].size(), 2u);
  EXPECT_EQ(Get("/api/v1/tasks/2.0")["state"], "queued");
}

// ?watch=true over a real session: nothing until the subscriber names a
// job or a task; then its current state, then its changes.
TEST_P(ServerShellTest, AWatchingStreamHearsWhatItNames) {
  ASSERT_EQ(Post("/api/v1/jobs", kPipeline)["id"], 1);
  ASSERT_EQ(Post("/api/v1/jobs", kPipeline)["id"], 2);
  Subscription sub = Subscribe("/api/v1/events?watch=true&batch=true");
  ASSERT_NE(sub.session, nullptr);
  auto session = sub.session;
  loop_.Post([session] { session->SendText(R"({"watch":"2.1"})"); });
  auto first = sub.events->Pop();
  ASSERT_TRUE(first);
  json state = json::parse(*first);
  ASSERT_EQ(state.size(), 1u) << *first;
  EXPECT_EQ(state[0]["task"], "2.1");
  EXPECT_EQ(state[0]["to"], "waiting");
  Post("/api/v1/jobs/1/cancel", "");  // not watched
  Post("/api/v1/jobs/2/cancel", "");
  std::vector<std::string> heard;
  json last;
  while (heard.empty() || heard.back() != "2.1") {
    auto m = sub.events->Pop();
    ASSERT_TRUE(m);
    for (const json& e : json::parse(*m)) {
      heard.push_back(e["task"].get<std::string>());
      last = e;
    }
  }
  EXPECT_EQ(heard, std::vector<std::string>{"2.1"});
  // Its end carries the task as the API shows it, as of that change.
  EXPECT_EQ(last["to"], "canceled");
  EXPECT_EQ(last["info"]["id"], "2.1");
  EXPECT_EQ(last["info"]["state"], "canceled");
  EXPECT_FALSE(state[0].contains("info")) << "not for a task that has not ended";
  loop_.Post([session] { session->Close("done"); });
}

TEST_P(ServerShellTest, EventStreamSendsASnapshotThenChanges) {
  Post("/api/v1/jobs", kPipeline);
  // The cancel of the second task comes after the one awaited: the events
  // inbox outlives the test (Subscription).
  Subscription sub = Subscribe("/api/v1/events?job=1");
  ASSERT_NE(sub.session, nullptr);
  auto& events = sub.events;
  auto& session = sub.session;
  auto first = events->Pop();
  auto second = events->Pop();
  ASSERT_TRUE(first && second);
  EXPECT_EQ(json::parse(*first)["to"], "queued");
  EXPECT_EQ(json::parse(*second)["to"], "waiting");
  Post("/api/v1/jobs/1/cancel", "");
  auto change = events->Pop();
  ASSERT_TRUE(change);
  EXPECT_EQ(json::parse(*change)["to"], "canceled");
  session->Close("done");
}

// An array job bigger than a slice of a read or a cancel (~4 ms a loop
// turn: a few thousand tasks).
constexpr int kBigJob = 25000;
const std::string kBigSpec = R"({"name": "big", "task": [{"id": "t", "command": ["true"],
  "array": "0-)" + std::to_string(kBigJob - 1) + R"("}]})";

TEST_P(ServerShellTest, AJobsTasksComeInBoundedPages) {
  ASSERT_EQ(Post("/api/v1/jobs", kBigSpec)["id"], 1);
  json page = Get("/api/v1/jobs/1");  // the default page
  EXPECT_EQ(page["task_count"], kBigJob);
  EXPECT_EQ(page["tasks"].size(), 1000u);
  EXPECT_EQ(page["offset"], 0);
  EXPECT_EQ(page["next_offset"], 1000);
  page = Get("/api/v1/jobs/1?offset=24500&limit=1000");  // the last, short page
  ASSERT_EQ(page["tasks"].size(), 500u);
  EXPECT_EQ(page["tasks"][0]["id"], "1.24500");
  EXPECT_EQ(page["tasks"][499]["id"], "1.24999");
  EXPECT_TRUE(page["next_offset"].is_null());
  page = Get("/api/v1/jobs/1?offset=24000&limit=1000");  // ends exactly at the end
  EXPECT_EQ(page["tasks"].size(), 1000u);
  EXPECT_TRUE(page["next_offset"].is_null());
  page = Get("/api/v1/jobs/1?offset=25000");  // past the end: empty
  EXPECT_TRUE(page["tasks"].empty());
  EXPECT_EQ(page["task_count"], kBigJob);
  page = Get("/api/v1/jobs/1?limit=0");  // the job's counts only
  EXPECT_TRUE(page["tasks"].empty());
  EXPECT_EQ(page["counts"]["queued"], kBigJob);

  json err = Get("/api/v1/jobs/1?limit=1001", 400);
  EXPECT_EQ(err["error"]["message"], "limit: at most 1000 tasks per page, got 1001");
  err = Get("/api/v1/jobs/1?offset=-5", 400);
  EXPECT_EQ(err["error"]["message"], "offset: expected an unsigned integer, got \"-5\"");
  err = Get("/api/v1/jobs/1?ofset=5", 400);
  EXPECT_EQ(err["error"]["message"], "unknown query parameter \"ofset\" (known: offset, limit)");
  err = Get("/api/v1/jobs/1/report?limit=2000", 400);
  EXPECT_EQ(err["error"]["message"], "limit: at most 1000 tasks per page, got 2000");
  err = Get("/api/v1/jobs/1/report?since=1", 400);
  EXPECT_EQ(err["error"]["code"], "invalid_argument");
}

TEST_P(ServerShellTest, AReportCoversTheWholeJobWithOnePageOfRows) {
  ASSERT_EQ(Post("/api/v1/jobs", kBigSpec)["id"], 1);
  json report = Get("/api/v1/jobs/1/report?offset=24990&limit=100");
  EXPECT_EQ(report["task_count"], kBigJob);
  EXPECT_EQ(report["state"], "pending");
  ASSERT_EQ(report["tasks"].size(), 10u);
  EXPECT_EQ(report["tasks"][0]["id"], "1.24990");
  EXPECT_EQ(report["offset"], 24990);
  EXPECT_TRUE(report["next_offset"].is_null());
  report = Get("/api/v1/jobs/1/report");
  EXPECT_EQ(report["tasks"].size(), 1000u);
  EXPECT_EQ(report["next_offset"], 1000);
}

// The answer comes after the first slice, naming what is left; the rest is
// canceled over the next loop turns.
TEST_P(ServerShellTest, CancelOfABigJobIsAnsweredAtOnceAndFinishesInSlices) {
  ASSERT_EQ(Post("/api/v1/jobs", kBigSpec)["id"], 1);
  json answer = Post("/api/v1/jobs/1/cancel", "");
  EXPECT_EQ(answer["canceled"], true);
  if (answer.contains("remaining")) {
    EXPECT_GT(answer["remaining"].get<int>(), 0);
    EXPECT_LT(answer["remaining"].get<int>(), kBigJob);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  json job;
  while (std::chrono::steady_clock::now() < deadline) {  // polling a condition
    job = Get("/api/v1/jobs/1?limit=0");
    if (job["done"] == true) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(job["counts"]["canceled"], kBigJob);
  EXPECT_EQ(job["done"], true);
}

TEST_P(ServerShellTest, TheEventSnapshotOfABigJobArrivesWhole) {
  ASSERT_EQ(Post("/api/v1/jobs", kBigSpec)["id"], 1);
  Subscription sub = Subscribe("/api/v1/events?job=1");
  ASSERT_NE(sub.session, nullptr);
  auto& events = sub.events;
  auto& session = sub.session;
  std::set<std::string> seen;
  for (int i = 0; i < kBigJob; ++i) {
    auto e = events->Pop();
    ASSERT_TRUE(e) << "after " << i << " events";
    seen.insert(json::parse(*e)["task"].get<std::string>());
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kBigJob));
  loop_.Post([session] { session->Close("done"); });
}

// ?batch=true over a real session: the snapshot and the live events come as
// JSON arrays, the live ones held while a message is being written and sent
// together when the session has written it (WsSession::OnDrained).
TEST_P(ServerShellTest, ABatchedStreamCarriesTheSnapshotAndEveryChange) {
  ASSERT_EQ(Post("/api/v1/jobs", kBigSpec)["id"], 1);
  Subscription sub = Subscribe("/api/v1/events?job=1&batch=true");
  ASSERT_NE(sub.session, nullptr);
  auto& session = sub.session;
  std::map<std::string, std::string> state;
  size_t messages = 0;
  auto take = [&](const std::string& to, size_t want) {
    size_t seen = 0;
    while (seen < want) {
      auto m = sub.events->Pop();
      ASSERT_TRUE(m) << "after " << seen << " of " << want << " '" << to << "' events";
      ++messages;
      json batch = json::parse(*m);
      ASSERT_TRUE(batch.is_array());
      for (const json& e : batch) {
        state[e["task"].get<std::string>()] = e["to"].get<std::string>();
        seen += e["to"] == to;
      }
    }
  };
  take("queued", kBigJob);
  EXPECT_EQ(state.size(), static_cast<size_t>(kBigJob));
  EXPECT_LT(messages, static_cast<size_t>(kBigJob) / 10);
  Post("/api/v1/jobs/1/cancel", "");
  take("canceled", kBigJob);
  for (const auto& [task, to] : state) EXPECT_EQ(to, "canceled") << task;
  loop_.Post([session] { session->Close("done"); });
}

TEST_P(ServerShellTest, WithoutASnapshotOnlyChangesArrive) {
  ASSERT_EQ(Post("/api/v1/jobs", kPipeline)["id"], 1);
  Subscription sub = Subscribe("/api/v1/events?snapshot=false");
  ASSERT_NE(sub.session, nullptr);
  auto& events = sub.events;
  auto& session = sub.session;
  Post("/api/v1/jobs/1/cancel", "");
  auto first = events->Pop();
  ASSERT_TRUE(first);
  EXPECT_EQ(json::parse(*first)["from"], "queued");  // no snapshot entry before it
  EXPECT_EQ(json::parse(*first)["to"], "canceled");
  loop_.Post([session] { session->Close("done"); });
}

TEST_P(ServerShellTest, AJobOverTheTaskLimitIsRefusedNamingTheLimit) {
  json err = Post("/api/v1/jobs",
                  R"({"name": "huge", "task": [{"id": "t", "command": ["true"],
                      "array": "0-1000000"}]})",
                  400);
  EXPECT_EQ(err["error"]["message"],
            "task: the job has 1000001 tasks, more than the limit of 1000000");
  EXPECT_EQ(err["error"]["field"], "task");
}

// Retention with a keep of one second: the finished job is forgotten by
// the server's own timer, and its id then answers 404 "expired", also after
// a restart; the job that is not finished stays.
TEST_P(ServerShellTest, AForgottenJobAnswersExpired) {
  StopShell();
  keep_finished_ = Seconds(1);
  StartShell();
  ASSERT_EQ(Post("/api/v1/jobs", kPipeline)["id"], 1);
  ASSERT_EQ(Post("/api/v1/jobs", kPipeline)["id"], 2);
  Post("/api/v1/jobs/1/cancel", "");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  json err;
  while (std::chrono::steady_clock::now() < deadline) {
    net::HttpClient http(Client());
    Result<net::Response> r = http.Get("/api/v1/jobs/1");
    ASSERT_TRUE(r.ok());
    if (r->status == 404) {
      err = json::parse(r->body);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // polling a condition
  }
  ASSERT_TRUE(err.is_object()) << "job 1 was not forgotten within 20 s";
  EXPECT_EQ(err["error"]["expired"], true);
  EXPECT_NE(err["error"]["message"].get<std::string>().find("job 1 expired"), std::string::npos);
  EXPECT_EQ(Get("/api/v1/tasks/1.0", 404)["error"]["expired"], true);
  EXPECT_FALSE(Get("/api/v1/jobs/9", 404)["error"].contains("expired"));
  Get("/api/v1/jobs/2");
  StopShell();
  StartShell();
  EXPECT_EQ(Get("/api/v1/jobs/1", 404)["error"]["expired"], true);
  Get("/api/v1/jobs/2");
  EXPECT_EQ(Post("/api/v1/jobs", kPipeline)["id"], 3);
}

// Output retention (output_retention.h) with --keep-outputs 3s: the worker
// that holds a finished job's outputs is told to release them by the
// server's own timer, the outputs route then says they were released, and
// a worker that names kept jobs as it attaches hears at once of those past
// it or unknown.
TEST_P(ServerShellTest, AFinishedTasksOutputsAreListed) {
  auto w = Worker("w1");
  RunWithAnOutput(*w);
  json outputs = Get("/api/v1/tasks/1.0/outputs")["outputs"];
  ASSERT_EQ(outputs.size(), 1u) << outputs.dump();
  EXPECT_EQ(outputs[0]["name"], "o.bin") << outputs.dump();
}

// (Whether the outputs are still listed right after the result is not
// checked here: the route answers by the real time since the job ended,
// and a slow disk may hold the result's ack past the keep of 3 s.)
TEST_P(ServerShellTest, AJobsOutputsAreReleasedKeepOutputsAfterItEnded) {
  StopShell();
  keep_outputs_ = Seconds(3);
  StartShell();
  auto w = Worker("w1");
  RunWithAnOutput(*w);

  auto release = w->ExpectPassing<proto::ReleaseOutputs>();
  ASSERT_TRUE(release.has_value());
  EXPECT_EQ(release->jobs, (std::vector<JobId>{1}));
  json gone = Get("/api/v1/tasks/1.0/outputs", 404);
  EXPECT_EQ(gone["error"]["released"], true);
  EXPECT_EQ(gone["error"]["message"],
            "outputs of 1.0 were released 3s after job 1 ended (drover server --keep-outputs)");

  auto w2 = Worker("w2");
  w2->Send(proto::OutputsKept{{1, 42}});
  auto at_once = w2->ExpectPassing<proto::ReleaseOutputs>();
  ASSERT_TRUE(at_once.has_value());
  EXPECT_EQ(at_once->jobs, (std::vector<JobId>{1, 42}));
}

// The assignments of job 1 (tasks a and b with one command, c another)
// that `w` gets, in task order.
std::vector<proto::Assignment> ThreeAssignments(FakeWorker& w) {
  std::vector<proto::Assignment> got;
  while (got.size() < 3) {
    auto assign = w.ExpectPassing<proto::Assign>();
    if (!assign) break;
    for (proto::Assignment& a : assign->tasks) got.push_back(std::move(a));
  }
  std::sort(got.begin(), got.end(), [](const auto& x, const auto& y) { return x.task < y.task; });
  return got;
}
constexpr char kTwoCommands[] = R"({"name": "n", "task": [{"id": "a", "command": ["x", "y"]},
  {"id": "b", "command": ["x", "y"]}, {"id": "c", "command": ["z"]}]})";

// A worker that says it resolves numbered commands gets a command sent to
// it before by its number alone; one that does not, every command whole.
TEST_P(ServerShellTest, ARepeatedCommandGoesByItsNumberToAWorkerThatResolvesThem) {
  auto w = std::make_unique<FakeWorker>(loop_, Client());
  proto::Hello hello = MakeHello("w1");
  hello.argv_ids = true;
  w->Send(hello);
  ASSERT_TRUE(w->Expect<proto::HelloAck>().has_value());
  Post("/api/v1/jobs", kTwoCommands);
  std::vector<proto::Assignment> got = ThreeAssignments(*w);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].argv, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(got[0].argv_id, 1u);
  EXPECT_TRUE(got[1].argv.empty());
  EXPECT_EQ(got[1].argv_id, 1u);
  EXPECT_EQ(got[2].argv, (std::vector<std::string>{"z"}));
  EXPECT_EQ(got[2].argv_id, 2u);
}

// Numbers go to the first kMaxArgvIds distinct commands of a connection;
// later ones go whole, unnumbered.
TEST_P(ServerShellTest, PastTheMostNumbersACommandGoesWhole) {
  constexpr uint32_t kTasks = proto::kMaxArgvIds + 2;
  std::vector<uint32_t> cores(kTasks);
  for (uint32_t i = 0; i < kTasks; ++i) cores[i] = i;
  auto w = std::make_unique<FakeWorker>(loop_, Client());
  proto::Hello hello = MakeHello("wide", cores);
  hello.argv_ids = true;
  w->Send(hello);
  ASSERT_TRUE(w->Expect<proto::HelloAck>().has_value());
  std::string job = R"({"name": "many", "task": [)";
  for (uint32_t i = 0; i < kTasks; ++i) {
    job += (i ? "," : "") + std::string(R"({"id": "t)") + std::to_string(i) +
           R"(", "command": ["c)" + std::to_string(i) + R"("]})";
  }
  Post("/api/v1/jobs", job + "]}");
  std::vector<proto::Assignment> got;
  while (got.size() < kTasks) {
    auto assign = w->ExpectPassing<proto::Assign>();
    ASSERT_TRUE(assign.has_value()) << got.size();
    for (proto::Assignment& a : assign->tasks) got.push_back(std::move(a));
  }
  std::set<uint32_t> numbers;
  size_t unnumbered = 0;
  for (const proto::Assignment& a : got) {
    EXPECT_EQ(a.argv.size(), 1u) << a.task.ToString();  // each command is new: whole
    if (a.argv_id == 0) {
      ++unnumbered;
    } else {
      numbers.insert(a.argv_id);
    }
  }
  EXPECT_EQ(unnumbered, 2u);
  EXPECT_EQ(numbers.size(), proto::kMaxArgvIds);
  EXPECT_EQ(*numbers.rbegin(), proto::kMaxArgvIds);
}

TEST_P(ServerShellTest, AWorkerThatDoesNotResolveNumberedCommandsGetsEveryCommandWhole) {
  auto w = Worker("w1");
  Post("/api/v1/jobs", kTwoCommands);
  std::vector<proto::Assignment> got = ThreeAssignments(*w);
  ASSERT_EQ(got.size(), 3u);
  for (const proto::Assignment& a : got) EXPECT_EQ(a.argv_id, 0u) << a.task.ToString();
  EXPECT_EQ(got[1].argv, (std::vector<std::string>{"x", "y"}));
}

TEST_P(ServerShellTest, ARefusedAssignmentIsPlacedAgainWithoutUsingARetry) {
  auto w = Worker("w1");
  Post("/api/v1/jobs", R"({"name": "r", "task": [{"id": "a", "command": ["x"]}]})");
  auto assign = w->Expect<proto::Assign>();
  ASSERT_TRUE(assign.has_value());
  w->Send(proto::Refused{TaskId{1, 0}, 1, "no room"});
  Barrier(*w);
  json task = Get("/api/v1/tasks/1.0");
  EXPECT_EQ(task["state"], "queued");  // not failed: a refusal is no failure
  EXPECT_EQ(task["reason"], "refused by worker 1: no room");
  EXPECT_EQ(Get("/api/v1/workers")["workers"][0]["refusing"], true);
  // The only worker takes it again once its heartbeat says it caught up.
  w->Send(proto::Heartbeat{});
  auto again = w->ExpectPassing<proto::Assign>();
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->tasks.at(0).task, (TaskId{1, 0}));
  EXPECT_EQ(again->tasks.at(0).attempt, 2u);
}

TEST_P(ServerShellTest, AWorkerRestartedUnderItsNameGetsItsLostTaskAgainAtOnce) {
  auto w = Worker("w1");
  Post("/api/v1/jobs", R"({"name": "long", "task": [{"id": "a", "command": ["sleep"]}]})");
  ASSERT_TRUE(w->Expect<proto::Assign>().has_value());
  w->Send(proto::Started{{{TaskId{1, 0}, 1, TimeFromMicros(1)}}});
  Barrier(*w);
  // kill -9 and start again: a new connection that holds nothing.
  auto again = Worker("w1");
  auto assign = again->ExpectPassing<proto::Assign>();
  ASSERT_TRUE(assign.has_value());
  EXPECT_EQ(assign->tasks.at(0).task, (TaskId{1, 0}));
  EXPECT_EQ(assign->tasks.at(0).attempt, 2u);
  json task = Get("/api/v1/tasks/1.0");
  EXPECT_EQ(task["state"], "assigned");
  EXPECT_EQ(task["attempt"], 2);
}

TEST_P(ServerShellTest, ANameBelongsToTheKeyThatFirstUsedItAcrossRestarts) {
  auto w = Worker("w1");
  auto intruder = std::make_unique<FakeWorker>(loop_, Client());
  ASSERT_TRUE(intruder->status().ok());
  proto::Hello hello = MakeHello("w1");
  hello.key = std::string(64, 'f');
  intruder->Send(hello);
  auto error = intruder->Expect<proto::Error>();
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code, "permission_denied");
  EXPECT_NE(error->message.find("worker name \"w1\" belongs to another worker"),
            std::string::npos)
      << error->message;
  ASSERT_TRUE(intruder->WaitClosed().has_value());
  Barrier(*w);  // the real w1 keeps its connection
  w.reset();
  StopShell();
  StartShell();
  auto later = std::make_unique<FakeWorker>(loop_, Client());
  later->Send(hello);
  error = later->Expect<proto::Error>();
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code, "permission_denied");
  // A hello without a key is refused too.
  auto keyless = std::make_unique<FakeWorker>(loop_, Client());
  proto::Hello bare = MakeHello("w9");
  bare.key.clear();
  keyless->Send(bare);
  error = keyless->Expect<proto::Error>();
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code, "invalid_argument");
  // The owner is welcome back.
  auto owner = Worker("w1");
  EXPECT_EQ(worker_id_, 1u);
}

TEST_P(ServerShellTest, AbsurdOffersAreRefused) {
  auto gpus = std::make_unique<FakeWorker>(loop_, Client());
  proto::Hello hello = MakeHello("big");
  for (uint32_t i = 0; i < 1000; ++i) {
    hello.resources.gpus.push_back(
        core::GpuDevice{i, "GPU-" + std::to_string(i), "A100", 80ull << 30});
  }
  gpus->Send(hello);
  auto error = gpus->Expect<proto::Error>();
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code, "invalid_argument");
  EXPECT_NE(error->message.find("1000 GPUs; at most 64"), std::string::npos) << error->message;
  auto cores = std::make_unique<FakeWorker>(loop_, Client());
  hello = MakeHello("big2", {});
  for (uint32_t i = 0; i < 1'000'000; ++i) hello.resources.cpu_cores.push_back(i);
  cores->Send(hello);
  error = cores->Expect<proto::Error>();
  ASSERT_TRUE(error.has_value());
  EXPECT_NE(error->message.find("1000000 cores; at most 4096"), std::string::npos)
      << error->message;
  EXPECT_EQ(Get("/api/v1/workers")["workers"].size(), 0u);
}

TEST_P(ServerShellTest, RestartRestoresJobs) {
  Post("/api/v1/jobs", kPipeline);
  Post("/api/v1/jobs", kPipeline);
  StopShell();
  StartShell();
  json jobs = Get("/api/v1/jobs");
  ASSERT_EQ(jobs["jobs"].size(), 2u);
  EXPECT_EQ(Get("/api/v1/tasks/2.0")["state"], "queued");
  EXPECT_EQ(Get("/api/v1/tasks/2.1")["state"], "waiting");
  EXPECT_EQ(Post("/api/v1/jobs", kPipeline)["id"], 3);
}

TEST_P(ServerShellTest, TornJournalTailIsCutAndReported) {
  Post("/api/v1/jobs", kPipeline);
  StopShell();
  const std::string journal = dir_ / "state/store/journal";
  const auto size = std::filesystem::file_size(journal);
  ASSERT_GT(size, 0u);
  {
    // A crash in the middle of writing the next record: a header and a few
    // bytes of a payload.
    FILE* f = std::fopen(journal.c_str(), "ab");
    ASSERT_NE(f, nullptr);
    const unsigned char torn[] = {200, 0, 0, 0, 1, 2, 3, 4, '{', '"', 'v'};
    std::fwrite(torn, 1, sizeof(torn), f);
    std::fclose(f);
  }
  StartShell();
  EXPECT_EQ(shell_->discarded_bytes(), 11u);
  EXPECT_EQ(Get("/api/v1/status")["journal_discarded_bytes"], 11);
  EXPECT_EQ(Get("/api/v1/jobs/1")["task_count"], 2);
}

TEST_P(ServerShellTest, JournalCutMidRecordKeepsEarlierJobs) {
  Post("/api/v1/jobs", kPipeline);
  Post("/api/v1/jobs", kPipeline);
  StopShell();
  const std::string journal = dir_ / "state/store/journal";
  const auto size = std::filesystem::file_size(journal);
  std::filesystem::resize_file(journal, size - 3);
  StartShell();
  EXPECT_GT(shell_->discarded_bytes(), 0u);
  EXPECT_EQ(Get("/api/v1/jobs/1")["task_count"], 2);
}

TEST_P(ServerShellTest, WorkerReattachingAfterRestartKeepsItsRunningTask) {
  {
    auto w = Worker("w1");
    Post("/api/v1/jobs", R"({"name": "long", "task": [{"id": "a", "command": ["sleep"]}]})");
    auto assign = w->Expect<proto::Assign>();
    ASSERT_TRUE(assign.has_value());
    w->Send(proto::Started{{{TaskId{1, 0}, 1, TimeFromMicros(1)}}});
    Barrier(*w);
    ASSERT_EQ(Get("/api/v1/tasks/1.0")["state"], "running");
    StopShell();
    ASSERT_TRUE(w->WaitClosed().has_value());
  }
  StartShell();
  auto w = Worker("w1", {{TaskId{1, 0}, 1}});
  EXPECT_EQ(worker_id_, 1u);  // the same id as before the restart
  json task = Get("/api/v1/tasks/1.0");
  EXPECT_EQ(task["state"], "running");
  EXPECT_EQ(task["attempt"], 1);
  // Finishing it is acknowledged; no Assign came before the Ack, so the
  // task was not re-run.
  proto::FinishedTask f{TaskId{1, 0}, 1, {}, TimeFromMicros(2)};
  w->Send(proto::Finished{{f}});
  auto ack = w->Expect<proto::Ack>();
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(Get("/api/v1/tasks/1.0")["state"], "succeeded");
  EXPECT_EQ(Get("/api/v1/tasks/1.0")["attempt"], 1);
}

// An idle-desktop worker's owner message pauses it: nothing is placed
// there, the workers API says why, and a stranger's long note is cut to a
// line rather than kept whole.
TEST_P(ServerShellTest, AnOwnerMessagePausesTheWorkerAndItsNoteIsBounded) {
  auto w = Worker("w1");
  w->Send(proto::Owner{true, std::string(100'000, 'x'), TimeFromMicros(5), 12'000});
  Barrier(*w);
  json workers = Get("/api/v1/workers");
  ASSERT_EQ(workers["workers"].size(), 1u);
  EXPECT_EQ(workers["workers"][0]["paused"], true) << workers.dump(2);
  EXPECT_EQ(workers["workers"][0]["note"].get<std::string>().size(), 256u);
  Post("/api/v1/jobs", R"({"name": "j", "task": [{"id": "a", "command": ["true"]}]})");
  EXPECT_EQ(Get("/api/v1/tasks/1.0")["state"], "queued");
  EXPECT_EQ(Get("/api/v1/tasks/1.0")["explain"], "all workers are in use by their owners");
  w->Send(proto::Owner{false, "owner away", TimeFromMicros(9), 0});
  auto assign = w->Expect<proto::Assign>();
  ASSERT_TRUE(assign.has_value());
  EXPECT_EQ(assign->tasks[0].task, (TaskId{1, 0}));
}

// The previous server sent 1.0#1 to w1 and died before its record was
// durable: the journal has the task queued, the worker reports it running
// on core 2. (w1 was drained, so the journal saw no assignment at all.)
TEST_P(ServerShellTest, AnAttemptTheJournalNeverSawIsAdoptedFromTheWorkersReport) {
  {
    auto w = Worker("w1");
    w->Send(proto::Drain{true, "test"});
    Barrier(*w);
    Post("/api/v1/jobs", R"({"name": "long", "task": [{"id": "a", "command": ["sleep"]}]})");
    ASSERT_EQ(Get("/api/v1/tasks/1.0")["state"], "queued");
    StopShell();
    ASSERT_TRUE(w->WaitClosed().has_value());
  }
  StartShell();
  auto w = Worker("w1", {{TaskId{1, 0}, 1, {2}, {}}});
  json task = Get("/api/v1/tasks/1.0");
  EXPECT_EQ(task["state"], "running") << task.dump(2);
  EXPECT_EQ(task["attempt"], 1);
  EXPECT_EQ(task["cores"], json::array({2})) << task.dump(2);
  proto::FinishedTask f{TaskId{1, 0}, 1, {}, TimeFromMicros(2)};
  w->Send(proto::Finished{{f}});
  // No Assign before the Ack: the adopted attempt was not sent again.
  auto ack = w->Expect<proto::Ack>();
  ASSERT_TRUE(ack.has_value());
  task = Get("/api/v1/tasks/1.0");
  EXPECT_EQ(task["state"], "succeeded");
  EXPECT_EQ(task["attempt"], 1);
}

// A process with the token but no history claims attempt 7 of a
// queued task and reports it finished. Nothing of it counts.
TEST_P(ServerShellTest, AWorkerCannotReportAnAttemptItWasNeverGiven) {
  Post("/api/v1/jobs",
       R"({"name": "l", "task": [{"id": "a", "command": ["x"],
           "resources": {"labels": {"os": "plan9"}}}]})");
  StopShell();
  StartShell();  // a restart: the only time unjournaled attempts are adopted
  auto w = std::make_unique<FakeWorker>(loop_, Client());
  proto::Hello hello = MakeHello("forger");
  proto::FinishedTask forged{TaskId{1, 0}, 7, {}, TimeFromMicros(2)};
  hello.finished = {forged};
  hello.running = {{TaskId{1, 0}, 8, {0}, {}}};
  w->Send(hello);
  ASSERT_TRUE(w->Expect<proto::HelloAck>().has_value());
  auto kill = w->ExpectPassing<proto::Kill>();
  ASSERT_TRUE(kill.has_value());
  EXPECT_EQ(kill->attempt, 8u);
  // The forged result is acknowledged (so a worker forgets it) and ignored.
  auto ack = w->ExpectPassing<proto::Ack>();
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->tasks, (std::vector<proto::TaskAttempt>{{TaskId{1, 0}, 7}}));
  json task = Get("/api/v1/tasks/1.0");
  EXPECT_EQ(task["state"], "queued") << task.dump(2);
  EXPECT_EQ(task["attempt"], 8);  // the killed attempt's number is used up
}

INSTANTIATE_TEST_SUITE_P(PlainAndTls, ServerShellTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "Tls" : "Plain";
                         });

}  // namespace
}  // namespace drover::server
