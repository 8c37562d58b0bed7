// Test helpers that read like the domain:
//
//   TestCluster c;
//   WorkerId w = c.AddWorker(WorkerBuilder().Cpus(4).Gpus(2));
//   JobId j = c.Submit(JobBuilder().Add(TaskBuilder("prep").Cpus(2)));
//   EXPECT_THAT(c.Take(), ElementsAre("claim 1.0#1 on w1 [...]", ...));
//
// TestCluster owns a Scheduler and a SimulatedClock, records every command
// the scheduler emits and hands them out as DescribeCommand lines. Take()
// checks that each "state" line is followed by the matching "persist task"
// record and leaves those records out, so tests list what matters and still
// see everything else: asserting Take() equals a list asserts that nothing
// more was emitted. Header-only; used only by core tests.
#ifndef DROVER_CORE_TESTING_TEST_CLUSTER_H_
#define DROVER_CORE_TESTING_TEST_CLUSTER_H_

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/quantity.h"
#include "common/time.h"
#include "core/scheduler.h"

namespace drover::core::testing {


class WorkerBuilder {
 public:
  WorkerBuilder& Cpus(uint32_t n) {
    r_.cpu_cores.clear();
    for (uint32_t i = 0; i < n; ++i) r_.cpu_cores.push_back(i);
    return *this;
  }
  WorkerBuilder& Mem(uint64_t bytes) { r_.mem_bytes = bytes; return *this; }
  WorkerBuilder& Gpus(uint32_t n, std::string model = "NVIDIA A100-SXM4-80GB",
                      uint64_t mem = 80 * kGiB) {
    for (uint32_t i = 0; i < n; ++i) Gpu(model, mem);
    return *this;
  }
  WorkerBuilder& Gpu(std::string model, uint64_t mem) {
    uint32_t index = static_cast<uint32_t>(r_.gpus.size());
    r_.gpus.push_back(GpuDevice{index, "GPU-" + std::to_string(index), std::move(model), mem});
    return *this;
  }
  WorkerBuilder& Label(std::string k, std::string v) { r_.labels[k] = v; return *this; }
  WorkerBuilder& Counter(std::string k, int64_t n) { r_.counters[k] = n; return *this; }
  WorkerBuilder& DiskFree(uint64_t bytes) {
    r_.disk_free_bytes = bytes;
    return *this;
  }
  WorkerBuilder& PrivateNetwork() {
    r_.private_network = true;
    return *this;
  }
  // A container runtime ("podman 4.3.1 (runc)"), with GPUs through CDI
  // when `gpus`.
  WorkerBuilder& Containers(bool gpus = false) {
    r_.container_runtime = "podman 4.3.1 (runc)";
    r_.container_gpus = gpus;
    return *this;
  }
  WorkerBuilder& EndsAt(Time t) {
    r_.ends_at = t;
    return *this;
  }
  WorkerResources Build() const { return r_; }

 private:
  WorkerResources r_ = [] {
    WorkerResources r;
    r.name = "host";
    for (uint32_t i = 0; i < 4; ++i) r.cpu_cores.push_back(i);
    r.mem_bytes = 16 * kGiB;
    return r;
  }();
};

class TaskBuilder {
 public:
  explicit TaskBuilder(std::string name = "main") {
    g_.name = std::move(name);
    g_.command = {"run", "{index}"};
  }
  TaskBuilder& Cpus(double n) { g_.resources.cpus_milli = std::llround(n * 1000); return *this; }
  TaskBuilder& Mem(uint64_t bytes) { g_.resources.mem_bytes = bytes; return *this; }
  TaskBuilder& Gpus(double n) { g_.resources.gpus = std::llround(n * 100); return *this; }
  TaskBuilder& GpuMem(uint64_t bytes) { g_.resources.gpu_mem_bytes = bytes; return *this; }
  TaskBuilder& GpuType(std::string t) { g_.resources.gpu_types.push_back(std::move(t)); return *this; }
  TaskBuilder& Counter(std::string k, int64_t n) { g_.resources.counters[k] = n; return *this; }
  TaskBuilder& Label(std::string k, std::string v) { g_.resources.labels[k] = v; return *this; }
  TaskBuilder& Priority(int32_t p) { g_.priority = p; return *this; }
  TaskBuilder& Disk(uint64_t bytes) {
    g_.resources.disk_bytes = bytes;
    return *this;
  }
  TaskBuilder& NetworkNone() {
    g_.resources.private_network = true;
    return *this;
  }
  TaskBuilder& Image(std::string image) {
    g_.image = std::move(image);
    g_.resources.container = true;
    return *this;
  }
  TaskBuilder& Preemptible(bool p) {
    g_.preemptible = p;
    return *this;
  }
  TaskBuilder& Retries(uint32_t n, Duration backoff = Seconds(10)) {
    g_.retries = n;
    g_.retry_backoff = backoff;
    return *this;
  }
  TaskBuilder& Timeout(Duration d) { g_.timeout = d; return *this; }
  TaskBuilder& Replicas(uint32_t n) {
    g_.replicas = n;
    return *this;
  }
  TaskBuilder& DependsOn(std::string name) { g_.depends_on.push_back(std::move(name)); return *this; }
  TaskBuilder& Command(std::vector<std::string> argv) {
    g_.command = std::move(argv);
    return *this;
  }
  TaskBuilder& Env(std::string k, std::string v) {
    g_.env[std::move(k)] = std::move(v);
    return *this;
  }
  // The result cache (core/result_cache.h), with these code files' hashes.
  TaskBuilder& Cache(std::vector<OutputFile> code = {}) {
    g_.cache = true;
    g_.code = std::move(code);
    return *this;
  }
  // `inputs` (core/input_select.h): only these outputs of its dependencies.
  TaskBuilder& Inputs(std::vector<std::string> selectors) {
    g_.inputs = std::move(selectors);
    return *this;
  }
  TaskBuilder& Array(int64_t first, uint32_t count) {
    g_.array = ArrayRange{first, count, 1};
    return *this;
  }
  TaskGroupSpec Build() const { return g_; }

 private:
  TaskGroupSpec g_;
};

class JobBuilder {
 public:
  JobBuilder() { spec_.name = "job"; spec_.user = "alice"; }
  JobBuilder(const TaskBuilder& t) : JobBuilder() { Add(t); }  // NOLINT: one-task jobs read well
  JobBuilder& Add(const TaskBuilder& t) { spec_.groups.push_back(t.Build()); return *this; }
  JobBuilder& User(std::string u) { spec_.user = std::move(u); return *this; }
  JobBuilder& After(JobId j) { spec_.after_jobs.push_back(j); return *this; }
  JobBuilder& AfterTask(TaskId t) { spec_.after_tasks.push_back(t); return *this; }
  std::shared_ptr<const JobSpec> Build() const { return std::make_shared<JobSpec>(spec_); }

 private:
  JobSpec spec_;
};

inline TaskId T(JobId job, uint32_t index) { return TaskId{job, index}; }

class TestCluster {
 public:
  explicit TestCluster(SchedulerConfig config = {})
      : config_(config), scheduler_(std::make_unique<Scheduler>(std::move(config))) {}

  Scheduler& scheduler() { return *scheduler_; }
  Time now() const { return clock_.Now(); }
  const Clock& clock() const { return clock_; }

  WorkerId AddWorker(const WorkerBuilder& w) {
    WorkerId id = next_worker_++;
    workers_[id] = w;
    Handle(WorkerJoined{id, w.Build()});
    return id;
  }
  // A server restart: a new scheduler restored from the journal (or from
  // the old one's snapshot, which then becomes the journal), with no
  // worker back yet; Rejoin brings one back as it was added.
  void Restart(bool from_snapshot = false) {
    if (from_snapshot) journal_ = scheduler_->Snapshot();
    scheduler_ = std::make_unique<Scheduler>(config_);
    for (const Record& r : journal_) {
      Status st = scheduler_->Restore(r);
      EXPECT_TRUE(st.ok()) << st.ToString();
    }
    scheduler_->FinishRestore(now(), out_);
    Collect();
  }
  void Rejoin(WorkerId id) { Handle(WorkerJoined{id, workers_.at(id).Build()}); }
  JobId Submit(const JobBuilder& job) {
    Result<JobId> id = scheduler_->Submit(now(), job.Build(), out_);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    Collect();
    // The job record is checked here so tests need not list it.
    if (id.ok()) ExpectAndDropJobRecord(*id);
    return id.ok() ? *id : 0;
  }
  // Handles an event that must be accepted.
  void Handle(Event e) {
    Status st = scheduler_->Handle(now(), std::move(e), out_);
    EXPECT_TRUE(st.ok()) << st.ToString();
    Collect();
  }
  Status TryHandle(Event e) {
    Status st = scheduler_->Handle(now(), std::move(e), out_);
    Collect();
    return st;
  }
  void Advance(Duration d) {
    clock_.Advance(d);
    Handle(Tick{});
  }

  // The current attempt of a task, from the last claim seen.
  uint32_t Attempt(TaskId t) const { return attempts_.count(t) ? attempts_.at(t) : 0; }
  void Grant(TaskId t) { Handle(LeaseGranted{t, Attempt(t)}); }
  void Reject(TaskId t) { Handle(LeaseRejected{t, Attempt(t)}); }
  void Start(TaskId t) { Handle(TaskStarted{t, Attempt(t)}); }
  void Finish(TaskId t, int exit_code = 0) {
    TaskOutcome o;
    o.exit_code = exit_code;
    Handle(TaskFinished{t, Attempt(t), o});
  }
  void FinishWith(TaskId t, TaskOutcome o) { Handle(TaskFinished{t, Attempt(t), std::move(o)}); }
  // Grant + start, dropping the commands.
  void Run(TaskId t) {
    Grant(t);
    Start(t);
  }

  // All commands since the last Take, described; task records verified
  // against the state lines and dropped.
  std::vector<std::string> Take() {
    std::vector<std::string> lines;
    for (size_t i = 0; i < recorded_.size(); ++i) {
      const Command& c = recorded_[i];
      if (const auto* p = std::get_if<Persist>(&c)) {
        if (const auto* rec = std::get_if<TaskRecord>(&p->record)) {
          bool matched = i > 0 && std::holds_alternative<TaskStateChanged>(recorded_[i - 1]);
          if (matched) {
            const auto& sc = std::get<TaskStateChanged>(recorded_[i - 1]);
            matched = sc.task == rec->task && sc.to == rec->state && sc.attempt == rec->attempt &&
                      sc.reason == rec->reason;
          }
          EXPECT_TRUE(matched) << "task record without its state line: " << DescribeCommand(c);
          continue;
        }
      }
      lines.push_back(DescribeCommand(c));
    }
    recorded_.clear();
    return lines;
  }
  // Every command since the last Take, undescribed (nothing dropped).
  std::vector<Command> TakeRaw() {
    std::vector<Command> all = std::move(recorded_);
    recorded_.clear();
    return all;
  }
  // Everything recorded so far that is a Persist, in order (never cleared).
  const std::vector<Record>& journal() const { return journal_; }

 private:
  void Collect() {
    for (Command& c : out_) {
      if (const auto* claim = std::get_if<ClaimLeases>(&c)) attempts_[claim->task] = claim->attempt;
      if (const auto* p = std::get_if<Persist>(&c)) journal_.push_back(p->record);
      recorded_.push_back(std::move(c));
    }
    out_.clear();
  }
  void ExpectAndDropJobRecord(JobId id) {
    for (auto it = recorded_.begin(); it != recorded_.end(); ++it) {
      const auto* p = std::get_if<Persist>(&*it);
      if (p && std::holds_alternative<JobRecord>(p->record)) {
        EXPECT_EQ(std::get<JobRecord>(p->record).job, id);
        recorded_.erase(it);
        return;
      }
    }
    ADD_FAILURE() << "no job record for job " << id;
  }

  SimulatedClock clock_;
  SchedulerConfig config_;
  std::unique_ptr<Scheduler> scheduler_;
  std::map<WorkerId, WorkerBuilder> workers_;
  Outbox out_;
  std::vector<Command> recorded_;
  std::vector<Record> journal_;
  std::map<TaskId, uint32_t> attempts_;
  WorkerId next_worker_ = 1;
};

}  // namespace drover::core::testing

#endif  // DROVER_CORE_TESTING_TEST_CLUSTER_H_
