#include "store/redis_connection.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <utility>

#include "net/event_loop_asio.h"

namespace drover::store {

namespace asio = boost::asio;

Status StatusFromErrorReply(const RedisReply& reply, std::string_view what) {
  const std::string message = "redis refused " + std::string(what) + ": " + reply.str;
  for (std::string_view transient : {"LOADING", "BUSY", "TRYAGAIN", "MASTERDOWN", "READONLY"}) {
    if (std::string_view(reply.str).starts_with(transient)) return Unavailable(message);
  }
  return Internal(message);
}

// Everything the hiredis context points at (ac->data). It outlives the
// RedisConnection when hiredis finishes a teardown later (a free requested
// from inside a reply callback is deferred by hiredis): `keepalive` holds it
// until hiredis has let go of the context.
struct RedisConnection::Core : std::enable_shared_from_this<Core> {
  Core(asio::io_context& io, std::string endpoint) : io(io), desc(io), endpoint(std::move(endpoint)) {}

  asio::io_context& io;
  // Non-null while this side may call hiredis on the context; cleared as
  // soon as hiredis starts tearing it down or we ask it to.
  redisAsyncContext* ac = nullptr;
  asio::posix::stream_descriptor desc;
  std::string endpoint;
  std::string error;  // why the connection ended, once it has
  bool want_read = false;
  bool want_write = false;
  bool read_waiting = false;
  bool write_waiting = false;
  bool connected = false;
  bool reported_end = false;  // on_connected(error) or on_lost ran, or Close()
  std::function<void(Status)> on_connected;
  std::function<void(Status)> on_lost;
  std::vector<std::unique_ptr<MessageCallback>> subscribers;
  std::shared_ptr<Core> keepalive;

  Status Lost() const {
    return Unavailable("redis at " + endpoint + ": " +
                       (error.empty() ? std::string("connection closed") : error));
  }

  // hiredis is tearing the context down (or will right after the current
  // callback): stop using it and tell the owner once.
  void Ended(const char* errstr) {
    ac = nullptr;
    if (error.empty()) error = errstr && *errstr ? errstr : "connection lost";
    if (reported_end) return;
    reported_end = true;
    auto handler = connected ? std::move(on_lost) : std::move(on_connected);
    on_lost = nullptr;
    on_connected = nullptr;
    if (handler) handler(Lost());
  }

  void ArmRead() {
    if (read_waiting || !desc.is_open()) return;
    read_waiting = true;
    desc.async_wait(asio::posix::stream_descriptor::wait_read,
                    [self = shared_from_this()](const boost::system::error_code& ec) {
                      self->read_waiting = false;
                      if (ec || !self->ac || !self->want_read) return;
                      redisAsyncHandleRead(self->ac);
                      if (self->ac && self->want_read) self->ArmRead();
                    });
  }

  void ArmWrite() {
    if (write_waiting || !desc.is_open()) return;
    write_waiting = true;
    desc.async_wait(asio::posix::stream_descriptor::wait_write,
                    [self = shared_from_this()](const boost::system::error_code& ec) {
                      self->write_waiting = false;
                      if (ec || !self->ac || !self->want_write) return;
                      redisAsyncHandleWrite(self->ac);
                      if (self->ac && self->want_write) self->ArmWrite();
                    });
  }
};

namespace {

using Core = RedisConnection::Core;

Core* CoreOf(const redisAsyncContext* ac) { return static_cast<Core*>(ac->data); }

// ---- The event hooks hiredis calls (privdata is the Core) ----

void AddRead(void* privdata) {
  auto* core = static_cast<Core*>(privdata);
  core->want_read = true;
  core->ArmRead();
}
void DelRead(void* privdata) { static_cast<Core*>(privdata)->want_read = false; }
void AddWrite(void* privdata) {
  auto* core = static_cast<Core*>(privdata);
  core->want_write = true;
  core->ArmWrite();
}
void DelWrite(void* privdata) { static_cast<Core*>(privdata)->want_write = false; }

// Called by hiredis just before it closes the socket and frees the context.
void Cleanup(void* privdata) {
  auto* core = static_cast<Core*>(privdata);
  core->ac = nullptr;
  core->want_read = core->want_write = false;
  boost::system::error_code ec;
  core->desc.cancel(ec);
  // hiredis owns the fd and closes it: take it back from asio unclosed.
  if (core->desc.is_open()) core->desc.release();
  // hiredis may still call the disconnect callback with ac->data after this
  // hook, so release the Core only once the current handler has finished.
  asio::post(core->io, [keep = std::move(core->keepalive)] {});
}

RedisReply Convert(const redisReply& r) {
  RedisReply out;
  switch (r.type) {
    case REDIS_REPLY_STRING:
      out.type = RedisReply::Type::kString;
      out.str.assign(r.str, r.len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = RedisReply::Type::kStatus;
      out.str.assign(r.str, r.len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = RedisReply::Type::kError;
      out.str.assign(r.str, r.len);
      break;
    case REDIS_REPLY_INTEGER:
      out.type = RedisReply::Type::kInteger;
      out.integer = r.integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::Type::kArray;
      out.elements.reserve(r.elements);
      for (size_t i = 0; i < r.elements; ++i) out.elements.push_back(Convert(*r.element[i]));
      break;
    default:
      out.type = RedisReply::Type::kNil;
      break;
  }
  return out;
}

struct PendingCall {
  RedisConnection::ReplyCallback done;
};

void OnReply(redisAsyncContext* ac, void* reply, void* privdata) {
  std::unique_ptr<PendingCall> call(static_cast<PendingCall*>(privdata));
  Core* core = CoreOf(ac);
  if (reply == nullptr) {
    // hiredis runs callbacks without a reply only while freeing the context.
    core->Ended(ac->errstr);
    call->done(core->Lost());
    return;
  }
  call->done(Convert(*static_cast<redisReply*>(reply)));
}

void OnMessage(redisAsyncContext* ac, void* reply, void* privdata) {
  Core* core = CoreOf(ac);
  if (reply == nullptr) {
    core->Ended(ac->errstr);
    return;
  }
  (*static_cast<RedisConnection::MessageCallback*>(privdata))(
      Convert(*static_cast<redisReply*>(reply)));
}

void OnConnect(const redisAsyncContext* ac, int status) {
  Core* core = CoreOf(ac);
  if (status != REDIS_OK) {
    core->Ended(ac->errstr);
    return;
  }
  core->connected = true;
  redisEnableKeepAlive(const_cast<redisContext*>(&ac->c));
  auto handler = std::move(core->on_connected);
  core->on_connected = nullptr;
  if (handler && !core->reported_end) handler(Status::Ok());
}

void OnDisconnect(const redisAsyncContext* ac, int /*status*/) { CoreOf(ac)->Ended(ac->errstr); }

}  // namespace

RedisConnection::RedisConnection(std::shared_ptr<Core> core) : core_(std::move(core)) {}

std::unique_ptr<RedisConnection> RedisConnection::Connect(net::EventLoop& loop,
                                                          const std::string& host, int port,
                                                          std::function<void(Status)> on_connected,
                                                          std::function<void(Status)> on_lost) {
  const std::string endpoint =
      (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
  auto core = std::make_shared<Core>(net::IoContextOf(loop), endpoint);
  core->on_connected = std::move(on_connected);
  core->on_lost = std::move(on_lost);
  std::unique_ptr<RedisConnection> conn(new RedisConnection(core));

  redisAsyncContext* ac = redisAsyncConnect(host.c_str(), port);
  if (ac == nullptr || ac->err) {
    core->error = ac ? ac->errstr : "out of memory";
    if (ac) redisAsyncFree(ac);
    core->reported_end = true;
    // Report on the loop, never from inside Connect().
    auto handler = std::move(core->on_connected);
    core->on_lost = nullptr;
    loop.Post([core, handler = std::move(handler)] {
      if (handler) handler(core->Lost());
    });
    return conn;
  }
  core->ac = ac;
  core->keepalive = core;
  ac->data = core.get();
  boost::system::error_code ec;
  core->desc.assign(ac->c.fd, ec);
  ac->ev.data = core.get();
  ac->ev.addRead = AddRead;
  ac->ev.delRead = DelRead;
  ac->ev.addWrite = AddWrite;
  ac->ev.delWrite = DelWrite;
  ac->ev.cleanup = Cleanup;
  redisAsyncSetDisconnectCallback(ac, OnDisconnect);
  // Setting the connect callback asks for write readiness: that is how an
  // asynchronous connect completes.
  redisAsyncSetConnectCallback(ac, OnConnect);
  if (ec) {
    core->error = "cannot watch the socket: " + ec.message();
    conn->Close();
    core->reported_end = true;
  }
  return conn;
}

RedisConnection::~RedisConnection() {
  core_->on_connected = nullptr;
  core_->on_lost = nullptr;
  Close();
}

void RedisConnection::Command(const std::vector<std::string>& argv, ReplyCallback done) {
  if (core_->ac == nullptr) {
    done(core_->Lost());
    return;
  }
  std::vector<const char*> args;
  std::vector<size_t> lens;
  args.reserve(argv.size());
  lens.reserve(argv.size());
  for (const auto& a : argv) {
    args.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* call = new PendingCall{std::move(done)};
  if (redisAsyncCommandArgv(core_->ac, OnReply, call, static_cast<int>(args.size()), args.data(),
                            lens.data()) != REDIS_OK) {
    std::unique_ptr<PendingCall> owned(call);
    owned->done(core_->Lost());
  }
}

void RedisConnection::Subscribe(const std::vector<std::string>& channels,
                                MessageCallback on_message) {
  if (core_->ac == nullptr) return;
  std::vector<std::string> argv = {"SUBSCRIBE"};
  argv.insert(argv.end(), channels.begin(), channels.end());
  std::vector<const char*> args;
  std::vector<size_t> lens;
  for (const auto& a : argv) {
    args.push_back(a.data());
    lens.push_back(a.size());
  }
  core_->subscribers.push_back(std::make_unique<MessageCallback>(std::move(on_message)));
  redisAsyncCommandArgv(core_->ac, OnMessage, core_->subscribers.back().get(),
                        static_cast<int>(args.size()), args.data(), lens.data());
}

void RedisConnection::Close() {
  core_->reported_end = true;
  core_->on_connected = nullptr;
  core_->on_lost = nullptr;
  if (core_->error.empty()) core_->error = "connection closed";
  redisAsyncContext* ac = core_->ac;
  if (ac == nullptr) return;
  core_->ac = nullptr;
  redisAsyncFree(ac);
}

bool RedisConnection::open() const { return core_->ac != nullptr; }

}  // namespace drover::store
