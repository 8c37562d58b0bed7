#include "proto/api_json.h"

#include <ctime>
#include <exception>
#include <tuple>

#include "common/quantity.h"
#include "proto/core_json.h"
#include "proto/json_util.h"

namespace drover::proto {
namespace {

using internal::DecodeContext;
using internal::Json;
using internal::Need;
using internal::ObjectReader;

constexpr size_t kMaxApiBodyBytes = 256 * 1024 * 1024;
constexpr int kMaxApiDepth = 64;

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

int64_t UnixMillis(Time t) { return FloorDiv(ToMicros(t), 1000); }

// A finished attempt's outcome; null when there is none.
Json OutcomeJson(const std::optional<core::TaskOutcome>& outcome) {
  if (!outcome) return nullptr;
  const core::TaskOutcome& o = *outcome;
  Json j{{"exit_code", o.exit_code},
         {"signal", o.signal},
         {"oom_killed", o.oom_killed},
         {"wall_ms", FloorDiv(o.usage.wall.count(), 1000)},
         {"cpu_ms", FloorDiv(o.usage.cpu.count(), 1000)},
         {"peak_mem_bytes", o.usage.peak_mem_bytes},
         {"result", o.result}};
  if (o.usage.io_read_bytes) j["io_read_bytes"] = *o.usage.io_read_bytes;
  if (o.usage.io_write_bytes) j["io_write_bytes"] = *o.usage.io_write_bytes;
  if (!o.image_digest.empty()) j["image_digest"] = o.image_digest;
  // A success's files ($DROVER_OUTPUT_DIR) and the worker holding them.
  Json files = Json::array();
  for (const core::OutputFile& f : o.outputs) {
    files.push_back(Json{{"name", f.name}, {"size", f.size}, {"sha256", f.sha256}});
  }
  j["outputs"] = std::move(files);
  if (o.outputs_on != 0) j["outputs_on"] = o.outputs_on;
  if (!o.replicas.empty()) j["replicas"] = o.replicas;
  if (o.cached_from.job != 0) {
    // Reused from the result cache: the task that ran, when it ended, how long it ran.
    j["cached_from"] = o.cached_from.ToString();
    j["cached_ended"] = FormatRfc3339(o.cached_ended);
    j["cached_ended_ms"] = UnixMillis(o.cached_ended);
    j["cached_ran_ms"] = FloorDiv(o.cached_ran.count(), 1000);
  }
  return j;
}

// Sets "<key>" (RFC 3339) and "<key>_ms".
void PutTime(Json& j, const std::string& key, std::optional<Time> t) {
  if (!t) {
    j[key] = nullptr;
    j[key + "_ms"] = nullptr;
    return;
  }
  j[key] = FormatRfc3339(*t);
  j[key + "_ms"] = UnixMillis(*t);
}

bool ReadTime(ObjectReader& r, const std::string& key, std::optional<Time>* out, Need need) {
  int64_t ms = 0;
  const Json* j = r.Get(key + "_ms", need);
  if (!r.ok()) return false;
  if (j == nullptr) {
    out->reset();
    return true;
  }
  if (!r.Integer(key + "_ms", &ms)) return false;
  *out = Time(Millis(ms));
  return true;
}

bool ReadRequiredTime(ObjectReader& r, const std::string& key, Time* out) {
  std::optional<Time> t;
  if (!ReadTime(r, key, &t, Need::kRequired)) return false;
  *out = *t;
  return true;
}

bool ReadStateName(const Json& j, const std::string& path, core::TaskState* out,
                   DecodeContext& ctx) {
  std::string name;
  if (!internal::ReadString(j, path, &name, ctx)) return false;
  for (int i = 0; i < core::kTaskStateCount; ++i) {
    if (core::TaskStateName(static_cast<core::TaskState>(i)) == name) {
      *out = static_cast<core::TaskState>(i);
      return true;
    }
  }
  return ctx.Fail(path, "unknown task state \"" + name + "\"");
}

bool ReadState(ObjectReader& r, std::string_view key, core::TaskState* out, DecodeContext& ctx) {
  const Json* j = r.Get(key, Need::kRequired);
  return r.ok() && ReadStateName(*j, r.PathOf(key), out, ctx);
}

Json GpuGrantsJson(const std::vector<core::GpuGrant>& gpus) {
  Json out = Json::array();
  for (const core::GpuGrant& g : gpus) {
    out.push_back(Json{{"index", g.index}, {"share", g.share}, {"mem_bytes", g.mem_bytes}});
  }
  return out;
}

bool ReadGrant(const Json& j, const std::string& path, core::GpuGrant* out, DecodeContext& ctx) {
  ObjectReader r(j, path, ctx);
  return r.Integer("index", &out->index) && r.Integer("share", &out->share) &&
         r.Integer("mem_bytes", &out->mem_bytes);
}

template <typename T, typename F>
bool ReadList(ObjectReader& r, std::string_view key, std::vector<T>* out, DecodeContext& ctx,
              F read_one) {
  const Json* j = r.Get(key, Need::kRequired);
  return r.ok() && internal::ReadVector<T>(*j, r.PathOf(key), out, ctx, read_one);
}

// ---- decoders of single objects --------------------------------------------

bool ReadJob(const Json& j, const std::string& path, core::JobInfo* out, DecodeContext& ctx) {
  ObjectReader r(j, path, ctx);
  if (!r.Integer("id", &out->id) || !r.String("name", &out->name) ||
      !r.String("user", &out->user, Need::kOptional) ||
      !ReadRequiredTime(r, "submitted_at", &out->submitted_at) ||
      !r.Integer("task_count", &out->task_count) || !r.Bool("done", &out->done) ||
      !r.Integer("cached", &out->cached, Need::kOptional)) {
    return false;
  }
  const Json* counts = r.Get("counts", Need::kRequired);
  if (!r.ok()) return false;
  ObjectReader c(*counts, r.PathOf("counts"), ctx);
  for (int i = 0; i < core::kTaskStateCount; ++i) {
    if (!c.Integer(core::TaskStateName(static_cast<core::TaskState>(i)), &out->counts[i],
                   Need::kOptional)) {
      return false;
    }
  }
  return c.ok();
}

bool ReadOutcomeApi(const Json& j, const std::string& path, core::TaskOutcome* out,
                    DecodeContext& ctx) {
  ObjectReader r(j, path, ctx);
  int64_t wall_ms = 0;
  int64_t cpu_ms = 0;
  if (!r.Integer("exit_code", &out->exit_code) || !r.Integer("signal", &out->signal) ||
      !r.Bool("oom_killed", &out->oom_killed) || !r.Integer("wall_ms", &wall_ms) ||
      !r.Integer("cpu_ms", &cpu_ms) || !r.Integer("peak_mem_bytes", &out->usage.peak_mem_bytes) ||
      !r.String("result", &out->result, Need::kOptional) ||
      !r.String("image_digest", &out->image_digest, Need::kOptional) ||
      !r.Integer("outputs_on", &out->outputs_on, Need::kOptional) ||
      !internal::ReadOptionalBytes(r, "io_read_bytes", &out->usage.io_read_bytes) ||
      !internal::ReadOptionalBytes(r, "io_write_bytes", &out->usage.io_write_bytes) ||
      !ReadList(r, "outputs", &out->outputs, ctx, internal::ReadOutputFile)) {
    return false;
  }
  if (const Json* replicas = r.Get("replicas", Need::kOptional)) {
    if (!internal::ReadWorkerIds(*replicas, r.PathOf("replicas"), &out->replicas, ctx)) {
      return false;
    }
  }
  if (r.Get("cached_from", Need::kOptional) != nullptr) {
    int64_t ended_ms = 0;
    int64_t ran_ms = 0;
    if (!r.Task("cached_from", &out->cached_from) ||
        !r.Integer("cached_ended_ms", &ended_ms, Need::kOptional) ||
        !r.Integer("cached_ran_ms", &ran_ms, Need::kOptional)) {
      return false;
    }
    out->cached_ended = TimeFromMicros(ended_ms * 1000);
    out->cached_ran = Millis(ran_ms);
  }
  out->usage.wall = Millis(wall_ms);
  out->usage.cpu = Millis(cpu_ms);
  return true;
}

bool ReadTask(const Json& j, const std::string& path, core::TaskInfo* out, DecodeContext& ctx) {
  ObjectReader r(j, path, ctx);
  if (!r.Task("id", &out->id) || !r.String("group", &out->group) ||
      !r.Integer("array_index", &out->array_index) || !ReadState(r, "state", &out->state, ctx) ||
      !r.Integer("attempt", &out->attempt) || !r.String("reason", &out->reason, Need::kOptional) ||
      !ReadRequiredTime(r, "submitted_at", &out->submitted_at) ||
      !ReadTime(r, "started_at", &out->started_at, Need::kOptional) ||
      !ReadTime(r, "finished_at", &out->finished_at, Need::kOptional) ||
      !ReadTime(r, "retry_at", &out->retry_at, Need::kOptional)) {
    return false;
  }
  WorkerId worker = 0;
  if (r.Get("worker", Need::kOptional) != nullptr) {
    if (!r.Integer("worker", &worker)) return false;
    out->worker = worker;
  }
  if (const Json* outcome = r.Get("outcome", Need::kOptional)) {
    core::TaskOutcome o;
    if (!ReadOutcomeApi(*outcome, r.PathOf("outcome"), &o, ctx)) return false;
    out->outcome = std::move(o);
  }
  if (r.Get("after", Need::kOptional) != nullptr) {
    TaskId after;
    if (!r.Task("after", &after)) return false;
    out->after = after;
  }
  // Its isolation beyond its resources, where it asked for any.
  std::string network;
  if (!r.String("network", &network, Need::kOptional) ||
      !r.Integer("disk", &out->disk_bytes, Need::kOptional) ||
      !r.String("image", &out->image, Need::kOptional)) {
    return false;
  }
  out->private_network = network == "none";
  if (const Json* io = r.Get("io", Need::kOptional)) {
    ObjectReader limits(*io, r.PathOf("io"), ctx);
    if (!limits.Integer("read_bps", &out->io.read_bps, Need::kOptional) ||
        !limits.Integer("write_bps", &out->io.write_bps, Need::kOptional) ||
        !limits.Integer("weight", &out->io.weight, Need::kOptional)) {
      return false;
    }
  }
  return r.ok() && ReadList(r, "cores", &out->cores, ctx, internal::ReadInteger<uint32_t>) &&
         ReadList(r, "gpus", &out->gpus, ctx, ReadGrant);
}

bool ReadWorkerGpu(const Json& j, const std::string& path, core::WorkerInfo* out,
                   DecodeContext& ctx) {
  ObjectReader r(j, path, ctx);
  core::GpuDevice gpu;
  int64_t free_share = 0;
  uint64_t free_mem = 0;
  if (!r.Integer("index", &gpu.index) || !r.String("uuid", &gpu.uuid) ||
      !r.String("model", &gpu.model) || !r.Integer("memory_bytes", &gpu.memory_bytes) ||
      !r.Integer("free_share", &free_share) || !r.Integer("free_mem_bytes", &free_mem)) {
    return false;
  }
  out->resources.gpus.push_back(std::move(gpu));
  out->gpu_free_share.push_back(free_share);
  out->gpu_free_mem_bytes.push_back(free_mem);
  return true;
}

bool ReadGpuUse(const Json& j, const std::string& path, core::GpuUtilization* out,
                DecodeContext& ctx) {
  ObjectReader r(j, path, ctx);
  return r.Integer("index", &out->index) && r.Integer("util_percent", &out->util_percent) &&
         r.Integer("mem_used_bytes", &out->mem_used_bytes);
}

bool ReadWorker(const Json& j, const std::string& path, core::WorkerInfo* out, DecodeContext& ctx) {
  ObjectReader r(j, path, ctx);
  if (!r.Integer("id", &out->id) || !r.String("name", &out->resources.name) ||
      !ReadList(r, "cpu_cores", &out->resources.cpu_cores, ctx, internal::ReadInteger<uint32_t>) ||
      !r.Integer("mem_bytes", &out->resources.mem_bytes) || !r.Bool("drained", &out->drained) ||
      !r.Bool("lost", &out->lost) ||
      !ReadList(r, "free_cores", &out->free_cores, ctx, internal::ReadInteger<uint32_t>) ||
      !r.Integer("free_mem_bytes", &out->free_mem_bytes) ||
      !ReadList(r, "tasks", &out->tasks, ctx, internal::ReadTaskId) ||
      !ReadRequiredTime(r, "last_heartbeat", &out->last_heartbeat) ||
      !ReadTime(r, "ends_at", &out->resources.ends_at, Need::kOptional) ||
      !r.Bool("refusing", &out->refusing, Need::kOptional) ||
      !r.Bool("paused", &out->paused, Need::kOptional) ||
      !r.String("note", &out->note, Need::kOptional) ||
      !r.Integer("offer_changes", &out->offer_changes, Need::kOptional)) {
    return false;
  }
  const Json* gpus = r.Get("gpus", Need::kRequired);
  if (!r.ok() || !internal::ForEachElement(*gpus, r.PathOf("gpus"), ctx,
                                           [&](const Json& g, const std::string& p) {
                                             return ReadWorkerGpu(g, p, out, ctx);
                                           })) {
    return false;
  }
  for (auto [key, map] : {std::pair{"counters", &out->resources.counters},
                          std::pair{"free_counters", &out->free_counters}}) {
    const Json* m = r.Get(key, Need::kRequired);
    if (!r.ok() || !internal::ReadCounterMap(*m, r.PathOf(key), map, ctx)) return false;
  }
  const Json* labels = r.Get("labels", Need::kRequired);
  if (!r.ok() ||
      !internal::ReadStringMap(*labels, r.PathOf("labels"), &out->resources.labels, ctx)) {
    return false;
  }
  const Json* u = r.Get("utilization", Need::kRequired);
  if (!r.ok()) return false;
  ObjectReader ur(*u, r.PathOf("utilization"), ctx);
  return ur.Integer("cpu_percent", &out->utilization.cpu_percent) &&
         ur.Integer("mem_used_bytes", &out->utilization.mem_used_bytes) &&
         ReadList(ur, "gpus", &out->utilization.gpus, ctx, ReadGpuUse);
}

// Parses `text` and runs `read` on it, turning the context into a Status.
template <typename T, typename F>
Result<T> DecodeWith(std::string_view text, F read) {
  try {
    ASSIGN_OR_RETURN(Json j, internal::ParseJson(text, kMaxApiBodyBytes, kMaxApiDepth));
    DecodeContext ctx;
    T value{};
    if (!read(j, &value, ctx)) return InvalidArgument(ctx.Describe());
    return value;
  } catch (const std::exception& e) {
    return Internal(std::string("API body could not be decoded: ") + e.what());
  }
}

template <typename T, typename F>
Result<std::vector<T>> DecodeList(std::string_view text, std::string_view key, F read_one) {
  return DecodeWith<std::vector<T>>(text,
                                    [&](const Json& j, std::vector<T>* out, DecodeContext& ctx) {
                                      ObjectReader r(j, "", ctx);
                                      return ReadList(r, key, out, ctx, read_one);
                                    });
}

}  // namespace

std::string FormatRfc3339(Time t) {
  int64_t ms = UnixMillis(t);
  std::time_t secs = static_cast<std::time_t>(FloorDiv(ms, 1000));
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms - FloorDiv(ms, 1000) * 1000));
  return buf;
}

nlohmann::json JobInfoJson(const core::JobInfo& job) {
  Json counts = Json::object();
  for (int i = 0; i < core::kTaskStateCount; ++i) {
    counts[std::string(core::TaskStateName(static_cast<core::TaskState>(i)))] = job.counts[i];
  }
  Json j{{"id", job.id},     {"name", job.name},
         {"user", job.user}, {"task_count", job.task_count},
         {"done", job.done}, {"counts", std::move(counts)}};
  PutTime(j, "submitted_at", job.submitted_at);
  if (job.cached != 0) j["cached"] = job.cached;  // succeeded from the result cache
  return j;
}

nlohmann::json TaskInfoJson(const core::TaskInfo& task) {
  Json j{{"id", task.id.ToString()},
         {"job", task.id.job},
         {"group", task.group},
         {"array_index", task.array_index},
         {"state", core::TaskStateName(task.state)},
         {"attempt", task.attempt},
         {"worker", task.worker ? Json(*task.worker) : Json()},
         {"reason", task.reason},
         {"cores", task.cores},
         {"gpus", GpuGrantsJson(task.gpus)}};
  PutTime(j, "submitted_at", task.submitted_at);
  PutTime(j, "started_at", task.started_at);
  PutTime(j, "finished_at", task.finished_at);
  PutTime(j, "retry_at", task.retry_at);
  j["outcome"] = OutcomeJson(task.outcome);
  if (task.after) j["after"] = task.after->ToString();
  if (task.private_network) j["network"] = "none";
  if (task.disk_bytes != 0) j["disk"] = task.disk_bytes;
  if (!task.image.empty()) j["image"] = task.image;
  if (task.io.Any()) {
    j["io"] = Json{{"read_bps", task.io.read_bps},
                   {"write_bps", task.io.write_bps},
                   {"weight", task.io.weight}};
  }
  // The latest saved $DROVER_CHECKPOINT_DIR (core/checkpoint.h), or null.
  if (task.checkpoint) {
    Json files = Json::array();
    for (const core::OutputFile& f : task.checkpoint->files) {
      files.push_back(Json{{"name", f.name}, {"size", f.size}, {"sha256", f.sha256}});
    }
    Json c{{"attempt", task.checkpoint->attempt},
           {"worker", task.checkpoint->worker},
           {"files", std::move(files)}};
    PutTime(c, "saved_at", task.checkpoint->saved_at);
    j["checkpoint"] = std::move(c);
  } else {
    j["checkpoint"] = nullptr;
  }
  return j;
}

namespace {
void HideOutcome(Json& outcome) {
  if (!outcome.is_object()) return;
  outcome["result"] = "";
  outcome["outputs"] = Json::array();
  outcome.erase("outputs_on");
  outcome.erase("replicas");
}
}  // namespace

void HideContents(nlohmann::json& task) {
  if (!task.is_object()) return;
  if (auto o = task.find("outcome"); o != task.end()) HideOutcome(*o);
  if (auto c = task.find("checkpoint"); c != task.end() && c->is_object()) {
    (*c)["files"] = Json::array();
  }
  if (auto a = task.find("attempts"); a != task.end() && a->is_array()) {
    for (Json& attempt : *a) {
      if (auto o = attempt.find("outcome"); o != attempt.end()) HideOutcome(*o);
    }
  }
  if (auto spec = task.find("spec"); spec != task.end() && spec->is_object()) {
    spec->erase("env");
    spec->erase("input_files");
  }
  task["contents_hidden"] = true;
}

nlohmann::json AttemptJson(const AttemptView& a) {
  Json j{{"attempt", a.attempt},
         {"worker", a.worker ? Json(*a.worker) : Json()},
         {"state", a.state},
         {"reason", a.reason}};
  PutTime(j, "started_at", a.started_at);
  PutTime(j, "finished_at", a.finished_at);
  j["outcome"] = OutcomeJson(a.outcome);
  return j;
}

nlohmann::json WorkerInfoJson(const core::WorkerInfo& worker) {
  const core::WorkerResources& res = worker.resources;
  Json gpus = Json::array();
  for (size_t i = 0; i < res.gpus.size(); ++i) {
    const core::GpuDevice& gpu = res.gpus[i];
    gpus.push_back(
        Json{{"index", gpu.index},
             {"uuid", gpu.uuid},
             {"model", gpu.model},
             {"memory_bytes", gpu.memory_bytes},
             {"free_share", i < worker.gpu_free_share.size() ? worker.gpu_free_share[i] : 0},
             {"free_mem_bytes",
              i < worker.gpu_free_mem_bytes.size() ? worker.gpu_free_mem_bytes[i] : 0}});
    // Out of the offer: its worker's checks found it sick.
    if (auto sick = worker.sick_gpus.find(gpu.index); sick != worker.sick_gpus.end()) {
      gpus.back()["sick"] = sick->second;
    }
  }
  Json tasks = Json::array();
  for (const TaskId& t : worker.tasks) tasks.push_back(t.ToString());
  Json gpu_use = Json::array();
  for (const core::GpuUtilization& g : worker.utilization.gpus) {
    gpu_use.push_back(Json{{"index", g.index},
                           {"util_percent", g.util_percent},
                           {"mem_used_bytes", g.mem_used_bytes}});
  }
  Json j{{"id", worker.id},
         {"name", res.name},
         {"cpu_cores", res.cpu_cores},
         {"mem_bytes", res.mem_bytes},
         {"gpus", std::move(gpus)},
         {"counters", res.counters},
         {"labels", res.labels},
         {"drained", worker.drained},
         {"lost", worker.lost},
         {"free_cores", worker.free_cores},
         {"free_mem_bytes", worker.free_mem_bytes},
         {"free_counters", worker.free_counters},
         {"tasks", std::move(tasks)},
         {"utilization", Json{{"cpu_percent", worker.utilization.cpu_percent},
                              {"mem_used_bytes", worker.utilization.mem_used_bytes},
                              {"gpus", std::move(gpu_use)}}}};
  PutTime(j, "last_heartbeat", worker.last_heartbeat);
  PutTime(j, "ends_at", res.ends_at);
  // What tasks that ask for them need: a network of their own, free disk.
  j["private_network"] = res.private_network;
  if (res.disk_free_bytes != 0) j["disk_free_bytes"] = res.disk_free_bytes;
  // What runs its tasks with an image (none: null), and whether with GPUs.
  j["container_runtime"] = res.container_runtime.empty() ? Json() : Json(res.container_runtime);
  j["container_gpus"] = res.container_gpus;
  j["refusing"] = worker.refusing;
  j["paused"] = worker.paused;
  if (!worker.unhealthy.empty()) {
    j["unhealthy"] = worker.unhealthy;
    PutTime(j, "unhealthy_since", worker.unhealthy_since);
  }
  if (!worker.quarantine_why.empty()) {
    j["quarantined"] = worker.quarantine_why;
    PutTime(j, "quarantined_until", worker.quarantined_until);
  }
  if (!worker.note.empty()) {
    j["note"] = worker.note;
    PutTime(j, "note_since", worker.note_since);
  }
  j["offer_changes"] = worker.offer_changes;
  if (worker.offer_changes > 0) PutTime(j, "offer_changed_at", worker.offer_changed_at);
  return j;
}

std::string EncodeJobInfo(const core::JobInfo& job) { return internal::Dump(JobInfoJson(job)); }
std::string EncodeTaskInfo(const core::TaskInfo& task) {
  return internal::Dump(TaskInfoJson(task));
}
std::string EncodeWorkerInfo(const core::WorkerInfo& worker) {
  return internal::Dump(WorkerInfoJson(worker));
}

std::string EncodeJobList(const std::vector<core::JobInfo>& jobs) {
  Json list = Json::array();
  for (const core::JobInfo& job : jobs) list.push_back(JobInfoJson(job));
  return internal::Dump(Json{{"jobs", std::move(list)}});
}
std::string EncodeTaskList(const std::vector<core::TaskInfo>& tasks) {
  Json list = Json::array();
  for (const core::TaskInfo& task : tasks) list.push_back(TaskInfoJson(task));
  return internal::Dump(Json{{"tasks", std::move(list)}});
}
std::string EncodeWorkerList(const std::vector<core::WorkerInfo>& workers) {
  Json list = Json::array();
  for (const core::WorkerInfo& worker : workers) list.push_back(WorkerInfoJson(worker));
  return internal::Dump(Json{{"workers", std::move(list)}});
}

namespace {
Json TaskEventJson(const core::TaskStateChanged& change, Time at) {
  Json j{{"type", "task_state"},
         {"task", change.task.ToString()},
         {"from", core::TaskStateName(change.from)},
         {"to", core::TaskStateName(change.to)},
         {"attempt", change.attempt},
         {"reason", change.reason}};
  PutTime(j, "at", at);
  return j;
}
}  // namespace

std::string EncodeTaskEvent(const core::TaskStateChanged& change, Time at) {
  return internal::Dump(TaskEventJson(change, at));
}

std::string EncodeTaskEvent(const core::TaskStateChanged& change, Time at,
                            const core::TaskInfo& info, bool hide_contents) {
  Json j = TaskEventJson(change, at);
  j["info"] = TaskInfoJson(info);
  if (hide_contents) HideContents(j["info"]);
  return internal::Dump(j);
}

std::string EncodeErrorBody(const Status& status, std::string_view field) {
  Json error{{"code", StatusCodeName(status.code())}, {"message", status.message()}};
  if (!field.empty()) error["field"] = field;
  return internal::Dump(Json{{"error", std::move(error)}});
}

Result<core::JobInfo> DecodeJobInfo(std::string_view text) {
  return DecodeWith<core::JobInfo>(text, [](const Json& j, core::JobInfo* out, DecodeContext& ctx) {
    return ReadJob(j, "", out, ctx);
  });
}
Result<core::TaskInfo> DecodeTaskInfo(std::string_view text) {
  return DecodeWith<core::TaskInfo>(text,
                                    [](const Json& j, core::TaskInfo* out, DecodeContext& ctx) {
                                      return ReadTask(j, "", out, ctx);
                                    });
}
Result<core::WorkerInfo> DecodeWorkerInfo(std::string_view text) {
  return DecodeWith<core::WorkerInfo>(text,
                                      [](const Json& j, core::WorkerInfo* out, DecodeContext& ctx) {
                                        return ReadWorker(j, "", out, ctx);
                                      });
}
Result<std::vector<core::JobInfo>> DecodeJobList(std::string_view text) {
  return DecodeList<core::JobInfo>(text, "jobs", ReadJob);
}
Result<std::vector<core::TaskInfo>> DecodeTaskList(std::string_view text) {
  return DecodeList<core::TaskInfo>(text, "tasks", ReadTask);
}
Result<std::vector<core::WorkerInfo>> DecodeWorkerList(std::string_view text) {
  return DecodeList<core::WorkerInfo>(text, "workers", ReadWorker);
}

Result<TaskEvent> DecodeTaskEvent(std::string_view text) {
  return DecodeWith<TaskEvent>(text, [](const Json& j, TaskEvent* out, DecodeContext& ctx) {
    ObjectReader r(j, "", ctx);
    std::string type;
    if (!r.String("type", &type)) return false;
    if (type != "task_state")
      return ctx.Fail("type", "expected \"task_state\", got \"" + type + "\"");
    return r.Task("task", &out->change.task) && ReadState(r, "from", &out->change.from, ctx) &&
           ReadState(r, "to", &out->change.to, ctx) && r.Integer("attempt", &out->change.attempt) &&
           r.String("reason", &out->change.reason, Need::kOptional) &&
           ReadRequiredTime(r, "at", &out->at);
  });
}

Result<ApiError> DecodeErrorBody(std::string_view text) {
  return DecodeWith<ApiError>(text, [](const Json& j, ApiError* out, DecodeContext& ctx) {
    ObjectReader r(j, "", ctx);
    const Json* error = r.Get("error", Need::kRequired);
    if (!r.ok()) return false;
    ObjectReader e(*error, "error", ctx);
    return e.String("code", &out->code) && e.String("message", &out->message) &&
           e.String("field", &out->field, Need::kOptional);
  });
}

Result<WatchRequest> ParseWatchRequest(std::string_view text) {
  constexpr size_t kMaxWatchBytes = 1024;
  if (text.size() > kMaxWatchBytes) {
    return InvalidArgument("watch message is " + std::to_string(text.size()) +
                           " bytes, more than the limit of " + std::to_string(kMaxWatchBytes));
  }
  return DecodeWith<WatchRequest>(text, [](const Json& j, WatchRequest* out, DecodeContext& ctx) {
    if (!j.is_object() || j.size() != 1) {
      return ctx.Fail("", R"(expected {"watch":"JOB"} or {"watch":"JOB.TASK"} (or "unwatch"))");
    }
    const std::string key = j.begin().key();
    if (key != "watch" && key != "unwatch") {
      return ctx.Fail("", "unknown key \"" + key + "\": expected \"watch\" or \"unwatch\"");
    }
    out->watch = key == "watch";
    if (!j.begin().value().is_string()) return ctx.Fail(key, "expected a job or task id string");
    const std::string id = j.begin().value().get<std::string>();
    if (id.find('.') == std::string::npos) {
      Result<JobId> job = ParseJobId(id);
      if (!job.ok()) return ctx.Fail(key, job.status().message());
      out->job = *job;
      return true;
    }
    Result<TaskId> task = ParseTaskId(id);
    if (!task.ok()) return ctx.Fail(key, task.status().message());
    out->job = task->job;
    out->task = task->index;
    return true;
  });
}

Result<AllocQueueRequest> ParseAllocQueueRequest(std::string_view text) {
  constexpr size_t kMaxAllocBytes = 64 << 10;
  if (text.size() > kMaxAllocBytes) {
    return InvalidArgument("allocation queue is " + std::to_string(text.size()) +
                           " bytes, more than the limit of " + std::to_string(kMaxAllocBytes));
  }
  return DecodeWith<AllocQueueRequest>(text, [](const Json& j, AllocQueueRequest* out,
                                                DecodeContext& ctx) {
    ObjectReader r(j, "", ctx);
    if (!r.RejectUnknown({"kind", "max_workers", "time_limit", "idle_timeout", "server_address",
                          "sbatch_args", "worker_args"}) ||
        !r.String("kind", &out->kind) || !r.Integer("max_workers", &out->max_workers) ||
        !r.String("server_address", &out->server_address, Need::kOptional)) {
      return false;
    }
    if (out->kind != "slurm") {
      return ctx.Fail("kind", "unknown kind \"" + out->kind + "\": only \"slurm\" is supported");
    }
    if (out->max_workers == 0 || out->max_workers > kMaxAllocWorkers) {
      return ctx.Fail("max_workers", "must be 1 to " + std::to_string(kMaxAllocWorkers));
    }
    for (auto [key, need, dest] :
         {std::tuple{"time_limit", Need::kRequired, &out->time_limit},
          std::tuple{"idle_timeout", Need::kOptional, &out->idle_timeout}}) {
      std::string text;
      if (!r.String(key, &text, need)) return false;
      if (text.empty() && need == Need::kOptional) continue;
      Result<Duration> d = ParseDuration(text);
      if (!d.ok()) return ctx.Fail(key, d.status().message());
      if (*d < Seconds(1) || *d > Seconds(366 * 86400)) {
        return ctx.Fail(key, "must be from 1s to 366d");
      }
      *dest = *d;
    }
    for (auto [key, dest] : {std::pair{"sbatch_args", &out->sbatch_args},
                             std::pair{"worker_args", &out->worker_args}}) {
      const Json* args = r.Get(key, Need::kOptional);
      if (args != nullptr && !internal::ReadVector<std::string>(*args, r.PathOf(key), dest, ctx,
                                                                internal::ReadString)) {
        return false;
      }
    }
    return r.ok();
  });
}

}  // namespace drover::proto
