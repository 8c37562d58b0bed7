#include "tests/redis_integration/redis_client.h"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <poll.h>

#include <algorithm>

namespace drover::testing {
namespace {

std::string Text(const redisReply* r) {
  if (r == nullptr) return "(null)";
  switch (r->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
      return std::string(r->str, r->len);
    case REDIS_REPLY_ERROR:
      return "ERR: " + std::string(r->str, r->len);
    case REDIS_REPLY_INTEGER:
      return std::to_string(r->integer);
    case REDIS_REPLY_NIL:
      return "(nil)";
    case REDIS_REPLY_ARRAY: {
      std::string out;
      for (size_t i = 0; i < r->elements; ++i) {
        if (i > 0) out += '\n';
        out += Text(r->element[i]);
      }
      return out;
    }
    default:
      return "(unknown)";
  }
}

redisReply* Command(redisContext* ctx, const std::vector<std::string>& argv) {
  std::vector<const char*> args;
  std::vector<size_t> lens;
  for (const std::string& a : argv) {
    args.push_back(a.data());
    lens.push_back(a.size());
  }
  return static_cast<redisReply*>(
      redisCommandArgv(ctx, static_cast<int>(args.size()), args.data(), lens.data()));
}

}  // namespace

RedisClient::RedisClient(int port) : port_(port) { Reconnect(); }

RedisClient::~RedisClient() {
  if (ctx_ != nullptr) redisFree(ctx_);
}

void RedisClient::Reconnect() {
  if (ctx_ != nullptr) redisFree(ctx_);
  ctx_ = redisConnect("127.0.0.1", port_);
  if (ctx_ == nullptr || ctx_->err) ADD_FAILURE() << "cannot connect to redis on " << port_;
}

std::string RedisClient::Run(const std::vector<std::string>& argv) {
  if (ctx_ == nullptr || ctx_->err) Reconnect();
  redisReply* r = Command(ctx_, argv);
  if (r == nullptr) return "IO: " + std::string(ctx_->errstr);
  std::string out = Text(r);
  freeReplyObject(r);
  return out;
}

std::vector<std::string> RedisClient::Keys(const std::string& pattern) {
  std::vector<std::string> keys;
  std::string cursor = "0";
  do {
    redisReply* r = Command(ctx_, {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    if (r == nullptr || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
      ADD_FAILURE() << "SCAN failed: " << Text(r);
      if (r) freeReplyObject(r);
      break;
    }
    cursor = std::string(r->element[0]->str, r->element[0]->len);
    for (size_t i = 0; i < r->element[1]->elements; ++i) {
      keys.emplace_back(r->element[1]->element[i]->str, r->element[1]->element[i]->len);
    }
    freeReplyObject(r);
  } while (cursor != "0");
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

KeyEvents::KeyEvents(int port) {
  ctx_ = redisConnect("127.0.0.1", port);
  if (ctx_ == nullptr || ctx_->err) {
    ADD_FAILURE() << "cannot connect to redis on " << port;
    return;
  }
  redisReply* r = Command(ctx_, {"PSUBSCRIBE", "__keyevent@0__:*"});
  if (r == nullptr) ADD_FAILURE() << "PSUBSCRIBE failed";
  if (r) freeReplyObject(r);
}

KeyEvents::~KeyEvents() {
  if (ctx_ != nullptr) redisFree(ctx_);
}

bool KeyEvents::WaitFor(const std::string& event, const std::string& key,
                        std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const std::string channel = "__keyevent@0__:" + event;
  while (ctx_ != nullptr && !ctx_->err) {
    void* reply = nullptr;
    if (redisGetReplyFromReader(ctx_, &reply) != REDIS_OK) return false;
    if (reply != nullptr) {
      auto* r = static_cast<redisReply*>(reply);
      // ["pmessage", pattern, channel, key]
      const bool match = r->type == REDIS_REPLY_ARRAY && r->elements == 4 &&
                         Text(r->element[2]) == channel && Text(r->element[3]) == key;
      freeReplyObject(r);
      if (match) return true;
      continue;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{ctx_->fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    if (redisBufferRead(ctx_) != REDIS_OK) return false;
  }
  return false;
}

}  // namespace drover::testing
