#include "server/audit_log.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>
#include <nlohmann/json.hpp>

#include "net/event_loop.h"

namespace drover::server {

using json = nlohmann::json;

namespace {

std::optional<AuditEntry> ParseLine(const std::string& line) {
  json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  AuditEntry e;
  try {
    e.seq = j.at("seq").get<uint64_t>();
    e.at = TimeFromMicros(j.at("at_us").get<int64_t>());
    e.user = j.value("user", "");
    e.role = j.value("role", "");
    e.from = j.value("from", "");
    e.method = j.value("method", "");
    e.path = j.value("path", "");
    e.status = j.value("status", 0);
    e.detail = j.value("detail", "");
  } catch (const json::exception&) {
    return std::nullopt;
  }
  return e;
}

}  // namespace

AuditLog::AuditLog(std::string path, UniqueFd fd, uint64_t seq, net::EventLoop* loop)
    : path_(std::move(path)), fd_(std::move(fd)), seq_(seq) {
  if (loop != nullptr) sync_timer_ = std::make_unique<net::Timer>(*loop);
}

AuditLog::~AuditLog() = default;

Result<std::unique_ptr<AuditLog>> AuditLog::Open(std::string path, net::EventLoop* loop) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  if (!fd.valid())
    return Internal("cannot open the audit log " + path + ": " + std::strerror(errno));
  // The last seq: the last whole line of the file's tail.
  struct stat st {};
  if (fstat(fd.fd(), &st) != 0)
    return Internal("cannot stat " + path + ": " + std::strerror(errno));
  uint64_t seq = 0;
  const off_t size = st.st_size;
  if (size > 0) {
    const off_t from = size > (1 << 16) ? size - (1 << 16) : 0;
    std::string tail(static_cast<size_t>(size - from), '\0');
    ssize_t n = pread(fd.fd(), tail.data(), tail.size(), from);
    if (n < 0) return Internal("cannot read " + path + ": " + std::strerror(errno));
    tail.resize(static_cast<size_t>(n));
    size_t end = tail.size();
    while (end > 0) {
      size_t begin = tail.rfind('\n', end - 1);
      begin = begin == std::string::npos ? 0 : begin + 1;
      if (auto e = ParseLine(tail.substr(begin, end - begin))) {
        seq = e->seq;
        break;
      }
      if (begin == 0) break;
      end = begin - 1;
    }
    // A line cut short by a crash: the next entry starts on a line of its own.
    if (!tail.empty() && tail.back() != '\n') {
      if (::write(fd.fd(), "\n", 1) != 1)
        return Internal("cannot write " + path + ": " + std::strerror(errno));
    }
  }
  return std::unique_ptr<AuditLog>(new AuditLog(std::move(path), std::move(fd), seq, loop));
}

void AuditLog::Append(AuditEntry e) {
  e.seq = seq_ + 1;
  json j = {{"seq", e.seq},   {"at_us", ToMicros(e.at)}, {"user", e.user},
            {"role", e.role}, {"from", e.from},          {"method", e.method},
            {"path", e.path}, {"status", e.status},      {"detail", e.detail}};
  std::string line = j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  // One write of the whole line (O_APPEND): it lands whole or not at all,
  // short of a crash in the middle (Open copes).
  ssize_t n = ::write(fd_.fd(), line.data(), line.size());
  if (n != static_cast<ssize_t>(line.size())) {
    ++write_errors_;
    spdlog::error("audit log {}: cannot append entry {} ({} {} by {}): {}", path_, e.seq, e.method,
                  e.path, e.user, n < 0 ? std::strerror(errno) : "short write");
    return;
  }
  seq_ = e.seq;
  dirty_ = true;
  // Armed once per unsynced batch, not per entry: a steady trickle of writes
  // must not put the sync off.
  if (sync_timer_ && !sync_timer_->armed()) sync_timer_->ArmAfter(kSyncPeriod, [this] { Sync(); });
}

void AuditLog::Sync() {
  if (!dirty_) return;
  dirty_ = false;
  if (fdatasync(fd_.fd()) != 0) {
    ++write_errors_;
    spdlog::error("audit log {}: fdatasync: {}", path_, std::strerror(errno));
    return;
  }
  synced_seq_ = seq_;
}

Result<std::vector<AuditEntry>> AuditLog::Read(const AuditQuery& q) const {
  std::ifstream in(path_);
  if (!in) return Internal("cannot read the audit log " + path_);
  std::deque<AuditEntry> out;
  std::string line;
  while (std::getline(in, line)) {
    std::optional<AuditEntry> e = ParseLine(line);
    if (!e || e->seq <= q.after_seq) continue;
    if (!q.user.empty() && e->user != q.user) continue;
    if (q.since && e->at < *q.since) continue;
    out.push_back(std::move(*e));
    if (q.limit > 0 && out.size() > q.limit) out.pop_front();
  }
  return std::vector<AuditEntry>(std::make_move_iterator(out.begin()),
                                 std::make_move_iterator(out.end()));
}

}  // namespace drover::server
