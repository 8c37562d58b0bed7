// FencingPolicy: when a worker cut off from the server must stop its tasks.
//
// A running task's lease expires lease_ttl after the server last renewed
// it, and the server may then give its resources to someone else. The
// worker therefore stops its tasks after (lease_ttl - 2 * heartbeat) without
// server contact (DESIGN.md section 4): two heartbeats earlier than the
// lease can expire, so a task never runs on a lease that may be someone
// else's. Pure: time comes in as an argument; tested on a SimulatedClock.
//
// Threading: not synchronised; one owner thread.
#ifndef DROVER_WORKER_EXEC_FENCING_H_
#define DROVER_WORKER_EXEC_FENCING_H_

#include "common/status.h"
#include "common/time.h"

namespace drover::worker {

class FencingPolicy {
 public:
  // InvalidArgument unless heartbeat > 0 and lease_ttl > 2 * heartbeat
  // (otherwise a worker would fence itself between two heartbeats).
  // `start` counts as the first contact.
  static Result<FencingPolicy> Create(Duration lease_ttl, Duration heartbeat, Time start);

  // Any message from the server (heartbeat reply, assignment) counts.
  // Contact that goes back in time is ignored.
  void OnServerContact(Time now);

  // How long the worker may go without contact: lease_ttl - 2 * heartbeat.
  Duration budget() const { return budget_; }
  // The moment past which tasks must be stopped if no contact comes; the
  // shell arms a timer for it.
  Time deadline() const { return last_contact_ + budget_; }
  // True once `now` is past the deadline.
  bool ShouldFence(Time now) const { return now > deadline(); }

 private:
  FencingPolicy(Duration budget, Time start) : budget_(budget), last_contact_(start) {}
  Duration budget_;
  Time last_contact_;
};

}  // namespace drover::worker

#endif  // DROVER_WORKER_EXEC_FENCING_H_
