// The agent's shell on its seams: a fake ServerLink, a
// fake TaskRunner and a SimulatedClock in place of the WebSocket, the
// Executor and the wall clock. No TLS, no socket, no task process: what
// the shell does with one assignment is read off the fake session's
// outbox. (The reaper and the life record stay real: they guard the work
// directory.) The end-to-end behaviour is agent_test's.
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "net/event_loop.h"
#include "net/net_test_util.h"
#include "net/ws_session.h"
#include "proto/messages.h"
#include "worker/agent/agent.h"
#include "worker/agent/server_link.h"
#include "worker/agent/task_runner.h"
#include "worker/agent/testing/fake_runner.h"

namespace drover::worker {
namespace {

using net::testing::TempDir;
using testing::FakeRunner;

// One connection: records what the agent sends; the test plays the server
// through Receive.
class FakeSession final : public net::WsSession {
 public:
  void SendText(std::string message) override {
    Result<proto::WorkerMessage> decoded = proto::DecodeWorkerMessage(message);
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    sent.push_back(std::move(decoded).value());
  }
  void SendBinary(std::string) override {}
  void Close(std::string reason) override { closed = reason; }
  void OnText(std::function<void(std::string)> fn) override { on_text_ = std::move(fn); }
  void OnBinary(std::function<void(std::string)>) override {}
  void OnClose(std::function<void(const Status&)> fn) override { on_close_ = std::move(fn); }
  uint64_t id() const override { return 1; }
  const std::string& remote() const override { return remote_; }

  void Receive(const proto::ServerMessage& message) { on_text_(proto::Encode(message)); }
  void Drop() { on_close_(Unavailable("dropped by the test")); }

  // The messages sent and not yet taken, oldest first.
  template <typename T>
  T Take() {
    EXPECT_FALSE(sent.empty()) << "nothing sent";
    if (sent.empty()) return T{};
    proto::WorkerMessage first = std::move(sent.front());
    sent.pop_front();
    const T* message = std::get_if<T>(&first);
    EXPECT_NE(message, nullptr) << "another message came first: " << proto::Encode(first);
    return message ? *message : T{};
  }

  std::deque<proto::WorkerMessage> sent;
  std::string closed;

 private:
  std::function<void(std::string)> on_text_;
  std::function<void(const Status&)> on_close_;
  std::string remote_ = "fake";
};

// Hands out the session the test gives it, once per Connect.
class FakeLink final : public ServerLink {
 public:
  void Connect(const net::ClientOptions&, ConnectCallback done) override {
    ++connects;
    pending_ = std::move(done);
    if (on_connect) on_connect();
  }
  std::shared_ptr<FakeSession> Accept() {
    auto session = std::make_shared<FakeSession>();
    ConnectCallback done = std::move(pending_);
    pending_ = nullptr;
    done(std::shared_ptr<net::WsSession>(session));
    return session;
  }

  int connects = 0;
  std::function<void()> on_connect;

 private:
  ConnectCallback pending_;
};

TEST(AgentShellTest, RunsAnAssignmentThroughFakesOnASimulatedClock) {
  TempDir dir;
  net::EventLoop loop;
  SimulatedClock clock;
  FakeLink link;
  FakeRunner runner(clock);

  AgentConfig config;
  config.servers = {"127.0.0.1:1"};  // never dialled: the link is the fake
  config.tls = false;
  config.name = "w1";
  config.workdir = dir / "work";
  config.isolation = "none";
  config.mem = "1GiB";
  config.gpus = "none";
  config.gpu_lock_dir = dir / "gpu-locks";
  config.nvidia_smi = "";
  config.run_as_root = true;
  config.reconnect.initial = Millis(1);
  config.reconnect.max = Millis(1);
  config.clock = &clock;
  config.server_link = &link;
  config.task_runner = &runner;
  Result<std::unique_ptr<Agent>> agent = Agent::Start(loop, config);
  ASSERT_TRUE(agent.ok()) << agent.status().ToString();
  ASSERT_EQ(link.connects, 1);

  std::shared_ptr<FakeSession> session = link.Accept();
  proto::Hello hello = session->Take<proto::Hello>();
  EXPECT_EQ(hello.worker_name, "w1");
  EXPECT_TRUE(hello.running.empty());
  EXPECT_TRUE(hello.finished.empty());
  // Long intervals: no heartbeat or fence falls inside the test.
  session->Receive(proto::HelloAck{7, "fake-server", Seconds(60), Seconds(600)});
  EXPECT_EQ((*agent)->worker_id(), 7u);

  proto::Assignment a;
  a.task = TaskId{1, 0};
  a.attempt = 1;
  a.cpu_quota_milli = 1000;
  a.argv = {"train"};
  a.job_name = "test";
  a.group_name = "g";
  const Time assigned_at = clock.Now();
  session->Receive(proto::Assign{{a}});
  EXPECT_EQ(runner.started, (std::vector<TaskId>{TaskId{1, 0}}));
  loop.Poll();  // Started goes out once per loop turn
  proto::Started started = session->Take<proto::Started>();
  EXPECT_EQ(started.tasks, (std::vector<proto::StartedTask>{{TaskId{1, 0}, 1, assigned_at}}));

  clock.Advance(Seconds(90));
  runner.Exit(TaskId{1, 0}, 0, "42\n");
  proto::Finished finished = session->Take<proto::Finished>();
  ASSERT_EQ(finished.tasks.size(), 1u);
  EXPECT_EQ(finished.tasks[0].task, (TaskId{1, 0}));
  EXPECT_EQ(finished.tasks[0].outcome.exit_code, 0);
  EXPECT_EQ(finished.tasks[0].outcome.result, "42\n");
  EXPECT_EQ(finished.tasks[0].finished_at, assigned_at + Seconds(90));
  loop.Poll();
  EXPECT_TRUE(session->sent.empty());
  // Its empty directories may serve later tasks; a failed task's stay (its
  // checkpoint directory is its retry's).
  EXPECT_EQ(runner.recycled, (std::vector<TaskId>{TaskId{1, 0}}));
  a.task = TaskId{1, 1};
  session->Receive(proto::Assign{{a}});
  loop.Poll();
  EXPECT_EQ(session->Take<proto::Started>().tasks.size(), 1u);
  runner.Exit(TaskId{1, 1}, 1, "");
  EXPECT_EQ(session->Take<proto::Finished>().tasks.size(), 1u);
  loop.Poll();
  EXPECT_EQ(runner.recycled, (std::vector<TaskId>{TaskId{1, 0}}));

  // Acknowledged, the results are no longer in the next session's Hello.
  session->Receive(
      proto::Ack{{proto::TaskAttempt{TaskId{1, 0}, 1}, proto::TaskAttempt{TaskId{1, 1}, 1}}});
  net::Timer give_up(loop);
  give_up.ArmAfter(Seconds(10), [&] { loop.Stop(); });
  link.on_connect = [&] { loop.Stop(); };
  session->Drop();
  loop.Run();  // until the reconnect (1 ms of backoff)
  ASSERT_EQ(link.connects, 2);
  std::shared_ptr<FakeSession> again = link.Accept();
  proto::Hello second = again->Take<proto::Hello>();
  EXPECT_EQ(second.previous_id, 7u);
  EXPECT_TRUE(second.finished.empty());
  EXPECT_TRUE(second.running.empty());
  EXPECT_TRUE(runner.killed.empty());
  agent->reset();
}

}  // namespace
}  // namespace drover::worker
