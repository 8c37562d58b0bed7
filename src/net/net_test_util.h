// Helpers for net_test: a temporary directory, an EventLoop running on its
// own thread, a queue to wait on values produced by loop callbacks, and the
// options of a loopback server and of a client pinned to it. Waiting is
// always on an event with a generous timeout, never a sleep.
#ifndef DROVER_NET_NET_TEST_UTIL_H_
#define DROVER_NET_NET_TEST_UTIL_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "net/client_options.h"
#include "net/event_loop.h"
#include "net/server.h"

namespace drover::net::testing {

inline constexpr auto kWait = std::chrono::seconds(20);

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "drover-net-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Runs `loop` on a thread for the lifetime of this object.
class LoopThread {
 public:
  explicit LoopThread(EventLoop& loop) : loop_(loop), thread_([this] { loop_.Run(); }) {}
  ~LoopThread() {
    loop_.Stop();
    thread_.join();
  }

  // Runs `fn` on the loop thread and waits for its result.
  template <class F>
  auto Call(F fn) -> decltype(fn()) {
    using R = decltype(fn());
    auto promise = std::make_shared<std::promise<R>>();
    auto future = promise->get_future();
    loop_.Post([promise, fn = std::move(fn)]() mutable {
      if constexpr (std::is_void_v<R>) {
        fn();
        promise->set_value();
      } else {
        promise->set_value(fn());
      }
    });
    return future.get();
  }

 private:
  EventLoop& loop_;
  std::thread thread_;
};

// A thread-safe queue: loop callbacks Push, the test thread Pops.
template <class T>
class Inbox {
 public:
  void Push(T value) {
    std::lock_guard<std::mutex> lock(mu_);
    items_.push_back(std::move(value));
    cv_.notify_all();
  }
  // The next value, or nullopt after `timeout`.
  std::optional<T> Pop(std::chrono::milliseconds timeout = kWait) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return !items_.empty(); })) return std::nullopt;
    T value = std::move(items_.front());
    items_.pop_front();
    return value;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<T> items_;
};

// A raw TCP connection to 127.0.0.1:port, for misbehaving-peer tests.
inline int ConnectRaw(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Reads until the peer closes; returns what was read, or nullopt if the
// connection is still open after `timeout`.
inline std::optional<std::string> ReadUntilClosed(int fd, std::chrono::milliseconds timeout = kWait) {
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n <= 0) return out;  // EOF or reset: closed
    out.append(buf, static_cast<size_t>(n));
  }
}

// A server on 127.0.0.1 and a free port, its TLS identity in `cert_dir`,
// accepting `token`.
inline ServerOptions LoopbackServerOptions(const std::string& cert_dir, const std::string& token,
                                           bool tls = true) {
  ServerOptions o;
  o.bind_address = "127.0.0.1";
  o.port = 0;
  o.tls = tls;
  o.cert_dir = cert_dir;
  o.token = token;
  return o;
}

// A client of `server` (started) sending `token`, pinned to the server's
// fingerprint when `tls`.
inline ClientOptions ClientOf(const Server& server, const std::string& token, bool tls = true) {
  ClientOptions o;
  o.host = "127.0.0.1";
  o.port = server.port();
  o.tls = tls;
  o.fingerprint = server.fingerprint();
  o.token = token;
  o.timeout = Seconds(20);
  return o;
}

}  // namespace drover::net::testing

#endif  // DROVER_NET_NET_TEST_UTIL_H_
