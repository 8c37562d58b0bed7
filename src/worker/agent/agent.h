// Agent: the worker shell (`drover worker`). It ties the executor, the local
// admission check (Slots), resource detection, fencing and the data plane
// (file_plane.h) to one server over the worker channel (proto/messages.h).
// The decisions (what to start, queue, refuse, kill, report and when) are
// WorkerState's (worker/state/worker_state.h, pure, tested on a simulated
// clock); the Agent carries out its commands and feeds it what happens.
// Each step of the protocol (connect, heartbeat, assign, queue-ahead,
// finished, cancel, logs, a lost link, fencing): src/worker/README.md, "The
// agent, step by step"; why it works so: docs/design.md sections 1, 4, 5.
//
// What a caller can rely on: once started, the agent connects and
// reconnects by itself (an unreachable server is not an error); tasks keep
// running while no server is reachable, and every result is reported until
// a server acknowledges it. With no server contact for lease_ttl - 2 *
// heartbeat_interval it fences: it kills its tasks, whose leases may soon
// be someone else's. Who the tasks run as (task_user, run_as_root,
// user_map): docs/guide.md, "Who tasks run as".
//
// Threading: Start, Stop and the destructor belong to the loop's thread, or
// to a time when the loop is not running. Everything else happens on the
// loop. The loop must outlive the Agent.
#ifndef DROVER_WORKER_AGENT_AGENT_H_
#define DROVER_WORKER_AGENT_AGENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "common/time.h"
#include "net/backoff.h"
#include "net/event_loop.h"
#include "worker/resources/resources.h"

namespace drover::worker {

class ServerLink;
class TaskRunner;

struct AgentConfig {
  // Servers as "host:port" ("[::1]:7210"), tried in turn; at least one.
  std::vector<std::string> servers;
  std::string token;        // the cluster token
  std::string fingerprint;  // the server certificate's SHA-256 (required with tls)
  bool tls = true;
  // The server's local socket (net/local_socket.h), for a worker in the
  // server's own process (`drover up`): connect there, in plain HTTP (no
  // TCP, no TLS; the token is sent as always). Empty: `servers`.
  std::string local_socket;
  std::string name;         // the worker's name; empty: the host name
  std::string workdir;      // task directories go under here; required
  // This worker's identity: a random key made on first start (mode 0600)
  // and sent in every hello; the server binds the worker's name to it and
  // refuses the name to any other key. Empty: "<workdir>/worker.key".
  std::string key_file;

  // "auto", "cgroup2", "cgroup1", "rlimit" or "none" (isolator.h).
  std::string isolation = "auto";

  // Resource overrides, as the command line spells them (resources.h).
  std::string cpus;                 // core list "0-7"; empty: affinity mask
  std::string mem;                  // memory offered to tasks, e.g. "16GiB"
  std::string gpus;                 // "0,1", "0-3" or "none"; empty: detect
  int gpu_part = 0;                 // with detection: this share of the GPUs
  int gpu_parts = 1;                // (DetectOptions::gpu_part)
  // Where this machine's workers lock the GPUs they offer (gpu_lock.h);
  // empty: GpuLocks::DefaultDir().
  std::string gpu_lock_dir;
  std::string gpu_type;
  std::string gpu_mem;
  std::vector<std::string> labels;    // key=value
  std::vector<std::string> counters;  // name=count

  // Who tasks run as when the agent is root (docs/guide.md, "Who tasks run
  // as"; RunsTasksPerUser below).
  std::string task_user;
  bool run_as_root = false;
  // Per-user mode's map, "user=account" each (`--user-map ana=alice`).
  std::vector<std::string> user_map;

  // Used until a server's HelloAck says otherwise (fencing needs them
  // before the first contact too).
  Duration heartbeat_interval = Seconds(2);
  Duration lease_ttl = Seconds(30);

  uint64_t log_cap_bytes = 64ull << 20;             // per task stream
  uint64_t log_rate_bytes_per_sec = 8ull << 20;     // all log transfers together
  Duration kill_grace = Seconds(10);                // Cancel: TERM -> KILL
  // At most this long per connection attempt; in fact 4 heartbeats (at
  // least 1 s) when that is shorter, so a paused server that accepts but
  // never answers does not hold the worker past its fencing deadline.
  Duration connect_timeout = Seconds(10);
  net::BackoffOptions reconnect;                    // delays between attempts
  // Detection hooks (tests point them at nothing): where nvidia-smi is ("":
  // skip it) and which NVML library to try.
  std::string nvidia_smi = "nvidia-smi";
  std::string nvml_library = "libnvidia-ml.so.1";
  // Called on the loop each time the server attaches this worker (`drover
  // up` announces itself once its local workers are in).
  std::function<void()> on_attached;
  // Positive: the worker leaves this long after it started (`--lifetime`,
  // a Slurm allocation's time limit); the server places only tasks whose
  // timeout ends by then (WorkerResources::ends_at).
  Duration lifetime = Duration::zero();
  // Positive: after this long with nothing to do the worker drains and
  // then calls on_leave (WorkerStateConfig::idle_timeout).
  Duration idle_timeout = Duration::zero();
  // Idle-desktop mode (`--desktop`, WorkerStateConfig::Desktop): the owner's
  // input is read from `idle_source` (desktop/input_source.h) every
  // `owner_poll`, the load of processes outside Drover (everything but
  // the tasks' cgroups; not measured without cgroups) every second.
  bool desktop = false;
  std::string idle_source = "auto";
  Duration idle_after = Seconds(15 * 60);
  Duration resume_after = Seconds(60);
  Duration suspend_for = Seconds(10 * 60);
  double max_outside_load = 0.3;
  Duration owner_poll = std::chrono::milliseconds(20);
  // Positive: memory pressure from other programs (`--min-available-mem`,
  // WorkerStateConfig::min_available_bytes), read at each heartbeat.
  uint64_t min_available_bytes = 0;
  // The data plane (file_plane.h): a cache of files under
  // <workdir>/.cache and a TLS file service peers fetch from. Off: no
  // service; a task whose dependencies left outputs is refused.
  bool files = true;
  uint64_t cache_bytes = 0;            // 0: a quarter of the free disk, at least 1 GiB
  std::string files_bind = "0.0.0.0";  // the file service's address
  uint16_t files_port = 0;             // 0: any free port
  uint64_t max_output_bytes = 0;       // a task's outputs together; 0: no limit
  // The most a task's directory may hold where its `disk` says less or
  // nothing (the lower of the two applies); 0: only the task's.
  uint64_t max_task_disk_bytes = 0;
  // Health (health_monitor.h): the work directory's file system is checked
  // (read-only, below `min_free_disk_bytes` free; 0: the smaller of 1 GiB
  // and 1%), and `health_check` run with sh -c (empty: none), at start and
  // every `health_interval`, each run bounded by `health_timeout`; while
  // either fails the worker takes no new work. `health_interval` zero: no
  // checks at all.
  std::string health_check;
  Duration health_interval = Seconds(300);
  Duration health_timeout = Seconds(60);
  uint64_t min_free_disk_bytes = 0;
  // Checkpoints (file_plane.h): every running attempt's
  // $DROVER_CHECKPOINT_DIR is saved to the server this often, and once
  // more when an attempt ends other than in success while the worker
  // lives (before its result is reported); zero: only then. Needs `files`.
  Duration checkpoint_every = Seconds(60);
  // Called on the loop when the worker leaves (idle); the caller stops it.
  std::function<void(const std::string& reason)> on_leave;
  // The clock behind every "now" of the agent (the state machine's events,
  // the fencing check, the log sender's rate limit); it must outlive the
  // Agent. Null: the system clock. Timers still run on the loop.
  Clock* clock = nullptr;
  // How the agent reaches a server (server_link.h); it must outlive the
  // Agent. Null: a WebSocket (WebSocketLink) the agent owns.
  ServerLink* server_link = nullptr;
  // What runs the tasks (task_runner.h); it must outlive the Agent, and
  // call no callback after Stop (the agent does not end its tasks then).
  // Null: the Executor, made and owned by the agent.
  TaskRunner* task_runner = nullptr;
};

// What `config` offers on this machine: DetectResources with its overrides
// (cores, GPUs, labels, counters) and --mem applied, as Agent::Start
// detects it (before it locks the GPUs for this worker). For a check that
// starts nothing (`drover worker --check`). Errors name the flag.
Result<WorkerResources> DetectOffer(const AgentConfig& config,
                                    std::unique_ptr<UtilizationSampler>* sampler = nullptr);

// Whether the agent runs each task as its job user's account (per user,
// worker/exec/task_account.h): as root, without --user, and without
// --run-as-root unless a --user-map is given.
bool RunsTasksPerUser(const AgentConfig& config);

// What `drover worker --check` says of the work directory: whether the
// accounts tasks run as can reach it (worker/exec/workdir_access.h), as a
// note (empty: nothing to say) or the error the start would fail with.
Result<std::string> CheckWorkdir(const AgentConfig& config);

class Agent {
 public:
  // Validates the configuration, detects resources, creates the executor
  // and begins connecting (in the background: an unreachable server is not
  // an error, the agent keeps trying). Fails with:
  //   InvalidArgument     no server, a bad address, bad override, bad
  //                       isolation word, non-positive heartbeat, lease_ttl
  //                       not above two heartbeats;
  //   InvalidArgument     (also) a bad user_map entry, user_map with
  //                       task_user;
  //   FailedPrecondition  an unknown task_user, user_map on an agent that
  //                       is not root, an unusable isolation mode, TLS
  //                       without a fingerprint;
  //   FailedPrecondition  (also) tasks that run as other accounts could
  //                       not reach the workdir (a parent they cannot
  //                       pass: CheckWorkdirReachable);
  //   Unavailable         the workdir cannot be created;
  //   detection errors    from DetectResources.
  static Result<std::unique_ptr<Agent>> Start(net::EventLoop& loop, AgentConfig config);

  // Closes the connection (pending results stay unacknowledged), drops the
  // queued successors (none starts) and kills every running task at once.
  // Idempotent; the destructor calls it.
  void Stop();
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // The id the last HelloAck gave this worker; 0 before the first.
  WorkerId worker_id() const;
  // One line: "4 cores, 15.5 GiB, no GPU".
  const std::string& summary() const;

  class Impl;

 private:
  explicit Agent(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace drover::worker

#endif  // DROVER_WORKER_AGENT_AGENT_H_
