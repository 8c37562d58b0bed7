// Batch frames on the worker channel, against a real ServerShell on
// 127.0.0.1. With them on (ServerConfig::worker_batches; `drover server`
// and `drover up` turn it on unless --no-worker-batches), a worker that
// says it reads them (Hello::batches) gets what the server sends it in a
// burst as one frame, and the HelloAck says the server reads them; a
// worker from before batches (no flag) gets one message per frame. With
// them off nobody gets a batch and the HelloAck says nothing of them,
// though a batch frame a worker sends is still read.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/server_shell.h"
#include "server/server_test_util.h"
#include "server/worker_channel.h"

namespace drover::server {
namespace {

// docs/design.md: at most 8 worker messages are read between two looks at
// the network (read_pacer.h).
TEST(WorkerChannelOptionsTest, EightWorkerReadsPerTurn) {
  EXPECT_EQ(WorkerChannelOptions{}.reads_per_turn, 8u);
}

using testing::FakeWorker;
using testing::LoopbackShell;
using testing::MakeHello;

class WorkerBatchesTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { ASSERT_TRUE(shell_.status().ok()) << shell_.status().ToString(); }

  std::unique_ptr<FakeWorker> Attach(const std::string& name, bool batches) {
    auto w = std::make_unique<FakeWorker>(shell_.loop(), shell_.Client());
    EXPECT_TRUE(w->status().ok()) << w->status().ToString();
    proto::Hello hello = MakeHello(name);
    hello.batches = batches;
    w->Send(hello);
    std::optional<std::string> text = w->NextText();
    EXPECT_TRUE(text.has_value());
    Result<proto::ServerMessage> ack = proto::DecodeServerMessage(text.value_or(""));
    EXPECT_TRUE(ack.ok() && std::holds_alternative<proto::HelloAck>(*ack)) << text.value_or("");
    if (ack.ok() && std::holds_alternative<proto::HelloAck>(*ack)) {
      EXPECT_EQ(std::get<proto::HelloAck>(*ack).batches, GetParam()) << text.value_or("");
    }
    return w;
  }

  // Two results for attempts the server does not know: it acknowledges
  // each (the core ignores them), both in the same turn.
  static std::vector<std::string> TwoStaleResults() {
    return {proto::Encode(proto::WorkerMessage(
                proto::Finished{{{TaskId{999, 0}, 1, {}, TimeFromMicros(3)}}})),
            proto::Encode(proto::WorkerMessage(
                proto::Finished{{{TaskId{998, 0}, 1, {}, TimeFromMicros(3)}}}))};
  }

  LoopbackShell shell_{[this](ServerConfig& cfg) { cfg.worker_batches = GetParam(); }};
};

TEST_P(WorkerBatchesTest, AWorkerThatReadsBatchesGetsABurstInOneFrameWhenTheServerSendsThem) {
  std::unique_ptr<FakeWorker> w = Attach("new", /*batches=*/true);
  w->SendRaw(proto::EncodeBatch(TwoStaleResults()));  // the server reads a batch frame
  std::vector<proto::ServerMessage> got;
  size_t frames = 0;
  while (got.size() < 2) {
    std::optional<std::string> text = w->NextText();
    ASSERT_TRUE(text.has_value());
    ++frames;
    EXPECT_EQ(proto::DecodeServerMessage(*text).ok(), !GetParam()) << *text;
    Result<std::vector<proto::ServerMessage>> frame = proto::DecodeServerFrame(*text);
    ASSERT_TRUE(frame.ok()) << frame.status().ToString();
    for (auto& m : *frame) got.push_back(std::move(m));
  }
  EXPECT_EQ(frames, GetParam() ? 1u : 2u);
  EXPECT_EQ(std::get<proto::Ack>(got.at(0)).tasks.at(0).task, (TaskId{999, 0}));
  EXPECT_EQ(std::get<proto::Ack>(got.at(1)).tasks.at(0).task, (TaskId{998, 0}));
}

TEST_P(WorkerBatchesTest, AWorkerFromBeforeBatchesGetsOneMessagePerFrame) {
  std::unique_ptr<FakeWorker> w = Attach("old", /*batches=*/false);
  for (const std::string& text : TwoStaleResults()) w->SendRaw(text);
  for (TaskId want : {TaskId{999, 0}, TaskId{998, 0}}) {
    std::optional<std::string> text = w->NextText();
    ASSERT_TRUE(text.has_value());
    Result<proto::ServerMessage> m = proto::DecodeServerMessage(*text);  // one message
    ASSERT_TRUE(m.ok()) << m.status().ToString() << " in " << *text;
    EXPECT_EQ(std::get<proto::Ack>(*m).tasks.at(0).task, want);
  }
}

// A bad message inside a batch fails the whole frame: the worker is told
// why, by the message's place, and dropped.
TEST_P(WorkerBatchesTest, ABadMessageInABatchNamesItsPlace) {
  std::unique_ptr<FakeWorker> w = Attach("careless", /*batches=*/true);
  std::vector<std::string> texts = TwoStaleResults();
  texts.push_back(R"({"v":1,"type":"started","tasks":"soon"})");
  w->SendRaw(proto::EncodeBatch(texts));
  std::optional<std::string> text = w->NextText();
  ASSERT_TRUE(text.has_value());
  Result<proto::ServerMessage> m = proto::DecodeServerMessage(*text);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_TRUE(std::holds_alternative<proto::Error>(*m)) << *text;
  EXPECT_NE(std::get<proto::Error>(*m).message.find("batch: messages[2]: started: tasks"),
            std::string::npos)
      << *text;
  EXPECT_TRUE(w->WaitClosed().has_value());
}

INSTANTIATE_TEST_SUITE_P(WorkerBatches, WorkerBatchesTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "WorkerBatchesOn" : "Default";
                         });

}  // namespace
}  // namespace drover::server
