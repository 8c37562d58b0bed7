// The data plane with real processes (docs/design.md, "Data plane"): files a
// task leaves in $DROVER_OUTPUT_DIR become its outputs (listed with size and
// SHA-256), and a dependent on another worker finds them under
// $DROVER_INPUTS/<task id>/, fetched from the holder's file service with a
// grant, not through the server; each worker fetches a file once; a
// corrupted transfer is caught by the hash and retried; a worker whose cache
// cannot hold an input refuses the attempt and another one runs it; the
// file service refuses requests without a valid grant; a producer whose
// only holder was killed runs again; the server pulls a task's output from
// its holder into its store for a worker that cannot reach it, and nothing
// else (the worker's side of that fallback: tests/multihost).
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <regex>
#include <thread>

#include "cluster.h"
#include "file_service.h"
#include "net/http_client.h"

namespace drover::testing {
namespace {

// True when no attempt of the task (from GET /api/v1/tasks/ID) failed.
bool NoAttemptFailed(const nlohmann::json& task) {
  for (const nlohmann::json& a : task.value("attempts", nlohmann::json::array())) {
    if (a.value("state", "") == "failed") return false;
  }
  return true;
}

// A three-step pipeline over three workers: prep on a writes a file (and
// its hash as its result), train on b checks it and writes a model, eval on
// c checks both. Each step checks what it read against the hash its
// producer computed; a mismatch fails the step.
constexpr char kPipeline[] = R"toml(name = "files"

[[task]]
id = "prep"
resources = { labels = { node = "a" } }
command = """
head -c 20971520 /dev/urandom > "$DROVER_OUTPUT_DIR/data.bin"
mkdir -p "$DROVER_OUTPUT_DIR/meta" && echo v1 > "$DROVER_OUTPUT_DIR/meta/version"
sha256sum < "$DROVER_OUTPUT_DIR/data.bin" | cut -d' ' -f1 > "$DROVER_RESULT"
"""

[[task]]
id = "train"
depends_on = ["prep"]
resources = { labels = { node = "b" } }
command = """
set -e
cd "$DROVER_INPUTS"
for r in *.result; do d="${r%.result}"; test "$(sha256sum < "$d/data.bin" | cut -d' ' -f1)" = "$(cat "$r")"; test "$(cat "$d/meta/version")" = v1; done
head -c 1048576 /dev/urandom > "$DROVER_OUTPUT_DIR/model.bin"
sha256sum < "$DROVER_OUTPUT_DIR/model.bin" | cut -d' ' -f1 > "$DROVER_RESULT"
"""

[[task]]
id = "eval"
depends_on = ["prep", "train"]
resources = { labels = { node = "c" } }
command = """
set -e
cd "$DROVER_INPUTS"
n=0
for r in *.result; do d="${r%.result}"; f="$(ls "$d" | grep -v meta)"; test "$(sha256sum < "$d/$f" | cut -d' ' -f1)" = "$(cat "$r")"; n=$((n+1)); done
test $n = 2
echo checked $n > "$DROVER_RESULT"
"""
)toml";

TEST(DataPlaneTest, AFileWrittenOnOneWorkerReachesDependentsOnOthersPeerToPeer) {
  Cluster c;
  c.StartServer();
  Process& a = c.StartWorker("a", {"--label", "node=a"});
  const uint16_t a_port = FilesPort(a);
  ASSERT_NE(a_port, 0) << a.output();
  c.StartWorker("b", {"--label", "node=b"});
  c.StartWorker("c", {"--label", "node=c"});
  RunResult run = c.Drover({"run", c.WriteFile("files.toml", kPipeline)});
  ASSERT_EQ(run.status, 0) << run.output << c.server()->output() << a.output();
  const uint64_t job = RunJobId(run.output);
  const std::string j = std::to_string(job);

  // prep's outputs are recorded with the task: names, sizes, hashes, holder.
  nlohmann::json prep = c.Get("/api/v1/tasks/" + j + ".0");
  const nlohmann::json& outputs = prep["outcome"]["outputs"];
  ASSERT_EQ(outputs.size(), 2u) << prep.dump(2);
  EXPECT_EQ(outputs[0]["name"], "data.bin");
  EXPECT_EQ(outputs[0]["size"], 20971520);
  std::string result = prep["outcome"]["result"];
  EXPECT_EQ(outputs[0]["sha256"].get<std::string>() + "\n", result);
  EXPECT_EQ(outputs[1]["name"], "meta/version");
  EXPECT_EQ(prep["outcome"]["outputs_on"], prep["worker"]);
  EXPECT_EQ(c.Get("/api/v1/tasks/" + j + ".2")["outcome"]["result"], "checked 2\n");

  // `drover status` shows them.
  RunResult status = c.Drover({"status", j + ".0"});
  EXPECT_NE(status.output.find("outputs (on worker"), std::string::npos) << status.output;
  EXPECT_NE(status.output.find("data.bin"), std::string::npos) << status.output;
  EXPECT_NE(status.output.find("20 MiB"), std::string::npos) << status.output;

  // `drover get` downloads them from a, checked, under their names.
  const std::string got = c.dir() + "/got";
  RunResult get = c.Drover({"get", j + ".0", "-o", got});
  ASSERT_EQ(get.status, 0) << get.output;
  RunResult sum =
      RunToEnd({"/bin/sh", "-c",
                "sha256sum < " + got + "/data.bin | cut -d' ' -f1; cat " + got + "/meta/version"},
               In(kStartTimeout));
  EXPECT_EQ(sum.output, result + "v1\n");
  RunResult one = c.Drover({"get", j + ".0", "meta/version", "-o", got + "/one"});
  ASSERT_EQ(one.status, 0) << one.output;
  EXPECT_EQ(Lines(got + "/one/meta/version"), std::vector<std::string>{"v1"});
  EXPECT_EQ(Lines(got + "/one/data.bin"), std::vector<std::string>{}) << "only what was asked";
  RunResult missing = c.Drover({"get", j + ".0", "nope.bin", "-o", got});
  EXPECT_NE(missing.status, 0);
  EXPECT_NE(missing.output.find("no output named nope.bin"), std::string::npos) << missing.output;

  // The bytes went from a to b and to c (once each: two fetches of each
  // of prep's two files), not through the server.
  nlohmann::json stats = FilesStats(c, "a", a_port);
  EXPECT_EQ(stats["served_files"], 7)
      << "two each for b and c, three for drover get: " << stats.dump();
  EXPECT_GE(stats["served_bytes"].get<uint64_t>(), 2u * 20971520) << stats.dump();
  Result<std::string> metrics = c.Api().GetText("/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status().ToString();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(*metrics, m,
                                std::regex("drover_http_body_bytes_total\\{direction=\"sent\"\\} "
                                           "([0-9]+)")))
      << metrics->substr(0, 2000);
  EXPECT_LT(std::stoull(m[1]), 20971520ull) << "file bytes passed through the server";
}

// The same input for 20 tasks on one worker is fetched there once.
TEST(DataPlaneTest, TwentyTasksOnOneWorkerFetchTheirInputOnce) {
  Cluster c;
  c.StartServer();
  Process& a = c.StartWorker("a", {"--label", "node=a"});
  const uint16_t a_port = FilesPort(a);
  c.StartWorker("b", {"--label", "node=b", "--cpus", "0-1"});
  RunResult run = c.Drover({"run", c.WriteFile("sweep.toml", R"toml(name = "sweep"

[[task]]
id = "prep"
resources = { labels = { node = "a" } }
command = "head -c 4194304 /dev/urandom > $DROVER_OUTPUT_DIR/set.bin && sha256sum < $DROVER_OUTPUT_DIR/set.bin | cut -d' ' -f1 > $DROVER_RESULT"

[[task]]
id = "use"
array = "0-19"
depends_on = ["prep"]
resources = { labels = { node = "b" }, cpus = 0.1 }
command = "cd $DROVER_INPUTS && for r in *.result; do test \"$(sha256sum < ${r%.result}/set.bin | cut -d' ' -f1)\" = \"$(cat $r)\"; done"
)toml")});
  ASSERT_EQ(run.status, 0) << run.output;
  nlohmann::json stats = FilesStats(c, "a", a_port);
  EXPECT_EQ(stats["served_files"], 1) << stats.dump();
  EXPECT_EQ(stats["served_bytes"], 4194304) << stats.dump();
}

// A transfer with a flipped byte (the holder's test hook) fails the hash
// check; the attempt is refused, not failed, naming the copy; that copy
// was the only one, so the producer runs again, and the dependent gets
// the new one.
TEST(DataPlaneTest, ACorruptedTransferIsCaughtAndRetried) {
  Cluster c;
  c.StartServer();
  c.StartWorker("a", {"--label", "node=a"}, {"DROVER_TEST_CORRUPT_SERVES=1"});
  Process& b = c.StartWorker("b", {"--label", "node=b"});
  RunResult run = c.Drover({"run", c.WriteFile("corrupt.toml", R"toml(name = "corrupt"

[[task]]
id = "prep"
resources = { labels = { node = "a" } }
command = "head -c 1048576 /dev/urandom > $DROVER_OUTPUT_DIR/x.bin"

[[task]]
id = "use"
depends_on = ["prep"]
resources = { labels = { node = "b" } }
command = "test -s $DROVER_INPUTS/*/x.bin"
)toml")});
  ASSERT_EQ(run.status, 0) << run.output << b.output();
  EXPECT_TRUE(b.WaitForLine("sha256 mismatch", In(kStartTimeout))) << b.output();
  const uint64_t job = RunJobId(run.output);
  nlohmann::json use = c.Get("/api/v1/tasks/" + std::to_string(job) + ".1");
  EXPECT_EQ(use["state"], "succeeded");
  EXPECT_TRUE(NoAttemptFailed(use)) << use.dump(2);
  nlohmann::json prep = c.Get("/api/v1/tasks/" + std::to_string(job) + ".0");
  EXPECT_EQ(prep["attempt"], 2) << prep.dump(2);
  EXPECT_NE(prep.dump().find("rerun: its outputs failed their SHA-256 check from worker"),
            std::string::npos)
      << prep.dump(2);
}

// A worker whose cache cannot hold an input refuses the attempt (no failure
// counted) and another worker runs the task.
TEST(DataPlaneTest, AnInputTooLargeForTheCacheGoesToAnotherWorker) {
  Cluster c;
  c.StartServer();
  c.StartWorker("a", {"--label", "node=a"});
  Process& small = c.StartWorker("small", {"--label", "role=use", "--cache-size", "2MiB"});
  const uint64_t job =
      Post(c, {{"name", "big-files"},
               {"task",
                {{{"id", "prep"},
                  {"resources", {{"labels", {{"node", "a"}}}}},
                  {"command", "head -c 8388608 /dev/zero > $DROVER_OUTPUT_DIR/big"}},
                 {{"id", "use"},
                  {"depends_on", {"prep"}},
                  {"resources", {{"labels", {{"role", "use"}}}}},
                  {"command", "test $(cat $DROVER_INPUTS/*/big | wc -c) = 8388608"}}}}});
  ASSERT_GT(job, 0u);
  // It cannot run on `small` alone: each try is refused there.
  ASSERT_TRUE(small.WaitForLine("cannot hold", In(kJobTimeout))) << small.output();
  c.StartWorker("roomy", {"--label", "role=use"});
  EventTap tap(c.Api().options(), job);
  ASSERT_TRUE(tap.WaitForState(std::to_string(job) + ".1", "succeeded"))
      << c.Get("/api/v1/tasks/" + std::to_string(job) + ".1").dump(2)
      << c.Drover({"workers"}).output;
  nlohmann::json t = c.Get("/api/v1/tasks/" + std::to_string(job) + ".1");
  EXPECT_TRUE(NoAttemptFailed(t)) << t.dump(2);
}

// Outputs that are not plain files, or too large, fail the task with a
// reason that names them.
TEST(DataPlaneTest, BadOrOversizedOutputsFailTheTaskWithAReason) {
  Cluster c;
  c.StartServer();
  c.StartWorker("a", {"--max-output", "1MiB"});
  const std::string big = std::to_string(SubmittedJob(c.Drover(
      {"submit", "--", "sh", "-c", "head -c 2097152 /dev/zero > $DROVER_OUTPUT_DIR/big"})));
  const std::string link_sh = std::to_string(SubmittedJob(
      c.Drover({"submit", "--", "sh", "-c", "ln -s /etc/passwd $DROVER_OUTPUT_DIR/pw"})));
  for (const std::string& job : {big, link_sh}) {
    RunResult wait = c.Drover({"wait", job});
    EXPECT_NE(wait.status, 0) << wait.output;
  }
  nlohmann::json b = c.Get("/api/v1/tasks/" + big + ".0");
  EXPECT_EQ(b["state"], "failed");
  EXPECT_NE(b["reason"].get<std::string>().find("max_output"), std::string::npos) << b.dump(2);
  nlohmann::json l = c.Get("/api/v1/tasks/" + link_sh + ".0");
  EXPECT_EQ(l["state"], "failed");
  EXPECT_NE(l["reason"].get<std::string>().find("outside the output directory"), std::string::npos)
      << l.dump(2);
}

// The file service serves nothing without a grant the server signed for
// that file and requester; each refusal is logged.
TEST(DataPlaneTest, TheFileServiceRefusesRequestsWithoutAValidGrant) {
  Cluster c;
  c.StartServer();
  Process& a = c.StartWorker("a");
  const uint16_t port = FilesPort(a);
  ASSERT_NE(port, 0);
  const std::string sha(64, 'a');
  net::HttpClient http = FilesClient(c, "a", port);
  struct Case {
    std::string target;
    std::map<std::string, std::string> headers;
    int status;
  };
  const std::vector<Case> cases = {
      {"/v1/files/" + sha, {}, 403},
      {"/v1/files/" + sha, {{"X-Drover-Grant", "v1.forged"}, {"X-Drover-Requester", "w9"}}, 403},
      {"/v1/files/../../etc/passwd", {{"X-Drover-Grant", "x"}}, 404},
      {"/v1/files/%2e%2e%2fetc%2fpasswd", {{"X-Drover-Grant", "x"}}, 404},
      {"/v1/files/..%2f..%2f" + sha.substr(6), {{"X-Drover-Grant", "x"}}, 404},
      {"/v1/files/" + std::string(64, 'G'), {{"X-Drover-Grant", "x"}}, 400},
  };
  for (const Case& k : cases) {
    net::ClientRequest request;
    request.target = k.target;
    request.headers = k.headers;
    Result<net::Response> r = http.Send(request);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status, k.status) << k.target << ": " << r->body;
  }
  nlohmann::json stats = FilesStats(c, "a", port);
  EXPECT_EQ(stats["served_files"], 0);
  EXPECT_GE(stats["refused"].get<int>(), 3);
  EXPECT_TRUE(a.WaitForLine("file service: refused", In(kStartTimeout))) << a.output();
}

// The fallback through the server (server/file_relay.h): POST
// /api/v1/files/{sha256}/pull makes the server fetch an output from its
// holder into its file store, once; it refuses without the token, for a
// malformed name, an unknown worker or task, and a file that is not an
// output of that task held by that worker; each refusal is logged.
TEST(DataPlaneTest, TheServerPullsOnlyATasksOutputFromItsHolder) {
  Cluster c;
  c.StartServer();
  Process& a = c.StartWorker("a", {"--label", "node=a"});
  c.StartWorker("b", {"--label", "node=b"});
  const uint64_t job =
      Post(c, {{"name", "relay"},
               {"task",
                {{{"id", "prep"},
                  {"resources", {{"labels", {{"node", "a"}}}}},
                  {"command", "head -c 3145728 /dev/urandom > $DROVER_OUTPUT_DIR/x.bin"}}}}});
  ASSERT_GT(job, 0u);
  const std::string prep = std::to_string(job) + ".0";
  {
    EventTap tap(c.Api().options(), job);
    ASSERT_TRUE(tap.WaitForState(prep, "succeeded")) << c.Get("/api/v1/tasks/" + prep).dump(2);
  }
  const nlohmann::json task = c.Get("/api/v1/tasks/" + prep);
  const std::string sha = task["outcome"]["outputs"][0]["sha256"];
  const uint64_t holder = task["outcome"]["outputs_on"];
  uint64_t other = 0;
  const nlohmann::json workers = c.Get("/api/v1/workers");
  for (const nlohmann::json& w : workers["workers"]) {
    if (w["id"].get<uint64_t>() != holder) other = w["id"].get<uint64_t>();
  }
  ASSERT_NE(other, 0u) << workers.dump(2);

  auto pull = [&](const std::string& target, const std::string& body,
                  const std::string& token = "") -> net::Response {
    net::ClientOptions o = c.Api().options();
    if (!token.empty()) o.token = token;
    net::ClientRequest r;
    r.method = "POST";
    r.target = target;
    r.body = body;
    Result<net::Response> got = net::HttpClient(o).Send(r);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    return got.ok() ? *got : net::Response{};
  };
  auto body = [](const std::string& t, uint64_t from) {
    return nlohmann::json{{"task", t}, {"from", from}}.dump();
  };
  const std::string route = "/api/v1/files/" + sha + "/pull";
  struct Case {
    std::string what, target, body, token;
    int status;
  };
  const std::vector<Case> cases = {
      {"no token", route, body(prep, holder), "wrong-token", 401},
      {"a malformed name", "/api/v1/files/abc/pull", body(prep, holder), "", 400},
      {"upper-case hex", "/api/v1/files/" + std::string(64, 'A') + "/pull", body(prep, holder), "",
       400},
      {"no body", route, "", "", 400},
      {"a body without from", route, R"({"task":")" + prep + R"("})", "", 400},
      {"an unknown worker", route, body(prep, 999), "", 404},
      {"an unknown task", route, body("99999.0", holder), "", 404},
      {"a file no task output names", "/api/v1/files/" + std::string(64, 'a') + "/pull",
       body(prep, holder), "", 403},
      {"another worker than the holder", route, body(prep, other), "", 403},
  };
  for (const Case& k : cases) {
    net::Response r = pull(k.target, k.body, k.token);
    EXPECT_EQ(r.status, k.status) << k.what << ": " << r.body;
  }
  EXPECT_TRUE(c.server()->WaitForLine("file relay: refused", In(kStartTimeout)));

  // The real thing, on loopback: the blob lands in the server's store,
  // fetched once from a however many ask at once (a later pull finds it
  // there).
  net::Response first, second;
  std::thread other_pull([&] { second = pull(route, body(prep, holder)); });
  first = pull(route, body(prep, holder));
  other_pull.join();
  ASSERT_EQ(first.status, 200) << first.body;
  ASSERT_EQ(second.status, 200) << second.body;
  net::Response again = pull(route, body(prep, holder));
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(nlohmann::json::parse(again.body)["relayed"], false) << again.body;
  Result<std::string> blob = c.Api().GetText("/api/v1/files/" + sha);
  ASSERT_TRUE(blob.ok()) << blob.status().ToString();
  EXPECT_EQ(blob->size(), 3145728u);
  const std::string copy = c.WriteFile("copy.bin", *blob);
  RunResult sum =
      RunToEnd({"/bin/sh", "-c", "sha256sum < " + copy + " | cut -d' ' -f1"}, In(kStartTimeout));
  EXPECT_EQ(sum.output, sha + "\n");
  EXPECT_TRUE(a.WaitForLine("to server", In(kStartTimeout))) << a.output();
  Result<std::string> metrics = c.Api().GetText("/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_NE(metrics->find("drover_file_relay_bytes_total 3145728"), std::string::npos) << *metrics;
  EXPECT_NE(metrics->find("drover_file_relay_files_total 1"), std::string::npos);
  // Nothing half-written is left in the store.
  RunResult left =
      RunToEnd({"/bin/sh", "-c", "ls -A " + c.dir() + "/state/files"}, In(kStartTimeout));
  EXPECT_EQ(left.output.find(".upload"), std::string::npos) << left.output;
}

// The server's pull fails cleanly: a full disk answers 507 and leaves no
// partial file (a 2 MiB tmpfs as the file store; root only), a holder the
// server cannot reach answers 502 naming it.
TEST(DataPlaneTest, AFailedPullThroughTheServerLeavesNothingAndSaysWhy) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount a tmpfs";
  Cluster c;
  const std::string files = c.dir() + "/state/files";
  ASSERT_EQ(RunToEnd({"/bin/mkdir", "-p", files}, In(kStartTimeout)).status, 0);
  if (::mount("tmpfs", files.c_str(), "tmpfs", 0, "size=2m,mode=0700") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here (" << std::strerror(errno) << ")";
  }
  struct Unmount {
    std::string dir;
    ~Unmount() { ::umount2(dir.c_str(), MNT_DETACH); }
  } unmount{files};
  c.StartServer();
  Process& a = c.StartWorker("a", {"--label", "node=a"});
  const uint64_t job = Post(c, {{"name", "full"},
                                {"task",
                                 {{{"id", "big"},
                                   {"resources", {{"labels", {{"node", "a"}}}}},
                                   {"command",
                                    "head -c 3145728 /dev/urandom > $DROVER_OUTPUT_DIR/big.bin && "
                                    "echo small > $DROVER_OUTPUT_DIR/small.txt"}}}}});
  ASSERT_GT(job, 0u);
  const std::string big = std::to_string(job) + ".0";
  {
    EventTap tap(c.Api().options(), job);
    ASSERT_TRUE(tap.WaitForState(big, "succeeded")) << c.Get("/api/v1/tasks/" + big).dump(2);
  }
  const nlohmann::json task = c.Get("/api/v1/tasks/" + big);
  const nlohmann::json& outputs = task["outcome"]["outputs"];
  ASSERT_EQ(outputs.size(), 2u) << task.dump(2);
  const uint64_t holder = task["outcome"]["outputs_on"];
  auto pull = [&](const std::string& sha) {
    net::ClientRequest r;
    r.method = "POST";
    r.target = "/api/v1/files/" + sha + "/pull";
    r.body = nlohmann::json{{"task", big}, {"from", holder}}.dump();
    Result<net::Response> got = net::HttpClient(c.Api().options()).Send(r);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    return got.ok() ? *got : net::Response{};
  };
  net::Response full = pull(outputs[0]["sha256"]);
  EXPECT_EQ(full.status, 507) << full.body;
  EXPECT_NE(full.body.find("no space left on device"), std::string::npos) << full.body;
  RunResult left = RunToEnd({"/bin/ls", "-A", files}, In(kStartTimeout));
  EXPECT_EQ(left.output, "") << "a partial file was left";
  // The store still takes what fits.
  net::Response small = pull(outputs[1]["sha256"]);
  EXPECT_EQ(small.status, 200) << small.body;

  // The holder gone (killed; the server keeps where it served): 502, named.
  a.Signal(SIGKILL);
  ASSERT_TRUE(a.Wait(In(kStartTimeout)).has_value());
  net::Response gone = pull(outputs[0]["sha256"]);
  EXPECT_EQ(gone.status, 502) << gone.body;
  EXPECT_NE(gone.body.find("worker " + std::to_string(holder)), std::string::npos) << gone.body;
  EXPECT_TRUE(c.server()->WaitForLine("file relay: fetching", In(kStartTimeout)));
}

// prep (on a worker labelled node=a) writes a random x.bin and its SHA-256
// as its result; use (node=b) checks the file it got against the result.
nlohmann::json HolderPipeline(const std::string& name, int replicas) {
  nlohmann::json prep = {{"id", "prep"},
                         {"resources", {{"labels", {{"node", "a"}}}}},
                         {"command",
                          "head -c 2097152 /dev/urandom > $DROVER_OUTPUT_DIR/x.bin && "
                          "sha256sum < $DROVER_OUTPUT_DIR/x.bin | cut -d' ' -f1 > $DROVER_RESULT"}};
  if (replicas != 1) prep["replicas"] = replicas;
  return {{"name", name},
          {"task",
           {prep,
            {{"id", "use"},
             {"depends_on", {"prep"}},
             {"resources", {{"labels", {{"node", "b"}}}}},
             {"command",
              "cd $DROVER_INPUTS && for r in *.result; do test \"$(sha256sum < "
              "${r%.result}/x.bin | cut -d' ' -f1)\" = \"$(cat $r)\"; done"}}}}};
}

// Kill -9 the only holder of an output before its dependent fetched it: once
// the holder is lost past the lease bound the producer runs again on
// another worker, the dependent succeeds, and `drover status` says why.
TEST(DataPlaneTest, KillingTheOnlyHolderReRunsTheProducer) {
  Cluster c(kFastLoss);
  c.StartServer();
  Process& a = c.StartWorker("a", {"--label", "node=a"});
  const uint64_t job = Post(c, HolderPipeline("lineage", 1));
  ASSERT_GT(job, 0u);
  const std::string prep = std::to_string(job) + ".0";
  const std::string use = std::to_string(job) + ".1";
  EventTap tap(c.Api().options(), job);
  ASSERT_TRUE(tap.WaitForState(prep, "succeeded"));
  // No worker for `use` yet: it waits queued while its input's holder dies.
  a.Signal(SIGKILL);
  ASSERT_TRUE(a.Wait(In(kStartTimeout)).has_value());
  c.StartWorker("b", {"--label", "node=b"});
  c.StartWorker("a2", {"--label", "node=a"});
  ASSERT_TRUE(tap.WaitForState(use, "succeeded"))
      << c.Get("/api/v1/tasks/" + use).dump(2) << c.Get("/api/v1/tasks/" + prep).dump(2);
  nlohmann::json p = c.Get("/api/v1/tasks/" + prep);
  EXPECT_EQ(p["state"], "succeeded");
  EXPECT_EQ(p["attempt"], 2) << p.dump(2);
  ASSERT_EQ(p["attempts"].size(), 2u) << p.dump(2);
  EXPECT_EQ(p["attempts"][0]["state"], "rerun") << p.dump(2);
  RunResult status = c.Drover({"status", prep});
  ASSERT_EQ(status.status, 0) << status.output;
  EXPECT_NE(status.output.find("rerun: outputs lost with worker"), std::string::npos)
      << status.output;
  EXPECT_TRUE(NoAttemptFailed(c.Get("/api/v1/tasks/" + use)));
}

// replicas = 2: a second worker fetches a copy of the outputs when the
// task succeeds; kill -9 the first holder and a dependent still gets them,
// from the copy, with no rerun.
TEST(DataPlaneTest, WithACopyKillingTheFirstHolderLosesNoWork) {
  Cluster c(kFastLoss);
  c.StartServer();
  Process& a = c.StartWorker("a", {"--label", "node=a"});
  c.StartWorker("c", {"--label", "node=c"});
  const uint64_t job = Post(c, HolderPipeline("copies", 2));
  ASSERT_GT(job, 0u);
  const std::string prep = std::to_string(job) + ".0";
  const std::string use = std::to_string(job) + ".1";
  // The server counts the copy (worker c, the only other one).
  ASSERT_TRUE(c.server()
                  ->WaitForLine("holds a copy of the outputs of " + prep + "#1", In(kJobTimeout))
                  .has_value())
      << c.server()->output();
  nlohmann::json p = c.Get("/api/v1/tasks/" + prep);
  ASSERT_EQ(p["outcome"]["replicas"].size(), 1u) << p.dump(2);
  EXPECT_NE(p["outcome"]["replicas"][0], p["outcome"]["outputs_on"]) << p.dump(2);
  RunResult status = c.Drover({"status", prep});
  EXPECT_NE(status.output.find(", copies on "), std::string::npos) << status.output;
  a.Signal(SIGKILL);
  ASSERT_TRUE(a.Wait(In(kStartTimeout)).has_value());
  c.StartWorker("b", {"--label", "node=b"});
  EventTap tap(c.Api().options(), job);
  ASSERT_TRUE(tap.WaitForState(use, "succeeded"))
      << c.Get("/api/v1/tasks/" + use).dump(2) << c.Get("/api/v1/tasks/" + prep).dump(2);
  p = c.Get("/api/v1/tasks/" + prep);
  EXPECT_EQ(p["attempt"], 1) << "no rerun: " << p.dump(2);
  EXPECT_TRUE(NoAttemptFailed(c.Get("/api/v1/tasks/" + use)));
}

// Files from the client: `drover submit --input` and a job file's
// `input_files` upload each file once (content-addressed: a second
// submission sends nothing) and place it, read-only, in the task's
// directory on whatever worker runs it; a spec naming a file the server
// does not hold is refused.
TEST(DataPlaneTest, FilesFromTheClientReachTheTasksDirectoryUploadedOnce) {
  Cluster c;
  c.StartServer();
  c.StartWorker("a");
  const std::string data = c.WriteFile("data.csv", "x,y\n1,2\n");
  const std::vector<std::string> check = {"sh", "-c",
                                          "test \"$(cat data.csv)\" = \"$(printf 'x,y\\n1,2')\" && "
                                          "test -z \"$(find data.csv -perm /222)\" && test $A = 1"};
  // --env too: repeatable options before "--" once took the command's "-c".
  std::vector<std::string> argv = {"submit", "--wait", "--input", data, "--env", "A=1", "--"};
  argv.insert(argv.end(), check.begin(), check.end());
  RunResult first = c.Drover(argv);
  ASSERT_EQ(first.status, 0) << first.output;
  EXPECT_NE(first.output.find("uploaded " + data), std::string::npos) << first.output;
  RunResult again = c.Drover(argv);
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_EQ(again.output.find("uploaded"), std::string::npos) << again.output;
  EXPECT_NE(again.output.find(data + ": already on the server"), std::string::npos) << again.output;

  // A job file's paths start at its own directory.
  c.WriteFile("cfg.txt", "lr=0.1\n");
  RunResult run = c.Drover({"run", c.WriteFile("uses-cfg.toml", R"toml(name = "uses-cfg"

[[task]]
id = "train"
input_files = ["cfg.txt"]
command = "grep -q lr=0.1 cfg.txt"
)toml")});
  ASSERT_EQ(run.status, 0) << run.output;

  // A file never uploaded, and a path sent as if uploaded: refused, named.
  Result<nlohmann::json> missing = c.Api().Post(
      "/api/v1/jobs",
      nlohmann::json{
          {"name", "m"},
          {"task",
           {{{"id", "t"},
             {"command", "true"},
             {"input_files",
              {{{"name", "gone.bin"}, {"size", 1}, {"sha256", std::string(64, 'e')}}}}}}}}
          .dump());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("\"gone.bin\""), std::string::npos)
      << missing.status().ToString();
  EXPECT_NE(missing.status().message().find("not on the server"), std::string::npos)
      << missing.status().ToString();
  Result<nlohmann::json> path = c.Api().Post(
      "/api/v1/jobs",
      nlohmann::json{
          {"name", "p"},
          {"task", {{{"id", "t"}, {"command", "true"}, {"input_files", {"local/data.csv"}}}}}}
          .dump());
  ASSERT_FALSE(path.ok());
  EXPECT_NE(path.status().message().find("a path on the client"), std::string::npos)
      << path.status().ToString();
}

}  // namespace
}  // namespace drover::testing
