// WorkerChannel: the server side of the worker WebSocket (/api/v1/worker).
//
// Per connection: the first message must be Hello. The worker gets its
// stable id by name (WorkerRegistry) and the channel answers HelloAck. Then:
//   Hello             -> one core::WorkerAttached with Hello.running (with
//                        their resources) and Hello.finished: the core joins
//                        the worker (unless it is known and not lost), counts
//                        the results, and confirms, adopts or kills each
//                        running attempt (core/events.h); Ack for the results
//                        once their records are durable
//   Finished          -> TaskFinished each, from this worker (a report for an
//                        attempt on another worker is stale); Ack once the
//                        records are durable
//   Started           -> TaskStarted
//   Refused           -> TaskRefused: the attempt ends without counting as a
//                        failure and the task goes elsewhere (the refusing
//                        worker takes nothing new until its next heartbeat)
//   Heartbeat         -> WorkerHeartbeat
//   Drain             -> WorkerDrained
//   Owner             -> WorkerPaused (and the freeze time, owner_freeze)
//   CheckpointSaved   -> core::CheckpointSaved, once every file it names is
//                        in the file store (else dropped, logged)
//   OutputsKept       -> the outputs-kept handler (output_retention.h), as
//                        does each result with outputs (in Finished or Hello)
//   LogChunk, binary  -> the log handlers (log_relay.h)
// A malformed message (or a message before Hello) gets an Error message and
// closes that connection only, with a logged reason.
//
// Hello is checked first: the protocol version, the offer's sanity
// (core::WorkerResources::Validate: no million cores or thousand GPUs), and
// the worker's identity: its key must be the one the registry holds for its
// name (WorkerRegistry::Admit), so no other process can take over
// a name, its connection, its tasks or its results.
//
// Outgoing: AssignTask commands are batched into one Assign per worker per
// loop turn, sent on the connection the worker has then. An assignment lost
// with a connection is not re-sent: the worker's next hello does not list
// it, and the core takes it back and places the task again (a new attempt,
// so a copy can never arrive late). A hello first flushes the assignments
// of the current turn to the old connection, so none made before the hello
// goes out on the new one. KillTask becomes Kill when it is hard (lease
// expired, attempt not current) and Cancel (graceful) otherwise.
//
// A closed connection becomes WorkerLost after `lost_grace` unless the same
// worker attaches again first. A connection that carries nothing from its
// worker for `silence_limit` (heartbeats stopped: a pulled cable, a frozen
// host; TCP itself would notice only after minutes) counts as closed. A second connection for a
// connected worker name replaces the first (the old one is closed).
//
// Thread safety: none; everything runs on the server's event loop.
#ifndef DROVER_SERVER_WORKER_CHANNEL_H_
#define DROVER_SERVER_WORKER_CHANNEL_H_

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/ids.h"
#include "common/time.h"
#include "core/commands.h"
#include "metrics/prom_text.h"
#include "net/event_loop.h"
#include "net/grant.h"
#include "net/read_pacer.h"
#include "net/ws_session.h"
#include "proto/log_frame.h"
#include "proto/messages.h"
#include "proto/messages_binary.h"
#include "server/assignment.h"
#include "server/core_driver.h"
#include "server/file_store.h"
#include "server/handoff_stats.h"
#include "server/once_per_turn.h"
#include "server/worker_registry.h"

namespace drover::server {

struct WorkerChannelOptions {
  std::string server_instance;  // sent in HelloAck
  Duration heartbeat_interval = Seconds(2);
  Duration lease_ttl = Seconds(30);
  Duration lost_grace = Seconds(6);  // disconnected this long -> WorkerLost
  // Zero: the larger of three heartbeat intervals and 5 s (a loaded worker
  // may miss a beat or two without being dropped).
  Duration silence_limit = Duration::zero();
  // Worker messages read between two looks at the network (read_pacer.h):
  // a request from a person waits for at most about this many, not for a
  // message from every worker. With batch frames 32 made a turn of the
  // loop 5-15 ms at 30,000 tasks a second and an API answer's p99 45-61
  // ms; 8 made it 21-28 ms with the same throughput (bench/README.md, B6).
  size_t reads_per_turn = 8;
  // Batch frames (proto::EncodeBatch): the HelloAck says the server reads
  // them, so workers send their bursts as one frame, and a worker whose
  // hello says it reads them gets the server's bursts so. Half the server's
  // CPU per task at B6's load, but there the event stream and API answers
  // lag (bench/README.md, B6): off by default. Either way the server reads
  // a batch frame a worker sends.
  bool batches = false;
  // Binary frames (proto/messages_binary.h): the HelloAck says the server
  // reads and writes them, and a worker whose hello says it does too gets
  // its assignments and acks in them. Off: JSON text only, as before them
  // (`drover server --worker-json`, to read a capture of the traffic).
  bool binary = true;
  // How long a file grant in an assignment stays valid (net/grant.h): the
  // worker fetches its inputs as the assignment arrives.
  Duration grant_ttl = Seconds(600);
  // The server's file store: a CheckpointSaved naming a file it does not
  // hold is dropped (the worker uploads it again next round). Null: every
  // CheckpointSaved is dropped.
  const FileStore* files = nullptr;
  // The most a task's outputs may add up to when its spec sets no
  // max_output (ServerConfig::max_output_bytes; 0 = none).
  uint64_t max_output_bytes = 0;
  // Reads the time for grants (Now) and for workers' silence (Monotonic).
  const Clock* clock = &SystemClock();
};

// Where log traffic from workers goes (log_relay.h).
struct LogHandlers {
  std::function<void(WorkerId, const proto::LogChunk&)> chunk;
  std::function<void(WorkerId, const proto::LogFrame&)> frame;
  std::function<void(WorkerId)> disconnected;
};

class WorkerChannel {
 public:
  WorkerChannel(net::EventLoop& loop, CoreDriver& driver, WorkerRegistry& registry,
                WorkerChannelOptions options);
  ~WorkerChannel();
  WorkerChannel(const WorkerChannel&) = delete;
  WorkerChannel& operator=(const WorkerChannel&) = delete;

  void SetLogHandlers(LogHandlers handlers) { log_ = std::move(handlers); }
  // Told which jobs' outputs a worker keeps (OutputRetention::Kept).
  using OutputsKeptHandler = std::function<void(WorkerId, const std::vector<JobId>&)>;
  void SetOutputsKeptHandler(OutputsKeptHandler handler) { outputs_kept_ = std::move(handler); }

  // Takes over a freshly upgraded WebSocket (the route's open handler).
  void Attach(std::shared_ptr<net::WsSession> session);

  // The driver's commands for workers.
  void Assign(const core::AssignTask& assign);
  void Kill(const core::KillTask& kill);
  // Asks the worker `copy.to` for a copy of a task's outputs (replicas):
  // each file with the holders' file services and a grant for it.
  void Replicate(const core::ReplicateOutputs& copy);

  // Sends `message` to a connected worker. kUnavailable when it is not
  // connected.
  Status Send(WorkerId worker, const proto::ServerMessage& message);

  bool connected(WorkerId worker) const { return workers_.count(worker) > 0; }
  size_t connection_count() const { return conns_.size(); }
  // Exit -> next start on each worker, from the workers' timestamps.
  const HandoffStats& handoffs() const { return handoffs_; }
  // Idle-desktop workers: from an owner's input to every task there frozen,
  // as the workers measured it (proto::Owner::freeze_us), in seconds.
  const metrics::PromHistogram& owner_freeze() const { return owner_freeze_; }
  // Health failures the workers reported, by kind ("disk", "program" as the
  // worker said; "gpu" per GPU found sick): each change into one counts.
  const std::map<std::string, uint64_t>& health_failures() const { return health_failures_; }
  // How many times the worker registry's file was written.
  uint64_t registry_writes() const { return registry_.writes(); }
  // The public key workers verify file grants with (empty: none could be
  // made, and no worker serves files).
  std::string grant_key() const;
  // Where `worker` serves files, as its latest Hello said (kept after it
  // disconnects); nullopt when it serves none.
  std::optional<proto::FileSource> FileSourceOf(WorkerId worker) const;
  // The server's file store (null when it keeps none).
  const FileStore* files() const { return options_.files; }
  // A grant for `requester` ("w12", or "client" for `drover get`) to fetch
  // the file `sha256`, valid for options.grant_ttl; empty without a key.
  std::string Grant(const std::string& sha256, const std::string& requester) const;

  // Sends the assignments made so far in this turn (one Assign per worker).
  // Called by the shell at the end of each core turn; otherwise a posted
  // flush sends them.
  void FlushAssigns();

  // Closes every connection; no WorkerLost is sent afterwards.
  void Stop();

 private:
  struct Conn {
    std::shared_ptr<net::WsSession> session;
    WorkerId worker = 0;  // 0 until Hello
    Duration last_heard;  // Clock::Monotonic
    std::string unhealthy;  // as its last heartbeat said, for the log
    std::map<uint32_t, std::string> sick_gpus;  // likewise
    // It reads batch frames (Hello::batches): what is sent to it in a burst
    // waits here for the end of the loop's turn and goes out as one frame.
    bool batches = false;
    std::vector<proto::WireMessage> out;
    // It reads binary frames (Hello::binary, and this server's own).
    bool binary = false;
    // It resolves numbered commands (Hello::argv_ids): those sent to it
    // whole, each command's arguments joined by NULs, and their numbers.
    bool argv_ids = false;
    std::unordered_map<std::string, uint32_t> argv_sent;
    bool rejected = false;  // Reject closed it: the rest of its frame is not read
    // Its hello waits for the registry's write and its turn (CommitRegistry,
    // ContinueAdmissions); what it sends meanwhile waits here, up to
    // kMaxEarlyMessages.
    bool admitting = false;
    std::vector<proto::WorkerMessage> early;
  };
  // A hello whose record is staged in the registry, not yet written.
  struct Admission {
    uint64_t conn;
    proto::Hello hello;
    WorkerId worker;
  };
  static constexpr size_t kMaxEarlyMessages = 256;
  static constexpr size_t kAdmissionsPerTurn = 32;

  void OnText(uint64_t conn, const std::string& text);
  // A frame from proto::FramesFor, as text or binary.
  static void SendFrame(Conn& conn, proto::WireMessage frame);
  // The messages of one frame, text or binary, in order.
  void OnFrame(uint64_t conn, Result<std::vector<proto::WorkerMessage>> decoded);
  // A command sent to `conn` before goes by its number alone; the first
  // kMaxArgvIds others are numbered as they go whole.
  void NumberCommands(Conn& conn, std::vector<proto::Assignment>& tasks);
  void OnMessage(uint64_t conn, proto::WorkerMessage& message);
  // Sends each batching connection's waiting messages, one frame each
  // (several when they exceed a frame).
  void FlushBatches();
  void OnBinary(uint64_t conn, const std::string& data);
  void OnClosed(uint64_t conn, const Status& status);
  void Reject(uint64_t conn, const Status& why);
  void OnHello(uint64_t conn, proto::Hello& hello);
  // The rest of a hello, once `worker` is durably active.
  void Admitted(uint64_t conn, proto::Hello& hello, WorkerId worker);
  // Writes the registry's staged changes in one write, then goes on with
  // the hellos that waited for it (or refuses them if it failed).
  void CommitRegistry();
  // Goes on with up to kAdmissionsPerTurn durable hellos, in order; posts
  // itself while more wait.
  void ContinueAdmissions();
  // Whether a hello of `worker` waits for the registry or its turn.
  bool Admitting(WorkerId worker) const;
  void OnFinished(WorkerId worker, std::vector<proto::FinishedTask> tasks);
  void OnCheckpointSaved(WorkerId worker, proto::CheckpointSaved& saved);
  // Tells the outputs-kept handler of the jobs of `tasks` with outputs.
  void NoteOutputs(WorkerId worker, const std::vector<proto::FinishedTask>& tasks);
  // Sends `ack` to the worker once every record appended so far is durable.
  void AckWhenDurable(WorkerId worker, proto::Ack ack);
  void ArmSilenceCheck();
  void CheckSilence();

  net::EventLoop& loop_;
  CoreDriver& driver_;
  WorkerRegistry& registry_;
  WorkerChannelOptions options_;
  LogHandlers log_;
  OutputsKeptHandler outputs_kept_;
  bool stopped_ = false;

  std::unordered_map<uint64_t, Conn> conns_;     // by session id
  std::unordered_map<WorkerId, uint64_t> workers_;  // connected worker -> session id
  std::map<WorkerId, std::unique_ptr<net::Timer>> lost_timers_;
  net::Timer silence_timer_;
  std::shared_ptr<net::ReadPacer> pacer_;
  std::map<WorkerId, std::vector<proto::Assignment>> pending_;  // this turn's batch
  OncePerTurn assign_flush_{loop_, [this] { FlushAssigns(); }};
  OncePerTurn batch_flush_{loop_, [this] { FlushBatches(); }};
  // The hellos of a burst share one registry write, at the loop's idle point.
  std::vector<Admission> admissions_;  // staged, not yet written
  std::deque<Admission> durable_;      // written, waiting for their turn
  OncePerTurn registry_commit_{loop_, [this] { CommitRegistry(); }, OncePerTurn::kWhenIdle};
  OncePerTurn admit_next_{loop_, [this] { ContinueAdmissions(); }};
  std::vector<uint64_t> batching_;  // connections with messages waiting
  HandoffStats handoffs_;
  std::map<std::string, uint64_t> health_failures_{{"disk", 0}, {"program", 0}, {"gpu", 0}};
  metrics::PromHistogram owner_freeze_{metrics::LatencyBuckets()};
  // The data plane: the key file grants are signed with, and where each
  // worker serves files (kept after it disconnects: it may still serve).
  std::unique_ptr<net::GrantSigner> grants_;
  std::unordered_map<WorkerId, proto::FileSource> file_sources_;
  FileGrants file_grants_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace drover::server

#endif  // DROVER_SERVER_WORKER_CHANNEL_H_
