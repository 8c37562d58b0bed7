#include "core_sim/ledger.h"

#include <algorithm>
#include <type_traits>

namespace drover::core_sim {

using core::TaskState;

namespace {

std::string Name(uint8_t state) {
  return state > static_cast<uint8_t>(TaskState::kCanceled)
             ? std::string("unknown")
             : std::string(core::TaskStateName(static_cast<TaskState>(state)));
}

// The lifecycle's edges (DESIGN.md section 3).
bool ValidEdge(TaskState from, TaskState to) {
  switch (from) {
    case TaskState::kWaiting:
      return to == TaskState::kQueued || to == TaskState::kCanceled;
    case TaskState::kQueued:
      // Back to waiting: a dependency reruns (lineage), checked below.
      return to == TaskState::kAssigned || to == TaskState::kCanceled || to == TaskState::kWaiting;
    case TaskState::kAssigned:
    case TaskState::kRunning:
      return to != TaskState::kWaiting && to != TaskState::kAssigned && to != from;
    case TaskState::kSucceeded:
      // A rerun: its outputs were lost with their worker (checked below).
      return to == TaskState::kQueued || to == TaskState::kWaiting;
    default:
      return false;  // terminal
  }
}

bool Active(uint8_t state) {
  return state == static_cast<uint8_t>(TaskState::kAssigned) ||
         state == static_cast<uint8_t>(TaskState::kRunning);
}

template <typename Range>
std::string Join(const Range& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

template <typename Range>
std::string Grants(const Range& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    s += (i ? "," : "") + std::to_string(v[i].index) + ":" + std::to_string(v[i].share) + "/" +
         std::to_string(v[i].mem_bytes);
  }
  return s + "]";
}

}  // namespace

void Ledger::Fail(const std::string& what) {
  if (violation_.empty()) violation_ = what;
}

Ledger::JobBook* Ledger::Job(JobId job) {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? nullptr : &it->second;
}

Ledger::TaskBook* Ledger::Task(TaskId task) {
  JobBook* job = Job(task.job);
  if (job == nullptr || task.index >= job->tasks.size()) return nullptr;
  return &job->tasks[task.index];
}

Ledger::WorkerBook* Ledger::Worker(WorkerId worker) {
  auto it = workers_.find(worker);
  return it == workers_.end() ? nullptr : &it->second;
}

const core::TaskGroupSpec& Ledger::SpecOf(TaskId task) const {
  const JobBook& job = jobs_.at(task.job);
  return job.spec->groups[job.group_of[task.index]];
}

std::optional<TaskState> Ledger::StateOf(TaskId task) const {
  auto it = jobs_.find(task.job);
  if (it == jobs_.end() || task.index >= it->second.tasks.size()) return std::nullopt;
  const uint8_t s = it->second.tasks[task.index].state;
  if (s == kUnknown) return std::nullopt;
  return static_cast<TaskState>(s);
}

uint32_t Ledger::AttemptOf(TaskId task) const {
  auto it = jobs_.find(task.job);
  if (it == jobs_.end() || task.index >= it->second.tasks.size()) return 0;
  return it->second.tasks[task.index].attempt;
}

bool Ledger::IsWorkerLost(WorkerId worker) const {
  auto it = workers_.find(worker);
  return it != workers_.end() && it->second.lost;
}

std::vector<JobId> Ledger::JobIds() const {
  std::vector<JobId> ids;
  for (const auto& [id, job] : jobs_) ids.push_back(id);
  return ids;
}

uint32_t Ledger::TaskCount(JobId job) const {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? 0 : static_cast<uint32_t>(it->second.tasks.size());
}

bool Ledger::DependenciesMet(TaskId id) const {
  const JobBook& job = jobs_.at(id.job);
  const core::TaskGroupSpec& spec = job.spec->groups[job.group_of[id.index]];
  for (const std::string& name : spec.depends_on) {
    for (size_t g = 0; g < job.spec->groups.size(); ++g) {
      if (job.spec->groups[g].name != name) continue;
      if (job.group_succeeded[g] != job.spec->groups[g].TaskCount()) return false;
    }
  }
  for (JobId after : job.spec->after_jobs) {
    auto it = jobs_.find(after);
    if (it == jobs_.end() || it->second.succeeded != it->second.tasks.size()) return false;
  }
  for (const TaskId& after : job.spec->after_tasks) {
    std::optional<TaskState> s = StateOf(after);
    if (!s || *s != TaskState::kSucceeded) return false;
  }
  return true;
}

// --- the shell side ----------------------------------------------------------------

void Ledger::WorkerJoined(WorkerId id, const core::WorkerResources& resources) {
  auto [it, inserted] = workers_.try_emplace(id);
  WorkerBook& w = it->second;
  if (!inserted && !w.lost) Fail("worker " + std::to_string(id) + " joined twice");
  if (!inserted && !(w.resources == resources)) {
    Fail("simulation error: worker " + std::to_string(id) + " rejoined with other resources");
  }
  w.resources = resources;
  w.lost = false;
  w.drained = false;
  if (inserted) w.gpus.resize(resources.gpus.size());
}

void Ledger::WorkerLost(WorkerId id) {
  if (WorkerBook* w = Worker(id)) w->lost = true;
}

void Ledger::WorkerDrained(WorkerId id, bool drained) {
  if (WorkerBook* w = Worker(id)) w->drained = drained;
}

void Ledger::ClaimAnswered(TaskId id, uint32_t attempt, bool granted) {
  TaskBook* t = Task(id);
  if (t != nullptr && t->claim_seen && t->claim_attempt == attempt) t->claim_granted = granted;
}

void Ledger::GrantDelivered(TaskId id, uint32_t attempt) {
  TaskBook* t = Task(id);
  if (t != nullptr && t->claim_seen && t->claim_attempt == attempt) t->grant_delivered = true;
}

// --- commands ----------------------------------------------------------------------

void Ledger::OnCommand(const core::Command& command) {
  std::visit(
      [&](const auto& c) {
        using T = std::decay_t<decltype(c)>;
        if constexpr (std::is_same_v<T, core::ClaimLeases>) OnClaim(c);
        if constexpr (std::is_same_v<T, core::AssignTask>) OnAssign(c);
        if constexpr (std::is_same_v<T, core::KillTask>) OnKill(c);
        if constexpr (std::is_same_v<T, core::RenewLeases>) OnRenew(c);
        if constexpr (std::is_same_v<T, core::ReleaseLeases>) OnRelease(c);
        if constexpr (std::is_same_v<T, core::TaskStateChanged>) OnStateChanged(c);
        if constexpr (std::is_same_v<T, core::Persist>) {
          if (const auto* job = std::get_if<core::JobRecord>(&c.record)) OnJobRecord(*job);
          if (const auto* task = std::get_if<core::TaskRecord>(&c.record)) OnTaskRecord(*task);
        }
      },
      command);
}

void Ledger::OnJobRecord(const core::JobRecord& record) {
  if (jobs_.count(record.job)) return Fail("job " + std::to_string(record.job) + " recorded twice");
  if (!record.spec) return Fail("job record without a spec");
  JobBook& job = jobs_[record.job];
  job.spec = record.spec;
  uint32_t first = 0;
  for (size_t g = 0; g < record.spec->groups.size(); ++g) {
    job.group_first.push_back(first);
    job.group_succeeded.push_back(0);
    const uint32_t n = record.spec->groups[g].TaskCount();
    for (uint32_t i = 0; i < n; ++i) job.group_of.push_back(static_cast<uint16_t>(g));
    first += n;
  }
  job.tasks.resize(first);
  total_tasks_ += first;
  non_terminal_ += first;
  new_jobs_.insert(record.job);
}

void Ledger::SetState(JobBook& job, TaskBook& task, uint8_t to) {
  const uint8_t from = task.state;
  if (from != kUnknown) --job.counts[from];
  ++job.counts[to];
  task.state = to;
  const bool was_terminal = from != kUnknown && core::IsTerminal(static_cast<TaskState>(from));
  const bool is_terminal = core::IsTerminal(static_cast<TaskState>(to));
  if (is_terminal && !was_terminal) --non_terminal_;
  if (was_terminal && !is_terminal) ++non_terminal_;
}

void Ledger::OnStateChanged(const core::TaskStateChanged& change) {
  const std::string id = change.task.ToString();
  JobBook* job = Job(change.task.job);
  TaskBook* t = Task(change.task);
  if (t == nullptr) return Fail("state change of unknown task " + id);
  touched_tasks_.insert(change.task);
  const uint8_t from = static_cast<uint8_t>(change.from);
  const uint8_t to = static_cast<uint8_t>(change.to);
  if (t->state == kUnknown) {
    // The first change of a just-submitted task names its initial state.
    if (change.from != TaskState::kWaiting && change.from != TaskState::kQueued) {
      return Fail(id + " starts in state " + Name(from));
    }
    SetState(*job, *t, from);
    if (change.from == TaskState::kQueued && change.to != TaskState::kCanceled &&
        !DependenciesMet(change.task)) {
      return Fail(id + " was queued at submission before its dependencies succeeded");
    }
  }
  if (t->state != from) {
    return Fail(id + " changed " + Name(from) + "->" + Name(to) + " but the ledger has it " +
                Name(t->state));
  }
  const bool retried = (change.from == TaskState::kFailed || change.from == TaskState::kCanceled) &&
                       (change.to == TaskState::kQueued || change.to == TaskState::kWaiting);
  if (retried) {
    // Only a person's RetryJob takes a task out of failed or canceled.
    if (retry_job_ != change.task.job) {
      return Fail(id + " left " + Name(from) + " without a retry of its job");
    }
    if (change.reason.rfind("retried", 0) != 0) {
      return Fail(id + " retried with the reason \"" + change.reason + "\"");
    }
    if (change.to == TaskState::kQueued && !DependenciesMet(change.task)) {
      return Fail(id + " retried into queued before its dependencies succeeded");
    }
    ++retried_;
  } else if (!ValidEdge(change.from, change.to)) {
    return Fail(id + " made an invalid transition " + Name(from) + "->" + Name(to));
  }
  ++transitions_[to];
  if (change.from == TaskState::kSucceeded) {
    // Lineage: only a worker the shell lost can have taken its outputs.
    // "worker 3", or "workers 3, 5" with copies (core/replicas.cc): every
    // holder must be lost.
    const std::string prefix = "rerun: outputs lost with worker";
    if (change.reason.rfind(prefix, 0) != 0) {
      return Fail(id + " left succeeded without a rerun reason: " + change.reason);
    }
    std::string list = change.reason.substr(prefix.size());
    if (!list.empty() && list[0] == 's') list.erase(0, 1);
    size_t pos = 0;
    do {
      size_t used = 0;
      const std::string rest = list.substr(pos);
      const WorkerBook* holder = nullptr;
      try {
        holder = Worker(std::stoull(rest, &used));
      } catch (const std::exception&) {
        return Fail(id + " rerun reason names no worker: " + change.reason);
      }
      if (holder == nullptr || !holder->lost) {
        return Fail(id + " reran for the outputs of a worker that is not lost: " + change.reason);
      }
      pos += used;
      if (pos < list.size() && list[pos] == ',') ++pos;
    } while (pos < list.size());
    if (change.to == TaskState::kQueued && !DependenciesMet(change.task)) {
      return Fail(id + " rerun queued before its dependencies succeeded");
    }
    --job->group_succeeded[job->group_of[change.task.index]];
    --job->succeeded;
    ++reruns_;
  }
  if (change.from == TaskState::kQueued && change.to == TaskState::kWaiting &&
      DependenciesMet(change.task)) {
    return Fail(id + " went back to waiting although its dependencies succeeded");
  }
  if (change.to == TaskState::kAssigned) {
    if (!t->claim_seen || change.attempt != t->attempt + 1) {
      return Fail(id + " assigned as attempt " + std::to_string(change.attempt) +
                  " without a claim for it (last attempt " + std::to_string(t->attempt) + ")");
    }
    if (!DependenciesMet(change.task)) {
      return Fail(id + " placed before its dependencies succeeded");
    }
    t->attempt = change.attempt;
    t->active = true;
    t->has_alloc = false;
  } else if (change.attempt != t->attempt) {
    return Fail(id + " " + Name(from) + "->" + Name(to) + " names attempt " +
                std::to_string(change.attempt) + ", the ledger has " + std::to_string(t->attempt));
  }
  if (change.from == TaskState::kWaiting && change.to == TaskState::kQueued &&
      !DependenciesMet(change.task)) {
    return Fail(id + " queued before its dependencies succeeded");
  }
  if (change.to == TaskState::kRunning && !t->assign_sent) {
    return Fail(id + " running without an AssignTask for attempt " + std::to_string(t->attempt));
  }
  if (change.to == TaskState::kSucceeded && !t->assign_sent) {
    return Fail(id + " succeeded without ever being assigned to a worker");
  }
  if (Active(from) && !Active(to)) {
    Unbook(change.task, *t);
    ended_attempts_.push_back(LeaseOwner{change.task, t->attempt});
  }
  SetState(*job, *t, to);
  if (change.to == TaskState::kSucceeded) {
    ++job->group_succeeded[job->group_of[change.task.index]];
    ++job->succeeded;
  }
}

void Ledger::OnTaskRecord(const core::TaskRecord& record) {
  const std::string id = record.task.ToString();
  TaskBook* t = Task(record.task);
  if (t == nullptr) return Fail("task record of unknown task " + id);
  if (static_cast<uint8_t>(record.state) != t->state) {
    return Fail("task record of " + id + " says " + Name(static_cast<uint8_t>(record.state)) +
                ", the last state change said " + Name(t->state));
  }
  if (record.attempt != t->attempt) {
    return Fail("task record of " + id + " names attempt " + std::to_string(record.attempt));
  }
  if (record.state != TaskState::kAssigned) return;
  if (record.worker != t->worker) {
    return Fail("task record of " + id + " names worker " + std::to_string(record.worker) +
                ", the claim went to " + std::to_string(t->worker));
  }
  if (t->has_alloc) return Fail("second assigned record for " + id);
  t->cores = record.cores;
  t->gpus = record.gpus;
  t->ran_cores = record.cores;
  t->ran_gpus = record.gpus;
  t->has_alloc = true;
  // The claim must cover exactly the slot and the GPUs given.
  std::vector<core::LeaseKey> expected{core::LeaseKey{core::LeaseKind::kSlot, t->worker, 0,
                                                      record.task}};
  for (const core::GpuGrant& g : record.gpus) {
    expected.push_back(g.share >= core::kWholeGpu
                           ? core::LeaseKey{core::LeaseKind::kGpu, t->worker, g.index, TaskId{}}
                           : core::LeaseKey{core::LeaseKind::kGpuShare, t->worker, g.index,
                                            record.task});
  }
  std::vector<core::LeaseKey> claimed = t->claim_keys;
  std::sort(expected.begin(), expected.end());
  std::sort(claimed.begin(), claimed.end());
  if (expected != claimed) return Fail("claim of " + id + " does not match its resources");
  Book(record.task, *t);
}

void Ledger::Book(TaskId id, TaskBook& t) {
  const std::string who = id.ToString() + "#" + std::to_string(t.attempt);
  WorkerBook* w = Worker(t.worker);
  if (w == nullptr) return Fail(who + " booked on unknown worker " + std::to_string(t.worker));
  const core::ResourceRequest& req = SpecOf(id).resources;
  const std::string on = " on worker " + std::to_string(t.worker);
  if (t.cores.size() != req.CoreCount()) {
    return Fail(who + " got " + std::to_string(t.cores.size()) + " cores for " + req.ToString());
  }
  std::vector<uint32_t> sorted = t.cores;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    return Fail(who + " got a core twice: " + Join(t.cores));
  }
  const auto& all = w->resources.cpu_cores;
  for (uint32_t c : t.cores) {
    if (std::find(all.begin(), all.end(), c) == all.end()) {
      return Fail(who + " got core " + std::to_string(c) + " which" + on + " lacks");
    }
    auto held = w->core_holder.find(c);
    const int64_t need = req.IsCoreShare() ? req.cpus_milli : 1000;
    auto used = w->core_milli.find(c);
    if (held != w->core_holder.end() && used != w->core_milli.end() &&
        used->second + need > 1000) {
      return Fail("core " + std::to_string(c) + on + " given to " + who + " while " +
                  held->second.ToString() + " holds it");
    }
  }
  if (w->mem + req.mem_bytes > w->resources.mem_bytes) {
    return Fail(who + " exceeds the memory" + on);
  }
  for (const auto& [key, value] : req.labels) {
    auto it = w->resources.labels.find(key);
    if (it == w->resources.labels.end() || it->second != value) {
      return Fail(who + " placed" + on + " whose labels do not match " + req.ToString());
    }
  }
  for (const auto& [name, amount] : req.counters) {
    auto it = w->resources.counters.find(name);
    const int64_t total = it == w->resources.counters.end() ? 0 : it->second;
    if (w->counters[name] + amount > total) return Fail(who + " exceeds counter " + name + on);
  }
  if (t.gpus.size() != req.GpuCount()) {
    return Fail(who + " got " + Grants(t.gpus) + " for " + req.ToString());
  }
  std::set<uint32_t> seen;
  for (const core::GpuGrant& g : t.gpus) {
    size_t i = 0;
    while (i < w->resources.gpus.size() && w->resources.gpus[i].index != g.index) ++i;
    if (i == w->resources.gpus.size()) return Fail(who + " got a GPU" + on + " lacks");
    if (!seen.insert(g.index).second) return Fail(who + " got GPU " + std::to_string(g.index) + " twice");
    const core::GpuDevice& dev = w->resources.gpus[i];
    if (!core::GpuModelAccepted(req.gpu_types, dev.model) || dev.memory_bytes < req.gpu_mem_bytes) {
      return Fail(who + " got GPU " + dev.model + " which does not match " + req.ToString());
    }
    GpuBook& gb = w->gpus[i];
    const std::string gpu = "GPU " + std::to_string(g.index) + on;
    if (req.IsGpuShare()) {
      if (g.share != req.gpus) return Fail(who + " got share " + std::to_string(g.share));
      if (gb.whole) return Fail(gpu + " shared with " + who + " while held whole");
      if (gb.share + g.share > core::kWholeGpu) return Fail(gpu + " over-shared by " + who);
    } else {
      if (g.share != core::kWholeGpu) return Fail(who + " got a partial whole GPU");
      if (gb.whole || gb.share > 0) return Fail(gpu + " given whole to " + who + " while in use");
    }
    if (gb.mem + g.mem_bytes > dev.memory_bytes) return Fail(gpu + " memory over-reserved by " + who);
  }
  // All checks passed: book it.
  for (uint32_t c : t.cores) {
    w->core_holder.emplace(c, id);
    w->core_milli[c] += req.IsCoreShare() ? req.cpus_milli : 1000;
  }
  w->mem += req.mem_bytes;
  for (const auto& [name, amount] : req.counters) w->counters[name] += amount;
  for (const core::GpuGrant& g : t.gpus) {
    size_t i = 0;
    while (w->resources.gpus[i].index != g.index) ++i;
    GpuBook& gb = w->gpus[i];
    gb.share += g.share;
    gb.mem += g.mem_bytes;
    gb.whole = g.share >= core::kWholeGpu;
  }
  w->tasks.insert(id);
}

void Ledger::Unbook(TaskId id, TaskBook& t) {
  t.active = false;
  WorkerBook* w = Worker(t.worker);
  if (w == nullptr || !t.has_alloc) {
    if (w != nullptr) w->tasks.erase(id);
    return;
  }
  t.has_alloc = false;
  const core::ResourceRequest& req = SpecOf(id).resources;
  for (uint32_t c : t.cores) {
    auto [begin, end] = w->core_holder.equal_range(c);
    for (auto it = begin; it != end; ++it) {
      if (it->second == id) {
        w->core_holder.erase(it);
        break;
      }
    }
    auto used = w->core_milli.find(c);
    if (used != w->core_milli.end() &&
        (used->second -= req.IsCoreShare() ? req.cpus_milli : 1000) <= 0) {
      w->core_milli.erase(used);
    }
  }
  w->mem -= req.mem_bytes;
  for (const auto& [name, amount] : req.counters) w->counters[name] -= amount;
  for (const core::GpuGrant& g : t.gpus) {
    size_t i = 0;
    while (w->resources.gpus[i].index != g.index) ++i;
    GpuBook& gb = w->gpus[i];
    gb.share -= g.share;
    gb.mem -= g.mem_bytes;
    gb.whole = false;
  }
  w->tasks.erase(id);
  t.cores.clear();
  t.gpus.clear();
}

void Ledger::OnClaim(const core::ClaimLeases& claim) {
  const std::string id = claim.task.ToString() + "#" + std::to_string(claim.attempt);
  TaskBook* t = Task(claim.task);
  if (t == nullptr) return Fail("claim for unknown task " + id);
  if (t->state != kUnknown && t->state != static_cast<uint8_t>(TaskState::kQueued)) {
    return Fail("claim for " + id + " which is " + Name(t->state));
  }
  if (claim.attempt != t->attempt + 1) {
    return Fail("claim for " + id + " after attempt " + std::to_string(t->attempt));
  }
  WorkerBook* w = Worker(claim.worker);
  if (w == nullptr) return Fail("claim for " + id + " on unknown worker");
  if (w->lost) return Fail(id + " placed on lost worker " + std::to_string(claim.worker));
  if (w->drained) return Fail(id + " placed on drained worker " + std::to_string(claim.worker));
  for (const core::LeaseKey& key : claim.keys) {
    if (key.worker != claim.worker) return Fail("claim for " + id + " names another worker");
  }
  t->claim_seen = true;
  t->claim_attempt = claim.attempt;
  t->claim_granted = false;
  t->grant_delivered = false;
  t->assign_sent = false;
  t->claim_keys = claim.keys;
  t->worker = claim.worker;
}

void Ledger::OnAssign(const core::AssignTask& a) {
  const std::string id = a.task.ToString() + "#" + std::to_string(a.attempt);
  TaskBook* t = Task(a.task);
  if (t == nullptr) return Fail("assign of unknown task " + id);
  if (t->state != static_cast<uint8_t>(TaskState::kAssigned) || a.attempt != t->attempt) {
    return Fail("assign of " + id + " which is " + Name(t->state) + " attempt " +
                std::to_string(t->attempt));
  }
  if (t->claim_attempt != a.attempt || !t->claim_granted) return Fail("assign of " + id + " whose claim the store did not grant");
  if (!t->grant_delivered) return Fail("assign of " + id + " before LeaseGranted arrived");
  if (t->assign_sent) return Fail("second assign of " + id);
  if (a.worker != t->worker) return Fail("assign of " + id + " to another worker than claimed");
  if (IsWorkerLost(a.worker)) return Fail("assign of " + id + " to lost worker");
  if (a.cores != t->cores || a.gpus != t->gpus) {
    return Fail("assign of " + id + " with cores " + Join(a.cores) + " gpus " + Grants(a.gpus) +
                " but the record said " + Join(t->cores) + " " + Grants(t->gpus));
  }
  const core::TaskGroupSpec& spec = SpecOf(a.task);
  const JobBook& job = jobs_.at(a.task.job);
  const uint32_t member = a.task.index - job.group_first[job.group_of[a.task.index]];
  if (a.array_index != spec.IndexAt(member)) return Fail("assign of " + id + " with wrong index");
  if (a.mem_limit_bytes != spec.resources.mem_bytes) {
    return Fail("assign of " + id + " with wrong limits");
  }
  if (a.job == nullptr || a.group >= a.job->groups.size() || !(a.Spec() == spec)) {
    return Fail("assign of " + id + " with the wrong spec");
  }
  t->assign_sent = true;
}

void Ledger::OnKill(const core::KillTask& k) {
  const std::string id = k.task.ToString() + "#" + std::to_string(k.attempt);
  TaskBook* t = Task(k.task);
  if (t == nullptr) return Fail("kill of unknown task " + id);
  if (!t->active || k.attempt != t->attempt || !t->assign_sent) {
    return Fail("kill of " + id + " which is not a running attempt");
  }
  if (k.worker != t->worker) return Fail("kill of " + id + " sent to another worker");
  if (IsWorkerLost(k.worker)) return Fail("kill of " + id + " sent to lost worker");
  if (k.reason.empty()) return Fail("kill of " + id + " without a reason");
}

void Ledger::OnRenew(const core::RenewLeases& renew) {
  if (IsWorkerLost(renew.worker)) {
    return Fail("renewal of leases of lost worker " + std::to_string(renew.worker));
  }
  for (const core::LeaseKey& key : renew.keys) {
    if (key.worker != renew.worker) return Fail("renewal names another worker");
    if (key.kind != core::LeaseKind::kSlot) continue;
    TaskBook* t = Task(key.task);
    if (t == nullptr || !t->active || t->worker != renew.worker || !t->grant_delivered) {
      return Fail("renewal of " + key.ToString() + " which no granted task holds");
    }
  }
}

void Ledger::OnRelease(const core::ReleaseLeases& release) {
  TaskBook* t = Task(release.task);
  if (t == nullptr) return Fail("release of unknown task " + release.task.ToString());
  if (release.attempt != t->claim_attempt || !t->claim_seen) {
    return Fail("release of " + release.task.ToString() + "#" + std::to_string(release.attempt) +
                " which is not its current attempt");
  }
  std::vector<core::LeaseKey> a = release.keys, b = t->claim_keys;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  if (a != b) return Fail("release of " + release.task.ToString() + " names other keys than claimed");
}

// --- checks against the core ----------------------------------------------------------

void Ledger::EndOfEvent(const core::Scheduler& scheduler, const LeaseTable& leases) {
  for (const LeaseOwner& o : ended_attempts_) {
    if (leases.HoldsAny(o)) {
      Fail("attempt " + o.task.ToString() + "#" + std::to_string(o.attempt) +
           " ended while its lease is still held (lost worker's task requeued before expiry?)");
    }
  }
  ended_attempts_.clear();
  retry_job_ = 0;
  for (JobId j : new_jobs_) {
    JobBook& job = jobs_.at(j);
    for (uint32_t i = 0; i < job.tasks.size(); ++i) {
      TaskBook& t = job.tasks[i];
      const TaskId id{j, i};
      if (t.state != kUnknown) continue;
      Result<core::TaskInfo> info = scheduler.GetTask(id);
      if (!info.ok()) {
        Fail("GetTask(" + id.ToString() + "): " + info.status().ToString());
        break;
      }
      if (info->state != TaskState::kWaiting && info->state != TaskState::kQueued) {
        Fail(id.ToString() + " is " + Name(static_cast<uint8_t>(info->state)) +
             " without a state change");
        break;
      }
      SetState(job, t, static_cast<uint8_t>(info->state));
      const bool met = DependenciesMet(id);
      if (met != (info->state == TaskState::kQueued)) {
        Fail(id.ToString() + " starts " + Name(t.state) + " but its dependencies are " +
             (met ? "met" : "not met"));
        break;
      }
    }
  }
  new_jobs_.clear();
  std::set<JobId> jobs;
  for (const TaskId& id : touched_tasks_) {
    CheckTaskAgainstCore(scheduler, id);
    jobs.insert(id.job);
  }
  touched_tasks_.clear();
  for (JobId j : jobs) CheckJobAgainstCore(scheduler, j);
}

void Ledger::CheckTaskAgainstCore(const core::Scheduler& scheduler, TaskId id) {
  const TaskBook& t = jobs_.at(id.job).tasks[id.index];
  Result<core::TaskInfo> info = scheduler.GetTask(id);
  if (!info.ok()) return Fail("GetTask(" + id.ToString() + "): " + info.status().ToString());
  if (static_cast<uint8_t>(info->state) != t.state || info->attempt != t.attempt) {
    return Fail("GetTask(" + id.ToString() + ") says " + Name(static_cast<uint8_t>(info->state)) +
                " #" + std::to_string(info->attempt) + ", the commands said " + Name(t.state) +
                " #" + std::to_string(t.attempt));
  }
  const std::vector<uint32_t> no_cores;
  const std::vector<core::GpuGrant> no_gpus;
  const bool held = t.active && t.has_alloc;
  const bool ended =
      t.state != kUnknown && core::IsTerminal(static_cast<core::TaskState>(t.state));
  const std::vector<uint32_t>& cores = held ? t.cores : ended ? t.ran_cores : no_cores;
  const std::vector<core::GpuGrant>& gpus = held ? t.gpus : ended ? t.ran_gpus : no_gpus;
  if (info->cores != cores || info->gpus != gpus) {
    return Fail("GetTask(" + id.ToString() + ") shows cores " + Join(info->cores) + " gpus " +
                Grants(info->gpus) + ", the commands said " + Join(cores) + " " + Grants(gpus));
  }
  if (t.active && (!info->worker || *info->worker != t.worker)) {
    return Fail("GetTask(" + id.ToString() + ") shows another worker");
  }
}

void Ledger::CheckJobAgainstCore(const core::Scheduler& scheduler, JobId id) {
  const JobBook& job = jobs_.at(id);
  Result<core::JobInfo> info = scheduler.GetJob(id);
  if (!info.ok()) return Fail("GetJob(" + std::to_string(id) + "): " + info.status().ToString());
  uint64_t sum = 0;
  for (uint64_t c : info->counts) sum += c;
  if (info->task_count != job.tasks.size() || sum != job.tasks.size()) {
    return Fail("job " + std::to_string(id) + " counts do not add up to its tasks");
  }
  // Tasks whose first state is not known yet are not in the ledger's counts.
  uint64_t unknown = 0;
  for (const TaskBook& t : job.tasks) unknown += t.state == kUnknown ? 1 : 0;
  if (unknown == 0 && info->counts != job.counts) {
    std::string s;
    for (int i = 0; i < core::kTaskStateCount; ++i) {
      s += " " + std::to_string(info->counts[i]) + "/" + std::to_string(job.counts[i]);
    }
    return Fail("job " + std::to_string(id) + " counts (core/ledger):" + s);
  }
}

void Ledger::CheckWorkerAgainstCore(const core::Scheduler& scheduler, WorkerId id) {
  const WorkerBook& w = workers_.at(id);
  Result<core::WorkerInfo> info = scheduler.GetWorker(id);
  const std::string name = "worker " + std::to_string(id);
  if (!info.ok()) return Fail("GetWorker(" + std::to_string(id) + "): " + info.status().ToString());
  if (info->lost != w.lost || (!w.lost && info->drained != w.drained)) {
    return Fail(name + ": lost/drained flags differ from the events");
  }
  std::vector<uint32_t> free;
  for (uint32_t c : w.resources.cpu_cores) {
    if (!w.core_holder.count(c)) free.push_back(c);
  }
  std::sort(free.begin(), free.end());
  if (info->free_cores != free) {
    return Fail(name + " free cores " + Join(info->free_cores) + ", expected " + Join(free));
  }
  if (info->free_mem_bytes != w.resources.mem_bytes - w.mem) return Fail(name + " free memory");
  for (size_t i = 0; i < w.gpus.size(); ++i) {
    const int64_t share = w.gpus[i].whole ? 0 : core::kWholeGpu - w.gpus[i].share;
    if (i >= info->gpu_free_share.size() || info->gpu_free_share[i] != share ||
        info->gpu_free_mem_bytes[i] != w.resources.gpus[i].memory_bytes - w.gpus[i].mem) {
      return Fail(name + " GPU " + std::to_string(i) + " free share/memory differ");
    }
  }
  for (const auto& [counter, total] : w.resources.counters) {
    auto used = w.counters.find(counter);
    const int64_t expect = total - (used == w.counters.end() ? 0 : used->second);
    auto it = info->free_counters.find(counter);
    if (it == info->free_counters.end() || it->second != expect) {
      return Fail(name + " free counter " + counter);
    }
  }
  std::vector<TaskId> tasks(w.tasks.begin(), w.tasks.end());
  if (info->tasks != tasks) return Fail(name + " task list differs");
}

void Ledger::FullCheck(const core::Scheduler& scheduler) {
  for (const auto& [j, job] : jobs_) {
    CheckJobAgainstCore(scheduler, j);
    for (uint32_t i = 0; i < job.tasks.size() && !failed(); ++i) {
      const TaskId id{j, i};
      if (job.tasks[i].state == kUnknown) continue;
      CheckTaskAgainstCore(scheduler, id);
      // Liveness: a waiting task whose dependencies all succeeded must have
      // been queued by the event that completed them.
      if (job.tasks[i].state == static_cast<uint8_t>(TaskState::kWaiting) && DependenciesMet(id)) {
        Fail(id.ToString() + " still waiting although its dependencies succeeded");
      }
    }
    if (failed()) return;
  }
  for (const auto& [id, w] : workers_) {
    CheckWorkerAgainstCore(scheduler, id);
    if (failed()) return;
  }
}

}  // namespace drover::core_sim
