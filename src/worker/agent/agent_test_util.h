// Helpers for agent_test: a fake server speaking the worker channel from
// the test thread, and FIFO-based gates a task waits on, so every step of
// a test waits on an event with a generous timeout, never on a sleep.
#ifndef DROVER_WORKER_AGENT_AGENT_TEST_UTIL_H_
#define DROVER_WORKER_AGENT_AGENT_TEST_UTIL_H_

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "net/net_test_util.h"
#include "net/server.h"
#include "proto/log_frame.h"
#include "proto/messages.h"
#include "proto/messages_binary.h"

namespace drover::worker::testing {

inline constexpr char kToken[] = "agent-test-token";
// The job of the task FakeServer::Sync asks about; no test uses it.
inline constexpr uint64_t kProbeJob = 999999;

// A net::Server on 127.0.0.1 (port 0) with the worker route, on its own
// loop thread. What workers send is decoded there and queued for the test;
// the test answers with Send() on the connection of the latest Hello. It
// reads one message per frame, as a server from before batch frames,
// unless made with `batches` (then it reads batch frames too and keeps the
// largest frame's message count).
class FakeServer {
 public:
  struct Received {
    uint64_t conn = 0;
    std::optional<proto::WorkerMessage> message;
    std::string binary;  // a log frame, when message is empty and !closed
    bool closed = false;
  };

  explicit FakeServer(bool tls, bool batches = false) : tls_(tls), batches_(batches) {
    server_ = std::make_unique<net::Server>(
        loop_, net::testing::LoopbackServerOptions(dir_.path(), kToken, tls));
    server_->WebSocketRoute("/api/v1/worker",
                            [this](std::shared_ptr<net::WsSession> s, const net::Request&) {
                              OnOpen(std::move(s));
                            });
    Status started = server_->Start();
    EXPECT_TRUE(started.ok()) << started.ToString();
    thread_.emplace(loop_);
  }
  ~FakeServer() {
    Unblock();
    thread_->Call([&] { server_.reset(); });
    thread_.reset();
  }

  uint16_t port() const { return server_->port(); }
  // The most messages one frame held (a FakeServer made with `batches`).
  size_t largest_frame() const { return largest_frame_; }
  bool tls() const { return tls_; }
  const std::string& fingerprint() const { return server_->fingerprint(); }

  // The next Hello (skipping closes and anything from older connections);
  // its connection becomes the one Send() talks to.
  proto::Hello ExpectHello() {
    while (true) {
      std::optional<Received> r = inbox_.Pop();
      if (!r) {
        ADD_FAILURE() << "no hello";
        return {};
      }
      if (r->message && std::holds_alternative<proto::Hello>(*r->message)) {
        std::lock_guard<std::mutex> lock(mu_);
        current_ = r->conn;
        backlog_.clear();
        return std::get<proto::Hello>(*r->message);
      }
    }
  }

  // The next message of type T on the current connection. Heartbeats are
  // skipped; other messages that come first are kept for later Expects.
  template <class T>
  T Expect() {
    for (auto it = backlog_.begin(); it != backlog_.end(); ++it) {
      if (it->message && std::holds_alternative<T>(*it->message)) {
        T value = std::get<T>(*it->message);
        backlog_.erase(it);
        return value;
      }
    }
    while (true) {
      std::optional<Received> r = inbox_.Pop();
      if (!r) {
        ADD_FAILURE() << "timed out waiting for a message";
        return {};
      }
      if (r->conn != current() || r->closed) continue;
      if (r->message && std::holds_alternative<T>(*r->message)) return std::get<T>(*r->message);
      if (r->message && std::holds_alternative<proto::Heartbeat>(*r->message)) {
        if constexpr (!std::is_same_v<T, proto::Heartbeat>) continue;
      }
      backlog_.push_back(std::move(*r));
    }
  }

  // The next binary log frame on the current connection (raw bytes).
  std::string ExpectFrame() {
    for (auto it = backlog_.begin(); it != backlog_.end(); ++it) {
      if (!it->message && !it->closed) {
        std::string data = std::move(it->binary);
        backlog_.erase(it);
        return data;
      }
    }
    while (true) {
      std::optional<Received> r = inbox_.Pop();
      if (!r) {
        ADD_FAILURE() << "timed out waiting for a log frame";
        return {};
      }
      if (r->conn != current() || r->closed) continue;
      if (!r->message) return r->binary;
      if (!std::holds_alternative<proto::Heartbeat>(*r->message)) backlog_.push_back(std::move(*r));
    }
  }

  // The next message other than a heartbeat on the current connection, in
  // the order the agent sent it (kept ones first); nullopt on timeout.
  std::optional<proto::WorkerMessage> Next() {
    for (auto it = backlog_.begin(); it != backlog_.end(); ++it) {
      if (it->message) {
        proto::WorkerMessage m = std::move(*it->message);
        backlog_.erase(it);
        return m;
      }
    }
    while (true) {
      std::optional<Received> r = inbox_.Pop();
      if (!r) {
        ADD_FAILURE() << "timed out waiting for a message";
        return std::nullopt;
      }
      if (r->conn != current() || r->closed) continue;
      if (!r->message) {
        backlog_.push_back(std::move(*r));  // a log frame
        continue;
      }
      if (std::holds_alternative<proto::Heartbeat>(*r->message)) continue;
      return std::move(*r->message);
    }
  }

  // A round trip through the agent: asks for the log of a task it does not
  // know and waits for the refusal. The agent handles messages in order,
  // so everything sent before has been handled by then, and what that
  // produced (heartbeats aside) is kept for Expect and Pending.
  void Sync() {
    const TaskId probe{kProbeJob, 0};
    proto::LogRequest request;
    request.task = probe;
    Send(request);
    while (true) {
      std::optional<Received> r = inbox_.Pop();
      if (!r) {
        ADD_FAILURE() << "no answer to the sync probe";
        return;
      }
      if (r->conn != current() || r->closed) continue;
      if (r->message) {
        if (const auto* chunk = std::get_if<proto::LogChunk>(&*r->message);
            chunk != nullptr && chunk->task == probe) {
          return;
        }
        if (std::holds_alternative<proto::Heartbeat>(*r->message)) continue;
      }
      backlog_.push_back(std::move(*r));
    }
  }

  // How many messages of type T were received and not yet taken.
  template <class T>
  size_t Pending() const {
    size_t n = 0;
    for (const Received& r : backlog_) {
      if (r.message && std::holds_alternative<T>(*r.message)) ++n;
    }
    return n;
  }

  void Send(const proto::ServerMessage& message) {
    std::shared_ptr<net::WsSession> s = session(current());
    ASSERT_NE(s, nullptr);
    s->SendText(proto::Encode(message));
  }
  // `message` (one with a binary form) in a binary frame of its own.
  void SendBinary(const proto::ServerMessage& message) {
    std::shared_ptr<net::WsSession> s = session(current());
    ASSERT_NE(s, nullptr);
    proto::WireMessage wire = proto::EncodeForPeer(message, /*binary=*/true);
    ASSERT_TRUE(wire.binary);
    s->SendBinary(proto::EncodeBinaryFrame({wire.bytes}));
  }
  void SendRawBinary(std::string bytes) {
    std::shared_ptr<net::WsSession> s = session(current());
    ASSERT_NE(s, nullptr);
    s->SendBinary(std::move(bytes));
  }
  // How many binary frames of messages the agent sent.
  size_t binary_frames() const { return binary_frames_; }
  // Closes the current connection, as a restarting server would.
  void Drop() {
    std::shared_ptr<net::WsSession> s = session(current());
    if (s) s->Close("test drops the connection");
  }
  // Stops the server's loop (it answers nothing, not even pings) until
  // Unblock().
  void Block() {
    release_.emplace();
    std::shared_future<void> gate = release_->get_future().share();
    loop_.Post([gate] { gate.wait(); });
  }
  void Unblock() {
    if (release_) release_->set_value();
    release_.reset();
  }

 private:
  void OnOpen(std::shared_ptr<net::WsSession> s) {
    const uint64_t conn = s->id();
    {
      std::lock_guard<std::mutex> lock(mu_);
      sessions_[conn] = s;
    }
    s->OnText([this, conn](std::string text) {
      if (batches_) {
        Result<std::vector<proto::WorkerMessage>> frame = proto::DecodeWorkerFrame(text);
        EXPECT_TRUE(frame.ok()) << frame.status().ToString() << ": " << text;
        if (!frame.ok()) return;
        if (frame->size() > largest_frame_) largest_frame_ = frame->size();
        for (auto& m : *frame) inbox_.Push(Received{conn, std::move(m), "", false});
        return;
      }
      Result<proto::WorkerMessage> m = proto::DecodeWorkerMessage(text);
      EXPECT_TRUE(m.ok()) << m.status().ToString() << ": " << text;
      if (m.ok()) inbox_.Push(Received{conn, std::move(*m), "", false});
    });
    s->OnBinary([this, conn](std::string data) {
      if (proto::IsMessageFrame(data)) {  // the agent's messages in a binary frame
        Result<std::vector<proto::WorkerMessage>> frame = proto::DecodeWorkerBinaryFrame(data);
        EXPECT_TRUE(frame.ok()) << frame.status().ToString();
        if (!frame.ok()) return;
        ++binary_frames_;
        for (auto& m : *frame) inbox_.Push(Received{conn, std::move(m), "", false});
        return;
      }
      inbox_.Push(Received{conn, std::nullopt, std::move(data), false});
    });
    s->OnClose([this, conn](const Status&) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        sessions_.erase(conn);
      }
      inbox_.Push(Received{conn, std::nullopt, "", true});
    });
  }
  uint64_t current() {
    std::lock_guard<std::mutex> lock(mu_);
    return current_;
  }
  std::shared_ptr<net::WsSession> session(uint64_t conn) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sessions_.find(conn);
    return it == sessions_.end() ? nullptr : it->second;
  }

  bool tls_;
  bool batches_;
  std::atomic<size_t> largest_frame_{0};
  std::atomic<size_t> binary_frames_{0};
  net::testing::TempDir dir_;
  net::EventLoop loop_;
  std::unique_ptr<net::Server> server_;
  std::optional<net::testing::LoopThread> thread_;
  net::testing::Inbox<Received> inbox_;
  std::deque<Received> backlog_;  // test thread only
  std::mutex mu_;
  std::map<uint64_t, std::shared_ptr<net::WsSession>> sessions_;
  uint64_t current_ = 0;
  std::optional<std::promise<void>> release_;
};

// A FIFO a task reads a line from (`read x < PATH`) or writes a line to.
// The test holds it open read-write, so neither side ever blocks in open().
class Fifo {
 public:
  explicit Fifo(std::string path) : path_(std::move(path)) {
    EXPECT_EQ(::mkfifo(path_.c_str(), 0666), 0);
    fd_ = ::open(path_.c_str(), O_RDWR | O_CLOEXEC);
    EXPECT_GE(fd_, 0);
  }
  ~Fifo() {
    if (fd_ >= 0) ::close(fd_);
  }
  const std::string& path() const { return path_; }
  // Lets a task blocked in `read x < PATH` go on.
  void Release() { EXPECT_EQ(::write(fd_, "go\n", 3), 3); }
  // A line a task wrote (without the newline), or nullopt after `timeout`.
  std::optional<std::string> ReadLine(std::chrono::milliseconds timeout = net::testing::kWait) {
    std::string line;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char c;
      if (::read(fd_, &c, 1) != 1) continue;
      if (c == '\n') return line;
      line += c;
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace drover::worker::testing

#endif  // DROVER_WORKER_AGENT_AGENT_TEST_UTIL_H_
