// LogSender: the agent's side of log transfers. It answers the server's
// LogRequests with the bytes of a task's stdout/stderr file, in binary
// frames (proto/log_frame.h), and a LogChunk text message when a transfer
// ends or fails.
//
//   request(follow=false)  sends the file from `offset` to its current end,
//                          then LogChunk{eof}.
//   request(follow=true)   sends what exists, then keeps sending new bytes
//                          as the file grows (inotify IN_MODIFY on the file,
//                          watched on the event loop: no polling) until the
//                          attempt ends (TaskEnded: the rest, then eof) or a
//                          request with stop=true arrives.
//
// Every transfer shares one rate limit (bytes per second with a burst
// allowance), so a chatty task followed by several people cannot flood the
// network; when the budget is spent the sender waits on a timer. Transfers
// are served round robin, one frame each per turn.
//
// Threading: belongs to the event loop's thread; every call and callback
// happens there. The loop must outlive it.
#ifndef DROVER_WORKER_AGENT_AGENT_LOGS_H_
#define DROVER_WORKER_AGENT_AGENT_LOGS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "common/ids.h"
#include "common/status.h"
#include "common/time.h"
#include "net/event_loop.h"
#include "proto/messages.h"

namespace drover::worker {

struct LogSenderOptions {
  uint64_t rate_bytes_per_sec = 8ull << 20;  // shared by all transfers
  Duration burst = Seconds(1);               // budget that may be spent at once
};

// Where a requested log lives, as the agent resolved it.
struct LogTarget {
  uint32_t attempt = 0;   // the resolved attempt (the request may say 0 = latest)
  std::string path;       // the stdout or stderr file (absent: nothing written)
  bool running = false;   // false: the file is complete
};

class LogSender {
 public:
  struct Sink {
    std::function<void(std::string)> text;    // a LogChunk, encoded
    std::function<void(std::string)> binary;  // a log frame
  };

  LogSender(net::EventLoop& loop, const Clock& clock, LogSenderOptions options, Sink sink);
  ~LogSender();
  LogSender(const LogSender&) = delete;
  LogSender& operator=(const LogSender&) = delete;

  // Starts (or with request.stop, ends) a transfer. `target` is the agent's
  // lookup for the request's task; an error there (no such task here) is
  // answered with LogChunk{error, eof}. A request for a transfer already in
  // progress replaces it. A file that cannot be opened or watched is
  // answered the same way, with the reason.
  void Request(const proto::LogRequest& request, const Result<LogTarget>& target);

  // The attempt ended: its followed transfers send what is left, then eof.
  void TaskEnded(TaskId task, uint32_t attempt);

  // Drops every transfer without a word (the connection is gone; the server
  // asks again after it reconnects).
  void Reset();

  size_t active() const { return transfers_.size(); }
  uint64_t bytes_sent() const { return bytes_sent_; }

 private:
  using Key = std::tuple<TaskId, uint32_t, proto::LogStream>;
  struct Transfer;

  void Pump();
  void Remove(const Key& key);
  void SendChunk(const Key& key, uint64_t offset, uint64_t size, bool eof, std::string error);
  void OnInotify();
  int64_t Allowance(Time now) const;
  uint64_t BurstBytes() const;  // what the full burst allows (max: no limit)

  net::EventLoop& loop_;
  const Clock& clock_;
  LogSenderOptions options_;
  Sink sink_;
  std::map<Key, std::unique_ptr<Transfer>> transfers_;
  int inotify_fd_ = -1;
  std::unique_ptr<net::FdWatch> inotify_watch_;
  net::Timer budget_timer_;
  Time budget_used_until_{};  // the rate limit: time the bytes sent so far "cost"
  uint64_t bytes_sent_ = 0;
  bool pumping_ = false;
};

}  // namespace drover::worker

#endif  // DROVER_WORKER_AGENT_AGENT_LOGS_H_
