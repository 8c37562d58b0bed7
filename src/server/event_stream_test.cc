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
  SlowReaderSession(net::EventLoop& loop, size_t limit, uint64_t id = 7)
      : loop_(loop), limit_(limit), id_(id) {}
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
  void Close(std::string reason) override {
    if (closed_) return;
    why = std::move(reason);
    closed_ = true;
    if (on_close_) on_close_(Status::Ok());
  }
  void OnText(std::function<void(std::string)>) override {}
  void OnBinary(std::function<void(std::string)>) override {}
  void OnClose(std::function<void(const Status&)> fn) override { on_close_ = std::move(fn); }
  uint64_t id() const override { return id_; }
  const std::string& remote() const override { return remote_; }
  size_t unsent_bytes() const override { return unsent_; }

  void OnDrained(std::function<void()> fn) override { on_drained_ = std::move(fn); }

  // The peer reads `bytes`; when nothing is left unsent, the drained
  // callback runs, as the real session's does after its last write.
  void Read(size_t bytes) {
    if (unsent_ == 0) return;
    unsent_ -= std::min(unsent_, bytes);
    if (unsent_ == 0 && on_drained_ && !closed_) on_drained_();
  }
  bool closed() const { return closed_; }

  std::vector<std::string> messages;
  std::string why;  // the reason of the first Close

 private:
  net::EventLoop& loop_;
  size_t limit_;
  uint64_t id_;
  size_t unsent_ = 0;
  bool closed_ = false;
  std::string remote_ = "127.0.0.1:1";
  std::function<void(const Status&)> on_close_;
  std::function<void()> on_drained_;
};

// The events of `messages`: one per message, or JSON arrays (?batch=true).
std::vector<nlohmann::json> EventsOf(const std::vector<std::string>& messages, bool batch) {
  std::vector<nlohmann::json> events;
  for (const std::string& m : messages) {
    nlohmann::json j = nlohmann::json::parse(m);
    EXPECT_EQ(j.is_array(), batch) << m.substr(0, 200);
    if (!j.is_array()) {
      events.push_back(std::move(j));
      continue;
    }
    EXPECT_FALSE(j.empty());
    for (nlohmann::json& e : j) events.push_back(std::move(e));
  }
  return events;
}

class EventStreamBatchTest : public ::testing::TestWithParam<bool> {};

INSTANTIATE_TEST_SUITE_P(OneOrMany, EventStreamBatchTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Batched" : "OnePerMessage"; });

TEST_P(EventStreamBatchTest, ASnapshotLargerThanTheSendLimitArrivesWholeAtTheReadersPace) {
  const bool batch = GetParam();
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
  if (batch) request.query["batch"] = "true";
  stream.Attach(session, request, c.now());
  EXPECT_LT(EventsOf(session->messages, batch).size(), kTasks)
      << "the first slice stops at the pace";

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

  ASSERT_FALSE(session->closed()) << "after " << session->messages.size() << " messages";
  const std::vector<nlohmann::json> events = EventsOf(session->messages, batch);
  ASSERT_EQ(events.size(), kTasks);
  std::set<std::string> seen;
  for (const nlohmann::json& e : events) seen.insert(e["task"].get<std::string>());
  EXPECT_EQ(seen.size(), kTasks);
  if (batch) {
    EXPECT_LT(session->messages.size(), kTasks / 10);
  }
  EXPECT_GT(stream.pace_waits(), 0u);
  stream.Stop();
}

TEST(EventStreamTest, ABatchingSubscriberGetsATurnsEventsInOrderInOneMessage) {
  core::testing::TestCluster c;
  const JobId job = c.Submit(core::testing::JobBuilder(core::testing::TaskBuilder().Array(0, 50)));
  net::EventLoop loop;
  EventStream stream(c.scheduler(), loop);
  auto batched = std::make_shared<SlowReaderSession>(loop, 1 << 20);
  net::Request request;
  request.query["snapshot"] = "false";
  request.query["batch"] = "true";
  stream.Attach(batched, request, c.now());
  request.query.erase("batch");
  auto other = std::make_shared<SlowReaderSession>(loop, 1 << 20, /*id=*/8);
  stream.Attach(other, request, c.now());
  for (uint32_t i = 0; i < 50; ++i) {
    stream.Publish(core::TaskStateChanged{TaskId{job, i}, core::TaskState::kQueued,
                                          core::TaskState::kRunning, 1, ""},
                   c.now());
  }
  loop.Poll();
  ASSERT_EQ(batched->messages.size(), 1u);
  const std::vector<nlohmann::json> events = EventsOf(batched->messages, true);
  ASSERT_EQ(events.size(), 50u);
  for (uint32_t i = 0; i < 50; ++i) {
    EXPECT_EQ(events[i]["task"], TaskId(job, i).ToString());
    EXPECT_EQ(events[i]["to"], "running");
  }
  EXPECT_EQ(other->messages.size(), 50u);
  EXPECT_EQ(EventsOf(other->messages, false), events);

  // While that message is unread, what comes is held, over many turns,
  // and goes as one message once the session has written everything.
  for (uint32_t i = 0; i < 50; ++i) {
    stream.Publish(core::TaskStateChanged{TaskId{job, i}, core::TaskState::kRunning,
                                          core::TaskState::kSucceeded, 1, ""},
                   c.now());
    loop.Poll();
  }
  EXPECT_EQ(batched->messages.size(), 1u) << "held while the first is unsent";
  EXPECT_EQ(other->messages.size(), 100u);
  batched->Read(1 << 20);
  ASSERT_EQ(batched->messages.size(), 2u);
  const std::vector<nlohmann::json> all = EventsOf(batched->messages, true);
  ASSERT_EQ(all.size(), 100u);
  EXPECT_EQ(all, EventsOf(other->messages, false)) << "the same events in the same order";
  stream.Stop();
}

TEST(EventStreamTest, ABatchingSubscriberThatDoesNotReadIsClosedAtTheHeldLimit) {
  core::testing::TestCluster c;
  const JobId job = c.Submit(core::testing::JobBuilder(core::testing::TaskBuilder().Array(0, 100)));
  net::EventLoop loop;
  EventStream stream(c.scheduler(), loop, EventStream::kDefaultPaceBytes, /*held_limit=*/4096);
  auto session = std::make_shared<SlowReaderSession>(loop, 1 << 20);
  net::Request request;
  request.query["snapshot"] = "false";
  request.query["batch"] = "true";
  stream.Attach(session, request, c.now());
  for (uint32_t i = 0; i < 100 && session->why.empty(); ++i) {
    stream.Publish(core::TaskStateChanged{TaskId{job, i}, core::TaskState::kQueued,
                                          core::TaskState::kRunning, 1, ""},
                   c.now());
    loop.Poll();
  }
  EXPECT_EQ(session->why, "not reading: more than 4096 bytes of events wait");
  EXPECT_EQ(session->messages.size(), 1u) << "the first went out; the rest were held";
  EXPECT_EQ(stream.subscriber_count(), 0u);
}

TEST(EventStreamTest, ABadBatchValueClosesTheStreamSayingWhy) {
  core::testing::TestCluster c;
  net::EventLoop loop;
  EventStream stream(c.scheduler(), loop);
  auto session = std::make_shared<SlowReaderSession>(loop, 1 << 20);
  net::Request request;
  request.query["batch"] = "yes";
  stream.Attach(session, request, c.now());
  EXPECT_EQ(session->why, "bad batch: want true or false, got \"yes\"");
  EXPECT_EQ(stream.subscriber_count(), 0u);
}

}  // namespace
}  // namespace drover::server
