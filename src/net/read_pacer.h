// ReadPacer: takes turns between many busy connections so that a loop that
// never runs dry still looks at the network often.
//
// Why: the loop's callbacks run in the order they became ready, and it asks
// epoll for newly readable sockets once per pass over what is queued. A
// session that has the next message waiting re-arms its read, which
// completes at once and queues behind the others. With a thousand workers
// sending as fast as the server answers, one pass holds a message from every
// worker (hundreds of milliseconds of work), and a request from a person
// (`drover status`, the dashboard) waits a whole pass for each of its steps
// (bench/README.md, B6 scenario c).
//
// A paced session asks Next() before it reads again. At most `per_turn`
// reads go through at once; the rest wait in order and go on `per_turn` at
// a time, one batch per pass, and the loop asks epoll between two batches,
// so what became readable meanwhile (an API request) waits for at most two
// batches, not for every worker. Under light load nothing waits: a read
// goes through at once until `per_turn` went through since the last batch.
// A read that brought several messages is charged for each (Charge).
//
//   auto pacer = std::make_shared<ReadPacer>(loop, 32);
//   session->PaceReads(pacer);     // the server's worker sessions
//
// Thread safety: the loop's thread.
#ifndef DROVER_NET_READ_PACER_H_
#define DROVER_NET_READ_PACER_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <memory>

#include "net/event_loop.h"

namespace drover::net {

class ReadPacer : public std::enable_shared_from_this<ReadPacer> {
 public:
  ReadPacer(EventLoop& loop, size_t per_turn);
  ReadPacer(const ReadPacer&) = delete;
  ReadPacer& operator=(const ReadPacer&) = delete;

  // Runs `read` now if this turn has room, otherwise queues it for a later
  // turn (in the order of the calls).
  void Next(std::function<void()> read);

  // Counts `units` more against this turn: a read that brought several
  // messages (a batch frame) is that much more work, and the reads after
  // it wait for a later turn once the turn's room is used.
  void Charge(size_t units) { used_ += units; }

  // Drops what waits (the server is stopping).
  void Clear();

  // Reads waiting for a turn, and batches let through after a wait, for
  // tests and metrics.
  size_t waiting() const { return waiting_.size(); }
  size_t batches() const { return batches_; }

 private:
  void Resume();

  EventLoop& loop_;
  size_t per_turn_;
  size_t used_ = 0;  // reads let through since the last batch
  bool resume_posted_ = false;
  size_t batches_ = 0;
  std::deque<std::function<void()>> waiting_;
};

}  // namespace drover::net

#endif  // DROVER_NET_READ_PACER_H_
