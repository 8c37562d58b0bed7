// RedisConnection: one hiredis asynchronous connection driven by a
// net::EventLoop (hiredis ships adapters for libevent, libuv and others, but
// not for asio; this is that adapter). The socket is registered with an asio
// posix::stream_descriptor; read and write readiness call
// redisAsyncHandleRead / redisAsyncHandleWrite. Nothing here blocks the loop,
// except that hiredis resolves a host *name* with a blocking lookup when
// connecting (pass an address to avoid it).
//
// Replies are copied into RedisReply values so that no hiredis header leaks
// out of this file pair's .cc.
//
// Lifetime of a connection: Connect() -> `on_connected(Ok)` once the TCP
// connection is up (or `on_connected(error)` once if it cannot be made) ->
// commands -> `on_lost(error)` once if an established connection drops. After
// Close() or destruction neither handler runs again.
//
// Failure of commands: a command's callback runs exactly once: with the
// reply (an error reply is a reply, of type kError), or with kUnavailable
// when the connection was lost, closed or destroyed before the reply came.
// That kUnavailable can come synchronously (from inside Command() when the
// connection is already down, or from inside Close()).
//
// Thread safety: none; everything runs on the loop's thread.
#ifndef DROVER_STORE_REDIS_CONNECTION_H_
#define DROVER_STORE_REDIS_CONNECTION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "net/event_loop.h"

namespace drover::store {

// A RESP2 reply.
struct RedisReply {
  enum class Type { kNil, kStatus, kError, kInteger, kString, kArray };
  Type type = Type::kNil;
  int64_t integer = 0;              // kInteger
  std::string str;                  // kStatus, kError, kString
  std::vector<RedisReply> elements;  // kArray

  bool is_error() const { return type == Type::kError; }
};

// The Status for an error reply to `what` (e.g. "claim"): kUnavailable for
// the transient ones (LOADING, BUSY, TRYAGAIN, MASTERDOWN, READONLY), else
// kInternal; both carry Redis's message.
Status StatusFromErrorReply(const RedisReply& reply, std::string_view what);

class RedisConnection {
 public:
  using ReplyCallback = std::function<void(Result<RedisReply>)>;
  using MessageCallback = std::function<void(const RedisReply&)>;

  // Starts a non-blocking connect to `host`:`port`; see the lifetime above.
  // Commands may be issued at once: hiredis sends them once connected.
  // `on_connected` is never run from inside Connect().
  static std::unique_ptr<RedisConnection> Connect(net::EventLoop& loop, const std::string& host,
                                                  int port,
                                                  std::function<void(Status)> on_connected,
                                                  std::function<void(Status)> on_lost);

  // Completes pending commands with kUnavailable.
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Sends one command (binary-safe arguments); see "Failure of commands".
  void Command(const std::vector<std::string>& argv, ReplyCallback done);

  // SUBSCRIBE to `channels`: `on_message` receives every push for them, the
  // ["subscribe", channel, count] confirmations and the ["message", channel,
  // payload] messages. After this only more Subscribe() calls are allowed on
  // the connection (Redis's rule for subscribers).
  void Subscribe(const std::vector<std::string>& channels, MessageCallback on_message);

  // Drops the connection: pending commands complete with kUnavailable (now,
  // or right after the current reply callback when called from one).
  void Close();

  // False once the connection is lost or closed.
  bool open() const;

  struct Core;

 private:
  explicit RedisConnection(std::shared_ptr<Core> core);
  std::shared_ptr<Core> core_;
};

}  // namespace drover::store

#endif  // DROVER_STORE_REDIS_CONNECTION_H_
