// Helpers for server_test: a ServerShell on a loop thread, a REST client and
// a fake worker that speaks proto messages over a real WebSocket. Waiting is
// on events with generous timeouts, never on sleeps.
#ifndef DROVER_SERVER_SERVER_TEST_UTIL_H_
#define DROVER_SERVER_SERVER_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <typeinfo>
#include <variant>

#include "net/http_client.h"
#include "net/net_test_util.h"
#include "net/ws_client.h"
#include "proto/messages.h"
#include "server/server_shell.h"

namespace drover::server::testing {

using net::testing::Inbox;
using net::testing::LoopThread;
using net::testing::TempDir;

// A worker that is only a WebSocket: the test decides every message.
class FakeWorker {
 public:
  // Connects to /api/v1/worker; check ok().
  FakeWorker(net::EventLoop& loop, const net::ClientOptions& options) {
    Inbox<Result<std::shared_ptr<net::WsSession>>> opened;
    loop.Post([&] {
      net::ConnectWebSocket(loop, options, "/api/v1/worker",
                            [this, &opened](Result<std::shared_ptr<net::WsSession>> s) {
                              if (s.ok()) {
                                std::shared_ptr<Seen> seen = seen_;
                                (*s)->OnText([seen](std::string t) { seen->text.Push(std::move(t)); });
                                (*s)->OnBinary(
                                    [seen](std::string b) { seen->binary.Push(std::move(b)); });
                                (*s)->OnClose([seen](const Status& st) { seen->closed.Push(st); });
                              }
                              opened.Push(std::move(s));
                            });
    });
    auto s = opened.Pop();
    if (!s) {
      status_ = DeadlineExceeded("connect timed out");
    } else if (!s->ok()) {
      status_ = s->status();
    } else {
      session_ = **s;
    }
  }
  ~FakeWorker() {
    if (session_) session_->Close("test over");
  }

  const Status& status() const { return status_; }
  void SendRaw(std::string text) { session_->SendText(std::move(text)); }
  void Send(const proto::WorkerMessage& m) { SendRaw(proto::Encode(m)); }
  void Close() { session_->Close("bye"); }
  // A binary frame (proto/messages_binary.h), and the next one from the
  // server as it came; nullopt on timeout.
  void SendBinary(std::string bytes) { session_->SendBinary(std::move(bytes)); }
  std::optional<std::string> NextBinary() { return seen_->binary.Pop(); }

  // The next text frame from the server as it came (one message or a
  // batch); nullopt on timeout.
  std::optional<std::string> NextText() { return seen_->text.Pop(); }
  // The next message from the server, decoded; nullopt on timeout.
  std::optional<proto::ServerMessage> Next() {
    if (!held_.empty()) {
      proto::ServerMessage m = std::move(held_.front());
      held_.pop_front();
      return m;
    }
    std::optional<std::string> text = seen_->text.Pop();
    if (!text) return std::nullopt;
    Result<proto::ServerMessage> m = proto::DecodeServerMessage(*text);
    EXPECT_TRUE(m.ok()) << m.status().ToString() << " in " << *text;
    if (!m.ok()) return std::nullopt;
    return std::move(*m);
  }
  // The next message, which must be a T.
  template <class T>
  std::optional<T> Expect() {
    std::optional<proto::ServerMessage> m = Next();
    if (!m) {
      ADD_FAILURE() << "no message from the server";
      return std::nullopt;
    }
    if (!std::holds_alternative<T>(*m)) {
      ADD_FAILURE() << "unexpected " << proto::MessageTypeName(*m) << ": " << proto::Encode(*m);
      return std::nullopt;
    }
    return std::get<T>(std::move(*m));
  }
  // The next T, keeping the messages before it for later Next()/Expect()
  // calls, in order. For acks: the server acks a result once it is durable
  // (the fsync runs off the loop), so assignments the same result unlocked
  // may come first.
  template <class T>
  std::optional<T> ExpectPassing() {
    // One an earlier call passed over first.
    for (auto it = held_.begin(); it != held_.end(); ++it) {
      if (std::holds_alternative<T>(*it)) {
        T t = std::get<T>(std::move(*it));
        held_.erase(it);
        return t;
      }
    }
    std::deque<proto::ServerMessage> passed;
    std::optional<T> found;
    while (!found) {
      std::optional<std::string> text = seen_->text.Pop();
      if (!text) {
        ADD_FAILURE() << "no " << typeid(T).name() << " from the server";
        break;
      }
      Result<proto::ServerMessage> m = proto::DecodeServerMessage(*text);
      EXPECT_TRUE(m.ok()) << m.status().ToString() << " in " << *text;
      if (!m.ok()) break;
      if (std::holds_alternative<T>(*m)) {
        found = std::get<T>(std::move(*m));
      } else {
        passed.push_back(std::move(*m));
      }
    }
    for (auto& m : passed) held_.push_back(std::move(m));
    return found;
  }
  // Waits until the server closed the connection.
  std::optional<Status> WaitClosed() { return seen_->closed.Pop(); }

 private:
  static Status DeadlineExceeded(std::string m) {
    return Status(StatusCode::kDeadlineExceeded, std::move(m));
  }
  Status status_;
  std::shared_ptr<net::WsSession> session_;
  // Shared with the session's callbacks, which may outlive this object.
  struct Seen {
    Inbox<std::string> text;
    Inbox<std::string> binary;
    Inbox<Status> closed;
  };
  std::shared_ptr<Seen> seen_ = std::make_shared<Seen>();
  std::deque<proto::ServerMessage> held_;  // passed over by ExpectPassing
};

// A ServerShell on 127.0.0.1 (any port, TLS, a fresh state directory) on a
// loop thread of its own, with `edit` applied to its config; and the client
// options that reach it. Check ok().
class LoopbackShell {
 public:
  explicit LoopbackShell(const std::function<void(ServerConfig&)>& edit = {}) {
    ServerConfig cfg;
    cfg.state_dir = dir_ / "state";
    cfg.bind_address = "127.0.0.1";
    cfg.port = 0;
    cfg.tls = true;
    cfg.access_file = dir_ / "access.json";
    if (edit) edit(cfg);
    auto shell = thread_.Call([&] { return ServerShell::Start(loop_, cfg); });
    status_ = shell.status();
    if (shell.ok()) shell_ = std::move(*shell);
  }
  ~LoopbackShell() {
    thread_.Call([&] {
      if (shell_) shell_->Stop();
      shell_.reset();
    });
  }

  const Status& status() const { return status_; }
  net::EventLoop& loop() { return loop_; }
  net::ClientOptions Client() const {
    net::ClientOptions o;
    o.port = shell_->port();
    o.tls = true;
    o.fingerprint = shell_->fingerprint();
    o.token = shell_->token();
    o.timeout = Seconds(20);
    return o;
  }

 private:
  TempDir dir_;
  net::EventLoop loop_;
  LoopThread thread_{loop_};
  std::unique_ptr<ServerShell> shell_;
  Status status_;
};

inline proto::Hello MakeHello(const std::string& name, std::vector<uint32_t> cores = {0, 1, 2, 3}) {
  proto::Hello h;
  h.worker_name = name;
  h.agent_version = "test";
  h.key = "test-key-of-worker-" + name + "-0123456789abcdef";  // one identity per name
  h.resources.name = name;
  h.resources.cpu_cores = std::move(cores);
  h.resources.mem_bytes = 8ull << 30;
  return h;
}

}  // namespace drover::server::testing

#endif  // DROVER_SERVER_SERVER_TEST_UTIL_H_
