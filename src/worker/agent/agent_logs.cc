#include "worker/agent/agent_logs.h"

#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "proto/log_frame.h"

namespace drover::worker {
namespace {

// The smallest amount worth waking up for when the budget is spent.
constexpr uint64_t kMinWakeBytes = 64 * 1024;

}  // namespace

struct LogSender::Transfer {
  int fd = -1;
  int wd = -1;  // inotify watch, -1 when not following
  uint64_t offset = 0;
  bool follow = false;
  bool running = false;
  ~Transfer() {
    if (fd >= 0) ::close(fd);
  }
};

LogSender::LogSender(net::EventLoop& loop, const Clock& clock, LogSenderOptions options, Sink sink)
    : loop_(loop), clock_(clock), options_(options), sink_(std::move(sink)), budget_timer_(loop) {}

LogSender::~LogSender() {
  budget_timer_.Cancel();
  transfers_.clear();
  inotify_watch_.reset();
  if (inotify_fd_ >= 0) ::close(inotify_fd_);
}

void LogSender::SendChunk(const Key& key, uint64_t offset, uint64_t size, bool eof,
                          std::string error) {
  proto::LogChunk chunk;
  chunk.task = std::get<0>(key);
  chunk.attempt = std::get<1>(key);
  chunk.stream = std::get<2>(key);
  chunk.offset = offset;
  chunk.size = size;
  chunk.eof = eof;
  chunk.error = std::move(error);
  sink_.text(proto::Encode(proto::WorkerMessage{std::move(chunk)}));
}

void LogSender::Request(const proto::LogRequest& request, const Result<LogTarget>& target) {
  const uint32_t attempt = target.ok() ? target->attempt : request.attempt;
  const Key key{request.task, attempt, request.stream};
  Remove(key);
  if (request.stop) return;
  if (!target.ok()) {
    SendChunk(key, request.offset, 0, true, target.status().message());
    return;
  }
  auto transfer = std::make_unique<Transfer>();
  transfer->fd = ::open(target->path.c_str(), O_RDONLY | O_CLOEXEC);
  if (transfer->fd < 0 && errno == ENOENT && !target->running) {
    // The executor makes an output file with its first byte: none means
    // the task wrote nothing to this stream.
    SendChunk(key, request.offset, 0, true, "");
    return;
  }
  if (transfer->fd < 0) {
    SendChunk(key, request.offset, 0, true,
              "cannot open " + target->path + ": " + std::strerror(errno));
    return;
  }
  transfer->offset = request.offset;
  transfer->running = target->running;
  transfer->follow = request.follow && target->running;
  if (transfer->follow) {
    if (inotify_fd_ < 0) {
      inotify_fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
      if (inotify_fd_ < 0) {
        SendChunk(key, request.offset, 0, true, std::string("inotify: ") + std::strerror(errno));
        return;
      }
      inotify_watch_ = std::make_unique<net::FdWatch>(loop_, inotify_fd_, [this] { OnInotify(); });
    }
    transfer->wd = ::inotify_add_watch(inotify_fd_, target->path.c_str(), IN_MODIFY);
    if (transfer->wd < 0) {
      SendChunk(key, request.offset, 0, true,
                "cannot watch " + target->path + ": " + std::strerror(errno));
      return;
    }
  }
  transfers_.emplace(key, std::move(transfer));
  Pump();
}

void LogSender::TaskEnded(TaskId task, uint32_t attempt) {
  bool any = false;
  for (auto& [key, transfer] : transfers_) {
    if (std::get<0>(key) == task && std::get<1>(key) == attempt) {
      transfer->running = false;
      transfer->follow = false;
      any = true;
    }
  }
  if (any) Pump();
}

void LogSender::Reset() {
  while (!transfers_.empty()) Remove(transfers_.begin()->first);
  budget_timer_.Cancel();
}

void LogSender::Remove(const Key& key) {
  auto it = transfers_.find(key);
  if (it == transfers_.end()) return;
  const int wd = it->second->wd;
  transfers_.erase(it);
  if (wd < 0) return;
  // Several transfers of one file share the watch (inotify gives the same
  // descriptor for the same inode); drop it with the last of them.
  for (const auto& [other, transfer] : transfers_) {
    if (transfer->wd == wd) return;
  }
  ::inotify_rm_watch(inotify_fd_, wd);
}

void LogSender::OnInotify() {
  // The events only say "something grew": drain them and serve everyone.
  alignas(struct inotify_event) char buffer[4096];
  while (::read(inotify_fd_, buffer, sizeof(buffer)) > 0) {
  }
  Pump();
}

int64_t LogSender::Allowance(Time now) const {
  if (options_.rate_bytes_per_sec == 0) return INT64_MAX;
  // Spent budget older than the burst window is forgotten; a clock that
  // went backwards resets the budget rather than stalling it.
  const Time base = std::clamp(budget_used_until_, now - options_.burst, now);
  const int64_t micros = (now - base).count();
  return static_cast<int64_t>(static_cast<double>(micros) *
                              static_cast<double>(options_.rate_bytes_per_sec) / 1e6);
}

uint64_t LogSender::BurstBytes() const {
  if (options_.rate_bytes_per_sec == 0) return UINT64_MAX;
  return static_cast<uint64_t>(static_cast<double>(options_.burst.count()) *
                               static_cast<double>(options_.rate_bytes_per_sec) / 1e6);
}

void LogSender::Pump() {
  if (pumping_) return;  // a sink call re-entered; the running pump continues
  pumping_ = true;
  std::string buffer;
  bool progress = true;
  bool throttled = false;
  uint64_t pending = 0;
  while (progress && !throttled) {
    progress = false;
    for (auto& [key, transfer] : transfers_) {
      struct stat st {};
      if (::fstat(transfer->fd, &st) != 0) continue;
      const uint64_t size = static_cast<uint64_t>(st.st_size);
      if (transfer->offset >= size) continue;
      const Time now = clock_.Now();
      const int64_t allowed = Allowance(now);
      // Less than a worthwhile frame (the rest of the file, 64 KiB, or the
      // whole burst when that is smaller) waits for the budget to grow: the
      // clock moves on while this loop runs, and frames of the few bytes
      // each moment earns would keep it from ever returning.
      const int64_t worthwhile = static_cast<int64_t>(
          std::min<uint64_t>({size - transfer->offset, kMinWakeBytes, BurstBytes()}));
      if (allowed < std::max<int64_t>(worthwhile, 1)) {
        throttled = true;
        pending = size - transfer->offset;
        break;
      }
      const size_t want = static_cast<size_t>(std::min<uint64_t>(
          {size - transfer->offset, proto::kMaxLogFrameBytes, static_cast<uint64_t>(allowed)}));
      buffer.resize(want);
      const ssize_t got = ::pread(transfer->fd, buffer.data(), want,
                                  static_cast<off_t>(transfer->offset));
      if (got <= 0) continue;
      proto::LogFrame frame;
      frame.task = std::get<0>(key);
      frame.attempt = std::get<1>(key);
      frame.stream = std::get<2>(key);
      frame.offset = transfer->offset;
      frame.bytes = std::string_view(buffer.data(), static_cast<size_t>(got));
      sink_.binary(proto::EncodeLogFrame(frame));
      transfer->offset += static_cast<uint64_t>(got);
      bytes_sent_ += static_cast<uint64_t>(got);
      if (options_.rate_bytes_per_sec > 0) {
        const Time base = std::clamp(budget_used_until_, now - options_.burst, now);
        budget_used_until_ =
            base + Duration(static_cast<int64_t>(static_cast<double>(got) * 1e6 /
                                                 static_cast<double>(options_.rate_bytes_per_sec)));
      }
      progress = true;
    }
  }
  // Transfers that have sent everything and will get nothing more end here.
  std::vector<Key> done;
  for (auto& [key, transfer] : transfers_) {
    struct stat st {};
    const bool stat_ok = ::fstat(transfer->fd, &st) == 0;
    const uint64_t size = stat_ok ? static_cast<uint64_t>(st.st_size) : transfer->offset;
    if (!transfer->follow && transfer->offset >= size) {
      SendChunk(key, transfer->offset, size, true, "");
      done.push_back(key);
    }
  }
  for (const Key& key : done) Remove(key);
  if (throttled && !budget_timer_.armed()) {
    const uint64_t need = std::min<uint64_t>({pending, kMinWakeBytes, BurstBytes()});
    const Duration wait(static_cast<int64_t>(static_cast<double>(need) * 1e6 /
                                             static_cast<double>(options_.rate_bytes_per_sec)));
    budget_timer_.ArmAfter(std::max(wait, Millis(1)), [this] { Pump(); });
  }
  pumping_ = false;
}

}  // namespace drover::worker
