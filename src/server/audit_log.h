// AuditLog: every write to the cluster, once, with who, what, when and from
// where: each request other than GET and HEAD that carried a
// valid token (submit, cancel, drain, allocation queues, user changes, file
// uploads, ...), refused ones included (a 403 is recorded with its reason).
// Requests without a valid token are not recorded: anyone who can reach the
// port could fill the log. Workers' own traffic (their WebSocket and the
// files they move) is not recorded either: it is the cluster's machinery,
// not a person's write.
//
// File: <state_dir>/audit.log, mode 0600, JSON Lines, one entry per write:
//
//   {"seq":12,"at_us":1764738600000000,"user":"ana","role":"user",
//    "from":"127.0.0.1:51234","method":"POST","path":"/api/v1/jobs/12/cancel",
//    "status":200,"detail":"..."}
//
// `detail` is the error message of a refused or failed request, or what a
// write made ("job 12", "job 12 for bob" when an admin submitted on
// another's behalf). Entries are appended with write(2) before the answer
// is sent, so a killed server loses none. The file is fdatasync'ed
// kSyncPeriod (one second) after the first entry appended since the last
// sync, so every entry is on disk within a second of its write and a
// machine that loses power may lose the last second (the guide's "synced
// within a second"; audit_log_test.cc checks it). seq numbers go on across
// restarts (Open reads the last one). A line cut short by a crash is
// skipped by Read (and a new line starts after it).
//
// Thread safety: none; used on the server's event loop.
#ifndef DROVER_SERVER_AUDIT_LOG_H_
#define DROVER_SERVER_AUDIT_LOG_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "common/unique_fd.h"

namespace drover::net {
class EventLoop;
class Timer;
}  // namespace drover::net

namespace drover::server {

struct AuditEntry {
  uint64_t seq = 0;  // set by Append
  Time at;
  std::string user;
  std::string role;
  std::string from;
  std::string method;
  std::string path;
  int status = 0;
  std::string detail;
};

struct AuditQuery {
  uint64_t after_seq = 0;     // entries with a larger seq
  std::string user;           // empty: everyone's
  std::optional<Time> since;  // at or after
  size_t limit = 1000;        // the newest this many that match
};

class AuditLog {
 public:
  // How long after an unsynced Append the log syncs itself (with a loop).
  static constexpr Duration kSyncPeriod = Seconds(1);

  // Opens (or makes) the log at `path`. Errors name the path. With a
  // `loop` (which must outlive the log), the first Append after a sync arms
  // a timer on it that calls Sync kSyncPeriod later; later appends do not
  // push that back. Without one the caller calls Sync.
  static Result<std::unique_ptr<AuditLog>> Open(std::string path, net::EventLoop* loop = nullptr);
  ~AuditLog();
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  // Appends `e` (its seq is the next); an entry that cannot be written is
  // logged as an error and counted (write_errors), and the request goes
  // on: a full disk must not stop the cluster.
  void Append(AuditEntry e);
  // fdatasync if anything was appended since the last Sync. A failure is
  // logged and counted (write_errors); the entries stay unsynced.
  void Sync();
  // Entries matching `q`, oldest first.
  Result<std::vector<AuditEntry>> Read(const AuditQuery& q) const;

  uint64_t last_seq() const { return seq_; }
  // The last seq a successful fdatasync covered (0: none since Open).
  uint64_t synced_seq() const { return synced_seq_; }
  uint64_t write_errors() const { return write_errors_; }
  const std::string& path() const { return path_; }

 private:
  AuditLog(std::string path, UniqueFd fd, uint64_t seq, net::EventLoop* loop);
  std::string path_;
  UniqueFd fd_;
  uint64_t seq_ = 0;
  uint64_t synced_seq_ = 0;
  bool dirty_ = false;
  uint64_t write_errors_ = 0;
  std::unique_ptr<net::Timer> sync_timer_;  // null without a loop
};

}  // namespace drover::server

#endif  // DROVER_SERVER_AUDIT_LOG_H_
