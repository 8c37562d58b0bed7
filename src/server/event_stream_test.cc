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
  void OnText(std::function<void(std::string)> fn) override { on_text_ = std::move(fn); }
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
  // A text message from the peer.
  void Receive(std::string text) {
    if (on_text_ && !closed_) on_text_(std::move(text));
  }

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
  std::function<void(std::string)> on_text_;
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
  EventStream stream(c.scheduler(), loop, c.clock(), /*pace_bytes=*/4096);
  auto session = std::make_shared<SlowReaderSession>(loop, 16 * 1024);
  net::Request request;
  request.query["job"] = std::to_string(job);
  if (batch) request.query["batch"] = "true";
  stream.Attach(session, request);
  EXPECT_LT(EventsOf(session->messages, batch).size(), kTasks)
      << "the first slice stops at the pace";

  net::Timer reader(loop);
  // Until the snapshot is done and all of it read: its last events may
  // still be held for the session's drain when its last slice is taken.
  std::function<void()> read = [&] {
    session->Read(2048);
    if ((stream.snapshots_in_progress() == 0 && session->unsent_bytes() == 0) ||
        session->closed()) {
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
  EventStream stream(c.scheduler(), loop, c.clock());
  auto batched = std::make_shared<SlowReaderSession>(loop, 1 << 20);
  net::Request request;
  request.query["snapshot"] = "false";
  request.query["batch"] = "true";
  stream.Attach(batched, request);
  request.query.erase("batch");
  auto other = std::make_shared<SlowReaderSession>(loop, 1 << 20, /*id=*/8);
  stream.Attach(other, request);
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

// The dashboard's stream: live events only, batched and coalesced.
net::Request CoalescingRequest() {
  net::Request request;
  request.query["snapshot"] = "false";
  request.query["batch"] = "true";
  request.query["coalesce"] = "true";
  return request;
}

// ?coalesce=true: changes that come while the last message is unread merge
// into one event per task (the first "from", the latest "to"), in the
// order the tasks first changed; one that keeps up hears every change.
TEST(EventStreamTest, ACoalescingSubscriberHearsEachTasksLatestChangeOnceWhileItLags) {
  core::testing::TestCluster c;
  const JobId job = c.Submit(core::testing::JobBuilder(core::testing::TaskBuilder().Array(0, 3)));
  net::EventLoop loop;
  EventStream stream(c.scheduler(), loop, c.clock());
  auto session = std::make_shared<SlowReaderSession>(loop, 1 << 20);
  const net::Request request = CoalescingRequest();
  stream.Attach(session, request);
  using core::TaskState;
  auto publish = [&](uint32_t index, TaskState from, TaskState to, uint32_t attempt,
                     std::string reason = "") {
    stream.Publish(core::TaskStateChanged{TaskId{job, index}, from, to, attempt, reason}, c.now());
  };
  publish(0, TaskState::kQueued, TaskState::kRunning, 1);
  loop.Poll();
  ASSERT_EQ(session->messages.size(), 1u) << "kept up: the change as it came";
  EXPECT_EQ(EventsOf(session->messages, true).size(), 1u);

  // Unread: task 1 runs and fails and is queued again, task 0 succeeds,
  // task 2 runs, over several turns.
  publish(1, TaskState::kQueued, TaskState::kRunning, 1);
  loop.Poll();
  publish(0, TaskState::kRunning, TaskState::kSucceeded, 1);
  publish(1, TaskState::kRunning, TaskState::kQueued, 2, "exit code 3; retrying");
  loop.Poll();
  publish(2, TaskState::kQueued, TaskState::kRunning, 1);
  loop.Poll();
  EXPECT_EQ(session->messages.size(), 1u) << "held while the first is unsent";
  session->Read(1 << 20);
  ASSERT_EQ(session->messages.size(), 2u);
  const nlohmann::json merged = nlohmann::json::parse(session->messages[1]);
  ASSERT_EQ(merged.size(), 3u) << merged.dump();
  EXPECT_EQ(merged[0]["task"], TaskId(job, 1).ToString());  // the first to change
  EXPECT_EQ(merged[0]["from"], "queued");
  EXPECT_EQ(merged[0]["to"], "queued");
  EXPECT_EQ(merged[0]["attempt"], 2);
  EXPECT_EQ(merged[0]["reason"], "exit code 3; retrying");
  EXPECT_EQ(merged[1]["task"], TaskId(job, 0).ToString());
  EXPECT_EQ(merged[1]["from"], "running");
  EXPECT_EQ(merged[1]["to"], "succeeded");
  EXPECT_EQ(merged[2]["task"], TaskId(job, 2).ToString());
  EXPECT_EQ(merged[2]["to"], "running");

  // Only a batched live stream coalesces.
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"batch", "false"}, {"snapshot", "true"}, {"watch", "true"}}) {
    net::Request bad = request;
    bad.query[key] = value;
    auto refused = std::make_shared<SlowReaderSession>(loop, 1 << 20, /*id=*/9);
    stream.Attach(refused, bad);
    EXPECT_EQ(refused->why,
              "coalesce=true merges the changes of a stream of live events only: it needs "
              "batch=true and snapshot=false, without watch")
        << key;
  }
  stream.Stop();
}

// A coalescing subscriber's backlog goes out kCoalescedPerDrain messages
// (each at most kMaxBatchBytes) per drain: the rest is not encoded until
// then, and goes on merging. (Encoding a backlog of a million changes at
// once held the loop for most of a second.)
TEST(EventStreamTest, ACoalescingSubscribersBacklogGoesAFewMessagesPerDrain) {
  constexpr uint32_t kTasks = 40000;
  core::testing::TestCluster c;
  const JobId job =
      c.Submit(core::testing::JobBuilder(core::testing::TaskBuilder().Array(0, kTasks - 1)));
  net::EventLoop loop;
  EventStream stream(c.scheduler(), loop, c.clock());
  auto session = std::make_shared<SlowReaderSession>(loop, 64 << 20);
  const net::Request request = CoalescingRequest();
  stream.Attach(session, request);
  using core::TaskState;
  auto publish = [&](uint32_t index, TaskState from, TaskState to) {
    stream.Publish(core::TaskStateChanged{TaskId{job, index}, from, to, 1, ""}, c.now());
  };
  publish(0, TaskState::kQueued, TaskState::kRunning);
  loop.Poll();
  ASSERT_EQ(session->messages.size(), 1u);
  for (uint32_t i = 1; i < kTasks; ++i) publish(i, TaskState::kQueued, TaskState::kRunning);
  loop.Poll();
  ASSERT_EQ(session->messages.size(), 1u) << "held while the first is unsent";

  std::vector<nlohmann::json> events;
  auto read_one = [&] {
    const size_t before = session->messages.size();
    session->Read(64 << 20);
    loop.Poll();
    ASSERT_GT(session->messages.size(), before);
    ASSERT_LE(session->messages.size(), before + EventStream::kCoalescedPerDrain);
    for (size_t m = before; m < session->messages.size(); ++m) {
      EXPECT_LE(session->messages[m].size(), EventStream::kMaxBatchBytes);
      for (nlohmann::json& e : EventsOf({session->messages[m]}, true)) {
        events.push_back(std::move(e));
      }
    }
  };
  read_one();
  ASSERT_LT(events.size(), kTasks - 1) << "the whole backlog in one message";
  const size_t sent = events.size();
  // A task still waiting merges in its place; one already sent comes again
  // at the end.
  publish(kTasks - 1, TaskState::kRunning, TaskState::kSucceeded);
  publish(1, TaskState::kRunning, TaskState::kSucceeded);
  loop.Poll();
  while (events.size() < kTasks && session->messages.size() < kTasks) read_one();
  ASSERT_EQ(events.size(), kTasks) << "tasks 1 to " << kTasks - 1 << ", then task 1 again";
  for (uint32_t i = 1; i < kTasks; ++i) {
    ASSERT_EQ(events[i - 1]["task"], TaskId(job, i).ToString()) << "in the order first changed";
  }
  EXPECT_EQ(events[kTasks - 2]["from"], "queued");
  EXPECT_EQ(events[kTasks - 2]["to"], "succeeded");
  EXPECT_GT(sent, 1u);
  EXPECT_EQ(events.back()["task"], TaskId(job, 1).ToString());
  EXPECT_EQ(events.back()["from"], "running");
  EXPECT_EQ(events.back()["to"], "succeeded");
  EXPECT_FALSE(session->closed());
  stream.Stop();
}

TEST(EventStreamTest, ABatchingSubscriberThatDoesNotReadIsClosedAtTheHeldLimit) {
  core::testing::TestCluster c;
  const JobId job = c.Submit(core::testing::JobBuilder(core::testing::TaskBuilder().Array(0, 100)));
  net::EventLoop loop;
  EventStream stream(c.scheduler(), loop, c.clock(), EventStream::kDefaultPaceBytes,
                     /*held_limit=*/4096);
  auto session = std::make_shared<SlowReaderSession>(loop, 1 << 20);
  net::Request request;
  request.query["snapshot"] = "false";
  request.query["batch"] = "true";
  stream.Attach(session, request);
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
  EventStream stream(c.scheduler(), loop, c.clock());
  auto session = std::make_shared<SlowReaderSession>(loop, 1 << 20);
  net::Request request;
  request.query["batch"] = "yes";
  stream.Attach(session, request);
  EXPECT_EQ(session->why, "bad batch: want true or false, got \"yes\"");
  EXPECT_EQ(stream.subscriber_count(), 0u);
}

// The "task" of each event the session was sent (all read), in order.
// Every event the session has been sent since the last look.
std::vector<nlohmann::json> NewEvents(SlowReaderSession& session) {
  session.Read(1 << 30);
  std::vector<nlohmann::json> events = EventsOf(session.messages, true);
  session.messages.clear();
  return events;
}

std::vector<std::string> TasksOf(SlowReaderSession& session) {
  std::vector<std::string> tasks;
  for (const nlohmann::json& e : NewEvents(session)) {
    tasks.push_back(e.value("task", "(" + e.value("type", "?") + ")"));
  }
  return tasks;
}

TEST(EventStreamTest, AWatchingSubscriberHearsOnlyWhatItWatchesWithItsStateFirst) {
  core::testing::TestCluster c;
  const JobId a = c.Submit(core::testing::JobBuilder(core::testing::TaskBuilder().Array(0, 3)));
  const JobId b = c.Submit(core::testing::JobBuilder(core::testing::TaskBuilder().Array(0, 2)));
  net::EventLoop loop;
  EventStream stream(c.scheduler(), loop, c.clock());
  auto session = std::make_shared<SlowReaderSession>(loop, 1 << 20);
  net::Request request;
  request.query["batch"] = "true";
  request.query["watch"] = "true";
  stream.Attach(session, request);
  auto publish = [&](JobId job, uint32_t index) {
    stream.Publish(core::TaskStateChanged{TaskId{job, index}, core::TaskState::kQueued,
                                          core::TaskState::kRunning, 1, ""},
                   c.now());
    loop.Poll();
  };
  publish(a, 0);
  EXPECT_TRUE(TasksOf(*session).empty()) << "no snapshot, nothing watched yet";

  const std::string ja = std::to_string(a), jb = std::to_string(b);
  session->Receive(R"({"watch":")" + ja + R"("})");
  EXPECT_EQ(TasksOf(*session), (std::vector<std::string>{ja + ".0", ja + ".1", ja + ".2"}))
      << "the job's snapshot";
  session->Receive(R"({"watch":")" + jb + R"(.1"})");
  const std::vector<nlohmann::json> state = EventsOf(session->messages, true);
  ASSERT_EQ(state.size(), 1u);
  EXPECT_EQ(state[0]["to"], "queued");
  EXPECT_EQ(state[0]["from"], "queued");
  EXPECT_EQ(TasksOf(*session), (std::vector<std::string>{jb + ".1"})) << "the task's state";

  publish(a, 1);
  publish(b, 0);
  publish(b, 1);
  EXPECT_EQ(TasksOf(*session), (std::vector<std::string>{ja + ".1", jb + ".1"}));

  session->Receive(R"({"unwatch":")" + ja + R"("})");
  session->Receive(R"({"unwatch":")" + jb + R"(.1"})");
  publish(a, 2);
  publish(b, 1);
  EXPECT_TRUE(TasksOf(*session).empty());

  session->Receive(R"({"watch":"999"})");
  session->Receive(R"({"watch":")" + ja + R"(.7"})");
  EXPECT_EQ(TasksOf(*session), (std::vector<std::string>{"(watch_error)", "(watch_error)"}))
      << "a watch of nothing is answered, and the stream stays";
  EXPECT_FALSE(session->closed());
  stream.Stop();
}

// ?ends=true: what the subscriber watches is heard of only when it ends,
// with its info; a task that ended before its watch at once, and a job's
// snapshot holds only its ended tasks.
TEST(EventStreamTest, AWatchingSubscriberWithEndsHearsOnlyEnds) {
  core::testing::TestCluster c;
  c.AddWorker(core::testing::WorkerBuilder().Cpus(4));
  const JobId a = c.Submit(core::testing::JobBuilder(core::testing::TaskBuilder().Array(0, 3)));
  const JobId b = c.Submit(core::testing::JobBuilder(core::testing::TaskBuilder().Array(0, 2)));
  c.Run(TaskId{a, 2});
  c.Finish(TaskId{a, 2});
  net::EventLoop loop;
  EventStream stream(c.scheduler(), loop, c.clock());
  auto session = std::make_shared<SlowReaderSession>(loop, 1 << 20);
  net::Request request;
  request.query["batch"] = "true";
  request.query["watch"] = "true";
  request.query["ends"] = "true";
  stream.Attach(session, request);
  auto publish = [&](JobId job, uint32_t index, core::TaskState to) {
    stream.Publish(core::TaskStateChanged{TaskId{job, index}, core::TaskState::kRunning, to, 1, ""},
                   c.now());
    loop.Poll();
  };
  const std::string ja = std::to_string(a), jb = std::to_string(b);
  session->Receive(R"({"watch":")" + jb + R"(.1"})");
  EXPECT_TRUE(TasksOf(*session).empty()) << "not ended: nothing yet";
  publish(b, 1, core::TaskState::kRunning);
  EXPECT_TRUE(TasksOf(*session).empty()) << "a change that is not an end";
  publish(b, 1, core::TaskState::kSucceeded);
  std::vector<nlohmann::json> events = NewEvents(*session);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["task"], jb + ".1");
  EXPECT_EQ(events[0]["to"], "succeeded");
  EXPECT_TRUE(events[0].contains("info")) << events[0];

  session->Receive(R"({"watch":")" + ja + R"(.2"})");
  EXPECT_EQ(TasksOf(*session), (std::vector<std::string>{ja + ".2"})) << "ended before its watch";
  session->Receive(R"({"watch":")" + ja + R"("})");
  events = NewEvents(*session);
  ASSERT_EQ(events.size(), 1u) << "the job's ended tasks";
  EXPECT_EQ(events[0]["task"], ja + ".2");
  EXPECT_TRUE(events[0].contains("info")) << "a watched job's snapshot: " << events[0];
  publish(a, 0, core::TaskState::kRunning);
  publish(a, 1, core::TaskState::kFailed);
  events = NewEvents(*session);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["task"], ja + ".1");
  EXPECT_TRUE(events[0].contains("info")) << "a watched job's task: " << events[0];

  auto without_watch = std::make_shared<SlowReaderSession>(loop, 1 << 20, 9);
  net::Request plain;
  plain.query["ends"] = "true";
  stream.Attach(without_watch, plain);
  EXPECT_EQ(without_watch->why,
            "ends=true sends the ends of what a watch=true stream watches: add watch=true");
  stream.Stop();
}

TEST(EventStreamTest, AMessageThatIsNotAWatchRequestClosesTheStreamSayingWhy) {
  core::testing::TestCluster c;
  net::EventLoop loop;
  EventStream stream(c.scheduler(), loop, c.clock());
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "bad watch message: "},
      {R"({"watch":12})", "bad watch message: watch: expected a job or task id string"},
      {R"({"watch":"0"})", "bad watch message: watch: job id \"0\" is not a positive number"},
      {R"({"watch":"1.x"})", "bad watch message: watch: "},
      {R"({"look":"1"})", "bad watch message: unknown key \"look\""},
      {R"({"watch":"1","unwatch":"2"})", "bad watch message: expected {\"watch\""},
  };
  uint64_t id = 1;
  for (const auto& [text, why] : cases) {
    auto session = std::make_shared<SlowReaderSession>(loop, 1 << 20, id++);
    net::Request request;
    request.query["watch"] = "true";
    stream.Attach(session, request);
    session->Receive(text);
    EXPECT_TRUE(session->closed()) << text;
    EXPECT_EQ(session->why.substr(0, why.size()), why) << text << " -> " << session->why;
  }
  EXPECT_EQ(stream.subscriber_count(), 0u);

  auto session = std::make_shared<SlowReaderSession>(loop, 1 << 20, id++);
  net::Request request;
  request.query["watch"] = "true";
  request.query["job"] = "3";
  stream.Attach(session, request);
  EXPECT_EQ(session->why, "watch=true follows what the subscriber names: drop job=3");
}

}  // namespace
}  // namespace drover::server
