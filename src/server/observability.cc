#include "server/observability.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <map>
#include <string>

#include "metrics/job_report.h"
#include "proto/api_json.h"
#include "server/paging.h"
#include "server/rest_api.h"
#include "server/sliced.h"

namespace drover::server {

namespace {

using metrics::Labels;
using metrics::MetricType;
using metrics::PromWriter;

double Secs(Duration d) { return static_cast<double>(d.count()) / 1e6; }

// Tasks a report looks at between two looks at the slice's clock.
constexpr uint64_t kReportStep = 16;

}  // namespace

Observability::Observability(net::EventLoop& loop, CoreDriver& driver, WorkerChannel& channel,
                             ObservabilityOptions options)
    : loop_(loop),
      driver_(driver),
      channel_(channel),
      options_(std::move(options)),
      ring_(std::max<size_t>(1, options_.capacity)),
      scheduling_latency_(metrics::LatencyBuckets()),
      journal_sync_(metrics::LatencyBuckets()),
      ready_(options_.started_at),
      timer_(std::make_unique<net::Timer>(loop)) {
  driver_.SetDurableObserver([this](Duration d) { journal_sync_.Observe(Secs(d)); });
  Sample();
}

Observability::~Observability() { Stop(); }

void Observability::Stop() {
  if (timer_) timer_->Cancel();
  driver_.SetDurableObserver(nullptr);
}

void Observability::Sample() {
  ring_.Add(metrics::SampleUtilization(driver_.scheduler(), driver_.Now()));
  timer_->ArmAfter(options_.interval, [this] { Sample(); });
}

void Observability::OnStateChanged(const core::TaskStateChanged& c, Time at) {
  if (std::optional<Duration> wait = ready_.OnStateChanged(c, at, driver_.scheduler())) {
    scheduling_latency_.Observe(Secs(*wait));
  }
}

std::string Observability::MetricsText() {
  const core::Scheduler& sched = driver_.scheduler();
  PromWriter w;

  // Tasks and jobs.
  std::array<uint64_t, core::kTaskStateCount> tasks{};
  uint64_t jobs_active = 0;
  uint64_t jobs_done = 0;
  std::map<std::string, uint64_t> queue{{"cpu", 0}, {"gpu", 0}};
  for (JobId id : sched.Jobs()) {
    Result<core::JobInfo> job = sched.GetJob(id);
    if (!job.ok()) continue;
    (job->done ? jobs_done : jobs_active) += 1;
    for (int s = 0; s < core::kTaskStateCount; ++s) tasks[s] += job->counts[s];
    const uint64_t queued = job->counts[static_cast<int>(core::TaskState::kQueued)];
    if (queued == 0) continue;
    // A job whose groups all ask for GPUs, or none does (the usual case),
    // counts without looking at its tasks: a scrape must not walk a
    // million-task job. Only a mixed job is counted task by task.
    if (Result<std::shared_ptr<const core::JobSpec>> found = sched.GetJobSpec(id); found.ok()) {
      const std::shared_ptr<const core::JobSpec>& spec = *found;
      const auto gpu = [](const core::TaskGroupSpec& g) { return g.resources.gpus > 0; };
      if (std::all_of(spec->groups.begin(), spec->groups.end(), gpu)) {
        queue["gpu"] += queued;
        continue;
      }
      if (std::none_of(spec->groups.begin(), spec->groups.end(), gpu)) {
        queue["cpu"] += queued;
        continue;
      }
    }
    Result<std::vector<TaskId>> ids = sched.JobTasks(id);
    if (!ids.ok()) continue;
    for (const TaskId& t : *ids) {
      Result<core::TaskInfo> info = sched.GetTask(t);
      if (!info.ok() || info->state != core::TaskState::kQueued) continue;
      Result<const core::TaskGroupSpec*> spec = sched.GetSpec(t);
      const bool gpu = spec.ok() && (*spec)->resources.gpus > 0;
      ++queue[gpu ? "gpu" : "cpu"];
    }
  }
  w.Family("drover_tasks", "Tasks by state (all jobs the server knows).", MetricType::kGauge);
  for (int s = 0; s < core::kTaskStateCount; ++s) {
    w.Sample("drover_tasks",
             {{"state", std::string(core::TaskStateName(static_cast<core::TaskState>(s)))}},
             static_cast<double>(tasks[s]));
  }
  w.Family("drover_jobs", "Jobs: active (some task not finished) or done.", MetricType::kGauge);
  w.Sample("drover_jobs", {{"state", "active"}}, static_cast<double>(jobs_active));
  w.Sample("drover_jobs", {{"state", "done"}}, static_cast<double>(jobs_done));
  w.Family("drover_queue_length",
           "Queued (ready, waiting for resources) tasks by resource class: gpu = asks for GPUs.",
           MetricType::kGauge);
  for (const auto& [cls, n] : queue) {
    w.Sample("drover_queue_length", {{"class", cls}}, static_cast<double>(n));
  }

  // Workers.
  std::vector<core::WorkerInfo> workers;
  for (WorkerId id : sched.Workers()) {
    Result<core::WorkerInfo> info = sched.GetWorker(id);
    if (info.ok()) workers.push_back(std::move(*info));
  }
  std::map<std::string, uint64_t> by_state{
      {"idle", 0},      {"busy", 0},        {"drained", 0}, {"paused", 0},
      {"unhealthy", 0}, {"quarantined", 0}, {"lost", 0}};
  uint64_t connected = 0;
  for (const core::WorkerInfo& wi : workers) {
    const char* state = wi.lost            ? "lost"
                        : wi.drained       ? "drained"
                        : wi.paused        ? "paused"
                        : !wi.unhealthy.empty() ? "unhealthy"
                        : !wi.quarantine_why.empty() ? "quarantined"
                        : wi.tasks.empty() ? "idle"
                                           : "busy";
    ++by_state[state];
    connected += channel_.connected(wi.id) ? 1 : 0;
  }
  w.Family("drover_workers",
           "Workers by state: lost, else drained, else paused (its owner is at it), else "
           "unhealthy (its health checks fail), else quarantined (a black hole), else busy "
           "(running tasks) or idle.",
           MetricType::kGauge);
  for (const auto& [state, n] : by_state) {
    w.Sample("drover_workers", {{"state", state}}, static_cast<double>(n));
  }
  w.Family("drover_workers_connected", "Workers with an open connection to this server.",
           MetricType::kGauge);
  w.Sample("drover_workers_connected", {}, static_cast<double>(connected));

  auto worker_labels = [](const core::WorkerInfo& wi) {
    return Labels{{"worker", wi.resources.name}, {"worker_id", std::to_string(wi.id)}};
  };
  struct PerWorker {
    const char* name;
    const char* help;
    std::function<double(const core::WorkerInfo&)> value;
  };
  const std::vector<PerWorker> per_worker = {
      {"drover_worker_cpu_cores", "CPU cores the worker offers.",
       [](const core::WorkerInfo& wi) { return static_cast<double>(wi.resources.cpu_cores.size()); }},
      {"drover_worker_cpu_allocated_cores", "CPU cores given to tasks.",
       [](const core::WorkerInfo& wi) {
         return static_cast<double>(wi.resources.cpu_cores.size() - wi.free_cores.size());
       }},
      {"drover_worker_cpu_utilization_ratio",
       "Whole-machine CPU busy fraction (0..1) from the last heartbeat.",
       [](const core::WorkerInfo& wi) { return wi.utilization.cpu_percent / 100.0; }},
      {"drover_worker_memory_bytes", "Memory the worker offers.",
       [](const core::WorkerInfo& wi) { return static_cast<double>(wi.resources.mem_bytes); }},
      {"drover_worker_memory_allocated_bytes", "Memory reserved by tasks.",
       [](const core::WorkerInfo& wi) {
         return static_cast<double>(wi.resources.mem_bytes -
                                    std::min(wi.resources.mem_bytes, wi.free_mem_bytes));
       }},
      {"drover_worker_memory_used_bytes", "Memory in use on the machine, from the last heartbeat.",
       [](const core::WorkerInfo& wi) { return static_cast<double>(wi.utilization.mem_used_bytes); }},
      {"drover_worker_tasks", "Tasks assigned to or running on the worker.",
       [](const core::WorkerInfo& wi) { return static_cast<double>(wi.tasks.size()); }},
  };
  for (const PerWorker& m : per_worker) {
    w.Family(m.name, m.help, MetricType::kGauge);
    for (const core::WorkerInfo& wi : workers) {
      if (!wi.lost) w.Sample(m.name, worker_labels(wi), m.value(wi));
    }
  }
  w.Family("drover_worker_gpu_utilization_ratio",
           "GPU busy fraction (0..1) from the last heartbeat.", MetricType::kGauge);
  for (const core::WorkerInfo& wi : workers) {
    if (wi.lost) continue;
    for (const core::GpuUtilization& g : wi.utilization.gpus) {
      Labels l = worker_labels(wi);
      l.emplace_back("gpu", std::to_string(g.index));
      w.Sample("drover_worker_gpu_utilization_ratio", l, g.util_percent / 100.0);
    }
  }
  w.Family("drover_worker_gpu_memory_used_bytes", "GPU memory in use, from the last heartbeat.",
           MetricType::kGauge);
  for (const core::WorkerInfo& wi : workers) {
    if (wi.lost) continue;
    for (const core::GpuUtilization& g : wi.utilization.gpus) {
      Labels l = worker_labels(wi);
      l.emplace_back("gpu", std::to_string(g.index));
      w.Sample("drover_worker_gpu_memory_used_bytes", l, static_cast<double>(g.mem_used_bytes));
    }
  }
  w.Family("drover_worker_gpu_allocated_ratio",
           "Share of the GPU given to tasks (0..1; fractions are GPU shares).", MetricType::kGauge);
  for (const core::WorkerInfo& wi : workers) {
    if (wi.lost) continue;
    for (size_t i = 0; i < wi.resources.gpus.size() && i < wi.gpu_free_share.size(); ++i) {
      Labels l = worker_labels(wi);
      l.emplace_back("gpu", std::to_string(wi.resources.gpus[i].index));
      w.Sample("drover_worker_gpu_allocated_ratio", l,
               static_cast<double>(core::kWholeGpu - wi.gpu_free_share[i]) / core::kWholeGpu);
    }
  }

  // The scheduler and the journal.
  const DriverStats& st = driver_.stats();
  w.Family("drover_scheduling_latency_seconds",
           "From a task becoming runnable (queued, retry backoff over) to its assignment.",
           MetricType::kHistogram);
  w.Histogram("drover_scheduling_latency_seconds", {}, scheduling_latency_);
  w.Family("drover_lease_claims_total", "Lease claims sent to the store.", MetricType::kCounter);
  w.Sample("drover_lease_claims_total", {}, static_cast<double>(st.lease_claims));
  w.Family("drover_lease_rejections_total",
           "Lease claims refused because another owner holds a key.", MetricType::kCounter);
  w.Sample("drover_lease_rejections_total", {}, static_cast<double>(st.lease_rejections));
  w.Family("drover_lease_claim_errors_total", "Lease claims that failed with a store error.",
           MetricType::kCounter);
  w.Sample("drover_lease_claim_errors_total", {}, static_cast<double>(st.lease_claim_errors));
  w.Family("drover_journal_sync_seconds",
           "From a journal flush to the store's durability ack of its batch (fsync; Redis ack).",
           MetricType::kHistogram);
  w.Histogram("drover_journal_sync_seconds", {}, journal_sync_);
  w.Family("drover_owner_freeze_seconds",
           "Idle-desktop workers: from the owner's input to every task on that worker frozen, "
           "as the worker measured it.",
           MetricType::kHistogram);
  w.Histogram("drover_owner_freeze_seconds", {}, channel_.owner_freeze());
  w.Family("drover_worker_health_failures_total",
           "Workers' health checks that started to fail, by kind: disk (the work directory's "
           "file system), program (--health-check), gpu (one GPU found sick through NVML).",
           MetricType::kCounter);
  for (const auto& [kind, n] : channel_.health_failures()) {
    w.Sample("drover_worker_health_failures_total", {{"kind", kind}}, static_cast<double>(n));
  }
  w.Family("drover_worker_registry_writes_total",
           "Writes of the worker registry (workers.json, each a whole file and an fsync): the "
           "hellos of new workers that arrive together share one.",
           MetricType::kCounter);
  w.Sample("drover_worker_registry_writes_total", {},
           static_cast<double>(channel_.registry_writes()));
  w.Family("drover_quarantines_total", "Workers quarantined as black holes.",
           MetricType::kCounter);
  w.Sample("drover_quarantines_total", {}, static_cast<double>(sched.QuarantineCount()));
  w.Family("drover_journal_records_total", "Records appended to the journal.",
           MetricType::kCounter);
  w.Sample("drover_journal_records_total", {}, static_cast<double>(st.records));
  w.Family("drover_journal_append_errors_total", "Journal appends that failed.",
           MetricType::kCounter);
  w.Sample("drover_journal_append_errors_total", {}, static_cast<double>(st.append_errors));
  if (options_.journal_bytes) {
    w.Family("drover_journal_bytes", "Size of the journal.", MetricType::kGauge);
    w.Sample("drover_journal_bytes", {}, static_cast<double>(options_.journal_bytes()));
  }
  if (options_.body_bytes_sent && options_.body_bytes_received) {
    w.Family("drover_http_body_bytes_total",
             "Bytes of HTTP request and response bodies through this server's port.",
             MetricType::kCounter);
    w.Sample("drover_http_body_bytes_total", {{"direction", "sent"}},
             static_cast<double>(options_.body_bytes_sent()));
    w.Sample("drover_http_body_bytes_total", {{"direction", "received"}},
             static_cast<double>(options_.body_bytes_received()));
  }
  if (options_.relayed_bytes && options_.relayed_files) {
    w.Family("drover_file_relay_bytes_total",
             "Bytes the server fetched from holders for workers that could not reach them.",
             MetricType::kCounter);
    w.Sample("drover_file_relay_bytes_total", {}, static_cast<double>(options_.relayed_bytes()));
    w.Family("drover_file_relay_files_total",
             "Files the server fetched into its store for workers that could not reach the "
             "holder.",
             MetricType::kCounter);
    w.Sample("drover_file_relay_files_total", {}, static_cast<double>(options_.relayed_files()));
  }
  w.Family("drover_server_start_time_seconds", "When the server started (Unix seconds).",
           MetricType::kGauge);
  w.Sample("drover_server_start_time_seconds", {},
           static_cast<double>(ToMicros(options_.started_at)) / 1e6);
  return w.Take();
}

void Observability::AddRoutes(net::Server& server) {
  server.Route("GET", "/metrics", [this](const net::Request&, net::Responder done) {
    net::Response r;
    r.content_type = metrics::kPromContentType;
    r.body = MetricsText();
    done(std::move(r));
  });

  server.Route("GET", "/api/v1/utilization", [this](const net::Request& r, net::Responder done) {
    int64_t since = INT64_MIN;
    if (auto it = r.query.find("since_ms"); it != r.query.end()) {
      try {
        size_t used = 0;
        since = std::stoll(it->second, &used);
        if (used != it->second.size()) throw std::invalid_argument("since_ms");
      } catch (const std::exception&) {
        return done(ApiError(InvalidArgument("since_ms: expected Unix milliseconds, got \"" +
                                          it->second + "\"")));
      }
    }
    done(net::JsonResponse(
        metrics::UtilizationJson(options_.interval, ring_.capacity(), ring_.Since(since)).dump()));
  });

  server.Route("GET", "/api/v1/jobs/{id}/report",
               [this](const net::Request& r, net::Responder done) {
                 Result<JobId> id = ParseJobId(r.path_params.at("id"));
                 if (!id.ok()) return done(ApiError(id.status()));
                 Result<Page> page = ParsePage(r);
                 if (!page.ok()) return done(ApiError(page.status()));
                 Result<metrics::JobReportScan> started =
                     metrics::JobReportScan::Start(driver_.scheduler(), *id, driver_.Now());
                 if (!started.ok()) {
                   return done(JobNotFound(started.status(), *id, driver_.scheduler()));
                 }
                 auto scan = std::make_shared<metrics::JobReportScan>(std::move(*started));
                 RunSliced(loop_, alive_, [this, scan, page = *page, done] {
                   const core::Scheduler& sched = driver_.scheduler();
                   for (SliceBudget budget; !scan->Step(sched, kReportStep);) {
                     if (budget.Spent()) return false;
                   }
                   Result<nlohmann::json> report =
                       scan->Finish(sched, metrics::ReportPage{page.offset, page.limit});
                   if (!report.ok()) {
                     done(ApiError(report.status()));
                     return true;
                   }
                   PutPage(*report, page, scan->task_count());
                   done(net::JsonResponse(
                       report->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
                   return true;
                 });
               });
}

}  // namespace drover::server
