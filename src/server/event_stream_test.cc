// EventStream's snapshot against a subscriber that reads slowly: paced by
// the session's unsent bytes, it arrives whole rather than outgrowing the
// session's send limit (which closes the session).
#include "server/event_stream.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/testing/test_cluster.h"

namespace drover::server {
namespace {

// A session whose peer reads when the test says (Read), and which closes
// itself, as the real one does, once more than `limit` bytes are unsent
// (its close callback runs on a later loop turn, as the real one's).
class SlowReaderSession : public net::WsSession {
 public:
  SlowReaderSession(net::EventLoop& loop, size_t limit) : loop_(loop), limit_(limit) {}
  void SendText(std::string message) override {
    if (closed_) return;
    unsent_ += message.size();
    if (unsent_ > limit_) {
      closed_ = true;
      loop_.Post([fn = on_close_] {
        if (fn) fn(ResourceExhausted("peer is not reading"));
      });
      return;
    }
    messages.push_back(std::move(message));
  }
  void SendBinary(std::string message) override { SendText(std::move(message)); }
  void Close(std::string) override {
    if (closed_) return;
    closed_ = true;
    if (on_close_) on_close_(Status::Ok());
  }
  void OnText(std::function<void(std::string)>) override {}
  void OnBinary(std::function<void(std::string)>) override {}
  void OnClose(std::function<void(const Status&)> fn) override { on_close_ = std::move(fn); }
  uint64_t id() const override { return 7; }
  const std::string& remote() const override { return remote_; }
  size_t unsent_bytes() const override { return unsent_; }

  void Read(size_t bytes) { unsent_ -= std::min(unsent_, bytes); }
  bool closed() const { return closed_; }

  std::vector<std::string> messages;

 private:
  net::EventLoop& loop_;
  size_t limit_;
  size_t unsent_ = 0;
  bool closed_ = false;
  std::string remote_ = "127.0.0.1:1";
  std::function<void(const Status&)> on_close_;
};

TEST(EventStreamTest, ASnapshotLargerThanTheSendLimitArrivesWholeAtTheReadersPace) {
  constexpr uint32_t kTasks = 3000;
  core::testing::TestCluster c;
  const JobId job =
      c.Submit(core::testing::JobBuilder(core::testing::TaskBuilder().Array(0, kTasks)));
  net::EventLoop loop;
  // ~100 bytes an event: the whole snapshot is ~300 KB against a send limit
  // of 16 KB; paced at 4 KB.
  EventStream stream(c.scheduler(), loop, /*pace_bytes=*/4096);
  auto session = std::make_shared<SlowReaderSession>(loop, 16 * 1024);
  net::Request request;
  request.query["job"] = std::to_string(job);
  stream.Attach(session, request, c.now());
  EXPECT_LT(session->messages.size(), kTasks) << "the first slice stops at the pace";

  net::Timer reader(loop);
  std::function<void()> read = [&] {
    session->Read(2048);
    if (stream.snapshots_in_progress() == 0 || session->closed()) {
      loop.Stop();
      return;
    }
    reader.ArmAfter(Millis(1), read);
  };
  reader.ArmAfter(Millis(1), read);
  loop.Run();

  ASSERT_FALSE(session->closed()) << "after " << session->messages.size() << " events";
  ASSERT_EQ(session->messages.size(), kTasks);
  std::set<std::string> seen;
  for (const std::string& m : session->messages) {
    seen.insert(nlohmann::json::parse(m)["task"].get<std::string>());
  }
  EXPECT_EQ(seen.size(), kTasks);
  EXPECT_GT(stream.pace_waits(), 0u);
  stream.Stop();
}

}  // namespace
}  // namespace drover::server
