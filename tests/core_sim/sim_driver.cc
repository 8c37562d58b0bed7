#include "core_sim/sim_driver.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <type_traits>

#include "common/quantity.h"
#include "core/commands.h"
#include "core/testing/restore_check.h"

namespace drover::core_sim {

using core::TaskState;

namespace {

struct GpuModel {
  const char* name;
  uint64_t memory;
};
constexpr GpuModel kModels[] = {{"NVIDIA A100-SXM4-80GB", 80 * kGiB},
                                {"NVIDIA GeForce RTX 4090", 24 * kGiB},
                                {"Tesla T4", 16 * kGiB}};

std::string Describe(const core::Event& event) {
  return std::visit(
      [](const auto& e) -> std::string {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, core::WorkerJoined>) return "join w" + std::to_string(e.worker);
        if constexpr (std::is_same_v<T, core::WorkerAttached>) return "attach w" + std::to_string(e.worker);
        if constexpr (std::is_same_v<T, core::WorkerHeartbeat>) return "heartbeat w" + std::to_string(e.worker);
        if constexpr (std::is_same_v<T, core::WorkerLost>) return "lost w" + std::to_string(e.worker);
        if constexpr (std::is_same_v<T, core::WorkerDrained>) {
          return std::string(e.drained ? "drain" : "undrain") + " w" + std::to_string(e.worker);
        }
        if constexpr (std::is_same_v<T, core::JobSubmitted>) {
          return "submit " + std::to_string(e.spec ? e.spec->TaskCount() : 0) + " tasks";
        }
        if constexpr (std::is_same_v<T, core::CancelJob>) return "cancel job " + std::to_string(e.job);
        if constexpr (std::is_same_v<T, core::CancelTask>) return "cancel task " + e.task.ToString();
        if constexpr (std::is_same_v<T, core::TaskStarted>) {
          return "started " + e.task.ToString() + "#" + std::to_string(e.attempt);
        }
        if constexpr (std::is_same_v<T, core::TaskFinished>) {
          return "finished " + e.task.ToString() + "#" + std::to_string(e.attempt) + " exit " +
                 std::to_string(e.outcome.exit_code) + " signal " + std::to_string(e.outcome.signal) +
                 (e.outcome.oom_killed ? " oom" : "");
        }
        if constexpr (std::is_same_v<T, core::LeaseGranted>) {
          return "granted " + e.task.ToString() + "#" + std::to_string(e.attempt);
        }
        if constexpr (std::is_same_v<T, core::LeaseRejected>) {
          return "rejected " + e.task.ToString() + "#" + std::to_string(e.attempt);
        }
        if constexpr (std::is_same_v<T, core::LeaseFreed>) {
          return std::string(e.expired ? "expired " : "deleted ") + e.task.ToString() + "#" +
                 std::to_string(e.attempt);
        }
        if constexpr (std::is_same_v<T, core::Tick>) return "tick";
        if constexpr (std::is_same_v<T, core::TaskRefused>) {
          return "refused " + e.task.ToString() + "#" + std::to_string(e.attempt);
        }
        if constexpr (std::is_same_v<T, core::WorkerPaused>) {
          return std::string(e.paused ? "pause" : "unpause") + " w" + std::to_string(e.worker);
        }
        if constexpr (std::is_same_v<T, core::CheckpointSaved>) {
          return "checkpoint " + e.task.ToString() + "#" + std::to_string(e.attempt) + " on w" +
                 std::to_string(e.worker);
        }
        if constexpr (std::is_same_v<T, core::OutputsReplicated>) {
          return "replicated " + e.task.ToString() + "#" + std::to_string(e.attempt) + " on w" +
                 std::to_string(e.worker);
        }
        if constexpr (std::is_same_v<T, core::UserPolicyChanged>) return "user policy";
        if constexpr (std::is_same_v<T, core::RetryJob>)
          return "retry job " + std::to_string(e.job);
        if constexpr (std::is_same_v<T, core::ForgetCacheEntries>) return "forget cache entries";
      },
      event);
}

}  // namespace

std::string SimReport::ToString() const {
  std::string s =
      std::to_string(events) + " events (" + std::to_string(random_events) + " random), " +
      std::to_string(jobs) + " jobs, " + std::to_string(tasks) + " tasks, " +
      std::to_string(claims) + " claims (" + std::to_string(rejections) + " rejected), " +
      std::to_string(assigns) + " assigns, " + std::to_string(kills) + " kills (" +
      std::to_string(vacates) + " vacates), " + std::to_string(losses) + " losses, " +
      std::to_string(rejoins) + " rejoins, " + std::to_string(expiries) + " expiries (" +
      std::to_string(dropped_notifications) + " notifications dropped), " + std::to_string(jumps) +
      " clock jumps, " + std::to_string(errors) + " refused events, " + std::to_string(reruns) +
      " reruns, " + std::to_string(retried_jobs) + " jobs retried (" +
      std::to_string(retried_tasks) + " tasks), " + std::to_string(copies) + " copies, " +
      std::to_string(restore_checks) + " restore checks (" + std::to_string(sliced_snapshots) +
      " sliced snapshots), " + FormatDuration(simulated) + " simulated; into:";
  for (int i = 0; i < core::kTaskStateCount; ++i) {
    s += " " + std::string(core::TaskStateName(static_cast<TaskState>(i))) + "=" +
         std::to_string(transitions[i]);
  }
  s += "; final:";
  for (int i = 0; i < core::kTaskStateCount; ++i) {
    if (final_states[i] == 0) continue;
    s += " " + std::string(core::TaskStateName(static_cast<TaskState>(i))) + "=" +
         std::to_string(final_states[i]);
  }
  return s;
}

SimDriver::SimDriver(SimOptions options) : options_(options), rng_(options.seed) {
  start_ = clock_.Now();
  core::SchedulerConfig config;
  config.max_retry_backoff = Seconds(60);
  config.users.quotas["alice"] = core::UserQuota{0, 0, 5};
  config.users.quotas["bob"] = core::UserQuota{6000, 200, 0};
  if (options_.preempt) {
    config.preempt_priority = 2;
    config.preempt_gap = 2;
    config.preempt_cooldown = Seconds(30);
  }
  scheduler_ = std::make_unique<core::Scheduler>(std::move(config));
  pump_ =
      std::make_unique<core::EventPump>(*scheduler_, static_cast<core::EventPump::Shell&>(*this));

  // Two anchors that stay in the pool: every request generated fits one of
  // them, so every task can finish once the world calms down.
  core::WorkerResources a;
  a.name = "anchor-a100";
  for (uint32_t c = 0; c < 32; ++c) a.cpu_cores.push_back(c);
  a.mem_bytes = 256 * kGiB;
  for (uint32_t g = 0; g < 4; ++g) {
    a.gpus.push_back(core::GpuDevice{g, "GPU-a-" + std::to_string(g), kModels[0].name, kModels[0].memory});
  }
  a.counters = {{"licenses", 4}};
  a.labels = {{"os", "linux"}, {"zone", "a"}};
  core::WorkerResources b;
  b.name = "anchor-4090";
  for (uint32_t c = 4; c < 20; ++c) b.cpu_cores.push_back(c);
  b.mem_bytes = 64 * kGiB;
  for (uint32_t g = 0; g < 2; ++g) {
    b.gpus.push_back(core::GpuDevice{g + 2, "GPU-b-" + std::to_string(g), kModels[1].name, kModels[1].memory});
  }
  b.counters = {{"licenses", 2}};
  b.labels = {{"os", "linux"}, {"zone", "b"}};
  anchors_ = {a, b};
  while (request_pool_.size() < 14) {
    core::ResourceRequest r = RandomRequest();
    if (FitsAnchor(r)) request_pool_.push_back(std::move(r));
  }
}

SimDriver::~SimDriver() = default;

// --- randomness ----------------------------------------------------------------------

int64_t SimDriver::Uniform(int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
}

bool SimDriver::Chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

Duration SimDriver::Between(Duration lo, Duration hi) {
  return Duration(Uniform(lo.count(), hi.count()));
}

core::WorkerResources SimDriver::RandomWorker(uint32_t n) {
  if (n <= anchors_.size()) return anchors_[n - 1];
  core::WorkerResources r;
  r.name = "w" + std::to_string(n);
  const uint32_t first = static_cast<uint32_t>(Uniform(0, 4));
  const uint32_t count = static_cast<uint32_t>(Uniform(2, 16));
  for (uint32_t c = 0; c < count; ++c) r.cpu_cores.push_back(first + c * (Chance(0.2) ? 2 : 1) + c);
  std::sort(r.cpu_cores.begin(), r.cpu_cores.end());
  r.cpu_cores.erase(std::unique(r.cpu_cores.begin(), r.cpu_cores.end()), r.cpu_cores.end());
  r.mem_bytes = static_cast<uint64_t>(Uniform(4, 128)) * kGiB;
  const int gpus = static_cast<int>(std::vector<int>{0, 0, 1, 2, 4}[Uniform(0, 4)]);
  for (int g = 0; g < gpus; ++g) {
    const GpuModel& m = kModels[Uniform(0, 2)];
    r.gpus.push_back(core::GpuDevice{static_cast<uint32_t>(g), "GPU-" + r.name + "-" + std::to_string(g),
                                     m.name, m.memory});
  }
  const int64_t licenses = Uniform(0, 3);
  if (licenses > 0) r.counters["licenses"] = licenses;
  r.labels = {{"os", "linux"}, {"zone", Chance(0.5) ? "a" : "b"}};
  return r;
}

core::ResourceRequest SimDriver::RandomRequest() {
  core::ResourceRequest r;
  r.cpus_milli = std::vector<int64_t>{0, 250, 1000, 1000, 1500, 2000, 4000}[Uniform(0, 6)];
  r.mem_bytes = std::vector<uint64_t>{0, 512 * kMiB, 2 * kGiB, 8 * kGiB}[Uniform(0, 3)];
  if (Chance(0.4)) {
    r.gpus = std::vector<int64_t>{25, 50, 100, 200}[Uniform(0, 3)];
    r.gpu_mem_bytes = r.IsGpuShare() ? std::vector<uint64_t>{0, 8 * kGiB, 20 * kGiB}[Uniform(0, 2)]
                                     : std::vector<uint64_t>{0, 16 * kGiB, 40 * kGiB}[Uniform(0, 2)];
    const int types = static_cast<int>(Uniform(0, 3));
    if (types == 1) r.gpu_types = {"A100"};
    if (types == 2) r.gpu_types = {"4090"};
    if (types == 3) r.gpu_types = {"a100", "T4"};
  }
  if (Chance(0.2)) r.counters["licenses"] = Uniform(1, 2);
  if (Chance(0.2)) r.labels["os"] = "linux";
  if (Chance(0.15)) r.labels["zone"] = Chance(0.5) ? "a" : "b";
  return r;
}

bool SimDriver::FitsAnchor(const core::ResourceRequest& r) const {
  for (const core::WorkerResources& w : anchors_) {
    bool ok = w.cpu_cores.size() >= r.CoreCount() && w.mem_bytes >= r.mem_bytes;
    for (const auto& [k, v] : r.labels) ok = ok && w.labels.count(k) && w.labels.at(k) == v;
    for (const auto& [k, v] : r.counters) ok = ok && w.counters.count(k) && w.counters.at(k) >= v;
    uint32_t gpus = 0;
    for (const core::GpuDevice& g : w.gpus) {
      if (g.memory_bytes >= r.gpu_mem_bytes && core::GpuModelAccepted(r.gpu_types, g.model)) ++gpus;
    }
    if (ok && gpus >= r.GpuCount()) return true;
  }
  return false;
}

std::shared_ptr<const core::JobSpec> SimDriver::RandomJob() {
  auto spec = std::make_shared<core::JobSpec>();
  static const char* kUsers[] = {"alice", "bob", "carol", "dave"};
  spec->user = kUsers[Uniform(0, 3)];
  spec->name = "job-" + std::to_string(report_.jobs);
  const int groups = static_cast<int>(Uniform(1, 4));
  for (int g = 0; g < groups; ++g) {
    core::TaskGroupSpec group;
    group.name = "g" + std::to_string(g);
    group.command = {"run", "{index}"};
    group.resources = request_pool_[Uniform(0, static_cast<int64_t>(request_pool_.size()) - 1)];
    group.priority = static_cast<int32_t>(Uniform(-2, 2));
    group.retries = static_cast<uint32_t>(Uniform(0, 2));
    group.retry_backoff = Between(Seconds(1), Seconds(8));
    if (Chance(0.25)) group.timeout = Between(Seconds(5), Seconds(60));
    for (int d = 0; d < g; ++d) {
      if (Chance(0.35)) group.depends_on.push_back("g" + std::to_string(d));
    }
    if (Chance(0.6)) {
      group.array = core::ArrayRange{Uniform(0, 10), static_cast<uint32_t>(Uniform(1, 12)),
                                     Chance(0.3) ? 2 : 1};
    }
    if (Chance(0.2)) group.replicas = 2;  // copies of its outputs (core/replicas.cc)
    spec->groups.push_back(std::move(group));
  }
  const std::vector<JobId> jobs = ledger_.JobIds();
  if (!jobs.empty() && Chance(0.08)) {
    spec->after_jobs.push_back(jobs[Uniform(std::max<int64_t>(0, jobs.size() - 10), jobs.size() - 1)]);
  }
  if (!jobs.empty() && Chance(0.06)) {
    const JobId j = jobs[Uniform(std::max<int64_t>(0, jobs.size() - 10), jobs.size() - 1)];
    spec->after_tasks.push_back(TaskId{j, static_cast<uint32_t>(Uniform(0, ledger_.TaskCount(j) - 1))});
  }
  return spec;
}

// --- the world -------------------------------------------------------------------------

void SimDriver::Fail(const std::string& what) {
  if (violation_.empty()) violation_ = what;
}

Status SimDriver::Failure() const {
  const std::string& what = violation_.empty() ? ledger_.violation() : violation_;
  return Internal("seed " + std::to_string(options_.seed) + ", event " +
                  std::to_string(report_.events) + " (" + Describe(last_event_) + " at +" +
                  FormatDuration(clock_.Now() - start_) + "): " + what);
}

Status SimDriver::Deliver(core::Event event) {
  ++report_.events;
  if (random_phase_) ++report_.random_events;
  last_event_ = event;
  return pump_->Push(std::move(event));
}

void SimDriver::Handled(const Status& status, const core::Outbox& out) {
  if (options_.trace) {
    std::fprintf(stderr, "[%llu +%s] %s%s\n", static_cast<unsigned long long>(report_.events),
                 FormatDuration(clock_.Now() - start_).c_str(), Describe(last_event_).c_str(),
                 status.ok() ? "" : (" -> " + status.ToString()).c_str());
    for (const core::Command& c : out) {
      std::fprintf(stderr, "    %s\n", core::DescribeCommand(c).c_str());
    }
  }
  if (!status.ok()) {
    ++report_.errors;
    if (!out.empty())
      Fail("the core refused the event (" + status.ToString() + ") but emitted commands");
  }
}

void SimDriver::Execute(core::Command& command) {
  ledger_.OnCommand(command);
  Apply(command);
}

void SimDriver::Executed() {
  ledger_.EndOfEvent(*scheduler_, leases_);
  if (report_.events % options_.full_check_every == 0) ledger_.FullCheck(*scheduler_);
  if (report_.events % options_.restore_check_every == 0) CheckRestore();
  SliceSnapshot();
}

std::unique_ptr<core::Scheduler> SimDriver::Restored(const std::vector<core::Record>& records,
                                                     const std::string& what) {
  std::string error;
  std::unique_ptr<core::Scheduler> restored =
      core::testing::RestoredFrom(records, clock_.Now(), scheduler_->config(), &error);
  if (!restored) Fail(what + " does not restore: " + error);
  return restored;
}

void SimDriver::SliceSnapshot() {
  if (!slicing_) return;
  // A few tasks per slice, so that many events fall between the slices.
  const size_t max_tasks = std::uniform_int_distribution<size_t>(1, 8)(rng_);
  if (!scheduler_->SnapshotSlice(*slicing_, max_tasks, sliced_)) return;
  slicing_.reset();
  ++report_.sliced_snapshots;
  sliced_.insert(sliced_.end(), sliced_follow_.begin(), sliced_follow_.end());
  sliced_follow_.clear();
  std::unique_ptr<core::Scheduler> from_journal = Restored(journal_, "the journal");
  if (!from_journal) return;
  std::unique_ptr<core::Scheduler> from_slices = Restored(sliced_, "the snapshot taken in slices");
  sliced_.clear();
  if (!from_slices) return;
  const std::string diff = core::testing::FirstDifference(*from_journal, *from_slices);
  if (!diff.empty()) {
    Fail("restored from the journal and from the snapshot taken in slices differ: " + diff);
  }
}

void SimDriver::Schedule(Action action, Duration after) {
  action.due_us = ToMicros(clock_.Now()) + after.count();
  action.seq = action_seq_++;
  actions_.push(action);
}

void SimDriver::CheckRestore() {
  ++report_.restore_checks;
  if (!slicing_) {
    slicing_ = scheduler_->StartSnapshot();
    sliced_.clear();
    sliced_follow_.clear();
  }
  std::unique_ptr<core::Scheduler> from_journal = Restored(journal_, "the journal");
  if (!from_journal) return;
  std::unique_ptr<core::Scheduler> from_snapshot = Restored(scheduler_->Snapshot(), "the snapshot");
  if (!from_snapshot) return;
  // Fair-share use comes back from the journal as the live core charged it
  // (a snapshot keeps no assignment times, so only the journal is exact).
  const std::vector<core::FairShareLine> live = scheduler_->FairShares(clock_.Now());
  const std::vector<core::FairShareLine> back = from_journal->FairShares(clock_.Now());
  if (live.size() != back.size()) {
    return Fail("the journal restores " + std::to_string(back.size()) + " fair-share users, live " +
                std::to_string(live.size()));
  }
  for (size_t i = 0; i < live.size(); ++i) {
    if (live[i].user != back[i].user ||
        std::abs(live[i].use_s - back[i].use_s) > 1e-6 * std::max(1.0, live[i].use_s)) {
      return Fail("fair-share use of " + live[i].user + " restored from the journal is " +
                  std::to_string(back[i].use_s) + " (" + back[i].user + "), live " +
                  std::to_string(live[i].use_s));
    }
  }
  const std::string diff = core::testing::FirstDifference(*from_journal, *from_snapshot);
  if (diff.empty()) return;
  // The differing task's records, from the journal and from the snapshot.
  std::string records;
  if (size_t at = diff.find("task "); at != std::string::npos) {
    Result<TaskId> task = ParseTaskId(diff.substr(at + 5, diff.find(':', at) - at - 5));
    auto add = [&](const char* from, const core::Record& r) {
      const TaskId* t = nullptr;
      if (const auto* x = std::get_if<core::TaskRecord>(&r)) t = &x->task;
      if (const auto* x = std::get_if<core::OutcomeRecord>(&r)) t = &x->task;
      if (t != nullptr && task.ok() && *t == *task) {
        records += std::string("\n  ") + from + core::testing::internal::Describe(r);
      }
    };
    for (const core::Record& r : journal_) add("journal:  ", r);
    for (const core::Record& r : scheduler_->Snapshot()) add("snapshot: ", r);
  }
  Fail("restored from the journal and from the snapshot differ: " + diff + records);
}

void SimDriver::Apply(const core::Command& command) {
  if (const auto* persist = std::get_if<core::Persist>(&command)) {
    journal_.push_back(persist->record);
    if (slicing_ && core::Scheduler::SnapshotFollows(*slicing_, persist->record)) {
      sliced_follow_.push_back(persist->record);
    }
  }
  if (const auto* claim = std::get_if<core::ClaimLeases>(&command)) {
    ++report_.claims;
    if (!leases_.CanClaim(*claim)) {
      for (const core::LeaseKey& key : claim->keys) {
        if (auto holder = leases_.Holder(key)) {
          return Fail("claim of " + claim->task.ToString() + "#" + std::to_string(claim->attempt) +
                      " wants " + key.ToString() + " which " + holder->task.ToString() + "#" +
                      std::to_string(holder->attempt) + " still holds");
        }
      }
    }
    const bool granted = !Chance(random_phase_ ? 0.05 : 0.01) && leases_.Claim(*claim, clock_.Now());
    if (!granted) ++report_.rejections;
    ledger_.ClaimAnswered(claim->task, claim->attempt, granted);
    Action a;
    a.kind = ActionKind::kAnswer;
    a.task = claim->task;
    a.attempt = claim->attempt;
    a.flag = granted;
    Schedule(a, Between(Duration::zero(), Millis(200)));
  } else if (const auto* copy = std::get_if<core::ReplicateOutputs>(&command)) {
    // The worker fetches the files from a live holder and reports its copy;
    // one that dies meanwhile, or finds no holder up, never does.
    if (copy->to == 0 || copy->to > workers_.size()) return Fail("replicate to unknown worker");
    if (std::find(copy->from.begin(), copy->from.end(), copy->to) != copy->from.end()) {
      return Fail("replicate to a worker that holds the files: " + core::DescribeCommand(command));
    }
    const SimWorker& to = workers_[copy->to - 1];
    bool source = false;
    for (WorkerId from : copy->from) {
      source = source || (from >= 1 && from <= workers_.size() && workers_[from - 1].alive);
    }
    if (!to.alive || !source) return;
    Action a;
    a.kind = ActionKind::kReplicated;
    a.task = copy->task;
    a.attempt = copy->attempt;
    a.worker = copy->to;
    a.incarnation = to.incarnation;
    Schedule(a, Between(Millis(100), Seconds(5)));
  } else if (const auto* assign = std::get_if<core::AssignTask>(&command)) {
    ++report_.assigns;
    if (assign->worker == 0 || assign->worker > workers_.size()) return Fail("assign to unknown worker");
    SimWorker& w = workers_[assign->worker - 1];
    if (!w.alive) return;  // the ledger reports an assign to a lost worker
    if (w.tasks.count(assign->task)) {
      return Fail("worker " + std::to_string(w.id) + " told to run " + assign->task.ToString() +
                  " which it runs already");
    }
    const uint64_t token = ++token_seq_;
    w.tasks[assign->task] = WorkerTask{assign->attempt, token};
    Action a;
    a.kind = ActionKind::kStart;
    a.task = assign->task;
    a.attempt = assign->attempt;
    a.worker = w.id;
    a.incarnation = w.incarnation;
    a.token = token;
    Schedule(a, Between(Duration::zero(), Millis(300)));
  } else if (const auto* kill = std::get_if<core::KillTask>(&command)) {
    ++report_.kills;
    if (kill->vacate) ++report_.vacates;
    if (kill->worker == 0 || kill->worker > workers_.size()) return Fail("kill on unknown worker");
    SimWorker& w = workers_[kill->worker - 1];
    auto it = w.tasks.find(kill->task);
    if (!w.alive || it == w.tasks.end() || it->second.attempt != kill->attempt) return;
    it->second.token = ++token_seq_;
    Action a;
    a.kind = ActionKind::kFinish;
    a.task = kill->task;
    a.attempt = kill->attempt;
    a.worker = w.id;
    a.incarnation = w.incarnation;
    a.token = it->second.token;
    a.ending = Ending::kKilled;
    Schedule(a, Between(Duration::zero(), Seconds(1)));
  } else if (const auto* renew = std::get_if<core::RenewLeases>(&command)) {
    leases_.Renew(*renew, clock_.Now());
  } else if (const auto* release = std::get_if<core::ReleaseLeases>(&command)) {
    if (leases_.Release(*release)) {
      Action a;
      a.kind = ActionKind::kFreed;
      a.task = release->task;
      a.attempt = release->attempt;
      a.flag = false;
      Schedule(a, Between(Duration::zero(), Millis(100)));
    }
  }
}

void SimDriver::RunAction(const Action& a) {
  switch (a.kind) {
    case ActionKind::kAnswer:
      if (a.flag) {
        ledger_.GrantDelivered(a.task, a.attempt);
        (void)Deliver(core::LeaseGranted{a.task, a.attempt});
      } else {
        (void)Deliver(core::LeaseRejected{a.task, a.attempt});
      }
      return;
    case ActionKind::kFreed:
      (void)Deliver(core::LeaseFreed{a.task, a.attempt, a.flag});
      return;
    case ActionKind::kReplicated: {
      const SimWorker& to = workers_[a.worker - 1];
      if (to.alive && to.incarnation == a.incarnation) {
        ++report_.copies;
        (void)Deliver(core::OutputsReplicated{a.task, a.attempt, a.worker});
      }
      return;
    }
    case ActionKind::kStart:
    case ActionKind::kFinish:
      break;
  }
  SimWorker& w = workers_[a.worker - 1];
  auto it = w.tasks.find(a.task);
  if (!w.alive || w.incarnation != a.incarnation || it == w.tasks.end() ||
      it->second.token != a.token) {
    return;  // superseded (killed) or the worker crashed
  }
  if (a.kind == ActionKind::kStart) {
    it->second.token = ++token_seq_;
    Action finish = a;
    finish.kind = ActionKind::kFinish;
    finish.token = it->second.token;
    const int64_t roll = Uniform(0, 99);
    finish.ending = roll < 78   ? Ending::kSuccess
                    : roll < 87 ? Ending::kExitCode
                    : roll < 93 ? Ending::kOom
                                : Ending::kSignal;
    const Duration run = Chance(0.1) ? Between(Seconds(40), Seconds(150))
                                     : Between(Millis(100), Seconds(40));
    Schedule(finish, run);
    (void)Deliver(core::TaskStarted{a.task, a.attempt});
    // Some save a checkpoint as they start (kept by the core, journaled,
    // handed to the next attempt).
    if (Chance(0.2)) {
      (void)Deliver(core::CheckpointSaved{
          a.task, a.attempt, a.worker, {core::OutputFile{"step", 8, std::string(64, 'c')}}});
    }
    return;
  }
  w.tasks.erase(it);
  core::TaskOutcome outcome;
  outcome.usage.wall = Seconds(1);
  switch (a.ending) {
    case Ending::kSuccess:
      // Some leave files on this worker: lose it, and a dependent that has
      // not started needs them rerun (core/lineage.cc).
      if (Chance(0.3)) outcome.outputs = {core::OutputFile{"out.bin", 1, std::string(64, 'a')}};
      break;
    case Ending::kExitCode:
      outcome.exit_code = static_cast<int32_t>(Uniform(1, 3));
      break;
    case Ending::kOom:
      outcome.oom_killed = true;
      outcome.signal = 9;
      outcome.usage.peak_mem_bytes = 3 * kGiB;
      break;
    case Ending::kSignal:
      outcome.signal = 11;
      break;
    case Ending::kKilled:
      outcome.signal = 15;
      break;
  }
  (void)Deliver(core::TaskFinished{a.task, a.attempt, std::move(outcome)});
}

void SimDriver::Advance(Duration d, bool tick) {
  const Time target = clock_.Now() + d;
  std::vector<LeaseTable::Freed> freed;
  while (!failed()) {
    const std::optional<Time> expiry = leases_.NextExpiry();
    const bool have_action = !actions_.empty() && actions_.top().due_us <= ToMicros(target);
    const bool have_expiry = expiry && *expiry <= target;
    if (!have_action && !have_expiry) break;
    if (have_expiry && (!have_action || ToMicros(*expiry) <= actions_.top().due_us)) {
      clock_.Set(std::max(clock_.Now(), *expiry));
      freed.clear();
      leases_.ExpireUntil(clock_.Now(), freed);
      for (const LeaseTable::Freed& f : freed) {
        ++report_.expiries;
        if (Chance(0.1)) {  // a lost notification: the core's fallback must cope
          ++report_.dropped_notifications;
          continue;
        }
        Action a;
        a.kind = ActionKind::kFreed;
        a.task = f.owner.task;
        a.attempt = f.owner.attempt;
        a.flag = true;
        Schedule(a, Between(Duration::zero(), Millis(500)));
      }
      continue;
    }
    Action a = actions_.top();
    actions_.pop();
    clock_.Set(std::max(clock_.Now(), TimeFromMicros(a.due_us)));
    RunAction(a);
  }
  if (failed()) return;
  clock_.Set(target);
  if (tick) (void)Deliver(core::Tick{});
}

// --- random steps --------------------------------------------------------------------------

SimDriver::SimWorker* SimDriver::RandomWorkerWhere(const std::function<bool(const SimWorker&)>& pred) {
  std::vector<SimWorker*> matching;
  for (SimWorker& w : workers_) {
    if (pred(w)) matching.push_back(&w);
  }
  if (matching.empty()) return nullptr;
  return matching[Uniform(0, static_cast<int64_t>(matching.size()) - 1)];
}

void SimDriver::JoinNew() {
  SimWorker w;
  w.id = static_cast<WorkerId>(workers_.size() + 1);
  w.resources = RandomWorker(w.id);
  w.alive = true;
  workers_.push_back(std::move(w));
  SimWorker& added = workers_.back();
  ledger_.WorkerJoined(added.id, added.resources);
  Status st = Deliver(core::WorkerJoined{added.id, added.resources});
  if (!st.ok()) Fail("join refused: " + st.ToString());
}

void SimDriver::Rejoin(SimWorker& w) {
  ++report_.rejoins;
  w.alive = true;
  w.drained = false;
  ledger_.WorkerJoined(w.id, w.resources);
  Status st = Deliver(core::WorkerJoined{w.id, w.resources});
  if (!st.ok()) Fail("rejoin refused: " + st.ToString());
}

void SimDriver::Lose() {
  uint32_t alive = 0;
  for (const SimWorker& w : workers_) alive += w.alive ? 1 : 0;
  if (alive <= 2) return;
  SimWorker* w = RandomWorkerWhere([](const SimWorker& x) { return x.alive; });
  ++report_.losses;
  // The machine crashed: its processes and their reports are gone.
  w->alive = false;
  w->tasks.clear();
  ++w->incarnation;
  ledger_.WorkerLost(w->id);
  Status st = Deliver(core::WorkerLost{w->id});
  if (!st.ok()) Fail("loss refused: " + st.ToString());
}

void SimDriver::ToggleDrain() {
  SimWorker* w = RandomWorkerWhere([](const SimWorker& x) { return x.alive; });
  if (w == nullptr) return;
  w->drained = !w->drained;
  ledger_.WorkerDrained(w->id, w->drained);
  Status st = Deliver(core::WorkerDrained{w->id, w->drained});
  if (!st.ok()) Fail("drain refused: " + st.ToString());
}

void SimDriver::Heartbeat() {
  SimWorker* w = RandomWorkerWhere([](const SimWorker& x) { return x.alive; });
  if (w == nullptr) return;
  core::WorkerUtilization u;
  u.cpu_percent = static_cast<uint32_t>(Uniform(0, 100));
  u.mem_used_bytes = static_cast<uint64_t>(Uniform(0, 4)) * kGiB;
  Status st = Deliver(core::WorkerHeartbeat{w->id, std::move(u)});
  if (!st.ok()) Fail("heartbeat refused: " + st.ToString());
}

void SimDriver::Submit() {
  ++report_.jobs;
  std::shared_ptr<const core::JobSpec> spec = RandomJob();
  report_.tasks += spec->TaskCount();
  Status st = Deliver(core::JobSubmitted{0, std::move(spec)});
  if (!st.ok()) Fail("submission refused: " + st.ToString());
}

TaskId SimDriver::RandomTask() {
  const std::vector<JobId> jobs = ledger_.JobIds();
  if (jobs.empty()) return TaskId{1, 0};
  const JobId j = jobs[Uniform(std::max<int64_t>(0, jobs.size() - 15), jobs.size() - 1)];
  return TaskId{j, static_cast<uint32_t>(Uniform(0, ledger_.TaskCount(j) - 1))};
}

void SimDriver::CancelSomething() {
  const TaskId t = RandomTask();
  if (Chance(0.2)) {
    (void)Deliver(core::CancelJob{t.job});
    return;
  }
  const std::optional<TaskState> state = ledger_.StateOf(t);
  Status st = Deliver(core::CancelTask{t});
  if (state && !core::IsTerminal(*state) && !st.ok()) Fail("cancel refused: " + st.ToString());
}

void SimDriver::RetrySomething() {
  const JobId j = RandomTask().job;
  // The check and the event agree: what the check allows is done, what it
  // refuses is refused, and nothing changes then (Handled).
  const Result<uint64_t> check = scheduler_->CheckRetry(j);
  ledger_.RetryAsked(j);
  Status st = Deliver(core::RetryJob{j, "sim"});
  if (check.ok() != st.ok()) {
    Fail("CheckRetry said " + (check.ok() ? std::string("ok") : check.status().ToString()) +
         " but RetryJob said " + st.ToString());
  }
  if (st.ok()) ++report_.retried_jobs;
}

void SimDriver::Stale() {
  const TaskId t = RandomTask();
  const uint32_t bogus = ledger_.AttemptOf(t) + 5;
  core::Event e;
  switch (Uniform(0, 4)) {
    case 0: e = core::TaskStarted{t, bogus}; break;
    case 1: e = core::TaskFinished{t, bogus, core::TaskOutcome{}}; break;
    case 2: e = core::LeaseGranted{t, bogus}; break;
    case 3: e = core::LeaseRejected{t, bogus}; break;
    default: e = core::WorkerHeartbeat{999'999, {}}; break;
  }
  Status st = Deliver(std::move(e));
  if (st.ok()) Fail("the core accepted a stale or unknown report");
}

void SimDriver::Step() {
  // Weights of the random steps; time passing dominates, as in life.
  const int64_t roll = Uniform(0, 999);
  if (roll < 560) {
    Advance(Between(Duration::zero(), Millis(1500)));
  } else if (roll < 640) {
    Submit();
  } else if (roll < 800) {
    Heartbeat();
  } else if (roll < 822) {
    CancelSomething();
  } else if (roll < 830) {
    RetrySomething();
  } else if (roll < 845) {
    if (workers_.size() < options_.max_workers) JoinNew();
  } else if (roll < 857) {
    Lose();
  } else if (roll < 885) {
    if (SimWorker* w = RandomWorkerWhere([](const SimWorker& x) { return !x.alive; })) Rejoin(*w);
  } else if (roll < 905) {
    ToggleDrain();
  } else if (roll < 908) {
    ++report_.jumps;
    // A stalled server: no ticks, so no renewals, for longer than the TTL.
    Advance(Between(Seconds(20), Seconds(120)), /*tick=*/true);
  } else if (roll < 925) {
    Stale();
  } else {
    Advance(Between(Duration::zero(), Millis(300)));
  }
}

Status SimDriver::Drain() {
  random_phase_ = false;
  for (SimWorker& w : workers_) {
    if (!w.alive) Rejoin(w);
    if (failed()) return Failure();
    if (w.drained) {
      w.drained = false;
      ledger_.WorkerDrained(w.id, false);
      (void)Deliver(core::WorkerDrained{w.id, false});
    }
  }
  const Time deadline = clock_.Now() + Seconds(14 * 24 * 3600);
  while (ledger_.NonTerminalTasks() > 0 && !failed()) {
    if (clock_.Now() > deadline) {
      std::string stuck;
      int shown = 0;
      for (JobId j : ledger_.JobIds()) {
        for (uint32_t i = 0; i < ledger_.TaskCount(j) && shown < 5; ++i) {
          const std::optional<TaskState> s = ledger_.StateOf(TaskId{j, i});
          if (s && core::IsTerminal(*s)) continue;
          Result<std::string> why = scheduler_->Explain(TaskId{j, i});
          stuck += " " + TaskId{j, i}.ToString() + " (" + (why.ok() ? *why : why.status().ToString()) + ")";
          ++shown;
        }
      }
      // And what the core says every worker has free.
      for (WorkerId w : scheduler_->Workers()) {
        Result<core::WorkerInfo> info = scheduler_->GetWorker(w);
        if (!info.ok()) continue;
        stuck += "\n  w" + std::to_string(w) + ": free cores " +
                 std::to_string(info->free_cores.size()) + ", GPU shares";
        for (int64_t share : info->gpu_free_share) stuck += " " + std::to_string(share);
        stuck += ", " + std::to_string(info->tasks.size()) + " tasks";
      }
      Fail(std::to_string(ledger_.NonTerminalTasks()) +
           " tasks never finished after the world calmed down:" + stuck);
      break;
    }
    Advance(Between(Millis(100), Seconds(3)));
    if (Chance(0.2)) Heartbeat();
  }
  if (failed()) return Failure();
  ledger_.FullCheck(*scheduler_);
  CheckRestore();
  if (!failed() && leases_.size() != 0) {
    Fail(std::to_string(leases_.size()) + " leases still held after every task ended");
  }
  return failed() ? Failure() : Status::Ok();
}

Status SimDriver::Run() {
  for (uint32_t i = 0; i < std::min<uint32_t>(8, options_.max_workers); ++i) JoinNew();
  while (report_.events < options_.events && !failed()) Step();
  if (failed()) return Failure();
  ledger_.FullCheck(*scheduler_);
  if (failed()) return Failure();
  Status st = Drain();
  report_.transitions = ledger_.transitions();
  report_.reruns = ledger_.reruns();
  report_.retried_tasks = ledger_.retried();
  for (JobId j : ledger_.JobIds()) {
    for (uint32_t i = 0; i < ledger_.TaskCount(j); ++i) {
      if (auto s = ledger_.StateOf(TaskId{j, i})) ++report_.final_states[static_cast<int>(*s)];
    }
  }
  report_.simulated = clock_.Now() - start_;
  return st;
}

}  // namespace drover::core_sim
