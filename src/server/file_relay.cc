#include "server/file_relay.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/quantity.h"
#include "net/http_client.h"
#include "net/json_text.h"
#include "net/sha256.h"
#include "net/token.h"

namespace drover::server {

struct FileRelay::Transfer {
  uint64_t id = 0;
  std::string sha256;
  uint64_t size = 0;
  std::string label;  // "3.0/model.bin from worker 1 (10.0.0.5:7211)"
  std::atomic<uint64_t> received{0};
  Stopwatch started;
  struct Waiter {
    net::Responder done;
    std::unique_ptr<net::Timer> timer;
  };
  std::map<uint64_t, Waiter> waiters;
  uint64_t next_waiter = 0;
};

namespace {

constexpr char kPullRoute[] = "/api/v1/files/{sha256}/pull";

Status WriteError(int error, const std::string& what) {
  if (error == ENOSPC || error == EDQUOT) {
    return ResourceExhausted(what + ": no space left on device");
  }
  return Internal(what + ": " + std::strerror(error));
}

// Streams the file from its holder into a new temporary file in `dir`,
// hashing on the way; returns its path once size and SHA-256 match and it
// is synced. Leaves no file behind on failure. On a thread of its own.
Result<std::string> PullOnThread(const proto::FileSource& holder, const std::string& grant,
                                 const std::string& token, Duration timeout,
                                 const std::string& sha256, uint64_t size, const std::string& dir,
                                 const std::atomic<bool>& stopping, std::atomic<uint64_t>& received,
                                 std::atomic<uint64_t>& relayed_bytes) {
  Result<std::string> random = net::GenerateToken();
  if (!random.ok()) return random.status();
  const std::string part = dir + "/.upload-relay-" + random->substr(0, 16);
  const int fd = ::open(part.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return WriteError(errno, "cannot create " + part);
  const std::string where = "worker " + std::to_string(holder.worker) + " (" + holder.host + ":" +
                            std::to_string(holder.port) + ")";
  net::ClientOptions client;
  client.host = holder.host;
  client.port = holder.port;
  client.tls = true;
  client.fingerprint = holder.fingerprint;
  client.token = token;
  client.timeout = timeout;
  net::ClientRequest request;
  request.target = "/v1/files/" + sha256;
  request.headers["X-Drover-Grant"] = grant;
  request.headers["X-Drover-Requester"] = "server";

  net::Sha256 hash;
  uint64_t bytes = 0;
  std::string pending;
  constexpr size_t kWriteBytes = 1 << 20;
  std::optional<Status> local_error;  // the disk's, or stopping: not the holder's fault
  bool oversize = false;
  auto flush = [&]() -> bool {
    size_t at = 0;
    while (at < pending.size()) {
      const ssize_t n = ::write(fd, pending.data() + at, pending.size() - at);
      if (n < 0) {
        if (errno == EINTR) continue;
        local_error = WriteError(errno, "cannot write " + part);
        return false;
      }
      at += static_cast<size_t>(n);
    }
    pending.clear();
    return true;
  };
  auto sink = [&](std::string_view chunk) -> Status {
    if (stopping) {
      local_error = Unavailable("the server is stopping");
      return *local_error;
    }
    if (chunk.size() > size - bytes) {
      oversize = true;
      return InvalidArgument("more than the " + std::to_string(size) + " bytes expected");
    }
    pending.append(chunk);
    if (pending.size() >= kWriteBytes && !flush()) return *local_error;
    hash.Update(chunk);
    bytes += chunk.size();
    received += chunk.size();
    relayed_bytes += chunk.size();
    return Status::Ok();
  };
  Result<net::Response> got = net::HttpClient(client).Download(request, sink);
  Status status = Status::Ok();
  if (local_error) {
    status = *local_error;
  } else if (oversize) {
    status = Unavailable(where + " sent more than the " + std::to_string(size) + " bytes expected");
  } else if (!got.ok()) {
    status = got.status().WithContext(where);
  } else if (Status answer = net::StatusFromResponse(*got); !answer.ok()) {
    status = Unavailable(where + " refused: " + answer.ToString());
  } else if (!flush()) {
    status = *local_error;
  } else if (bytes != size) {
    status = Unavailable(where + " sent " + std::to_string(bytes) + " bytes, want " +
                         std::to_string(size));
  } else if (std::string digest = hash.HexDigest(); digest != sha256) {
    status = Unavailable(where + " sent other bytes: sha256 " + digest.substr(0, 12) +
                         "..., want " + sha256.substr(0, 12) + "...");
  } else if (::fdatasync(fd) != 0 && errno != EINVAL) {
    // Synced here, off the loop: the store's Commit syncs again, cheaply.
    status = WriteError(errno, "cannot write " + part);
  }
  if (::close(fd) != 0 && status.ok()) status = WriteError(errno, "cannot write " + part);
  if (!status.ok()) {
    ::unlink(part.c_str());
    return status;
  }
  return part;
}

std::string Progress(const FileRelay::Transfer& t) {
  return net::JsonText(nlohmann::json{
      {"sha256", t.sha256}, {"size", t.size}, {"received", t.received.load()}, {"pulling", true}});
}

}  // namespace

FileRelay::FileRelay(net::EventLoop& loop, const core::Scheduler& scheduler,
                     const WorkerChannel& channel, FileStore& store, FileRelayOptions options)
    : loop_(loop),
      scheduler_(scheduler),
      channel_(channel),
      store_(store),
      options_(std::move(options)),
      sweep_timer_(loop) {}

FileRelay::~FileRelay() {
  *alive_ = false;
  Stop();
}

void FileRelay::Stop() {
  if (stopped_) return;
  stopped_ = true;
  *stopping_ = true;
  sweep_timer_.Cancel();
  for (auto& [sha, t] : inflight_) t->waiters.clear();
  for (auto& [id, thread] : threads_) thread.join();
  threads_.clear();
  inflight_.clear();
}

FileRelayStats FileRelay::stats() const {
  return FileRelayStats{pulls_.load(), relayed_files_.load(), relayed_bytes_.load(), failed_.load(),
                        refused_.load()};
}

void FileRelay::AddRoutes(net::Server& server) {
  server.Route("POST", kPullRoute,
               [this](const net::Request& r, net::Responder done) { Handle(r, std::move(done)); });
}

void FileRelay::Handle(const net::Request& r, net::Responder done) {
  auto refuse = [&](const Status& why) {
    ++refused_;
    spdlog::warn("file relay: refused a pull from {}: {}", r.remote, why.message());
    done(net::ErrorResponse(why));
  };
  auto sha_it = r.path_params.find("sha256");
  const std::string sha = sha_it == r.path_params.end() ? std::string() : sha_it->second;
  if (!net::IsSha256Hex(sha)) {
    return refuse(InvalidArgument("not a file name: expected 64 lower-case hex digits"));
  }
  if (stopped_) return done(net::ErrorResponse(Unavailable("the server is stopping")));
  const nlohmann::json body = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  if (!body.is_object() || !body.contains("task") || !body["task"].is_string() ||
      !body.contains("from") || !body["from"].is_number_unsigned()) {
    return refuse(InvalidArgument(
        "expected {\"task\": \"<job>.<index>\", \"from\": <worker id>, \"wait_ms\": <ms>}"));
  }
  Result<TaskId> task = ParseTaskId(body["task"].get<std::string>());
  if (!task.ok()) return refuse(task.status());
  const uint64_t from_raw = body["from"].get<uint64_t>();
  if (from_raw == 0 || from_raw > UINT32_MAX) {
    return refuse(InvalidArgument("from: not a worker id: " + std::to_string(from_raw)));
  }
  const WorkerId from = static_cast<WorkerId>(from_raw);
  Duration wait = options_.default_wait;
  if (body.contains("wait_ms")) {
    if (!body["wait_ms"].is_number_unsigned()) {
      return refuse(InvalidArgument("wait_ms: expected milliseconds"));
    }
    const uint64_t ms = std::min<uint64_t>(body["wait_ms"].get<uint64_t>(), 1ull << 40);
    wait = std::min<Duration>(Millis(static_cast<int64_t>(ms)), options_.max_wait);
  }
  const std::string short_sha = sha.substr(0, 12) + "...";
  std::optional<proto::FileSource> holder = channel_.FileSourceOf(from);
  if (!holder) {
    return refuse(NotFound("worker " + std::to_string(from) + " is unknown or serves no files"));
  }
  Result<core::TaskInfo> info = scheduler_.GetTask(*task);
  if (!info.ok()) return refuse(info.status());
  const core::OutputFile* file = nullptr;
  // The holder of the outputs, or a worker holding a copy (replicas).
  if (info->outcome && (info->outcome->outputs_on == from ||
                        std::find(info->outcome->replicas.begin(), info->outcome->replicas.end(),
                                  from) != info->outcome->replicas.end())) {
    for (const core::OutputFile& f : info->outcome->outputs) {
      if (f.sha256 == sha) {
        file = &f;
        break;
      }
    }
  }
  if (file == nullptr) {
    return refuse(PermissionDenied("file " + short_sha + " is not an output of task " +
                                   task->ToString() + " held by worker " + std::to_string(from)));
  }
  if (store_.Has(sha)) {
    return done(net::JsonResponse(
        net::JsonText(nlohmann::json{{"sha256", sha}, {"size", file->size}, {"relayed", false}})));
  }
  if (channel_.grant_key().empty()) {
    return refuse(Unavailable("the server has no grant key: it cannot fetch from workers"));
  }
  auto it = inflight_.find(sha);
  if (it == inflight_.end()) {
    const std::string label = task->ToString() + "/" + file->name + " (" + FormatBytes(file->size) +
                              ") from worker " + std::to_string(from) + " (" + holder->host + ":" +
                              std::to_string(holder->port) + ")";
    spdlog::info("file relay: {} asks for {}; fetching it through the server", r.remote, label);
    StartTransfer(sha, file->size, *holder, label);
    it = inflight_.find(sha);
  }
  std::shared_ptr<Transfer> t = it->second;
  const uint64_t waiter = t->next_waiter++;
  Transfer::Waiter& w = t->waiters[waiter];
  w.done = std::move(done);
  w.timer = std::make_unique<net::Timer>(loop_);
  std::weak_ptr<Transfer> weak = t;
  w.timer->ArmAfter(wait, [weak, waiter] {
    std::shared_ptr<Transfer> t = weak.lock();
    if (!t) return;
    auto found = t->waiters.find(waiter);
    if (found == t->waiters.end()) return;
    net::Responder answer = std::move(found->second.done);
    t->waiters.erase(found);  // its timer too (safe from inside its callback)
    answer(net::JsonResponse(Progress(*t), 202));
  });
}

void FileRelay::StartTransfer(const std::string& sha256, uint64_t size,
                              const proto::FileSource& holder, const std::string& label) {
  auto t = std::make_shared<Transfer>();
  t->id = next_id_++;
  t->sha256 = sha256;
  t->size = size;
  t->label = label;
  inflight_[sha256] = t;
  ++pulls_;
  const std::string grant = channel_.Grant(sha256, "server");
  const std::string dir = store_.dir();
  const std::string token = options_.token;
  const Duration timeout = options_.timeout;
  std::shared_ptr<std::atomic<bool>> stopping = stopping_;
  std::weak_ptr<bool> alive = alive_;
  const uint64_t id = t->id;
  threads_[id] = std::thread([this, t, holder, grant, dir, token, timeout, stopping, alive, id] {
    auto part = std::make_shared<Result<std::string>>(
        PullOnThread(holder, grant, token, timeout, t->sha256, t->size, dir, *stopping, t->received,
                     relayed_bytes_));
    loop_.Post([this, alive, id, sha = t->sha256, part] {
      if (alive.expired() || !*alive.lock()) return;
      Finished(sha, id, std::move(*part));
    });
  });
}

void FileRelay::Finished(const std::string& sha256, uint64_t id, Result<std::string> part) {
  if (auto th = threads_.find(id); th != threads_.end()) {
    th->second.join();
    threads_.erase(th);
  }
  if (stopped_) {
    if (part.ok()) ::unlink(part->c_str());
    return;
  }
  auto it = inflight_.find(sha256);
  if (it == inflight_.end() || it->second->id != id) {
    if (part.ok()) ::unlink(part->c_str());
    return;
  }
  std::shared_ptr<Transfer> t = it->second;
  inflight_.erase(it);
  Status status = part.status();
  if (part.ok()) {
    status = store_.Commit(net::Upload{*part, t->size, t->sha256}, t->sha256);
    ::unlink(part->c_str());  // gone when committed (renamed); else the leftover
  }
  const double secs = t->started.ElapsedSeconds();
  net::Response answer;
  if (status.ok()) {
    ++relayed_files_;
    relayed_[t->sha256] = options_.clock->Now();
    ArmSweep();
    spdlog::info("file relay: fetched {} into the file store in {:.3f} s", t->label, secs);
    answer = net::JsonResponse(
        net::JsonText(nlohmann::json{{"sha256", t->sha256}, {"size", t->size}, {"relayed", true}}));
  } else {
    ++failed_;
    spdlog::warn("file relay: fetching {} failed after {:.3f} s: {}", t->label, secs,
                 status.ToString());
    if (status.code() == StatusCode::kResourceExhausted) {
      answer = net::ErrorResponse(507, status.code(), status.message());
    } else if (status.code() == StatusCode::kInternal) {
      answer = net::ErrorResponse(status);
    } else {
      answer = net::ErrorResponse(502, StatusCode::kUnavailable,
                                  "the server could not fetch it: " + status.message());
    }
  }
  for (auto& [w, waiter] : t->waiters) {
    waiter.timer->Cancel();
    waiter.done(answer);
  }
  t->waiters.clear();
}

void FileRelay::ArmSweep() {
  if (sweep_timer_.armed() || relayed_.empty()) return;
  Time oldest = relayed_.begin()->second;
  for (const auto& [sha, at] : relayed_) oldest = std::min(oldest, at);
  const Duration in = std::max<Duration>(oldest + options_.keep - options_.clock->Now(), Seconds(1));
  sweep_timer_.ArmAfter(in, [this] {
    const Time now = options_.clock->Now();
    const Time before = now - options_.keep;
    for (auto it = relayed_.begin(); it != relayed_.end();) {
      it = it->second <= before ? relayed_.erase(it) : std::next(it);
    }
    if (const size_t swept = store_.Sweep(before); swept > 0) {
      spdlog::info(
          "file store: deleted {} file(s) no task names (relayed, or uploaded and never "
          "named, over {} ago)",
          swept, FormatDuration(options_.keep));
    }
    ArmSweep();
  });
}

}  // namespace drover::server
