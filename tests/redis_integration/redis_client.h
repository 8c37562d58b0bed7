// RedisClient: a blocking hiredis client for the Redis integration tests —
// what a person would do with redis-cli (DEL a lease, plant one, read the
// journal's length), plus a keyevent watcher that a test waits on instead
// of sleeping.
//
//   RedisClient cli(port);
//   cli.Run({"DEL", "drover:lease:1:slot:1.0"});
//   KeyEvents events(port);                       // PSUBSCRIBE __keyevent@0__:*
//   events.WaitFor("hset", "drover:lease:1:slot:1.0", std::chrono::seconds(10));
//
// Thread safety: one thread per object.
#ifndef DROVER_TESTS_REDIS_INTEGRATION_REDIS_CLIENT_H_
#define DROVER_TESTS_REDIS_INTEGRATION_REDIS_CLIENT_H_

#include <chrono>
#include <string>
#include <vector>

struct redisContext;

namespace drover::testing {

class RedisClient {
 public:
  explicit RedisClient(int port);
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // The reply as text: a string, status or integer as is, nil as "(nil)",
  // an error as "ERR: ...", an array's elements joined by '\n'. A broken
  // connection: "IO: ..." (and later calls reconnect).
  std::string Run(const std::vector<std::string>& argv);

  // Every key matching `pattern` (SCAN), sorted.
  std::vector<std::string> Keys(const std::string& pattern);

 private:
  void Reconnect();
  int port_;
  redisContext* ctx_ = nullptr;
};

// Keyspace events (`notify-keyspace-events` must include E and the classes
// waited for; KEA covers all) of database 0, from the moment of
// construction.
class KeyEvents {
 public:
  explicit KeyEvents(int port);
  ~KeyEvents();
  KeyEvents(const KeyEvents&) = delete;
  KeyEvents& operator=(const KeyEvents&) = delete;

  // Waits for event `event` ("del", "hset", "expired", ...) on `key`,
  // skipping others; false at the timeout.
  bool WaitFor(const std::string& event, const std::string& key, std::chrono::milliseconds timeout);

 private:
  redisContext* ctx_ = nullptr;
};

}  // namespace drover::testing

#endif  // DROVER_TESTS_REDIS_INTEGRATION_REDIS_CLIENT_H_
