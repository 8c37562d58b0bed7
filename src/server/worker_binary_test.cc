// Binary frames on the worker channel (proto/messages_binary.h), against a
// real ServerShell on 127.0.0.1. By default the HelloAck says the server
// reads and writes them, and a worker whose hello says it does gets its
// assignments and acks in binary frames and may send its Started and
// Finished so; a worker from before them (no flag) gets JSON text only.
// With --worker-json the HelloAck says nothing of them and everything is
// text, though a binary frame a worker sends is still read.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "net/http_client.h"
#include "proto/messages_binary.h"
#include "server/server_shell.h"
#include "server/server_test_util.h"

namespace drover::server {
namespace {

using testing::FakeWorker;
using testing::LoopbackShell;
using testing::MakeHello;

class WorkerBinaryTest : public ::testing::TestWithParam<bool> {
 protected:
  bool json_only() const { return GetParam(); }

  void SetUp() override { ASSERT_TRUE(shell_.status().ok()) << shell_.status().ToString(); }

  net::ClientOptions Client() const { return shell_.Client(); }

  std::unique_ptr<FakeWorker> Attach(const std::string& name, bool binary) {
    auto w = std::make_unique<FakeWorker>(shell_.loop(), Client());
    EXPECT_TRUE(w->status().ok()) << w->status().ToString();
    proto::Hello hello = MakeHello(name);
    hello.binary = binary;
    w->Send(hello);
    std::optional<proto::HelloAck> ack = w->Expect<proto::HelloAck>();
    EXPECT_TRUE(ack.has_value());
    if (ack) {
      EXPECT_EQ(ack->binary, !json_only());
    }
    return w;
  }

  nlohmann::json Get(const std::string& target) {
    net::HttpClient http(Client());
    Result<net::Response> r = http.Get(target);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? nlohmann::json::parse(r->body, nullptr, false) : nlohmann::json();
  }

  void Submit() {
    net::HttpClient http(Client());
    Result<net::Response> r =
        http.Post("/api/v1/jobs", R"({"name": "b", "task": [{"id": "t", "command": ["true"]}]})");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->status, 200) << r->body;
  }

  // The next server message, from a binary frame of one when `binary`,
  // else from a text frame.
  template <typename T>
  std::optional<T> Receive(FakeWorker& w, bool binary) {
    if (!binary) return w.Expect<T>();
    std::optional<std::string> frame = w.NextBinary();
    EXPECT_TRUE(frame.has_value()) << "no binary frame";
    if (!frame) return std::nullopt;
    Result<std::vector<proto::ServerMessage>> m = proto::DecodeServerBinaryFrame(*frame);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    if (!m.ok() || m->size() != 1 || !std::holds_alternative<T>(m->front())) {
      Result<std::string> described = proto::DescribeBinaryFrame(*frame);
      ADD_FAILURE() << "not one " << typeid(T).name() << ": "
                    << (described.ok() ? *described : described.status().message());
      return std::nullopt;
    }
    return std::get<T>(m->front());
  }

  // Runs the job's one task on `w`: its assignment, Started and Finished
  // (in binary frames when `binary`), the ack; then the job succeeded.
  void RunOneTask(FakeWorker& w, bool binary) {
    Submit();
    std::optional<proto::Assign> assign = Receive<proto::Assign>(w, binary);
    ASSERT_TRUE(assign.has_value());
    ASSERT_EQ(assign->tasks.size(), 1u);
    const proto::Assignment& a = assign->tasks[0];
    EXPECT_EQ(a.argv, (std::vector<std::string>{"true"}));
    const proto::WorkerMessage started =
        proto::Started{{{a.task, a.attempt, TimeFromMicros(1'700'000'000'000'000)}}};
    core::TaskOutcome outcome;
    // A binary frame carries a result's bytes as they are; what the API
    // shows of bytes that are not UTF-8 is U+FFFD, as JSON text would have
    // carried them.
    outcome.result = "done\xff";
    const proto::WorkerMessage finished =
        proto::Finished{{{a.task, a.attempt, outcome, TimeFromMicros(1'700'000'000'100'000)}}};
    for (const proto::WorkerMessage& m : {started, finished}) {
      proto::WireMessage wire = proto::EncodeForPeer(m, binary);
      ASSERT_EQ(wire.binary, binary);
      if (binary) {
        w.SendBinary(proto::EncodeBinaryFrame({wire.bytes}));
      } else {
        w.SendRaw(wire.bytes);
      }
    }
    std::optional<proto::Ack> ack = Receive<proto::Ack>(w, binary);
    ASSERT_TRUE(ack.has_value());
    EXPECT_EQ(ack->tasks, (std::vector<proto::TaskAttempt>{{a.task, a.attempt}}));
    nlohmann::json task = Get("/api/v1/tasks/" + a.task.ToString());
    EXPECT_EQ(task["state"], "succeeded") << task.dump();
    EXPECT_EQ(task["outcome"]["result"], "done\xef\xbf\xbd") << task.dump();
  }

  LoopbackShell shell_{[this](ServerConfig& cfg) { cfg.worker_json = json_only(); }};
};

TEST_P(WorkerBinaryTest, AWorkerThatSpeaksBinaryRunsATaskInBinaryFramesUnlessTheServerSaysJson) {
  std::unique_ptr<FakeWorker> w = Attach("new", /*binary=*/true);
  RunOneTask(*w, /*binary=*/!json_only());
}

TEST_P(WorkerBinaryTest, AWorkerFromBeforeBinaryFramesGetsAndSendsText) {
  std::unique_ptr<FakeWorker> w = Attach("old", /*binary=*/false);
  RunOneTask(*w, /*binary=*/false);
}

// A worker may send binary frames whatever it was told: the server reads them.
TEST_P(WorkerBinaryTest, TheServerReadsABinaryFrameFromAnyWorker) {
  std::unique_ptr<FakeWorker> w = Attach("eager", /*binary=*/false);
  Submit();
  std::optional<proto::Assign> assign = w->Expect<proto::Assign>();
  ASSERT_TRUE(assign.has_value());
  const proto::Assignment& a = assign->tasks.at(0);
  w->SendBinary(proto::EncodeBinaryFrame(
      {proto::EncodeForPeer(
           proto::WorkerMessage{proto::Finished{{{a.task, a.attempt, {}, TimeFromMicros(5)}}}},
           true)
           .bytes}));
  std::optional<proto::Ack> ack = w->ExpectPassing<proto::Ack>();
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->tasks.at(0).task, a.task);
}

// A bad binary frame is answered with an Error naming the message and
// field, and the connection closes.
TEST_P(WorkerBinaryTest, ABadBinaryFrameNamesWhatIsWrong) {
  std::unique_ptr<FakeWorker> w = Attach("careless", /*binary=*/true);
  proto::Finished bad{{{TaskId{3, 0}, 1, {}, TimeFromMicros(5)}}};
  bad.tasks[0].outcome.outputs = {{"out", 1, "not-a-digest"}};
  w->SendBinary(proto::EncodeBinaryFrame(
      {proto::EncodeForPeer(proto::WorkerMessage{proto::Started{}}, true).bytes,
       proto::EncodeForPeer(proto::WorkerMessage{bad}, true).bytes}));
  std::optional<proto::Error> error = w->Expect<proto::Error>();
  ASSERT_TRUE(error.has_value());
  EXPECT_NE(error->message.find("binary frame: messages[1]: finished: outputs.sha256"),
            std::string::npos)
      << error->message;
  EXPECT_TRUE(w->WaitClosed().has_value());
}

INSTANTIATE_TEST_SUITE_P(WorkerBinary, WorkerBinaryTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "WorkerJson" : "Default";
                         });

}  // namespace
}  // namespace drover::server
