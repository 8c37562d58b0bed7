// EventPump: the one loop every shell runs around the core (DESIGN.md
// section 1): the server's CoreDriver, `drover sim`'s replay and the seeded
// simulation (tests/core_sim) all drive the scheduler through it.
//
//   Push(event) ─► queue ─► Scheduler::Handle(shell.Now(), event) ─► outbox
//                    ▲                                                  │
//                    └──── events the shell raises while executing ◄────┘
//                          shell.Execute(command), each in order
//
// Rules, the same for every shell:
//   - events are handled one at a time, in the order pushed;
//   - an event's outbox is executed in full, in order, before the next
//     event is handled;
//   - an event pushed from inside Execute (a store that answers at once, a
//     simulated worker) waits its turn behind the current outbox: handling
//     is never re-entrant;
//   - a submission (Submit) runs through the same drain.
// The shell decides what a command does; the pump only decides when.
//
// Thread safety: none; the shell's one thread owns it.
#ifndef DROVER_CORE_EVENT_PUMP_H_
#define DROVER_CORE_EVENT_PUMP_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <utility>

#include "common/status.h"
#include "common/time.h"
#include "core/scheduler.h"

namespace drover::core {

class EventPump {
 public:
  // What the pump needs from its shell.
  class Shell {
   public:
    virtual ~Shell() = default;
    // The time the next event is handled at (it must not go backwards).
    virtual Time Now() = 0;
    // Carries out one command; may Push events (they queue).
    virtual void Execute(Command& command) = 0;
    // After each Handle, before its outbox runs. A non-OK status: the core
    // ignored the event (stale, unknown; it emitted nothing).
    virtual void Handled(const Status& status, const Outbox& out) {
      (void)status;
      (void)out;
    }
    // After an event's outbox ran.
    virtual void Executed() {}
    // When a drain ends with the queue empty.
    virtual void Drained() {}
  };

  EventPump(Scheduler& scheduler, Shell& shell) : scheduler_(scheduler), shell_(shell) {}
  EventPump(const EventPump&) = delete;
  EventPump& operator=(const EventPump&) = delete;

  // Queues `event` and, unless a drain is under way (a push from inside
  // Execute), handles everything queued. Returns how the core took `event`
  // when it was handled in this call; OK when it only queued (or the pump
  // is stopped: it is dropped).
  Status Push(Event event) {
    if (stopped_) return Status::Ok();
    queue_.push_back(std::move(event));
    if (draining_) return Status::Ok();
    return Drain();
  }

  // Runs a core call made outside Handle (Submit, FinishRestore, ...) as
  // one event of a drain: `call(now, outbox)`, then its outbox in order,
  // then whatever that queued. Returns the call's status (kUnavailable
  // when stopped; kFailedPrecondition from inside a drain, where it would
  // be re-entrant).
  template <typename Call>
  Status Run(Call call) {
    if (stopped_) return Unavailable("stopped");
    if (draining_) return FailedPrecondition("a core call from inside a drain");
    draining_ = true;
    Status s = call(shell_.Now(), outbox_);
    ++handled_;
    shell_.Handled(s, outbox_);
    RunOutbox();
    draining_ = false;
    (void)Drain();
    return s;
  }

  // Submits a job through the same drain (Scheduler::Submit).
  Result<JobId> Submit(std::shared_ptr<const JobSpec> spec) {
    JobId id = 0;
    Status s = Run([&](Time now, Outbox& out) {
      Result<JobId> r = scheduler_.Submit(now, std::move(spec), out);
      if (!r.ok()) return r.status();
      id = *r;
      return Status::Ok();
    });
    if (!s.ok()) return s;
    return id;
  }

  // Drops what is queued and every later event.
  void Stop() {
    stopped_ = true;
    queue_.clear();
  }
  bool stopped() const { return stopped_; }
  // Events (and submissions) handled so far.
  uint64_t handled() const { return handled_; }

 private:
  Status Drain() {
    draining_ = true;
    Status first;
    bool first_set = false;
    while (!queue_.empty() && !stopped_) {
      Event event = std::move(queue_.front());
      queue_.pop_front();
      ++handled_;
      Status s = scheduler_.Handle(shell_.Now(), std::move(event), outbox_);
      if (!first_set) {
        first = s;
        first_set = true;
      }
      shell_.Handled(s, outbox_);
      RunOutbox();
    }
    draining_ = false;
    shell_.Drained();
    return first;
  }

  void RunOutbox() {
    for (Command& c : outbox_) shell_.Execute(c);
    outbox_.clear();
    shell_.Executed();
  }

  Scheduler& scheduler_;
  Shell& shell_;
  Outbox outbox_;
  std::deque<Event> queue_;
  bool draining_ = false;
  bool stopped_ = false;
  uint64_t handled_ = 0;
};

}  // namespace drover::core

#endif  // DROVER_CORE_EVENT_PUMP_H_
