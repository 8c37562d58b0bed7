// AllocManager: allocation queues, the workers the server borrows from a
// Slurm cluster the lab already has (`drover alloc add slurm`, docs/deploy.md
// "Workers from Slurm").
//
// A queue says how many workers it may have at once, each allocation's time
// limit and how long an idle worker stays. Every `interval` the manager asks
// Slurm about its allocations (squeue) and, for each queue with queued work
// that a worker of its allocations could take (a timeout that ends within
// the worker's lifetime: core Scheduler::QueuedWithin) and no allocation
// still waiting for its worker to attach, submits one more (sbatch), below
// the queue's maximum and outside the backoff of a failed submission. The
// allocation runs `drover worker --lifetime L --idle-timeout I`: it takes
// only tasks that end before the allocation does, and leaves when idle,
// which ends the allocation. So the queue grows one allocation per interval
// while work waits and shrinks as workers go idle.
//
// Slurm is reached through SlurmCommands (RealSlurm runs sbatch, squeue and
// scancel) on a thread of the manager's own, one round at a time, so that
// the event loop never waits for Slurm. Queues and their allocations are
// kept in <state_dir>/allocs.json (rewritten whole on each change), the
// batch scripts and Slurm's output under <state_dir>/alloc/.
//
// Thread safety: everything but the round's thread belongs to the loop.
#ifndef DROVER_SERVER_ALLOC_H_
#define DROVER_SERVER_ALLOC_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "core/scheduler.h"
#include "net/event_loop.h"
#include "net/server.h"
#include "proto/api_json.h"

namespace drover::server {

struct Allocation {
  std::string job;          // Slurm's job id
  std::string slurm_state;  // as squeue said last: PENDING, RUNNING, ...; "ended" once gone
  bool ended = false;
  Time submitted_at;
  std::optional<Time> ended_at;
  // Its worker attached (at some time). One that ended without is counted
  // as a failed submission: a node that cannot start the worker must not
  // be asked again every round.
  bool attached = false;
};

struct AllocQueue {
  uint64_t id = 0;
  proto::AllocQueueRequest spec;
  std::vector<Allocation> allocations;  // the active ones and the last ended ones
  uint32_t failures = 0;                // failed submissions in a row
  std::optional<Time> retry_at;         // no submission before (after a failure)
  std::string last_error;               // of the last failed submission
};

// The name of an allocation's worker: "slurm-<queue>-<job>".
std::string AllocWorkerName(uint64_t queue, const std::string& job);
// What a worker of the queue is told to live: the time limit less a margin
// for its start (a tenth, at most a minute).
Duration AllocWorkerLifetime(const proto::AllocQueueRequest& spec);
// The wait after `failures` failed submissions in a row: 10 s, doubled
// each time, at most 10 minutes.
Duration AllocBackoff(uint32_t failures);
// Whether `queue` should submit an allocation at `now`: there is work for
// it (`demand` queued tasks), none of its allocations is waiting for its
// worker (`waiting`), it is below its maximum and not in a backoff.
bool ShouldSubmit(const AllocQueue& queue, size_t demand, size_t waiting, Time now);
// squeue -h -o "%i %T" output as job -> state. Lines that are not "ID
// STATE" are an error naming the line.
Result<std::map<std::string, std::string>> ParseSqueue(std::string_view text);

// What the batch script needs to start a worker.
struct WorkerLaunch {
  std::string drover;          // the binary, as on this machine
  std::string server_address;  // HOST:PORT (the queue's own, if it has one)
  std::string token_file;
  std::string fingerprint;  // empty: --no-tls
};
// The batch script of an allocation of `queue` (POSIX sh).
std::string AllocScript(const AllocQueue& queue, const WorkerLaunch& launch);

// Slurm's commands, as the manager uses them; each blocks until Slurm answers.
class SlurmCommands {
 public:
  virtual ~SlurmCommands() = default;
  // Submits `script` with `args`; the job's id.
  virtual Result<std::string> Submit(const std::vector<std::string>& args,
                                     const std::string& script) = 0;
  // The jobs named `names` that Slurm still knows: job -> state.
  virtual Result<std::map<std::string, std::string>> States(
      const std::vector<std::string>& names) = 0;
  virtual Status Cancel(const std::string& job) = 0;
};

// sbatch, squeue and scancel from PATH, each within 30 s.
std::unique_ptr<SlurmCommands> RealSlurm();

struct AllocOptions {
  std::string state_dir;
  Duration interval = Seconds(5);
  // Read at each submission (the port and fingerprint are known once the
  // server listens).
  std::function<WorkerLaunch()> launch;
  // Names the jobs of this server in Slurm ("drover-<id>-q<queue>"), so
  // two servers on one cluster do not count each other's.
  std::string server_id;
};

class AllocManager {
 public:
  // Loads <state_dir>/allocs.json (a malformed file is an error naming it)
  // and starts the rounds.
  static Result<std::unique_ptr<AllocManager>> Start(net::EventLoop& loop, const Clock& clock,
                                                     const core::Scheduler& scheduler,
                                                     std::unique_ptr<SlurmCommands> slurm,
                                                     AllocOptions options);
  ~AllocManager();
  AllocManager(const AllocManager&) = delete;
  AllocManager& operator=(const AllocManager&) = delete;

  // POST /api/v1/allocs, GET /api/v1/allocs ({"queues": [...], "rounds":
  // N}, N the rounds done so far), POST /api/v1/allocs/{id}/remove.
  void AddRoutes(net::Server& server);

  Result<uint64_t> Add(proto::AllocQueueRequest spec);
  // Forgets the queue; its allocations are canceled (scancel) in the next round.
  Status Remove(uint64_t id);
  const std::vector<AllocQueue>& queues() const { return queues_; }
  // Waits for the round in flight, then stops; no round starts after.
  void Stop();

 private:
  struct Round;
  AllocManager(net::EventLoop& loop, const Clock& clock, const core::Scheduler& scheduler,
               std::unique_ptr<SlurmCommands> slurm, AllocOptions options);
  Status Load();
  void Save();
  void Tick();
  void Finish(Round& round);
  // The names of the workers the scheduler knows, and of those attached now.
  void WorkerNames(std::set<std::string>* known, std::set<std::string>* live) const;
  void Failed(AllocQueue& q, std::string why, Time now);
  std::string JobName(uint64_t queue) const;

  net::EventLoop& loop_;
  const Clock& clock_;
  const core::Scheduler& scheduler_;
  std::unique_ptr<SlurmCommands> slurm_;
  AllocOptions options_;
  net::Timer timer_;
  std::vector<AllocQueue> queues_;
  uint64_t next_id_ = 1;
  std::vector<std::string> to_cancel_;  // jobs of removed queues
  std::thread round_thread_;
  bool in_round_ = false;
  uint64_t rounds_ = 0;  // finished, for GET /api/v1/allocs ("rounds")
  bool stopped_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace drover::server

#endif  // DROVER_SERVER_ALLOC_H_
