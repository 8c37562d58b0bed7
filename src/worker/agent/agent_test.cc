#include "worker/agent/agent.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "worker/agent/agent_test_util.h"
#include "worker/exec/life_record.h"
#include "worker/exec/process_tree_test_util.h"

namespace drover::worker {
namespace {

using net::testing::LoopThread;
using net::testing::TempDir;
using testing::FakeServer;
using testing::Fifo;

constexpr WorkerId kWorkerId = 7;

int FirstAllowedCore() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
  for (int i = 0; i < CPU_SETSIZE; ++i) {
    if (CPU_ISSET(i, &set)) return i;
  }
  return 0;
}

// True once process `pid` has exited (or is gone), waiting on its pidfd.
bool WaitForExit(pid_t pid, std::chrono::milliseconds timeout) {
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return errno == ESRCH;
  pollfd p{fd, POLLIN, 0};
  const int ready = ::poll(&p, 1, static_cast<int>(timeout.count()));
  ::close(fd);
  return ready == 1;
}

class AgentTest : public ::testing::Test {
 protected:
  ~AgentTest() override { StopAgent(); }

  AgentConfig Config(const FakeServer& server) {
    AgentConfig c;
    c.servers = {"127.0.0.1:" + std::to_string(server.port())};
    c.token = testing::kToken;
    c.tls = server.tls();
    c.fingerprint = server.fingerprint();
    c.name = "w1";
    c.workdir = dir_ / "work";
    c.isolation = "none";
    c.cpus = std::to_string(core_);
    c.mem = "1GiB";
    c.gpus = "none";
    c.nvidia_smi = "";
    c.labels = {"zone=test"};
    c.counters = {"licenses=2"};
    c.run_as_root = true;
    c.heartbeat_interval = Millis(100);
    c.lease_ttl = Seconds(30);
    c.kill_grace = Seconds(5);
    c.connect_timeout = Seconds(2);
    c.reconnect.initial = Millis(20);
    c.reconnect.max = Millis(300);
    return c;
  }

  Status StartAgent(AgentConfig config) {
    Result<std::unique_ptr<Agent>> agent =
        thread_.Call([&] { return Agent::Start(loop_, std::move(config)); });
    if (!agent.ok()) return agent.status();
    agent_ = std::move(agent).value();
    return Status::Ok();
  }
  void StopAgent() {
    thread_.Call([&] { agent_.reset(); });
  }

  // Starts the agent and answers its Hello; returns that Hello.
  proto::Hello Attach(FakeServer& server, AgentConfig config, Duration heartbeat = Millis(100),
                      Duration lease_ttl = Seconds(30)) {
    Status started = StartAgent(std::move(config));
    EXPECT_TRUE(started.ok()) << started.ToString();
    proto::Hello hello = server.ExpectHello();
    server.Send(proto::HelloAck{kWorkerId, "test-server", heartbeat, lease_ttl});
    return hello;
  }

  proto::Assignment Task(uint32_t index, std::string script, uint32_t attempt = 1) {
    proto::Assignment a;
    a.task = TaskId{1, index};
    a.attempt = attempt;
    a.cores = {static_cast<uint32_t>(core_)};
    a.cpu_quota_milli = 1000;
    a.argv = {"sh", "-c", std::move(script)};
    a.job_name = "test";
    a.group_name = "g";
    return a;
  }

  // `a`, queued behind attempt `attempt` of `predecessor` (queue-ahead).
  // Task 1.0 started and held until a line is written to `gate`: the
  // predecessor of the queue-ahead tests.
  void StartHeldTask(FakeServer& server, const Fifo& gate) {
    server.Send(proto::Assign{{Task(0, "read x < " + gate.path())}});
    ASSERT_EQ(server.Expect<proto::Started>().tasks.size(), 1u);
  }
  // StartHeldTask, then task 1.1 (which touches `marker`) queued behind it.
  void QueueBehindHeldTask(FakeServer& server, const Fifo& gate, const std::string& marker) {
    ASSERT_NO_FATAL_FAILURE(StartHeldTask(server, gate));
    server.Send(proto::Assign{{After(Task(1, "touch " + marker), TaskId{1, 0})}});
    server.Sync();
  }
  // Lets 1.0 (StartHeldTask) end: its Finished comes alone, nothing starts
  // after it, and the task queued behind it never ran (no `marker`).
  void EndHeldTaskAlone(FakeServer& server, Fifo& gate, const std::string& marker,
                        proto::Finished* done) {
    gate.Release();
    *done = server.Expect<proto::Finished>();
    ASSERT_EQ(done->tasks.size(), 1u);
    EXPECT_EQ(done->tasks[0].task, (TaskId{1, 0}));
    server.Sync();
    EXPECT_EQ(server.Pending<proto::Started>(), 0u);
    EXPECT_FALSE(Exists(marker));
  }
  static proto::Assignment After(proto::Assignment a, TaskId predecessor, uint32_t attempt = 1) {
    a.after = proto::TaskAttempt{predecessor, attempt};
    return a;
  }

  bool Exists(const std::string& path) const { return ::access(path.c_str(), F_OK) == 0; }

  TempDir dir_;
  int core_ = FirstAllowedCore();
  net::EventLoop loop_;
  LoopThread thread_{loop_};
  std::unique_ptr<Agent> agent_;
};

TEST_F(AgentTest, HelloOverTlsCarriesResourcesThenHeartbeats) {
  FakeServer server(/*tls=*/true);
  ASSERT_FALSE(server.fingerprint().empty());
  ASSERT_TRUE(StartAgent(Config(server)).ok());
  proto::Hello hello = server.ExpectHello();
  EXPECT_EQ(hello.protocol_version, proto::kProtocolVersion);
  EXPECT_EQ(hello.worker_name, "w1");
  EXPECT_EQ(hello.previous_id, 0u);
  EXPECT_EQ(hello.resources.cpu_cores, (std::vector<uint32_t>{static_cast<uint32_t>(core_)}));
  EXPECT_EQ(hello.resources.mem_bytes, 1ull << 30);
  EXPECT_TRUE(hello.resources.gpus.empty());
  EXPECT_EQ(hello.resources.labels.at("zone"), "test");
  EXPECT_EQ(hello.resources.counters.at("licenses"), 2);
  EXPECT_TRUE(hello.running.empty());
  EXPECT_TRUE(hello.finished.empty());

  server.Send(proto::HelloAck{kWorkerId, "test-server", Millis(100), Seconds(30)});
  proto::Heartbeat heartbeat = server.Expect<proto::Heartbeat>();
  EXPECT_TRUE(heartbeat.running.empty());
  EXPECT_LE(heartbeat.utilization.cpu_percent, 100u);
  EXPECT_GT(heartbeat.utilization.mem_used_bytes, 0u);
  EXPECT_EQ(thread_.Call([&] { return agent_->worker_id(); }), kWorkerId);
}

TEST_F(AgentTest, RunsATaskReportsItsResultAndServesItsLog) {
  FakeServer server(/*tls=*/false);
  Attach(server, Config(server));
  server.Send(proto::Assign{{Task(0, "echo hi; echo 42 > \"$DROVER_RESULT\"")}});

  proto::Started started = server.Expect<proto::Started>();
  ASSERT_EQ(started.tasks.size(), 1u);
  EXPECT_EQ(started.tasks[0].task, (TaskId{1, 0}));
  EXPECT_EQ(started.tasks[0].attempt, 1u);
  proto::Finished finished = server.Expect<proto::Finished>();
  ASSERT_EQ(finished.tasks.size(), 1u);
  const proto::FinishedTask& t = finished.tasks[0];
  EXPECT_EQ(t.task, (TaskId{1, 0}));
  EXPECT_EQ(t.outcome.exit_code, 0);
  EXPECT_EQ(t.outcome.signal, 0);
  EXPECT_EQ(t.outcome.result, "42\n");
  EXPECT_GT(t.outcome.usage.wall, Duration::zero());

  proto::LogRequest log;
  log.task = TaskId{1, 0};
  log.stream = proto::LogStream::kStdout;
  server.Send(log);
  std::string raw = server.ExpectFrame();
  Result<proto::LogFrame> frame = proto::DecodeLogFrame(raw);
  ASSERT_TRUE(frame.ok()) << frame.status().ToString();
  EXPECT_EQ(frame->task, (TaskId{1, 0}));
  EXPECT_EQ(frame->attempt, 1u);
  EXPECT_EQ(frame->offset, 0u);
  EXPECT_EQ(frame->bytes, "hi\n");
  proto::LogChunk end = server.Expect<proto::LogChunk>();
  EXPECT_TRUE(end.eof);
  EXPECT_EQ(end.offset, 3u);

  // Acknowledged: the next session's Hello no longer carries it.
  server.Send(proto::Ack{{proto::TaskAttempt{TaskId{1, 0}, 1}}});
  server.Drop();
  proto::Hello again = server.ExpectHello();
  EXPECT_EQ(again.previous_id, kWorkerId);
  EXPECT_TRUE(again.finished.empty());
  EXPECT_TRUE(again.running.empty());
}

// The agent says it resolves numbered commands; a task sent by its
// command's number runs that command; a number never sent on this
// connection drops the session, and the next one numbers afresh.
TEST_F(AgentTest, ResolvesNumberedCommandsAndDropsASessionThatNamesOneNeverSent) {
  FakeServer server(/*tls=*/false);
  EXPECT_TRUE(Attach(server, Config(server)).argv_ids);
  proto::Assignment whole = Task(0, "echo \"$DROVER_TASK_ID\" > \"$DROVER_RESULT\"");
  whole.argv_id = 1;
  proto::Assignment by_number = Task(1, "never run");
  by_number.argv.clear();
  by_number.argv_id = 1;
  std::map<TaskId, std::string> results;
  for (const proto::Assignment& a : {whole, by_number}) {  // one core: one at a time
    server.Send(proto::Assign{{a}});
    proto::Finished finished = server.Expect<proto::Finished>();
    for (const proto::FinishedTask& t : finished.tasks) results[t.task] = t.outcome.result;
  }
  EXPECT_EQ(results[(TaskId{1, 0})], "1.0\n");
  EXPECT_EQ(results[(TaskId{1, 1})], "1.1\n");

  proto::Assignment stray = Task(2, "never run");
  stray.argv.clear();
  stray.argv_id = 2;
  server.Send(proto::Assign{{stray}});
  proto::Hello again = server.ExpectHello();
  EXPECT_TRUE(again.argv_ids);
  server.Send(proto::HelloAck{kWorkerId, "test-server", Millis(100), Seconds(30)});
  server.Send(proto::Assign{{by_number}});  // number 1 of a connection that sent none
  EXPECT_TRUE(server.ExpectHello().argv_ids);
}

TEST_F(AgentTest, DependencyResultsAppearAsInputFiles) {
  FakeServer server(/*tls=*/false);
  Attach(server, Config(server));
  proto::Assignment a = Task(2, "cat \"$DROVER_INPUTS/1.0\" \"$DROVER_INPUTS/1.1\" > \"$DROVER_RESULT\"");
  a.inputs = {{TaskId{1, 0}, "forty-two\n"}, {TaskId{1, 1}, "seven\n"}};
  server.Send(proto::Assign{{a}});
  proto::Finished finished = server.Expect<proto::Finished>();
  ASSERT_EQ(finished.tasks.size(), 1u);
  EXPECT_EQ(finished.tasks[0].outcome.exit_code, 0);
  EXPECT_EQ(finished.tasks[0].outcome.result, "forty-two\nseven\n");
}

// A succeeded task's outputs are kept for its job (docs/design.md, "Data
// plane"): the agent names the job after each HelloAck until the server
// releases it.
TEST_F(AgentTest, NamesTheJobsItKeepsOutputsForAfterEachHelloUntilReleased) {
  FakeServer server(/*tls=*/false);
  Attach(server, Config(server));
  server.Sync();
  EXPECT_EQ(server.Pending<proto::OutputsKept>(), 0u) << "nothing is kept yet";
  server.Send(proto::Assign{{Task(0, "echo out > \"$DROVER_OUTPUT_DIR/o.txt\"")}});
  proto::Finished finished = server.Expect<proto::Finished>();
  ASSERT_EQ(finished.tasks.size(), 1u);
  ASSERT_EQ(finished.tasks[0].outcome.outputs.size(), 1u);

  server.Drop();
  server.ExpectHello();
  server.Send(proto::HelloAck{kWorkerId, "test-server", Millis(100), Seconds(30)});
  EXPECT_EQ(server.Expect<proto::OutputsKept>().jobs, (std::vector<JobId>{1}));

  server.Send(proto::ReleaseOutputs{{1}});
  server.Sync();
  EXPECT_FALSE(std::filesystem::exists(dir_ / "work/.cache/.keep/1"));
  server.Drop();
  server.ExpectHello();
  server.Send(proto::HelloAck{kWorkerId, "test-server", Millis(100), Seconds(30)});
  server.Sync();
  EXPECT_EQ(server.Pending<proto::OutputsKept>(), 0u) << "released";
}

TEST_F(AgentTest, RefusesWhatDoesNotFitAndStopsTasksOnRequest) {
  FakeServer server(/*tls=*/false);
  Attach(server, Config(server));
  server.Send(proto::Assign{{Task(0, "exec sleep 60")}});
  ASSERT_EQ(server.Expect<proto::Started>().tasks.size(), 1u);

  // The same core again: refused, nothing started.
  server.Send(proto::Assign{{Task(1, "exit 0")}});
  proto::Refused busy = server.Expect<proto::Refused>();
  EXPECT_EQ(busy.task, (TaskId{1, 1}));
  EXPECT_NE(busy.reason.find("core"), std::string::npos) << busy.reason;
  // More memory than the worker offers: refused.
  proto::Assignment big = Task(2, "exit 0");
  big.cores.clear();
  big.cpu_quota_milli = 0;
  big.mem_limit_bytes = 2ull << 30;
  server.Send(proto::Assign{{big}});
  proto::Refused no_memory = server.Expect<proto::Refused>();
  EXPECT_EQ(no_memory.task, (TaskId{1, 2}));
  EXPECT_FALSE(no_memory.reason.empty());

  // Kill stops it at once.
  server.Send(proto::Kill{TaskId{1, 0}, 1, "lease lost"});
  proto::Finished killed = server.Expect<proto::Finished>();
  ASSERT_EQ(killed.tasks.size(), 1u);
  EXPECT_EQ(killed.tasks[0].task, (TaskId{1, 0}));
  EXPECT_EQ(killed.tasks[0].outcome.signal, SIGKILL);

  // The core is free again; Cancel stops gracefully (TERM first).
  server.Send(proto::Assign{{Task(1, "exec sleep 60", /*attempt=*/2)}});
  ASSERT_EQ(server.Expect<proto::Started>().tasks.size(), 1u);
  server.Send(proto::Cancel{TaskId{1, 1}, 2, "canceled by user"});
  proto::Finished canceled = server.Expect<proto::Finished>();
  ASSERT_EQ(canceled.tasks.size(), 1u);
  EXPECT_EQ(canceled.tasks[0].task, (TaskId{1, 1}));
  EXPECT_EQ(canceled.tasks[0].attempt, 2u);
  EXPECT_EQ(canceled.tasks[0].outcome.signal, SIGTERM);
}

// With a server that reads batch frames (HelloAck::batches), what the agent
// sends in a burst comes in one frame: an assignment of two tasks whose
// second is refused brings the first's Started and the Refused together.
// Every other test here talks to a FakeServer that reads one message per
// frame, as a server from before batches does, and so checks that the agent
// then sends none.
TEST_F(AgentTest, AServerThatReadsBatchesGetsABurstInOneFrame) {
  FakeServer server(/*tls=*/false, /*batches=*/true);
  Status started = StartAgent(Config(server));
  ASSERT_TRUE(started.ok()) << started.ToString();
  EXPECT_TRUE(server.ExpectHello().batches) << "the agent reads batch frames";
  proto::HelloAck ack{kWorkerId, "test-server", Millis(100), Seconds(30)};
  ack.batches = true;
  server.Send(ack);
  server.Send(proto::Assign{{Task(0, "exec sleep 60"), Task(1, "exit 0")}});
  EXPECT_EQ(server.Expect<proto::Started>().tasks.size(), 1u);
  EXPECT_EQ(server.Expect<proto::Refused>().task, (TaskId{1, 1}));
  EXPECT_GE(server.largest_frame(), 2u);
}

// With a server whose HelloAck says it reads binary frames, the agent runs
// an assignment sent in one and reports in them; every other test here
// talks to a FakeServer that says nothing of them, as a server from before
// them, and this one checks that the agent then sends none.
TEST_F(AgentTest, AServerThatSpeaksBinaryGetsBinaryFramesAndOneFromBeforeGetsText) {
  for (bool binary : {true, false}) {
    FakeServer server(/*tls=*/false);
    Status started = StartAgent(Config(server));
    ASSERT_TRUE(started.ok()) << started.ToString();
    EXPECT_TRUE(server.ExpectHello().binary) << "the agent reads and writes binary frames";
    proto::HelloAck ack{kWorkerId, "test-server", Millis(100), Seconds(30)};
    ack.binary = binary;
    server.Send(ack);
    const proto::ServerMessage assign = proto::Assign{{Task(0, "echo -n ok > $DROVER_RESULT")}};
    if (binary) {
      server.SendBinary(assign);  // text would do as well: the agent reads both
    } else {
      server.Send(assign);
    }
    EXPECT_EQ(server.Expect<proto::Started>().tasks.size(), 1u);
    proto::Finished finished = server.Expect<proto::Finished>();
    ASSERT_EQ(finished.tasks.size(), 1u);
    EXPECT_EQ(finished.tasks[0].outcome.result, "ok");
    EXPECT_EQ(server.binary_frames() > 0, binary) << server.binary_frames();
    StopAgent();
  }
}

// A binary frame the agent cannot read ends the session, as a malformed
// text message does; it connects again.
TEST_F(AgentTest, ABadBinaryFrameFromTheServerEndsTheSession) {
  FakeServer server(/*tls=*/false);
  Attach(server, Config(server));
  proto::Assignment bad = Task(0, "true");
  bad.vacate_signal = 0;  // not a signal: the frame is refused
  proto::WireMessage wire = proto::EncodeForPeer(proto::ServerMessage{proto::Assign{{bad}}}, true);
  ASSERT_FALSE(proto::DecodeServerBinaryFrame(proto::EncodeBinaryFrame({wire.bytes})).ok());
  server.SendRawBinary(proto::EncodeBinaryFrame({wire.bytes}));
  proto::Hello again = server.ExpectHello();
  EXPECT_EQ(again.worker_name, "w1");
}

TEST_F(AgentTest, AStartFailureIsReportedAsFinishedWithTheReason) {
  FakeServer server(/*tls=*/false);
  Attach(server, Config(server));
  proto::Assignment a = Task(0, "");
  a.argv = {"no-such-command-drover-test"};
  server.Send(proto::Assign{{a}});
  proto::Finished finished = server.Expect<proto::Finished>();
  ASSERT_EQ(finished.tasks.size(), 1u);
  EXPECT_EQ(finished.tasks[0].outcome.exit_code, -1);
  EXPECT_NE(finished.tasks[0].outcome.reason.find("command not found"), std::string::npos)
      << finished.tasks[0].outcome.reason;
  // Its core was given back: the next task starts.
  server.Send(proto::Assign{{Task(1, "exit 3")}});
  proto::Finished next = server.Expect<proto::Finished>();
  ASSERT_EQ(next.tasks.size(), 1u);
  EXPECT_EQ(next.tasks[0].outcome.exit_code, 3);
}

TEST_F(AgentTest, FollowsALogAsItGrows) {
  FakeServer server(/*tls=*/false);
  Attach(server, Config(server));
  Fifo gate(dir_ / "gate");
  server.Send(proto::Assign{{Task(0, "echo first; read x < " + gate.path() + "; echo second")}});
  ASSERT_EQ(server.Expect<proto::Started>().tasks.size(), 1u);
  proto::LogRequest follow;
  follow.task = TaskId{1, 0};
  follow.follow = true;
  server.Send(follow);
  std::string seen;
  while (seen.size() < 6) {
    Result<proto::LogFrame> f = proto::DecodeLogFrame(server.ExpectFrame());
    ASSERT_TRUE(f.ok());
    seen += f->bytes;
  }
  EXPECT_EQ(seen, "first\n");
  gate.Release();
  while (seen.size() < 13) {
    std::string raw = server.ExpectFrame();
    Result<proto::LogFrame> f = proto::DecodeLogFrame(raw);
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(f->offset, seen.size());
    seen += f->bytes;
  }
  EXPECT_EQ(seen, "first\nsecond\n");
  proto::LogChunk end = server.Expect<proto::LogChunk>();
  EXPECT_TRUE(end.eof);
  EXPECT_EQ(end.offset, 13u);
}

TEST_F(AgentTest, KeepsRunningAcrossReconnectsAndResendsTheResultUntilAcked) {
  FakeServer server(/*tls=*/false);
  Attach(server, Config(server));
  Fifo gate(dir_ / "gate");
  server.Send(proto::Assign{{Task(0, "read x < " + gate.path() + "; echo done > \"$DROVER_RESULT\"")}});
  ASSERT_EQ(server.Expect<proto::Started>().tasks.size(), 1u);

  // The server goes away; the task keeps running and the agent re-attaches.
  server.Drop();
  proto::Hello second = server.ExpectHello();
  EXPECT_EQ(second.previous_id, kWorkerId);
  // With the resources it was given, so a restarted server can adopt it.
  EXPECT_EQ(second.running, (std::vector<proto::RunningTask>{
                                {TaskId{1, 0}, 1, {static_cast<uint32_t>(core_)}, {}}}));
  EXPECT_TRUE(second.finished.empty());
  server.Send(proto::HelloAck{kWorkerId, "test-server-2", Millis(100), Seconds(30)});

  gate.Release();
  proto::Finished finished = server.Expect<proto::Finished>();
  ASSERT_EQ(finished.tasks.size(), 1u);
  EXPECT_EQ(finished.tasks[0].outcome.result, "done\n");

  // Not acknowledged before the connection drops: the next Hello resends it.
  server.Drop();
  proto::Hello third = server.ExpectHello();
  EXPECT_TRUE(third.running.empty());
  ASSERT_EQ(third.finished.size(), 1u);
  EXPECT_EQ(third.finished[0].task, (TaskId{1, 0}));
  EXPECT_EQ(third.finished[0].outcome.result, "done\n");
  server.Send(proto::HelloAck{kWorkerId, "test-server-3", Millis(100), Seconds(30)});
  server.Send(proto::Ack{{proto::TaskAttempt{TaskId{1, 0}, 1}}});

  server.Drop();
  proto::Hello fourth = server.ExpectHello();
  EXPECT_TRUE(fourth.finished.empty());
  EXPECT_TRUE(fourth.running.empty());
}

TEST_F(AgentTest, FencesItsTasksWhenTheServerStopsAnswering) {
  FakeServer server(/*tls=*/false);
  AgentConfig config = Config(server);
  config.heartbeat_interval = Millis(250);
  config.lease_ttl = Millis(1500);
  Attach(server, config, Millis(250), Millis(1500));
  Fifo pid_out(dir_ / "pid");
  server.Send(proto::Assign{{Task(0, "echo $$ > " + pid_out.path() + "; exec sleep 60")}});
  ASSERT_EQ(server.Expect<proto::Started>().tasks.size(), 1u);
  std::optional<std::string> pid_text = pid_out.ReadLine();
  ASSERT_TRUE(pid_text.has_value());
  const pid_t pid = std::stoi(*pid_text);

  // The server's loop stops: no pong, no message. Within lease TTL - 2
  // heartbeats (1 s) of the last contact the agent kills the task.
  const auto blocked_at = std::chrono::steady_clock::now();
  server.Block();
  ASSERT_TRUE(WaitForExit(pid, std::chrono::seconds(20)));
  const double after =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - blocked_at).count();
  EXPECT_GE(after, 0.4) << "killed before the fencing budget could have run out";
  server.Unblock();

  // Reported once a server answers again.
  while (true) {
    proto::Hello hello = server.ExpectHello();
    if (::testing::Test::HasFailure()) return;
    if (hello.finished.empty()) {
      server.Drop();  // an attempt from before the kill; make it try again
      continue;
    }
    EXPECT_TRUE(hello.running.empty());
    ASSERT_EQ(hello.finished.size(), 1u);
    EXPECT_EQ(hello.finished[0].task, (TaskId{1, 0}));
    EXPECT_EQ(hello.finished[0].outcome.signal, SIGKILL);
    EXPECT_EQ(hello.finished[0].outcome.reason.rfind("fenced: no contact with the server for ", 0),
              0u)
        << hello.finished[0].outcome.reason;
    break;
  }
}

// ---- queue-ahead ------------------------------------------------------------

TEST_F(AgentTest, AQueuedTaskStartsWhenItsPredecessorExitsWithoutTheServer) {
  FakeServer server(/*tls=*/false);
  Attach(server, Config(server));
  Fifo gate(dir_ / "gate");
  const std::string marker = dir_ / "b-ran";
  ASSERT_NO_FATAL_FAILURE(StartHeldTask(server, gate));

  // B takes A's core, after A; its input is written now, it does not run.
  proto::Assignment b = After(
      Task(1, "touch " + marker + "; cat \"$DROVER_INPUTS/1.0\" > \"$DROVER_RESULT\""),
      TaskId{1, 0});
  b.inputs = {{TaskId{1, 0}, "from A\n"}};
  server.Send(proto::Assign{{b}});
  server.Sync();
  EXPECT_EQ(server.Pending<proto::Started>(), 0u);
  EXPECT_EQ(server.Pending<proto::Refused>(), 0u);
  EXPECT_EQ(server.Pending<proto::Finished>(), 0u);
  EXPECT_TRUE(Exists(dir_ / "work/1/1.1/inputs/1.0"));
  EXPECT_FALSE(Exists(marker));
  EXPECT_EQ(server.Expect<proto::Heartbeat>().running,
            (std::vector<proto::TaskAttempt>{{TaskId{1, 0}, 1}}));

  // A ends; nothing more comes from the server. Finished(A), then Started(B).
  gate.Release();
  std::optional<proto::WorkerMessage> first = server.Next();
  ASSERT_TRUE(first && std::holds_alternative<proto::Finished>(*first));
  const proto::Finished& a_done = std::get<proto::Finished>(*first);
  ASSERT_EQ(a_done.tasks.size(), 1u);
  EXPECT_EQ(a_done.tasks[0].task, (TaskId{1, 0}));
  EXPECT_EQ(a_done.tasks[0].outcome.exit_code, 0);
  std::optional<proto::WorkerMessage> second = server.Next();
  ASSERT_TRUE(second && std::holds_alternative<proto::Started>(*second));
  const proto::Started& b_started = std::get<proto::Started>(*second);
  ASSERT_EQ(b_started.tasks.size(), 1u);
  EXPECT_EQ(b_started.tasks[0].task, (TaskId{1, 1}));
  EXPECT_EQ(b_started.tasks[0].attempt, 1u);
  // Both on the worker's clock: A's exit as seen, then B's process made.
  EXPECT_LE(a_done.tasks[0].finished_at, b_started.tasks[0].started_at);

  proto::Finished b_done = server.Expect<proto::Finished>();
  ASSERT_EQ(b_done.tasks.size(), 1u);
  EXPECT_EQ(b_done.tasks[0].task, (TaskId{1, 1}));
  EXPECT_EQ(b_done.tasks[0].outcome.exit_code, 0);
  EXPECT_EQ(b_done.tasks[0].outcome.result, "from A\n");
  EXPECT_TRUE(Exists(marker));
}

TEST_F(AgentTest, AfterAnAttemptThatDoesNotRunHereStartsAtOnce) {
  FakeServer server(/*tls=*/false);
  Attach(server, Config(server));
  Fifo gate(dir_ / "gate");
  ASSERT_NO_FATAL_FAILURE(StartHeldTask(server, gate));

  // Neither pins a core, so both fit beside A.
  auto unpinned = [this](uint32_t index) {
    proto::Assignment a = Task(index, "exit 0");
    a.cores.clear();
    a.cpu_quota_milli = 0;
    return a;
  };
  // Another attempt of the running task, and a task unknown here.
  server.Send(proto::Assign{{After(unpinned(1), TaskId{1, 0}, /*attempt=*/2)}});
  server.Send(proto::Assign{{After(unpinned(2), TaskId{1, 9})}});
  std::set<TaskId> started;
  std::set<TaskId> finished;
  while (started.size() < 2 || finished.size() < 2) {
    std::optional<proto::WorkerMessage> m = server.Next();
    ASSERT_TRUE(m.has_value());
    if (const auto* s = std::get_if<proto::Started>(&*m)) {
      for (const proto::StartedTask& t : s->tasks) started.insert(t.task);
    } else if (const auto* f = std::get_if<proto::Finished>(&*m)) {
      for (const proto::FinishedTask& t : f->tasks) {
        EXPECT_EQ(started.count(t.task), 1u) << "finished before it was reported started";
        EXPECT_EQ(t.outcome.exit_code, 0) << t.outcome.result;
        finished.insert(t.task);
      }
    } else {
      ADD_FAILURE() << "unexpected message " << m->index();
    }
  }
  EXPECT_EQ(started, (std::set<TaskId>{{1, 1}, {1, 2}}));
  gate.Release();
  EXPECT_EQ(server.Expect<proto::Finished>().tasks[0].task, (TaskId{1, 0}));
}

TEST_F(AgentTest, ACanceledQueuedTaskNeverStarts) {
  FakeServer server(/*tls=*/false);
  Attach(server, Config(server));
  Fifo gate(dir_ / "gate");
  const std::string marker = dir_ / "b-ran";
  ASSERT_NO_FATAL_FAILURE(QueueBehindHeldTask(server, gate, marker));
  ASSERT_TRUE(Exists(dir_ / "work/1/1.1"));

  server.Send(proto::Cancel{TaskId{1, 1}, 1, "canceled by user"});
  proto::Finished canceled = server.Expect<proto::Finished>();
  ASSERT_EQ(canceled.tasks.size(), 1u);
  EXPECT_EQ(canceled.tasks[0].task, (TaskId{1, 1}));
  EXPECT_EQ(canceled.tasks[0].outcome.exit_code, -1);
  EXPECT_EQ(canceled.tasks[0].outcome.signal, 0);
  EXPECT_EQ(canceled.tasks[0].outcome.reason, "canceled before it started: canceled by user");
  EXPECT_TRUE(canceled.tasks[0].never_started);
  EXPECT_FALSE(Exists(dir_ / "work/1/1.1")) << "its prepared directory stayed";

  // A's exit starts nothing.
  proto::Finished a_done;
  ASSERT_NO_FATAL_FAILURE(EndHeldTaskAlone(server, gate, marker, &a_done));
  EXPECT_EQ(server.Pending<proto::Finished>(), 0u);
  EXPECT_TRUE(server.Expect<proto::Heartbeat>().running.empty());
}

TEST_F(AgentTest, AWithdrawnQueuedTaskNeverStartsAndAStartedOneIgnoresIt) {
  FakeServer server(/*tls=*/false);
  Attach(server, Config(server));
  Fifo gate(dir_ / "gate");
  const std::string marker = dir_ / "b-ran";
  ASSERT_NO_FATAL_FAILURE(QueueBehindHeldTask(server, gate, marker));

  // The running one is not queued: a withdrawal leaves it alone.
  server.Send(proto::Withdraw{TaskId{1, 0}, 1, "room freed first on worker 2"});
  server.Send(proto::Withdraw{TaskId{1, 1}, 1, "room freed first on worker 2"});
  proto::Finished dropped = server.Expect<proto::Finished>();
  ASSERT_EQ(dropped.tasks.size(), 1u);
  EXPECT_EQ(dropped.tasks[0].task, (TaskId{1, 1}));
  EXPECT_TRUE(dropped.tasks[0].never_started);
  EXPECT_EQ(dropped.tasks[0].outcome.reason,
            "withdrawn before it started: room freed first on worker 2");

  proto::Finished a_done;
  ASSERT_NO_FATAL_FAILURE(EndHeldTaskAlone(server, gate, marker, &a_done));
  EXPECT_EQ(a_done.tasks[0].outcome.exit_code, 0);
  EXPECT_FALSE(a_done.tasks[0].never_started);
}

// A queued task is prepared at once, so a command that does not exist
// fails then, while its predecessor still runs.
TEST_F(AgentTest, AQueuedTaskThatCannotStartFailsWhenAssigned) {
  FakeServer server(/*tls=*/false);
  Attach(server, Config(server));
  Fifo gate(dir_ / "gate");
  ASSERT_NO_FATAL_FAILURE(StartHeldTask(server, gate));
  proto::Assignment b = After(Task(1, ""), TaskId{1, 0});
  b.argv = {"no-such-command-drover-test"};
  server.Send(proto::Assign{{b}});
  proto::Finished failed = server.Expect<proto::Finished>();
  ASSERT_EQ(failed.tasks.size(), 1u);
  EXPECT_EQ(failed.tasks[0].task, (TaskId{1, 1}));
  EXPECT_EQ(failed.tasks[0].outcome.exit_code, -1);
  EXPECT_EQ(failed.tasks[0].outcome.reason, "command not found: no-such-command-drover-test");
  gate.Release();
  EXPECT_EQ(server.Expect<proto::Finished>().tasks[0].task, (TaskId{1, 0}));
  server.Sync();
  EXPECT_EQ(server.Pending<proto::Started>(), 0u);
}

TEST_F(AgentTest, FencingDropsAQueuedTaskBeforeItsPredecessorCanStartIt) {
  FakeServer server(/*tls=*/false);
  AgentConfig config = Config(server);
  config.heartbeat_interval = Millis(250);
  config.lease_ttl = Millis(1500);
  Attach(server, config, Millis(250), Millis(1500));
  Fifo pid_out(dir_ / "pid");
  const std::string marker = dir_ / "b-ran";
  server.Send(proto::Assign{{Task(0, "echo $$ > " + pid_out.path() + "; exec sleep 60")}});
  ASSERT_EQ(server.Expect<proto::Started>().tasks.size(), 1u);
  std::optional<std::string> pid_text = pid_out.ReadLine();
  ASSERT_TRUE(pid_text.has_value());
  const pid_t pid = std::stoi(*pid_text);
  server.Send(proto::Assign{{After(Task(1, "touch " + marker), TaskId{1, 0})}});
  server.Sync();
  ASSERT_EQ(server.Pending<proto::Started>(), 0u);

  server.Block();
  ASSERT_TRUE(WaitForExit(pid, std::chrono::seconds(20)));
  server.Unblock();

  // Once A's end is known too, a Hello reports both: A killed, B dropped.
  while (true) {
    proto::Hello hello = server.ExpectHello();
    if (::testing::Test::HasFailure()) return;
    const bool has_a = std::any_of(hello.finished.begin(), hello.finished.end(),
                                   [](const auto& f) { return f.task == TaskId{1, 0}; });
    if (!has_a) {
      server.Drop();  // from before A's end was recorded; make it try again
      continue;
    }
    EXPECT_TRUE(hello.running.empty());
    ASSERT_EQ(hello.finished.size(), 2u);
    EXPECT_EQ(hello.finished[0].task, (TaskId{1, 0}));
    EXPECT_EQ(hello.finished[0].outcome.signal, SIGKILL);
    const proto::FinishedTask& b = hello.finished[1];
    EXPECT_EQ(b.task, (TaskId{1, 1}));
    EXPECT_EQ(b.outcome.exit_code, -1);
    EXPECT_EQ(b.outcome.signal, 0);
    EXPECT_EQ(b.outcome.reason.rfind("fenced: no contact with the server for ", 0), 0u)
        << b.outcome.result;
    break;
  }
  server.Send(proto::HelloAck{kWorkerId, "test-server-2", Millis(250), Millis(1500)});
  server.Sync();
  EXPECT_EQ(server.Pending<proto::Started>(), 0u);
  EXPECT_FALSE(Exists(marker));
}

TEST_F(AgentTest, AQueuedTaskIsInTheHelloAndStartsOnceWhenAssignedAgain) {
  FakeServer server(/*tls=*/false);
  Attach(server, Config(server));
  Fifo gate(dir_ / "gate");
  const uint32_t core = static_cast<uint32_t>(core_);
  ASSERT_NO_FATAL_FAILURE(StartHeldTask(server, gate));
  const proto::Assignment b = After(Task(1, "exit 0"), TaskId{1, 0});
  server.Send(proto::Assign{{b}});
  // A second, different task behind A: refused.
  server.Send(proto::Assign{{After(Task(2, "exit 0"), TaskId{1, 0})}});
  proto::Refused second = server.Expect<proto::Refused>();
  EXPECT_EQ(second.task, (TaskId{1, 2}));
  EXPECT_NE(second.reason.find("a task is already queued behind 1.0"), std::string::npos)
      << second.reason;
  // Another attempt of the queued task: refused too.
  server.Send(proto::Assign{{After(Task(1, "exit 0", /*attempt=*/2), TaskId{1, 0})}});
  proto::Refused other_attempt = server.Expect<proto::Refused>();
  EXPECT_EQ(other_attempt.task, (TaskId{1, 1}));
  EXPECT_EQ(other_attempt.attempt, 2u);

  server.Drop();
  proto::Hello hello = server.ExpectHello();
  EXPECT_EQ(hello.running, (std::vector<proto::RunningTask>{
                               {TaskId{1, 0}, 1, {core}, {}},
                               {TaskId{1, 1}, 1, {core}, {}, /*queued=*/true}}));
  server.Send(proto::HelloAck{kWorkerId, "test-server-2", Millis(100), Seconds(30)});
  // Sent again, as a server that re-sends its assignments would.
  server.Send(proto::Assign{{b}});
  server.Sync();
  EXPECT_EQ(server.Pending<proto::Started>(), 0u);
  EXPECT_EQ(server.Pending<proto::Refused>(), 0u);

  gate.Release();
  proto::Finished a_done = server.Expect<proto::Finished>();
  EXPECT_EQ(a_done.tasks[0].task, (TaskId{1, 0}));
  proto::Started b_started = server.Expect<proto::Started>();
  ASSERT_EQ(b_started.tasks.size(), 1u);
  EXPECT_EQ(b_started.tasks[0].task, (TaskId{1, 1}));
  proto::Finished b_done = server.Expect<proto::Finished>();
  EXPECT_EQ(b_done.tasks[0].task, (TaskId{1, 1}));
  server.Sync();
  EXPECT_EQ(server.Pending<proto::Started>(), 0u);
  EXPECT_EQ(server.Pending<proto::Finished>(), 0u);
}

// A worker's next life ends what its previous life left running before it
// says hello, and records each task it runs for its own next
// life (isolation none: the tasks log of life_record.h).
TEST_F(AgentTest, ARestartEndsWhatThePreviousLifeLeftBeforeItsHello) {
  const std::string state = dir_ / "work/.worker";
  std::filesystem::create_directories(state);
  testing::TaskGroup left = testing::StartTaskGroup();
  ASSERT_GT(left.member, 0);
  std::optional<ProcStat> st = ReadProcStat(left.leader);
  ASSERT_TRUE(st.has_value());
  std::ofstream(state + "/tasks") << "+ " << left.leader << " " << st->start_ticks << " 1.9.1\n";

  FakeServer server(/*tls=*/false);
  proto::Hello hello = Attach(server, Config(server));
  EXPECT_TRUE(testing::EndsWithin(left.leader, std::chrono::milliseconds(0)));
  EXPECT_TRUE(testing::EndsWithin(left.member, std::chrono::seconds(10)));
  EXPECT_TRUE(hello.running.empty());
  testing::KillAndReap(left.leader);

  server.Send(proto::Assign{{Task(0, "exec sleep 1000")}});
  proto::Started started = server.Expect<proto::Started>();
  ASSERT_EQ(started.tasks.size(), 1u);
  std::ifstream log(state + "/tasks");
  std::string op, pid, start, name;
  log >> op >> pid >> start >> name;
  EXPECT_EQ(op, "+");
  EXPECT_EQ(name, "1.0.1");
}

TEST_F(AgentTest, ConfigurationErrorsAreClear) {
  AgentConfig c;
  c.workdir = dir_ / "work";
  c.run_as_root = true;
  Status no_server = StartAgent(c);
  EXPECT_EQ(no_server.code(), StatusCode::kInvalidArgument);

  c.servers = {"127.0.0.1:1"};
  Status no_fingerprint = StartAgent(c);
  EXPECT_EQ(no_fingerprint.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(no_fingerprint.message().find("fingerprint"), std::string::npos);

  c.tls = false;
  c.lease_ttl = Seconds(3);
  c.heartbeat_interval = Seconds(2);
  EXPECT_EQ(StartAgent(c).code(), StatusCode::kInvalidArgument);

  c.lease_ttl = Seconds(30);
  c.isolation = "docker";
  EXPECT_EQ(StartAgent(c).code(), StatusCode::kInvalidArgument);
}

// Per-user mode: a root agent with --user-map runs each task as
// its assignment's user's account, queued ones too; a user without an
// account here fails with the reason, without running anything.
TEST_F(AgentTest, PerUserRunsEachTaskAsItsUsersAccountAndRefusesTheUnknown) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to switch users";
  const passwd* nobody = ::getpwnam("nobody");
  if (nobody == nullptr) GTEST_SKIP() << "no user \"nobody\" on this machine";
  const std::string uid = std::to_string(nobody->pw_uid);
  std::filesystem::permissions(dir_.path(), std::filesystem::perms(0711));
  FakeServer server(/*tls=*/false);
  AgentConfig c = Config(server);
  c.run_as_root = false;
  c.user_map = {"ana=nobody"};
  Attach(server, c);

  proto::Assignment carol = Task(2, "touch \"$DROVER_RESULT\"");
  carol.user = "carol-drover-none";
  server.Send(proto::Assign{{carol}});
  proto::Finished refused = server.Expect<proto::Finished>();
  ASSERT_EQ(refused.tasks.size(), 1u);
  EXPECT_EQ(refused.tasks[0].task, (TaskId{1, 2}));
  EXPECT_EQ(refused.tasks[0].outcome.exit_code, -1);
  EXPECT_EQ(refused.tasks[0].outcome.reason,
            "user carol-drover-none has no account on worker w1 (map it with --user-map "
            "carol-drover-none=ACCOUNT, or run every task as one account with --user)");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "work/1/2.1"));

  // In the test's directory (0711), where the account can open it.
  Fifo gate(dir_ / "gate");
  proto::Assignment first = Task(0, "read x < " + gate.path() + "; id -u > \"$DROVER_RESULT\"");
  first.user = "ana";
  server.Send(proto::Assign{{first}});
  ASSERT_EQ(server.Expect<proto::Started>().tasks.size(), 1u);
  // Queued behind it: made ahead as its own user's account.
  proto::Assignment queued = After(Task(1, "id -u > \"$DROVER_RESULT\""), TaskId{1, 0});
  queued.user = "ana";
  server.Send(proto::Assign{{queued}});
  server.Sync();
  gate.Release();
  std::map<TaskId, std::string> results;
  while (results.size() < 2) {
    for (const proto::FinishedTask& t : server.Expect<proto::Finished>().tasks) {
      EXPECT_EQ(t.outcome.exit_code, 0) << t.task.ToString() << ": " << t.outcome.reason;
      results[t.task] = t.outcome.result;
    }
  }
  EXPECT_EQ(results[(TaskId{1, 0})], uid + "\n");
  EXPECT_EQ(results[(TaskId{1, 1})], uid + "\n");
}

TEST_F(AgentTest, AUserMapExcludesOneAccountAndNeedsRoot) {
  AgentConfig c;
  c.servers = {"127.0.0.1:1"};
  c.tls = false;
  c.workdir = dir_ / "work";
  c.gpus = "none";
  c.user_map = {"ana=alice"};
  c.task_user = "nobody";
  Status both = StartAgent(c);
  EXPECT_EQ(both.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(both.message(),
            "--user runs every task as one account, --user-map each task as its user's: give "
            "one of them");
  c.task_user.clear();
  c.user_map = {"ana"};
  EXPECT_EQ(StartAgent(c).message(), "--user-map ana: expected USER=ACCOUNT (ana=alice)");
  if (::geteuid() != 0) {
    c.user_map = {"ana=alice"};
    Status not_root = StartAgent(c);
    EXPECT_EQ(not_root.code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(not_root.message().find("needs a worker running as root"), std::string::npos)
        << not_root.message();
  }
}

}  // namespace
}  // namespace drover::worker
