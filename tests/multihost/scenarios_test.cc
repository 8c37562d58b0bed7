// Fault scenarios on a LAN of network namespaces: every task ends
// exactly once in the right state, counted in a side file per task that
// each attempt appends to ("start ATTEMPT PID EPOCH_MS DIR", "done ATTEMPT").
//
// Each scenario prints one "multihost timing |" line with its detection and
// recovery times, for the table in docs/lan.md.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "../integration/cluster.h"
#include "lan.h"
#include "lan_cluster.h"
#include "net/token.h"

namespace drover::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Quick detection: heartbeat 500 ms; the worker fences its tasks 3 s after
// its last contact (TTL - 2 heartbeats); the server reschedules only after
// the leases expired.
const std::vector<std::string> kTiming = {"--heartbeat", "500ms", "--lease-ttl", "4s"};
// A lost server is retried at least every second.
const std::vector<std::string> kWorker = {"--reconnect-max", "1s"};

void Timing(const std::string& scenario, const std::string& text) {
  std::printf("multihost timing | %s | %s\n", scenario.c_str(), text.c_str());
  std::fflush(stdout);
}

std::string Secs(int64_t ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ms) / 1000.0);
  return buf;
}

Deadline AtMillis(int64_t epoch_ms) { return In(milliseconds(epoch_ms - NowMillis())); }

// A task that records its start, waits for the file `go`, and records its
// end, in <runs><index>.
std::string Blocker(const std::string& runs, const std::string& go) {
  return "f=" + runs +
         "$DROVER_TASK_INDEX; echo \"start $DROVER_ATTEMPT $$ $(date +%s%3N) $PWD\" "
         ">> $f; while [ ! -e " +
         go + " ]; do sleep 0.05; done; echo \"done $DROVER_ATTEMPT\" >> $f";
}

// The same without waiting.
std::string Quick(const std::string& runs) {
  return "f=" + runs +
         "$DROVER_TASK_INDEX; echo \"start $DROVER_ATTEMPT $$ $(date +%s%3N) $PWD\" "
         ">> $f; echo \"done $DROVER_ATTEMPT\" >> $f";
}

struct Start {
  uint32_t attempt = 0;
  pid_t pid = 0;
  int64_t at_ms = 0;
  std::string dir;
};

std::vector<Start> Starts(const std::string& file) {
  std::vector<Start> out;
  for (const std::string& line : Lines(file)) {
    std::istringstream in(line);
    std::string word;
    Start s;
    if (in >> word && word == "start" && in >> s.attempt >> s.pid >> s.at_ms >> s.dir) {
      out.push_back(s);
    }
  }
  return out;
}

std::vector<std::string> Dones(const std::string& file) {
  std::vector<std::string> out;
  for (const std::string& line : Lines(file)) {
    if (line.starts_with("done")) out.push_back(line);
  }
  return out;
}

// Every task of `job` succeeded, and its side file holds exactly one "done",
// from the attempt the server recorded.
void ExpectEachTaskRanOnce(LanCluster& c, uint64_t job, const std::string& runs, size_t tasks) {
  nlohmann::json info = c.Get("/api/v1/jobs/" + std::to_string(job));
  ASSERT_EQ(info["tasks"].size(), tasks) << info.dump(2);
  for (const nlohmann::json& t : info["tasks"]) {
    EXPECT_EQ(t["state"], "succeeded") << t.dump(2);
    const std::string index = std::to_string(t["array_index"].get<int64_t>());
    const std::string file = runs + (index == "-1" ? "0" : index);
    EXPECT_EQ(Dones(file),
              std::vector<std::string>{"done " + std::to_string(t["attempt"].get<int>())})
        << "task " << t["id"] << " side file:\n"
        << ::testing::PrintToString(Lines(file));
  }
}

class MultiHost : public ::testing::Test {
 protected:
  void SetUp() override {
    lan_ = std::make_unique<Lan>();
    ASSERT_TRUE(lan_->ok()) << lan_->error();
    in_cli_ = std::make_unique<EnterNetns>(lan_->Netns("cli"));
    ASSERT_TRUE(in_cli_->ok()) << "cannot enter " << lan_->Netns("cli");
  }
  void TearDown() override {
    cluster_.reset();
    in_cli_.reset();
    lan_.reset();
  }

  LanCluster& Cluster(std::vector<std::string> server_flags, bool bind_all = false) {
    cluster_ = std::make_unique<LanCluster>(*lan_, std::move(server_flags), bind_all);
    return *cluster_;
  }
  // `cores`: what each worker offers ("0": one core, so three blocking
  // tasks run one per worker).
  void StartWorkers(LanCluster& c, const std::string& cores = "0", WorkerStart how = {}) {
    how.extra.insert(how.extra.end(), kWorker.begin(), kWorker.end());
    how.extra.insert(how.extra.end(), {"--cpus", cores});
    for (const char* host : {"w1", "w2", "w3"}) c.StartWorker(host, how);
  }

  std::unique_ptr<Lan> lan_;
  std::unique_ptr<EnterNetns> in_cli_;
  std::unique_ptr<LanCluster> cluster_;
};

// 1. A worker host's cable is pulled for 30 s.
TEST_F(MultiHost, WorkerLinkDownTasksFencedRescheduledElsewhereAndWorkerRejoins) {
  LanCluster& c = Cluster(kTiming);
  c.StartServer();
  // Two cores each: spread puts one task on each worker and leaves room for
  // the task rerun from w1.
  StartWorkers(c, "0-1");
  const std::string runs = c.dir() + "/runs.";
  const std::string go = c.dir() + "/go";
  const uint64_t job = SubmittedJob(c.Drover(
      {"submit", "--name", "spread", "--array", "0-2", "--", "sh", "-c", Blocker(runs, go)}));
  ASSERT_GT(job, 0u);
  EventTap tap(c.options(), job);
  ASSERT_TRUE(tap.WaitForTasksIn("running", 3));
  std::string victim;  // the task on w1
  int64_t victim_index = -1;
  for (int i = 0; i < 3; ++i) {
    const std::string id = std::to_string(job) + "." + std::to_string(i);
    if (c.WorkerOf(c.Get("/api/v1/tasks/" + id)) == "w1") {
      victim = id;
      victim_index = i;
    }
  }
  ASSERT_FALSE(victim.empty()) << "no task on w1: "
                               << c.Get("/api/v1/jobs/" + std::to_string(job)).dump(2);

  const int64_t down = NowMillis();
  ASSERT_TRUE(lan_->SetLink("w1", false).ok());
  Process& w1 = c.worker("w1");
  std::optional<std::string> fenced =
      w1.WaitForLine("running tasks (their leases", In(seconds(60)));
  ASSERT_TRUE(fenced) << w1.output();
  std::optional<std::string> lost = c.server().WaitForLine("declaring it lost", In(seconds(60)));
  ASSERT_TRUE(lost) << c.server().output();
  ASSERT_TRUE(tap.WaitForState(victim, "running", 2));
  // The cable stays out for 30 s in all; w1 cannot re-attach meanwhile.
  EXPECT_FALSE(w1.WaitForLine("attached as worker", AtMillis(down + 30000)));
  std::ofstream(go) << "go\n";
  RunResult wait = c.Drover({"wait", std::to_string(job)});
  EXPECT_EQ(wait.status, 0) << wait.output;

  const int64_t up = NowMillis();
  ASSERT_TRUE(lan_->SetLink("w1", true).ok());
  std::optional<std::string> rejoined = w1.WaitForLine("attached as worker", In(seconds(60)));
  ASSERT_TRUE(rejoined) << w1.output();

  // The victim ran twice, was finished once, and the second time elsewhere.
  const std::string file = runs + std::to_string(victim_index);
  std::vector<Start> starts = Starts(file);
  ASSERT_EQ(starts.size(), 2u) << ::testing::PrintToString(Lines(file));
  EXPECT_EQ(starts[0].attempt, 1u);
  EXPECT_NE(starts[0].dir.find("/work-w1/"), std::string::npos) << starts[0].dir;
  EXPECT_EQ(starts[1].attempt, 2u);
  // Never both at once: w1 had stopped its copy before the rerun began.
  EXPECT_LT(*LogMillis(*fenced), starts[1].at_ms) << "fence: " << *fenced;
  EXPECT_EQ(starts[1].dir.find("/work-w1/"), std::string::npos) << starts[1].dir;
  // w1 stopped its copy (it reported it once back, so it has been reaped).
  EXPECT_EQ(kill(starts[0].pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
  ExpectEachTaskRanOnce(c, job, runs, 3);
  nlohmann::json t = c.Get("/api/v1/tasks/" + victim);
  EXPECT_EQ(t["attempt"], 2) << t.dump(2);
  EXPECT_NE(c.WorkerOf(t), "w1") << t.dump(2);

  // w1 is back in service: three blocking two-core tasks need all three
  // workers.
  const std::string runs2 = c.dir() + "/again.";
  const std::string go2 = c.dir() + "/go2";
  const uint64_t job2 =
      SubmittedJob(c.Drover({"submit", "--name", "again", "--cpus", "2", "--array", "0-2", "--",
                             "sh", "-c", Blocker(runs2, go2)}));
  ASSERT_GT(job2, 0u);
  {
    EventTap tap2(c.options(), job2);
    ASSERT_TRUE(tap2.WaitForTasksIn("running", 3));
  }
  std::set<std::string> hosts;
  for (int i = 0; i < 3; ++i) {
    hosts.insert(
        c.WorkerOf(c.Get("/api/v1/tasks/" + std::to_string(job2) + "." + std::to_string(i))));
  }
  EXPECT_EQ(hosts, (std::set<std::string>{"w1", "w2", "w3"}));
  std::ofstream(go2) << "go\n";
  EXPECT_EQ(c.Drover({"wait", std::to_string(job2)}).status, 0);
  ExpectEachTaskRanOnce(c, job2, runs2, 3);

  Timing("link down 30 s (w1)", "worker fenced its task after " + Secs(*LogMillis(*fenced) - down) +
                                    ", server declared it lost after " +
                                    Secs(*LogMillis(*lost) - down) + ", task restarted on " +
                                    c.WorkerOf(t) + " after " + Secs(starts[1].at_ms - down) +
                                    ", worker re-joined " + Secs(*LogMillis(*rejoined) - up) +
                                    " after the link came back");
}

// 2. The server host's server is killed with kill -9 and restarted on the
// same state dir, with Redis (on its own host) as the store.
TEST_F(MultiHost, ServerKilledAndRestartedWithRedisEveryTaskRunsOnce) {
  // A lease TTL far above a restart (with the Redis leader lease to wait
  // out) keeps this about re-attaching, not fencing.
  LanCluster& rc = Cluster({"--heartbeat", "500ms", "--lease-ttl", "20s", "--redis",
                            "redis://" + Lan::Address("rds") + ":6379/0"});
  Status redis = rc.StartRedis();
  ASSERT_TRUE(redis.ok()) << redis.ToString();
  rc.StartServer();
  StartWorkers(rc);
  const std::string runs = rc.dir() + "/runs.";
  const std::string go = rc.dir() + "/go";
  const uint64_t job = SubmittedJob(rc.Drover(
      {"submit", "--name", "hold", "--array", "0-5", "--", "sh", "-c", Blocker(runs, go)}));
  ASSERT_GT(job, 0u);
  {
    EventTap tap(rc.options(), job);
    ASSERT_TRUE(tap.WaitForTasksIn("running", 3));
  }
  const int64_t killed = NowMillis();
  rc.KillServer(SIGKILL);
  rc.StartServer();
  const int64_t ready = NowMillis();
  int64_t last_attach = 0;
  for (const char* host : {"w1", "w2", "w3"}) {
    std::optional<std::string> line =
        rc.worker(host).WaitForLine("attached as worker", In(seconds(60)));
    ASSERT_TRUE(line) << rc.worker(host).output();
    last_attach = std::max(last_attach, LogMillis(*line).value_or(0));
  }
  std::ofstream(go) << "go\n";
  RunResult wait = rc.Drover({"wait", std::to_string(job)});
  EXPECT_EQ(wait.status, 0) << wait.output << "\nserver:\n" << rc.server().output();
  ExpectEachTaskRanOnce(rc, job, runs, 6);
  // Nothing was re-run: the three that ran through the outage were
  // re-attached (attempt 1, one start each), like the three queued.
  const nlohmann::json info = rc.Get("/api/v1/jobs/" + std::to_string(job));
  size_t reattached = 0;
  for (const nlohmann::json& t : info["tasks"]) {
    const std::string file = runs + std::to_string(t["array_index"].get<int64_t>());
    EXPECT_EQ(Starts(file).size(), 1u) << ::testing::PrintToString(Lines(file));
    EXPECT_EQ(t["attempt"].get<int64_t>(), 1) << t.dump(2);
    if (t["attempt"].get<int64_t>() == 1 && Starts(file).size() == 1) ++reattached;
  }
  EXPECT_EQ(reattached, 6u);
  Timing("server kill -9 + restart (redis)",
         "server ready again after " + Secs(ready - killed) +
             " (Redis leader lease), all workers re-attached after " + Secs(last_attach - killed) +
             ", " + std::to_string(reattached) + " tasks ran once (attempt 1), none re-run");
}

// 3. Delay and loss on every link.
TEST_F(MultiHost, PacketDelayAndLossEveryTaskRunsOnce) {
  const std::vector<std::string> netem = {"delay", "40ms", "10ms", "loss", "2%"};
  Status probe = lan_->Netem("w1", netem);
  if (!probe.ok()) {
    std::printf("multihost: SKIPPED packet delay/loss: tc netem is not available here: %s\n",
                probe.ToString().c_str());
    GTEST_SKIP() << "tc netem is not available: " << probe.ToString();
  }
  ASSERT_TRUE(RunCommand(lan_->Exec("w1", {"tc", "qdisc", "del", "dev", "eth0", "root"})).ok());
  LanCluster& c = Cluster(kTiming);
  c.StartServer();
  StartWorkers(c);
  auto run_batch = [&](const std::string& name) -> int64_t {
    const std::string runs = c.dir() + "/" + name + ".";
    const int64_t t0 = NowMillis();
    RunResult r = c.Drover(
        {"submit", "--name", name, "--array", "0-11", "--wait", "--", "sh", "-c", Quick(runs)});
    const int64_t took = NowMillis() - t0;
    EXPECT_EQ(r.status, 0) << r.output;
    std::smatch m;
    // `submit --wait` prints the job id first.
    uint64_t job = 0;
    if (std::regex_search(r.output, m, std::regex("([0-9]+)"))) job = std::stoull(m[1]);
    EXPECT_GT(job, 0u) << r.output;
    if (job > 0) ExpectEachTaskRanOnce(c, job, runs, 12);
    return took;
  };
  const int64_t clean = run_batch("clean");
  for (const char* host : {"srv", "w1", "w2", "w3", "cli"}) {
    Status s = lan_->Netem(host, netem);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  const int64_t impaired = run_batch("impaired");
  Timing(
      "netem delay 40±10 ms, loss 2% on every host",
      "12 tasks took " + Secs(impaired) + " against " + Secs(clean) + " on a clean LAN (ratio " +
          std::to_string(static_cast<double>(impaired) / std::max<int64_t>(clean, 1)).substr(0, 4) +
          "), each ran once");
}

// 4. The work directory's file system fills up.
TEST_F(MultiHost, FullWorkDirectoryFailsTheTaskWithNoSpaceAndTheWorkerCarriesOn) {
  LanCluster& c = Cluster(kTiming);
  c.StartServer();
  WorkerStart how;
  how.extra = kWorker;
  how.extra.insert(how.extra.end(), {"--cpus", "0"});
  how.tmpfs_size = "1m";
  Process& w3 = c.StartWorker("w3", how);

  const int64_t t0 = NowMillis();
  const uint64_t hog =
      SubmittedJob(c.Drover({"submit", "--name", "hog", "--", "sh", "-c", "head -c 4M /dev/zero"}));
  ASSERT_GT(hog, 0u);
  RunResult wait = c.Drover({"wait", std::to_string(hog)});
  const int64_t failed_after = NowMillis() - t0;
  EXPECT_NE(wait.status, 0) << wait.output;
  nlohmann::json t = c.Get("/api/v1/tasks/" + std::to_string(hog) + ".0");
  EXPECT_EQ(t["state"], "failed") << t.dump(2);
  EXPECT_NE(t["reason"].get<std::string>().find("no space left on device"), std::string::npos)
      << t.dump(2);

  // The disk is still full: a task that writes nothing runs.
  const uint64_t next = SubmittedJob(c.Drover({"submit", "--name", "next", "--", "true"}));
  ASSERT_GT(next, 0u);
  EXPECT_EQ(c.Drover({"wait", std::to_string(next)}).status, 0);
  EXPECT_EQ(c.Get("/api/v1/tasks/" + std::to_string(next) + ".0")["state"], "succeeded");

  // Space freed (as an operator would, inside the worker's mount namespace):
  // a task with output and a result runs too.
  const std::string hog_out = c.dir() + "/work-w3/" + std::to_string(hog) + "/0.1/stdout";
  Status freed =
      RunCommand({"nsenter", "--target", std::to_string(w3.pid()), "--mount", "rm", "-f", hog_out});
  ASSERT_TRUE(freed.ok()) << freed.ToString();
  const uint64_t after = SubmittedJob(c.Drover(
      {"submit", "--name", "after", "--", "sh", "-c", "echo hello; echo ok > $DROVER_RESULT"}));
  ASSERT_GT(after, 0u);
  EXPECT_EQ(c.Drover({"wait", std::to_string(after)}).status, 0);
  nlohmann::json a = c.Get("/api/v1/tasks/" + std::to_string(after) + ".0");
  EXPECT_EQ(a["state"], "succeeded") << a.dump(2);
  EXPECT_EQ(a["outcome"]["result"], "ok\n") << a.dump(2);
  // The same worker process did all of it.
  EXPECT_EQ(kill(w3.pid(), 0), 0);
  EXPECT_EQ(c.WorkerOf(a), "w3");
  Timing("work dir full (1 MiB tmpfs on w3)",
         "task failed with \"" + t["reason"].get<std::string>().substr(0, 60) + "...\" after " +
             Secs(failed_after) + "; the worker ran the next two tasks");
}

// 7. Files between hosts: prep on w1 writes 200 MiB, train on w2
// checks it and writes a model, eval on w3 checks both; the bytes go worker
// to worker, and the server's body counters show they did not pass through
// it.
TEST_F(MultiHost, AFileMovesBetweenHostsPeerToPeerNotThroughTheServer) {
  LanCluster& c = Cluster(kTiming);
  c.StartServer();
  for (const char* host : {"w1", "w2", "w3"}) {
    WorkerStart how;
    how.extra = kWorker;
    how.extra.insert(how.extra.end(), {"--label", std::string("node=") + host});
    c.StartWorker(host, how);
  }
  auto body_bytes_sent = [&]() -> uint64_t {
    Result<std::string> metrics = c.Api().GetText("/metrics");
    std::smatch m;
    if (!metrics.ok() ||
        !std::regex_search(*metrics, m,
                           std::regex("drover_http_body_bytes_total\\{direction=\"sent\"\\} "
                                      "([0-9]+)"))) {
      return UINT64_MAX;
    }
    return std::stoull(m[1]);
  };
  const uint64_t before = body_bytes_sent();
  const std::string check =
      "cd \"$DROVER_INPUTS\" && for r in *.result; do d=\"${r%.result}\"; "
      "test \"$(cat \"$d\"/*.bin | sha256sum | cut -d' ' -f1)\" = \"$(cat \"$r\")\" || exit 9; "
      "done; ls *.result | wc -l > \"$DROVER_RESULT\"";
  auto step = [&](const std::string& id, const std::string& node, nlohmann::json deps,
                  const std::string& command) {
    nlohmann::json t = {
        {"id", id}, {"resources", {{"labels", {{"node", node}}}}}, {"command", command}};
    if (!deps.empty()) t["depends_on"] = deps;
    return t;
  };
  nlohmann::json spec = {
      {"name", "files"},
      {"task",
       {step("prep", "w1", nlohmann::json::array(),
             "head -c 209715200 /dev/urandom > $DROVER_OUTPUT_DIR/data.bin && "
             "sha256sum < $DROVER_OUTPUT_DIR/data.bin | cut -d' ' -f1 > $DROVER_RESULT"),
        step("train", "w2", {"prep"},
             check + " && head -c 4194304 /dev/urandom > $DROVER_OUTPUT_DIR/model.bin && "
                     "sha256sum < $DROVER_OUTPUT_DIR/model.bin | cut -d' ' -f1 > $DROVER_RESULT"),
        step("eval", "w3", {"prep", "train"}, check)}}};
  const int64_t t0 = NowMillis();
  Result<nlohmann::json> posted = c.Api().Post("/api/v1/jobs", spec.dump());
  ASSERT_TRUE(posted.ok()) << posted.status().ToString();
  const std::string job = std::to_string((*posted)["id"].get<uint64_t>());
  RunResult wait = c.Drover({"wait", job});
  ASSERT_EQ(wait.status, 0) << wait.output << c.Get("/api/v1/jobs/" + job).dump(2);
  const int64_t took = NowMillis() - t0;
  for (int i = 0; i < 3; ++i) {
    nlohmann::json t = c.Get("/api/v1/tasks/" + job + "." + std::to_string(i));
    EXPECT_EQ(c.WorkerOf(t), "w" + std::to_string(i + 1)) << t.dump(2);
  }
  EXPECT_EQ(c.Get("/api/v1/tasks/" + job + ".2")["outcome"]["result"], "2\n");
  const uint64_t after = body_bytes_sent();
  ASSERT_NE(after, UINT64_MAX);
  EXPECT_LT(after - before, 10ull << 20)
      << "the server sent " << (after - before) << " body bytes while 400 MiB moved";
  Timing("200 MiB file, prep on w1 -> train on w2 -> eval on w3",
         "pipeline done in " + Secs(took) + "; the server sent " +
             std::to_string((after - before) >> 10) + " KiB of bodies");
}

// 8. w2 cannot reach w1 (a route cut on w2), while the server reaches
// both: the file w1 wrote reaches w2 through the server, checked by its
// SHA-256; w2's log says so; the server fetched it once from w1 (its relay
// counter is the file's size) and sent it to w2.
TEST_F(MultiHost, AFileGoesThroughTheServerWhenTheHolderIsUnreachable) {
  LanCluster& c = Cluster(kTiming);
  c.StartServer();
  for (const char* host : {"w1", "w2"}) {
    WorkerStart how;
    how.extra = kWorker;
    how.extra.insert(how.extra.end(), {"--label", std::string("node=") + host});
    c.StartWorker(host, how);
  }
  ASSERT_TRUE(lan_->CutRoute("w2", "w1").ok());
  auto metric = [&](const std::string& pattern) -> uint64_t {
    Result<std::string> metrics = c.Api().GetText("/metrics");
    std::smatch m;
    if (!metrics.ok() || !std::regex_search(*metrics, m, std::regex(pattern + " ([0-9]+)"))) {
      return UINT64_MAX;
    }
    return std::stoull(m[1]);
  };
  const std::string sent = "drover_http_body_bytes_total\\{direction=\"sent\"\\}";
  const uint64_t sent_before = metric(sent);
  constexpr uint64_t kSize = 6 << 20;
  nlohmann::json spec = {
      {"name", "relay"},
      {"task",
       {{{"id", "prep"},
         {"resources", {{"labels", {{"node", "w1"}}}}},
         {"command", "head -c " + std::to_string(kSize) +
                         " /dev/urandom > $DROVER_OUTPUT_DIR/model.bin && "
                         "sha256sum < $DROVER_OUTPUT_DIR/model.bin | cut -d' ' -f1 > "
                         "$DROVER_RESULT"}},
        {{"id", "use"},
         {"depends_on", {"prep"}},
         {"resources", {{"labels", {{"node", "w2"}}}}},
         {"command",
          "cd \"$DROVER_INPUTS\" && for r in *.result; do d=\"${r%.result}\"; "
          "test \"$(sha256sum < \"$d/model.bin\" | cut -d' ' -f1)\" = \"$(cat \"$r\")\" || exit 9; "
          "done; echo checked > \"$DROVER_RESULT\""}}}}};
  const int64_t t0 = NowMillis();
  Result<nlohmann::json> posted = c.Api().Post("/api/v1/jobs", spec.dump());
  ASSERT_TRUE(posted.ok()) << posted.status().ToString();
  const std::string job = std::to_string((*posted)["id"].get<uint64_t>());
  RunResult wait = c.Drover({"wait", job});
  ASSERT_EQ(wait.status, 0) << wait.output << c.Get("/api/v1/jobs/" + job).dump(2) << "\nw2:\n"
                            << c.worker("w2").output() << "\nserver:\n"
                            << c.server().output();
  const int64_t took = NowMillis() - t0;
  nlohmann::json use = c.Get("/api/v1/tasks/" + job + ".1");
  EXPECT_EQ(c.WorkerOf(use), "w2") << use.dump(2);
  EXPECT_EQ(use["outcome"]["result"], "checked\n") << use.dump(2);
  EXPECT_EQ(use["attempt"], 1) << "not refused first: " << use.dump(2);
  std::optional<std::string> said =
      c.worker("w2").WaitForLine("input " + job + ".0/model.bin: holder worker", In(seconds(5)));
  ASSERT_TRUE(said) << c.worker("w2").output();
  EXPECT_TRUE(std::regex_search(
      *said, std::regex("holder worker [0-9]+ unreachable \\(.*No route to host.*\\); fetching "
                        "through the server")))
      << *said;
  EXPECT_TRUE(c.worker("w2").WaitForLine("through the server (from worker", In(seconds(5))))
      << c.worker("w2").output();
  EXPECT_TRUE(c.server().WaitForLine("fetching it through the server", In(seconds(5))))
      << c.server().output();
  EXPECT_EQ(metric("drover_file_relay_bytes_total"), kSize);
  EXPECT_EQ(metric("drover_file_relay_files_total"), 1u);
  const uint64_t sent_after = metric(sent);
  ASSERT_NE(sent_after, UINT64_MAX);
  EXPECT_GE(sent_after - sent_before, kSize) << "w2 downloaded it from the server";
  Timing("6 MiB file, w2 cannot reach its holder w1",
         "through the server in " + Secs(took) + " (pipeline); the server relayed " +
             std::to_string(kSize >> 10) + " KiB and sent " +
             std::to_string((sent_after - sent_before) >> 10) + " KiB of bodies");
}

// Connections from the attacker host that hold the server's port busy.
std::vector<int> Attack(const std::string& netns, int each) {
  std::vector<int> fds;
  std::thread([&] {
    EnterNetns in(netns);
    if (!in.ok()) return;
    std::mt19937 rng(7);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(kLanPort);
    inet_pton(AF_INET, Lan::Address("srv").c_str(), &to.sin_addr);
    const std::string hello_cut("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11);
    const std::string half_http = "GET /api/v1/status HTTP/1.1\r\nHost: 10.213.0.10\r\nAuthor";
    for (int kind = 0; kind < 4; ++kind) {
      for (int i = 0; i < each; ++i) {
        const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
          if (fd >= 0) close(fd);
          continue;
        }
        std::string bytes;
        if (kind == 0) {
          for (int b = 0; b < 4096; ++b) bytes.push_back(static_cast<char>(rng()));
        } else if (kind == 1) {
          bytes = hello_cut;
          for (int b = 0; b < 40; ++b) bytes.push_back(static_cast<char>(rng()));
        } else if (kind == 2) {
          bytes = half_http;
        }  // kind 3: connect and say nothing
        if (!bytes.empty()) (void)send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
        fds.push_back(fd);
      }
    }
  }).join();
  return fds;
}

// 5. Garbage and half-open connections from another host.
TEST_F(MultiHost, GarbageAndHalfOpenConnectionsLeaveWorkersAndClientsUnaffected) {
  LanCluster& c = Cluster(kTiming);
  c.StartServer();
  StartWorkers(c);
  auto api_ms = [&] {
    const int64_t t0 = NowMillis();
    nlohmann::json s = c.Get("/api/v1/status");
    EXPECT_TRUE(s.is_object()) << s.dump();
    return NowMillis() - t0;
  };
  const int64_t calm = api_ms();
  std::vector<int> fds = Attack(lan_->Netns("rds"), 25);
  EXPECT_GE(fds.size(), 90u) << "the attacker could not connect";
  const int64_t busy = api_ms();
  const std::string runs = c.dir() + "/runs.";
  const int64_t t0 = NowMillis();
  RunResult r = c.Drover(
      {"submit", "--name", "amid", "--array", "0-8", "--wait", "--", "sh", "-c", Quick(runs)});
  const int64_t took = NowMillis() - t0;
  EXPECT_EQ(r.status, 0) << r.output << "\nserver:\n" << c.server().output();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("([0-9]+)")));
  ExpectEachTaskRanOnce(c, std::stoull(m[1]), runs, 9);
  // No worker was dropped.
  const nlohmann::json workers = c.Get("/api/v1/workers");
  for (const nlohmann::json& w : workers["workers"]) {
    EXPECT_FALSE(w.value("lost", false)) << w.dump(2);
  }
  for (int fd : fds) close(fd);
  Timing("garbage + half-open connections (" + std::to_string(fds.size()) + " from rds)",
         "API answered in " + std::to_string(busy) + " ms under attack against " +
             std::to_string(calm) + " ms before; 9 tasks finished in " + Secs(took) +
             ", no worker lost");
}

// 6. Workers on other hosts find the server by its beacon, over TLS; an
// impostor's beacons (another cluster token) are ignored and logged.
TEST_F(MultiHost, WorkersDiscoverTheServerAcrossHostsAndIgnoreAnImpostor) {
  LanCluster& c =
      Cluster({"--heartbeat", "500ms", "--lease-ttl", "4s", "--beacon-interval", "200ms"},
              /*bind_all=*/true);
  // The impostor: a real drover server on "rds" with a state dir (and so a
  // token) of its own, beaconing on the same port.
  Process impostor(lan_->Exec(
      "rds", {DROVER_BINARY, "server", "--bind", "0.0.0.0", "--port", "7210", "--state-dir",
              c.dir() + "/impostor", "--access-file", "-", "--beacon-interval", "200ms"}));
  ASSERT_TRUE(impostor.WaitForLine("drover: beacon on UDP port", In(kLanStartTimeout)))
      << impostor.output();
  // w1 listens before the real server runs, so it can only hear the
  // impostor at first. It has the real cluster's token (made here, as an
  // operator copies it to each machine; the server loads it).
  Result<std::string> token = net::LoadOrCreateToken(c.dir() + "/state/token");
  ASSERT_TRUE(token.ok()) << token.status().ToString();
  WorkerStart how;
  how.extra = kWorker;
  how.extra.insert(how.extra.end(), {"--cpus", "0"});
  how.discover = true;
  how.wait_attached = false;
  Process& w1 = c.StartWorker("w1", how);
  std::optional<std::string> ignored =
      w1.WaitForLine("ignored a beacon from " + Lan::Address("rds"), In(seconds(30)));
  ASSERT_TRUE(ignored) << w1.output();
  EXPECT_NE(ignored->find("bad HMAC"), std::string::npos) << *ignored;

  const int64_t t0 = NowMillis();
  Process& server = c.StartServer();
  ASSERT_TRUE(server.WaitForLine("drover: beacon on UDP port", In(kLanStartTimeout)))
      << server.output();
  for (const char* host : {"w2", "w3"}) c.StartWorker(host, how);
  int64_t last_attach = 0;
  for (const char* host : {"w1", "w2", "w3"}) {
    Process& w = c.worker(host);
    std::optional<std::string> found = w.WaitForLine("drover: discovered server", In(seconds(30)));
    ASSERT_TRUE(found) << w.output();
    EXPECT_NE(found->find("at " + Lan::Address("srv") + ":7210"), std::string::npos) << *found;
    std::optional<std::string> attached = w.WaitForLine("attached as worker", In(seconds(30)));
    ASSERT_TRUE(attached) << w.output();
    last_attach = std::max(last_attach, LogMillis(*attached).value_or(0));
  }
  // The cluster works over TLS.
  nlohmann::json workers = c.Get("/api/v1/workers");
  EXPECT_EQ(workers["workers"].size(), 3u) << workers.dump(2);
  EXPECT_TRUE(c.options().tls);
  const std::string runs = c.dir() + "/runs.";
  RunResult r = c.Drover(
      {"submit", "--name", "found", "--array", "0-5", "--wait", "--", "sh", "-c", Quick(runs)});
  EXPECT_EQ(r.status, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("([0-9]+)")));
  ExpectEachTaskRanOnce(c, std::stoull(m[1]), runs, 6);
  Timing("discovery across hosts (TLS, beacon every 200 ms)",
         "3 workers attached " + Secs(last_attach - t0) +
             " after the server started; the impostor's beacons from " + Lan::Address("rds") +
             " were ignored and logged (bad HMAC)");
}

}  // namespace
}  // namespace drover::testing
