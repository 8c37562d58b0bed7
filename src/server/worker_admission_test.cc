// A worker's hello against a real ServerShell on 127.0.0.1: the hellos of
// new workers that arrive together share one write of the worker registry,
// and what a worker sends before its hello is answered waits for it, in
// order, up to a bound.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "net/http_client.h"
#include "server/server_shell.h"
#include "server/server_test_util.h"

namespace drover::server {
namespace {

using testing::FakeWorker;
using testing::LoopbackShell;
using testing::MakeHello;

class WorkerAdmissionTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(shell_.status().ok()) << shell_.status().ToString(); }

  std::unique_ptr<FakeWorker> Connect() {
    auto w = std::make_unique<FakeWorker>(shell_.loop(), shell_.Client());
    EXPECT_TRUE(w->status().ok()) << w->status().ToString();
    return w;
  }

  // Sends on the loop's thread, all in one callback: the server finds
  // them all waiting when it next looks at the network.
  void SendTogether(const std::vector<std::pair<FakeWorker*, std::string>>& frames) {
    Inbox<bool> sent;
    shell_.loop().Post([&] {
      for (const auto& [w, text] : frames) w->SendRaw(text);
      sent.Push(true);
    });
    ASSERT_TRUE(sent.Pop().has_value());
  }

  double RegistryWrites() {
    Result<net::Response> got = net::HttpClient(shell_.Client()).Get("/metrics");
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    if (!got.ok()) return -1;
    std::smatch m;
    std::regex line("\ndrover_worker_registry_writes_total ([0-9]+)\n");
    EXPECT_TRUE(std::regex_search(got->body, m, line)) << got->body;
    return m.empty() ? -1 : std::stod(m[1].str());
  }

  // The counter once it has reached `n` (it only grows), or as it stood
  // after 20 s.
  double RegistryWritesOnceAtLeast(double n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    double writes = RegistryWrites();
    while (writes < n && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      writes = RegistryWrites();
    }
    return writes;
  }

  LoopbackShell shell_;
};

TEST_F(WorkerAdmissionTest, NewWorkersJoiningTogetherShareOneRegistryWrite) {
  // More than one turn admits (32 a turn).
  constexpr int kWorkers = 40;
  std::vector<std::unique_ptr<FakeWorker>> workers;
  std::vector<std::pair<FakeWorker*, std::string>> hellos;
  for (int i = 0; i < kWorkers; ++i) {
    workers.push_back(Connect());
    hellos.emplace_back(workers.back().get(),
                        proto::Encode(proto::WorkerMessage(MakeHello("w" + std::to_string(i)))));
  }
  SendTogether(hellos);
  std::set<WorkerId> ids;
  for (auto& w : workers) {
    std::optional<proto::HelloAck> ack = w->Expect<proto::HelloAck>();
    ASSERT_TRUE(ack.has_value());
    ids.insert(ack->worker);
  }
  EXPECT_EQ(ids.size(), static_cast<size_t>(kWorkers));
  // One write each before they were staged together.
  EXPECT_LE(RegistryWrites(), 2);

  // A known worker that comes back writes nothing.
  workers[0]->Close();
  ASSERT_TRUE(workers[0]->WaitClosed().has_value());
  auto again = Connect();
  again->Send(MakeHello("w0"));
  std::optional<proto::HelloAck> ack = again->Expect<proto::HelloAck>();
  ASSERT_TRUE(ack.has_value());
  EXPECT_LE(RegistryWrites(), 2);
}

TEST_F(WorkerAdmissionTest, WhatAWorkerSendsBeforeItsHelloIsAnsweredWaitsForIt) {
  auto w = Connect();
  // One frame: the hello, then a result for an attempt the server does not
  // know, which it acknowledges (the core ignores it).
  const std::string frame =
      proto::EncodeBatch({proto::Encode(proto::WorkerMessage(MakeHello("early"))),
                          proto::Encode(proto::WorkerMessage(
                              proto::Finished{{{TaskId{999, 0}, 1, {}, TimeFromMicros(3)}}}))});
  SendTogether({{w.get(), frame}});
  ASSERT_TRUE(w->Expect<proto::HelloAck>().has_value());
  std::optional<proto::Ack> ack = w->ExpectPassing<proto::Ack>();
  ASSERT_TRUE(ack.has_value());
  ASSERT_EQ(ack->tasks.size(), 1u);
  EXPECT_EQ(ack->tasks[0].task, (TaskId{999, 0}));
}

TEST_F(WorkerAdmissionTest, TooMuchBeforeTheHelloIsAnsweredClosesTheConnection) {
  auto w = Connect();
  std::vector<std::string> texts{proto::Encode(proto::WorkerMessage(MakeHello("chatty")))};
  for (int i = 0; i < 300; ++i)
    texts.push_back(proto::Encode(proto::WorkerMessage(proto::Heartbeat{})));
  SendTogether({{w.get(), proto::EncodeBatch(texts)}});
  std::optional<proto::ServerMessage> m = w->Next();
  ASSERT_TRUE(m.has_value());
  ASSERT_TRUE(std::holds_alternative<proto::Error>(*m)) << proto::Encode(*m);
  EXPECT_NE(std::get<proto::Error>(*m).message.find(
                "more than 256 messages before the hello was answered"),
            std::string::npos)
      << std::get<proto::Error>(*m).message;
  EXPECT_TRUE(w->WaitClosed().has_value());
  // Its record was written with the hellos of its turn, and then, as the
  // core never heard of it, marked inactive (else a restart would wait for
  // it): two writes, at the loop's idle points after it closed.
  EXPECT_EQ(RegistryWritesOnceAtLeast(2), 2);
  // Nothing of it reached the core.
  Result<net::Response> workers = net::HttpClient(shell_.Client()).Get("/api/v1/workers");
  ASSERT_TRUE(workers.ok());
  EXPECT_EQ(workers->body.find("chatty"), std::string::npos) << workers->body;
}

}  // namespace
}  // namespace drover::server
