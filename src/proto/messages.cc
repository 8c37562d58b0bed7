#include "proto/messages.h"

#include <exception>
#include <utility>

#include "proto/core_json.h"
#include "proto/json_util.h"
#include "proto/messages_internal.h"

namespace drover::proto {
namespace {

using internal::DecodeContext;
using internal::Json;
using internal::Need;
using internal::ObjectReader;

constexpr std::string_view Name(const Hello&) { return "hello"; }
constexpr std::string_view Name(const Heartbeat&) { return "heartbeat"; }
constexpr std::string_view Name(const Started&) { return "started"; }
constexpr std::string_view Name(const Finished&) { return "finished"; }
constexpr std::string_view Name(const Refused&) { return "refused"; }
constexpr std::string_view Name(const LogChunk&) { return "log_chunk"; }
constexpr std::string_view Name(const Drain&) { return "drain"; }
constexpr std::string_view Name(const Owner&) { return "owner"; }
constexpr std::string_view Name(const CheckpointSaved&) { return "checkpoint_saved"; }
constexpr std::string_view Name(const OutputsKept&) { return "outputs_kept"; }
constexpr std::string_view Name(const ReleaseOutputs&) { return "release_outputs"; }
constexpr std::string_view Name(const OutputsReplicated&) { return "outputs_replicated"; }
constexpr std::string_view Name(const Replicate&) { return "replicate"; }
constexpr std::string_view Name(const HelloAck&) { return "hello_ack"; }
constexpr std::string_view Name(const Assign&) { return "assign"; }
constexpr std::string_view Name(const Ack&) { return "ack"; }
constexpr std::string_view Name(const Cancel&) { return "cancel"; }
constexpr std::string_view Name(const Kill&) { return "kill"; }
constexpr std::string_view Name(const Withdraw&) { return "withdraw"; }
constexpr std::string_view Name(const LogRequest&) { return "log_request"; }
constexpr std::string_view Name(const Error&) { return "error"; }

// ---- pieces shared by several messages -----------------------------------

Json AttemptJson(const TaskId& task, uint32_t attempt) {
  return Json{{"task", task.ToString()}, {"attempt", attempt}};
}

bool ReadTaskAttempt(const Json& j, const std::string& path, TaskAttempt* out, DecodeContext& ctx) {
  ObjectReader r(j, path, ctx);
  return r.Task("task", &out->task) && r.Integer("attempt", &out->attempt);
}

Json AttemptListJson(const std::vector<TaskAttempt>& list) {
  Json out = Json::array();
  for (const TaskAttempt& a : list) out.push_back(AttemptJson(a.task, a.attempt));
  return out;
}

Json RunningListJson(const std::vector<RunningTask>& list) {
  Json out = Json::array();
  for (const RunningTask& a : list) {
    Json j = AttemptJson(a.task, a.attempt);
    j["cores"] = a.cores;
    Json gpus = Json::array();
    for (const core::GpuGrant& g : a.gpus) gpus.push_back(internal::GpuGrantJson(g));
    j["gpus"] = std::move(gpus);
    if (a.queued) j["queued"] = true;
    out.push_back(std::move(j));
  }
  return out;
}

Json FinishedTaskJson(const FinishedTask& f) {
  Json j = AttemptJson(f.task, f.attempt);
  j["outcome"] = internal::OutcomeJson(f.outcome);
  j["finished_at_us"] = ToMicros(f.finished_at);
  if (f.never_started) j["never_started"] = true;
  if (f.vacated) j["vacated"] = true;
  return j;
}

bool ReadFinishedTask(const Json& j, const std::string& path, FinishedTask* out,
                      DecodeContext& ctx) {
  ObjectReader r(j, path, ctx);
  if (!r.Task("task", &out->task) || !r.Integer("attempt", &out->attempt)) return false;
  const Json* outcome = r.Get("outcome", Need::kRequired);
  if (!r.ok() || !internal::ReadOutcome(*outcome, r.PathOf("outcome"), &out->outcome, ctx)) {
    return false;
  }
  return r.TimeMicros("finished_at_us", &out->finished_at) &&
         r.Bool("never_started", &out->never_started, Need::kOptional) &&
         r.Bool("vacated", &out->vacated, Need::kOptional);
}

Json FinishedListJson(const std::vector<FinishedTask>& list) {
  Json out = Json::array();
  for (const FinishedTask& f : list) out.push_back(FinishedTaskJson(f));
  return out;
}

template <typename T, typename F>
bool ReadList(ObjectReader& r, std::string_view key, std::vector<T>* out, DecodeContext& ctx,
              F read_one, Need need = Need::kRequired) {
  const Json* j = r.Get(key, need);
  if (!r.ok()) return false;
  return j == nullptr || internal::ReadVector<T>(*j, r.PathOf(key), out, ctx, read_one);
}

bool ReadStream(ObjectReader& r, LogStream* out, DecodeContext& ctx) {
  std::string name;
  if (!r.String("stream", &name)) return false;
  if (name == "stdout") {
    *out = LogStream::kStdout;
  } else if (name == "stderr") {
    *out = LogStream::kStderr;
  } else {
    return ctx.Fail(r.PathOf("stream"), "expected \"stdout\" or \"stderr\", got \"" + name + "\"");
  }
  return true;
}

bool ReadRunningTask(const Json& j, const std::string& path, RunningTask* out,
                     DecodeContext& ctx) {
  ObjectReader r(j, path, ctx);
  return r.Task("task", &out->task) && r.Integer("attempt", &out->attempt) &&
         ReadList(r, "cores", &out->cores, ctx, internal::ReadInteger<uint32_t>, Need::kOptional) &&
         ReadList(r, "gpus", &out->gpus, ctx, internal::ReadGpuGrant, Need::kOptional) &&
         r.Bool("queued", &out->queued, Need::kOptional);
}

// ---- worker -> server ------------------------------------------------------

Json Body(const Hello& m) {
  Json j{{"v", m.protocol_version},
         {"name", m.worker_name},
         {"previous_id", m.previous_id},
         {"agent_version", m.agent_version},
         {"key", m.key},
         {"files_port", m.files_port},
         {"files_fingerprint", m.files_fingerprint},
         {"resources", internal::WorkerResourcesJson(m.resources)},
         {"running", RunningListJson(m.running)},
         {"finished", FinishedListJson(m.finished)}};
  if (m.batches) j["batches"] = true;
  if (m.argv_ids) j["argv_ids"] = true;
  if (m.binary) j["binary"] = true;
  return j;
}
bool Read(ObjectReader& r, Hello* m, DecodeContext& ctx) {
  if (!r.Integer("v", &m->protocol_version) || !r.String("name", &m->worker_name) ||
      !r.Integer("previous_id", &m->previous_id, Need::kOptional) ||
      !r.String("agent_version", &m->agent_version, Need::kOptional) ||
      !r.String("key", &m->key, Need::kOptional) ||
      !r.Integer("files_port", &m->files_port, Need::kOptional) ||
      !r.String("files_fingerprint", &m->files_fingerprint, Need::kOptional) ||
      !r.Bool("batches", &m->batches, Need::kOptional) ||
      !r.Bool("argv_ids", &m->argv_ids, Need::kOptional) ||
      !r.Bool("binary", &m->binary, Need::kOptional)) {
    return false;
  }
  if (!m->files_fingerprint.empty() && !core::IsSha256Hex(m->files_fingerprint)) {
    return ctx.Fail("files_fingerprint", "expected 64 lower-case hex digits");
  }
  if (m->worker_name.empty()) return ctx.Fail("name", "must not be empty");
  if (m->worker_name.size() > kMaxWorkerNameBytes) {
    return ctx.Fail("name", "longer than " + std::to_string(kMaxWorkerNameBytes) + " bytes");
  }
  for (const char c : m->worker_name) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return ctx.Fail("name", "holds a control character");
    }
  }
  const Json* resources = r.Get("resources", Need::kRequired);
  if (!r.ok() || !internal::ReadWorkerResources(*resources, "resources", &m->resources, ctx)) {
    return false;
  }
  m->resources.name = m->worker_name;
  return ReadList(r, "running", &m->running, ctx, ReadRunningTask, Need::kOptional) &&
         ReadList(r, "finished", &m->finished, ctx, ReadFinishedTask, Need::kOptional);
}

Json Body(const Heartbeat& m) {
  Json j{{"utilization", internal::UtilizationJson(m.utilization)},
         {"running", AttemptListJson(m.running)}};
  if (!m.unhealthy.empty()) j["unhealthy"] = m.unhealthy;
  if (!m.unhealthy_kind.empty()) j["unhealthy_kind"] = m.unhealthy_kind;
  if (!m.sick_gpus.empty()) {
    Json sick = Json::array();
    for (const auto& [index, why] : m.sick_gpus) sick.push_back(Json{{"index", index}, {"why", why}});
    j["sick_gpus"] = std::move(sick);
  }
  return j;
}
bool ReadSickGpu(const Json& j, const std::string& path, std::pair<uint32_t, std::string>* out,
                 DecodeContext& ctx) {
  ObjectReader r(j, path, ctx);
  return r.Integer("index", &out->first) && r.String("why", &out->second);
}
bool ReadSickGpus(ObjectReader& r, Heartbeat* m, DecodeContext& ctx) {
  std::vector<std::pair<uint32_t, std::string>> sick;
  if (!ReadList(r, "sick_gpus", &sick, ctx, ReadSickGpu, Need::kOptional)) return false;
  for (auto& [index, why] : sick) m->sick_gpus[index] = std::move(why);
  return true;
}
bool Read(ObjectReader& r, Heartbeat* m, DecodeContext& ctx) {
  const Json* u = r.Get("utilization", Need::kRequired);
  return r.ok() && internal::ReadUtilization(*u, "utilization", &m->utilization, ctx) &&
         ReadList(r, "running", &m->running, ctx, ReadTaskAttempt, Need::kOptional) &&
         r.String("unhealthy", &m->unhealthy, Need::kOptional) &&
         r.String("unhealthy_kind", &m->unhealthy_kind, Need::kOptional) &&
         ReadSickGpus(r, m, ctx);
}

Json Body(const Started& m) {
  Json tasks = Json::array();
  for (const StartedTask& s : m.tasks) {
    Json j = AttemptJson(s.task, s.attempt);
    j["started_at_us"] = ToMicros(s.started_at);
    tasks.push_back(std::move(j));
  }
  return Json{{"tasks", std::move(tasks)}};
}
bool ReadStartedTask(const Json& j, const std::string& path, StartedTask* out, DecodeContext& ctx) {
  ObjectReader r(j, path, ctx);
  return r.Task("task", &out->task) && r.Integer("attempt", &out->attempt) &&
         r.TimeMicros("started_at_us", &out->started_at);
}
bool Read(ObjectReader& r, Started* m, DecodeContext& ctx) {
  return ReadList(r, "tasks", &m->tasks, ctx, ReadStartedTask);
}

Json Body(const Finished& m) { return Json{{"tasks", FinishedListJson(m.tasks)}}; }
bool Read(ObjectReader& r, Finished* m, DecodeContext& ctx) {
  return ReadList(r, "tasks", &m->tasks, ctx, ReadFinishedTask);
}

Json Body(const Refused& m) {
  Json j = AttemptJson(m.task, m.attempt);
  j["reason"] = m.reason;
  if (!m.corrupt.empty()) {
    Json list = Json::array();
    for (const CorruptInput& c : m.corrupt) {
      list.push_back(Json{{"task", c.task.ToString()}, {"worker", c.holder}});
    }
    j["corrupt"] = std::move(list);
  }
  return j;
}
bool ReadCorruptInput(const Json& j, const std::string& path, CorruptInput* out,
                      DecodeContext& ctx) {
  ObjectReader r(j, path, ctx);
  if (!r.Task("task", &out->task) || !r.Integer("worker", &out->holder)) return false;
  if (out->holder == 0) return ctx.Fail(r.PathOf("worker"), "is not a worker id (0)");
  return true;
}
bool Read(ObjectReader& r, Refused* m, DecodeContext& ctx) {
  return r.Task("task", &m->task) && r.Integer("attempt", &m->attempt) &&
         r.String("reason", &m->reason, Need::kOptional) &&
         ReadList(r, "corrupt", &m->corrupt, ctx, ReadCorruptInput, Need::kOptional);
}

Json Body(const LogChunk& m) {
  Json j = AttemptJson(m.task, m.attempt);
  j["stream"] = LogStreamName(m.stream);
  j["offset"] = m.offset;
  j["size"] = m.size;
  j["eof"] = m.eof;
  if (!m.error.empty()) j["error"] = m.error;
  return j;
}
bool Read(ObjectReader& r, LogChunk* m, DecodeContext& ctx) {
  return r.Task("task", &m->task) && r.Integer("attempt", &m->attempt) &&
         ReadStream(r, &m->stream, ctx) && r.Integer("offset", &m->offset) &&
         r.Integer("size", &m->size) && r.Bool("eof", &m->eof) &&
         r.String("error", &m->error, Need::kOptional);
}

Json Body(const Drain& m) { return Json{{"drain", m.drain}, {"reason", m.reason}}; }
bool Read(ObjectReader& r, Drain* m, DecodeContext&) {
  return r.Bool("drain", &m->drain) && r.String("reason", &m->reason, Need::kOptional);
}

Json Body(const Owner& m) {
  Json j{{"present", m.present}, {"note", m.note}, {"since_us", ToMicros(m.since)}};
  if (m.freeze_us != 0) j["freeze_us"] = m.freeze_us;
  return j;
}
bool Read(ObjectReader& r, Owner* m, DecodeContext& ctx) {
  if (!r.Bool("present", &m->present) || !r.String("note", &m->note, Need::kOptional) ||
      !r.TimeMicros("since_us", &m->since, Need::kOptional) ||
      !r.Integer("freeze_us", &m->freeze_us, Need::kOptional)) {
    return false;
  }
  if (m->freeze_us < 0) return ctx.Fail(r.PathOf("freeze_us"), "must not be negative");
  return true;
}

Json FileListJson(const std::vector<core::OutputFile>& files) {
  Json out = Json::array();
  for (const core::OutputFile& f : files) {
    out.push_back(Json{{"name", f.name}, {"size", f.size}, {"sha256", f.sha256}});
  }
  return out;
}
// At most kMaxOutputFiles, each checked as an output (OutputNameProblem).
bool ReadFileList(ObjectReader& r, const char* key, std::vector<core::OutputFile>* out,
                  DecodeContext& ctx, Need need) {
  const Json* files = r.Get(key, need);
  if (files == nullptr) return r.ok();
  if (files->is_array() && files->size() > core::kMaxOutputFiles) {
    return ctx.Fail(r.PathOf(key), "has " + std::to_string(files->size()) +
                                       " files, more than the limit of " +
                                       std::to_string(core::kMaxOutputFiles));
  }
  return internal::ReadVector<core::OutputFile>(*files, r.PathOf(key), out, ctx,
                                                internal::ReadOutputFile);
}

Json Body(const CheckpointSaved& m) {
  Json j = AttemptJson(m.task, m.attempt);
  j["files"] = FileListJson(m.files);
  return j;
}
bool Read(ObjectReader& r, CheckpointSaved* m, DecodeContext& ctx) {
  if (!r.Task("task", &m->task) || !r.Integer("attempt", &m->attempt) ||
      !ReadFileList(r, "files", &m->files, ctx, Need::kRequired)) {
    return false;
  }
  if (m->files.empty()) return ctx.Fail(r.PathOf("files"), "must not be empty");
  return true;
}

// A list of job ids ("jobs"): each above zero.
bool ReadJobList(ObjectReader& r, std::vector<JobId>* out, DecodeContext& ctx) {
  if (!ReadList(r, "jobs", out, ctx, internal::ReadInteger<JobId>)) return false;
  for (size_t i = 0; i < out->size(); ++i) {
    if ((*out)[i] == 0) {
      return ctx.Fail(r.PathOf("jobs") + "[" + std::to_string(i) + "]", "must be above zero");
    }
  }
  return true;
}

Json Body(const OutputsKept& m) { return Json{{"jobs", m.jobs}}; }
bool Read(ObjectReader& r, OutputsKept* m, DecodeContext& ctx) {
  return ReadJobList(r, &m->jobs, ctx);
}

Json Body(const OutputsReplicated& m) { return AttemptJson(m.task, m.attempt); }
bool Read(ObjectReader& r, OutputsReplicated* m, DecodeContext&) {
  return r.Task("task", &m->task) && r.Integer("attempt", &m->attempt);
}

// ---- server -> worker ------------------------------------------------------

Json Body(const ReleaseOutputs& m) { return Json{{"jobs", m.jobs}}; }
bool Read(ObjectReader& r, ReleaseOutputs* m, DecodeContext& ctx) {
  return ReadJobList(r, &m->jobs, ctx);
}

Json Body(const HelloAck& m) {
  Json j{{"worker", m.worker},
         {"server_instance", m.server_instance},
         {"heartbeat_interval_us", m.heartbeat_interval.count()},
         {"lease_ttl_us", m.lease_ttl.count()},
         {"grant_key", m.grant_key}};
  if (m.batches) j["batches"] = true;
  if (m.binary) j["binary"] = true;
  return j;
}
bool Read(ObjectReader& r, HelloAck* m, DecodeContext& ctx) {
  if (!r.Integer("worker", &m->worker) || !r.String("server_instance", &m->server_instance) ||
      !r.Micros("heartbeat_interval_us", &m->heartbeat_interval) ||
      !r.Micros("lease_ttl_us", &m->lease_ttl) ||
      !r.String("grant_key", &m->grant_key, Need::kOptional) ||
      !r.Bool("batches", &m->batches, Need::kOptional) ||
      !r.Bool("binary", &m->binary, Need::kOptional)) {
    return false;
  }
  if (!m->grant_key.empty() && !core::IsSha256Hex(m->grant_key)) {
    return ctx.Fail("grant_key", "expected 64 lower-case hex digits");
  }
  if (m->heartbeat_interval <= Duration::zero()) {
    return ctx.Fail("heartbeat_interval_us", "must be positive");
  }
  if (m->lease_ttl <= m->heartbeat_interval) {
    return ctx.Fail("lease_ttl_us", "must be longer than the heartbeat interval");
  }
  return true;
}

Json InputFileJson(const InputFile& f) {
  Json sources = Json::array();
  for (const FileSource& s : f.sources) {
    sources.push_back(Json{
        {"worker", s.worker}, {"host", s.host}, {"port", s.port}, {"fingerprint", s.fingerprint}});
  }
  return Json{{"from", f.from.ToString()}, {"name", f.file.name},           {"size", f.file.size},
              {"sha256", f.file.sha256},   {"sources", std::move(sources)}, {"grant", f.grant}};
}
bool ReadFileSource(const Json& j, const std::string& path, FileSource* out, DecodeContext& ctx) {
  ObjectReader r(j, path, ctx);
  if (!r.Integer("worker", &out->worker) || !r.String("host", &out->host) ||
      !r.Integer("port", &out->port) || !r.String("fingerprint", &out->fingerprint)) {
    return false;
  }
  if (out->host.empty() || out->host.size() > 255) {
    return ctx.Fail(r.PathOf("host"), "must be 1 to 255 bytes");
  }
  if (out->port == 0) return ctx.Fail(r.PathOf("port"), "must not be 0");
  if (!core::IsSha256Hex(out->fingerprint)) {
    return ctx.Fail(r.PathOf("fingerprint"), "expected 64 lower-case hex digits");
  }
  return true;
}
bool ReadInputFile(const Json& j, const std::string& path, InputFile* out, DecodeContext& ctx) {
  if (!internal::ReadOutputFile(j, path, &out->file, ctx)) return false;
  ObjectReader r(j, path, ctx);
  return r.Task("from", &out->from) && r.String("grant", &out->grant) &&
         ReadList(r, "sources", &out->sources, ctx, ReadFileSource);
}

Json Body(const Replicate& m) {
  Json j = AttemptJson(m.task, m.attempt);
  Json files = Json::array();
  for (const InputFile& f : m.files) files.push_back(InputFileJson(f));
  j["files"] = std::move(files);
  return j;
}
bool Read(ObjectReader& r, Replicate* m, DecodeContext& ctx) {
  if (!r.Task("task", &m->task) || !r.Integer("attempt", &m->attempt) ||
      !ReadList(r, "files", &m->files, ctx, ReadInputFile)) {
    return false;
  }
  if (m->files.empty()) return ctx.Fail(r.PathOf("files"), "must not be empty");
  return true;
}

Json AssignmentJson(const Assignment& a) {
  Json gpus = Json::array();
  for (const core::GpuGrant& g : a.gpus) gpus.push_back(internal::GpuGrantJson(g));
  Json inputs = Json::object();
  for (const auto& [task, result] : a.inputs) inputs[task.ToString()] = result;
  Json j = AttemptJson(a.task, a.attempt);
  j["cores"] = a.cores;
  j["cpu_quota_milli"] = a.cpu_quota_milli;
  j["mem_limit_bytes"] = a.mem_limit_bytes;
  j["gpus"] = std::move(gpus);
  j["argv"] = a.argv;
  if (a.argv_id != 0) j["argv_id"] = a.argv_id;
  j["env"] = a.env;
  j["timeout_us"] = a.timeout.count();
  j["array_index"] = a.array_index;
  j["job_name"] = a.job_name;
  j["group_name"] = a.group_name;
  j["inputs"] = std::move(inputs);
  if (!a.files.empty()) {
    Json files = Json::array();
    for (const InputFile& f : a.files) files.push_back(InputFileJson(f));
    j["files"] = std::move(files);
  }
  if (!a.uploads.empty()) j["uploads"] = FileListJson(a.uploads);
  if (!a.checkpoint.empty()) {
    j["checkpoint"] = FileListJson(a.checkpoint);
    j["checkpoint_from"] = a.checkpoint_from;
  }
  if (a.after) j["after"] = AttemptJson(a.after->task, a.after->attempt);
  j["vacate_signal"] = a.vacate_signal;
  j["vacate_grace_us"] = a.vacate_grace.count();
  if (a.max_output_bytes != 0) {
    j["max_output"] = a.max_output_bytes;
    if (a.max_output_by_task) j["max_output_by_task"] = true;
  }
  if (!a.user.empty()) j["user"] = a.user;
  internal::IsolationFieldsJson(a, j);
  return j;
}
bool ReadAssignment(const Json& j, const std::string& path, Assignment* a, DecodeContext& ctx) {
  ObjectReader r(j, path, ctx);
  if (!r.Task("task", &a->task) || !r.Integer("attempt", &a->attempt) ||
      !ReadList(r, "cores", &a->cores, ctx, internal::ReadInteger<uint32_t>) ||
      !r.Integer("cpu_quota_milli", &a->cpu_quota_milli) ||
      !r.Integer("mem_limit_bytes", &a->mem_limit_bytes) ||
      !ReadList(r, "gpus", &a->gpus, ctx, internal::ReadGpuGrant, Need::kOptional) ||
      !ReadList(r, "argv", &a->argv, ctx, internal::ReadString) ||
      !r.Integer("argv_id", &a->argv_id, Need::kOptional) ||
      !r.Micros("timeout_us", &a->timeout, Need::kOptional) ||
      !r.Integer("array_index", &a->array_index, Need::kOptional) ||
      !r.String("job_name", &a->job_name, Need::kOptional) ||
      !r.String("group_name", &a->group_name, Need::kOptional) ||
      !r.Integer("vacate_signal", &a->vacate_signal, Need::kOptional) ||
      !r.Micros("vacate_grace_us", &a->vacate_grace, Need::kOptional) ||
      !r.Integer("max_output", &a->max_output_bytes, Need::kOptional) ||
      !r.Bool("max_output_by_task", &a->max_output_by_task, Need::kOptional) ||
      !r.String("user", &a->user, Need::kOptional) || !internal::ReadIsolationFields(r, a, ctx)) {
    return false;
  }
  if (a->vacate_signal < 1 || a->vacate_signal > 64) {
    return ctx.Fail(r.PathOf("vacate_signal"), "must be a signal number (1..64)");
  }
  if (a->vacate_grace < Duration::zero()) {
    return ctx.Fail(r.PathOf("vacate_grace_us"), "must not be negative");
  }
  if (a->argv_id > kMaxArgvIds) {
    return ctx.Fail(r.PathOf("argv_id"), "must be at most " + std::to_string(kMaxArgvIds));
  }
  if (a->argv.empty() && a->argv_id == 0) {
    return ctx.Fail(r.PathOf("argv"), "must not be empty (without argv_id)");
  }
  if (a->cpu_quota_milli < 0) return ctx.Fail(r.PathOf("cpu_quota_milli"), "must not be negative");
  if (a->timeout < Duration::zero())
    return ctx.Fail(r.PathOf("timeout_us"), "must not be negative");
  if (const Json* env = r.Get("env", Need::kOptional)) {
    if (!internal::ReadStringMap(*env, r.PathOf("env"), &a->env, ctx)) return false;
  }
  if (const Json* after = r.Get("after", Need::kOptional)) {
    if (!ReadTaskAttempt(*after, r.PathOf("after"), &a->after.emplace(), ctx)) return false;
  }
  if (!ReadList(r, "files", &a->files, ctx, ReadInputFile, Need::kOptional)) return false;
  if (!ReadFileList(r, "uploads", &a->uploads, ctx, Need::kOptional) ||
      !ReadFileList(r, "checkpoint", &a->checkpoint, ctx, Need::kOptional) ||
      !r.Integer("checkpoint_from", &a->checkpoint_from, Need::kOptional)) {
    return false;
  }
  if (const Json* inputs = r.Get("inputs", Need::kOptional)) {
    return internal::ForEachMember(
        *inputs, r.PathOf("inputs"), ctx,
        [&](const std::string& key, const Json& v, const std::string& p) {
          Result<TaskId> id = ParseTaskId(key);
          if (!id.ok()) return ctx.Fail(r.PathOf("inputs"), id.status().message(), key);
          return internal::ReadString(v, p, &a->inputs[*id], ctx);
        });
  }
  return r.ok();
}

Json Body(const Assign& m) {
  Json tasks = Json::array();
  for (const Assignment& a : m.tasks) tasks.push_back(AssignmentJson(a));
  return Json{{"tasks", std::move(tasks)}};
}
bool Read(ObjectReader& r, Assign* m, DecodeContext& ctx) {
  return ReadList(r, "tasks", &m->tasks, ctx, ReadAssignment);
}

Json Body(const Ack& m) { return Json{{"tasks", AttemptListJson(m.tasks)}}; }
bool Read(ObjectReader& r, Ack* m, DecodeContext& ctx) {
  return ReadList(r, "tasks", &m->tasks, ctx, ReadTaskAttempt);
}

template <typename M>
Json StopBody(const M& m) {
  Json j = AttemptJson(m.task, m.attempt);
  j["reason"] = m.reason;
  return j;
}
template <typename M>
bool ReadStop(ObjectReader& r, M* m) {
  return r.Task("task", &m->task) && r.Integer("attempt", &m->attempt) &&
         r.String("reason", &m->reason, Need::kOptional);
}
Json Body(const Cancel& m) {
  Json j = StopBody(m);
  if (m.vacate) j["vacate"] = true;
  return j;
}
bool Read(ObjectReader& r, Cancel* m, DecodeContext&) {
  return ReadStop(r, m) && r.Bool("vacate", &m->vacate, Need::kOptional);
}
Json Body(const Kill& m) { return StopBody(m); }
bool Read(ObjectReader& r, Kill* m, DecodeContext&) { return ReadStop(r, m); }
Json Body(const Withdraw& m) { return StopBody(m); }
bool Read(ObjectReader& r, Withdraw* m, DecodeContext&) { return ReadStop(r, m); }

Json Body(const LogRequest& m) {
  Json j = AttemptJson(m.task, m.attempt);
  j["stream"] = LogStreamName(m.stream);
  j["follow"] = m.follow;
  j["stop"] = m.stop;
  j["offset"] = m.offset;
  return j;
}
bool Read(ObjectReader& r, LogRequest* m, DecodeContext& ctx) {
  return r.Task("task", &m->task) && r.Integer("attempt", &m->attempt) &&
         ReadStream(r, &m->stream, ctx) && r.Bool("follow", &m->follow) &&
         r.Bool("stop", &m->stop, Need::kOptional) && r.Integer("offset", &m->offset);
}

Json Body(const Error& m) {
  Json j{{"code", m.code}, {"message", m.message}};
  if (!m.leader.empty()) j["leader"] = m.leader;
  return j;
}
bool Read(ObjectReader& r, Error* m, DecodeContext&) {
  return r.String("code", &m->code) && r.String("message", &m->message) &&
         r.String("leader", &m->leader, Need::kOptional);
}

// ---- generic encode / decode ----------------------------------------------

template <typename Variant>
std::string EncodeVariant(const Variant& message) {
  return std::visit(
      [](const auto& m) {
        Json j = Body(m);
        j["type"] = Name(m);
        if (!j.contains("v")) j["v"] = kProtocolVersion;
        return internal::Dump(j);
      },
      message);
}

// Tries each alternative of Variant whose name equals `type`.
template <typename Variant, size_t... I>
bool DecodeAlternative(std::string_view type, ObjectReader& r, DecodeContext& ctx,
                       std::optional<Variant>* out, std::index_sequence<I...>) {
  bool matched = false;
  auto try_one = [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (matched || Name(T{}) != type) return;
    matched = true;
    T value{};
    if (Read(r, &value, ctx)) *out = Variant(std::move(value));
  };
  (try_one(std::type_identity<std::variant_alternative_t<I, Variant>>{}), ...);
  return matched;
}

template <typename Variant>
Result<Variant> DecodeVariantJson(const Json& j, std::string_view direction) {
  DecodeContext ctx;
  ObjectReader r(j, "", ctx);
  std::string type;
  uint32_t version = 0;
  if (!r.String("type", &type) || !r.Integer("v", &version)) {
    return InvalidArgument("message: " + ctx.Describe());
  }
  if (version != kProtocolVersion && type != "hello") {
    return FailedPrecondition("message \"" + type + "\" has protocol version " +
                              std::to_string(version) + "; this build speaks version " +
                              std::to_string(kProtocolVersion));
  }
  std::optional<Variant> out;
  if (!DecodeAlternative<Variant>(type, r, ctx, &out,
                                  std::make_index_sequence<std::variant_size_v<Variant>>())) {
    return InvalidArgument("unknown message type \"" + type + "\" for a " + std::string(direction) +
                           " message");
  }
  if (!out) return InvalidArgument(type + ": " + ctx.Describe());
  return std::move(*out);
}

template <typename Variant>
Result<Variant> DecodeVariant(std::string_view text, std::string_view direction) {
  ASSIGN_OR_RETURN(Json j, internal::ParseJson(text, kMaxMessageBytes, kMaxNestingDepth));
  return DecodeVariantJson<Variant>(j, direction);
}

template <typename Variant>
Result<Variant> DecodeSafely(std::string_view text, std::string_view direction) {
  try {
    return DecodeVariant<Variant>(text, direction);
  } catch (const std::exception& e) {
    // Not expected: every accessor is type-checked first. Still, a decoder
    // facing the network must not throw.
    return InvalidArgument(std::string("message could not be decoded: ") + e.what());
  }
}

}  // namespace

std::string_view LogStreamName(LogStream stream) {
  return stream == LogStream::kStderr ? "stderr" : "stdout";
}

std::string_view MessageTypeName(const WorkerMessage& message) {
  return std::visit([](const auto& m) { return Name(m); }, message);
}
std::string_view MessageTypeName(const ServerMessage& message) {
  return std::visit([](const auto& m) { return Name(m); }, message);
}

std::string Encode(const WorkerMessage& message) { return EncodeVariant(message); }
std::string Encode(const ServerMessage& message) { return EncodeVariant(message); }

Result<WorkerMessage> DecodeWorkerMessage(std::string_view text) {
  return DecodeSafely<WorkerMessage>(text, "worker-to-server");
}
Result<ServerMessage> DecodeServerMessage(std::string_view text) {
  return DecodeSafely<ServerMessage>(text, "server-to-worker");
}

namespace internal {
Result<WorkerMessage> DecodeWorkerMessageJson(const Json& j) {
  return DecodeVariantJson<WorkerMessage>(j, "worker-to-server");
}
Result<ServerMessage> DecodeServerMessageJson(const Json& j) {
  return DecodeVariantJson<ServerMessage>(j, "server-to-worker");
}
}  // namespace internal

}  // namespace drover::proto
