// Binary frames of the worker channel (messages_binary.h).
#include "proto/messages_binary.h"

#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "proto/binary_fields.h"
#include "proto/binary_io.h"

namespace drover::proto {
namespace {

using internal::BinaryReader;
using internal::BinaryWriter;
using internal::kNoLimit;

// A field added to Assignment must be added to its encoding below (or to
// Plain's list of what sends it as JSON): the size stands for the field
// list.
static_assert(sizeof(Assignment) == 552, "an Assignment field to encode or to leave to JSON");

// The version of the outcome's form (binary_fields.h) a binary frame uses.
constexpr uint8_t kOutcomeForm = 3;

// A task id as the JSON decoding takes it: job above zero.
bool GetTaskId(BinaryReader& r, TaskId* t, const char* what) {
  if (!internal::GetTask(r, t, what)) return false;
  if (t->job == 0) return r.Fail(what, "is not a task id (job 0)");
  return true;
}

void PutAttempt(BinaryWriter& w, TaskId task, uint32_t attempt) {
  internal::PutTask(w, task);
  w.Unsigned(attempt);
}
bool GetAttempt(BinaryReader& r, TaskId* task, uint32_t* attempt) {
  return GetTaskId(r, task, "task") && r.UnsignedAs(attempt, "attempt", UINT32_MAX);
}

// An assignment with nothing that only JSON carries.
bool Plain(const Assignment& a) {
  return a.files.empty() && a.uploads.empty() && a.checkpoint.empty() && a.checkpoint_from == 0 &&
         !a.private_network && a.io == core::IoLimits{} && a.disk_bytes == 0 && a.image.empty() &&
         a.image_pull == core::ImagePull::kMissing;
}

void Put(BinaryWriter& w, const Started& m) {
  w.Byte(kBinaryStarted);
  w.Unsigned(m.tasks.size());
  for (const StartedTask& s : m.tasks) {
    PutAttempt(w, s.task, s.attempt);
    w.Signed(ToMicros(s.started_at));
  }
}
bool Get(BinaryReader& r, Started* m) {
  size_t n = 0;
  if (!r.Count(&n, "tasks", kNoLimit)) return false;
  m->tasks.resize(n);
  for (StartedTask& s : m->tasks) {
    if (!GetAttempt(r, &s.task, &s.attempt) || !internal::GetTime(r, &s.started_at, "started_at")) {
      return false;
    }
  }
  return true;
}

void Put(BinaryWriter& w, const Finished& m) {
  w.Byte(kBinaryFinished);
  w.Unsigned(m.tasks.size());
  for (const FinishedTask& f : m.tasks) {
    PutAttempt(w, f.task, f.attempt);
    internal::PutOutcome(w, f.outcome);
    w.Signed(ToMicros(f.finished_at));
    w.Byte((f.never_started ? 1 : 0) | (f.vacated ? 2 : 0));
  }
}
bool Get(BinaryReader& r, Finished* m) {
  size_t n = 0;
  if (!r.Count(&n, "tasks", kNoLimit)) return false;
  m->tasks.resize(n);
  for (FinishedTask& f : m->tasks) {
    uint8_t flags = 0;
    if (!GetAttempt(r, &f.task, &f.attempt) || !internal::GetOutcome(r, &f.outcome, kOutcomeForm) ||
        !internal::GetTime(r, &f.finished_at, "finished_at") || !r.Byte(&flags, "flags")) {
      return false;
    }
    if (flags > 3) return r.Fail("flags", "expected 0 to 3, found " + std::to_string(flags));
    f.never_started = (flags & 1) != 0;
    f.vacated = (flags & 2) != 0;
  }
  return true;
}

void Put(BinaryWriter& w, const Ack& m) {
  w.Byte(kBinaryAck);
  w.Unsigned(m.tasks.size());
  for (const TaskAttempt& t : m.tasks) PutAttempt(w, t.task, t.attempt);
}
bool Get(BinaryReader& r, Ack* m) {
  size_t n = 0;
  if (!r.Count(&n, "tasks", kNoLimit)) return false;
  m->tasks.resize(n);
  for (TaskAttempt& t : m->tasks) {
    if (!GetAttempt(r, &t.task, &t.attempt)) return false;
  }
  return true;
}

void PutStrings(BinaryWriter& w, const std::vector<std::string>& v) {
  w.Unsigned(v.size());
  for (const std::string& s : v) w.String(s);
}
bool GetStrings(BinaryReader& r, std::vector<std::string>* v, const char* what) {
  size_t n = 0;
  if (!r.Count(&n, what, kNoLimit)) return false;
  v->resize(n);
  for (std::string& s : *v) {
    if (!r.String(&s, what, kNoLimit)) return false;
  }
  return true;
}

void Put(BinaryWriter& w, const Assignment& a) {
  PutAttempt(w, a.task, a.attempt);
  internal::PutPlacement(w, a.cores, a.gpus);
  w.Signed(a.cpu_quota_milli);
  w.Unsigned(a.mem_limit_bytes);
  PutStrings(w, a.argv);
  w.Unsigned(a.argv_id);
  w.Unsigned(a.env.size());
  for (const auto& [key, value] : a.env) {
    w.String(key);
    w.String(value);
  }
  w.Signed(a.timeout.count());
  w.Signed(a.array_index);
  w.String(a.job_name);
  w.String(a.group_name);
  w.Unsigned(a.inputs.size());
  for (const auto& [task, result] : a.inputs) {
    internal::PutTask(w, task);
    w.String(result);
  }
  w.Byte(a.after ? 1 : 0);
  if (a.after) PutAttempt(w, a.after->task, a.after->attempt);
  w.Signed(a.vacate_signal);
  w.Signed(a.vacate_grace.count());
  w.Unsigned(a.max_output_bytes);
  w.Byte(a.max_output_by_task ? 1 : 0);
  w.String(a.user);
}

bool GetAssignmentLists(BinaryReader& r, Assignment* a) {
  int64_t quota = 0;
  if (!internal::GetPlacement(r, &a->cores, &a->gpus, /*check_shares=*/true) ||
      !r.Signed(&quota, "cpu_quota_milli") || !r.Unsigned(&a->mem_limit_bytes, "mem_limit_bytes")) {
    return false;
  }
  if (quota < 0) return r.Fail("cpu_quota_milli", "must not be negative");
  a->cpu_quota_milli = quota;
  if (!GetStrings(r, &a->argv, "argv") || !r.UnsignedAs(&a->argv_id, "argv_id", kMaxArgvIds)) {
    return false;
  }
  if (a->argv.empty() && a->argv_id == 0) {
    return r.Fail("argv", "must not be empty (without argv_id)");
  }
  size_t n = 0;
  if (!r.Count(&n, "env", kNoLimit)) return false;
  for (size_t i = 0; i < n; ++i) {
    std::string key;
    std::string value;
    if (!r.String(&key, "env", kNoLimit) || !r.String(&value, "env", kNoLimit)) return false;
    a->env[std::move(key)] = std::move(value);
  }
  return true;
}

bool Get(BinaryReader& r, Assignment* a) {
  if (!GetAttempt(r, &a->task, &a->attempt) || !GetAssignmentLists(r, a) ||
      !internal::GetDuration(r, &a->timeout, "timeout") ||
      !r.Signed(&a->array_index, "array_index") || !r.String(&a->job_name, "job_name", kNoLimit) ||
      !r.String(&a->group_name, "group_name", kNoLimit)) {
    return false;
  }
  if (a->timeout < Duration::zero()) return r.Fail("timeout", "must not be negative");
  size_t n = 0;
  if (!r.Count(&n, "inputs", kNoLimit)) return false;
  for (size_t i = 0; i < n; ++i) {
    TaskId from;
    std::string result;
    if (!GetTaskId(r, &from, "inputs") || !r.String(&result, "inputs", kNoLimit)) return false;
    a->inputs[from] = std::move(result);
  }
  bool after = false;
  if (!internal::GetBool(r, &after, "after")) return false;
  if (after) {
    TaskAttempt& t = a->after.emplace();
    if (!GetTaskId(r, &t.task, "after") || !r.UnsignedAs(&t.attempt, "after", UINT32_MAX)) {
      return false;
    }
  }
  int64_t signal = 0;
  if (!r.Signed(&signal, "vacate_signal") ||
      !internal::GetDuration(r, &a->vacate_grace, "vacate_grace") ||
      !r.Unsigned(&a->max_output_bytes, "max_output") ||
      !internal::GetBool(r, &a->max_output_by_task, "max_output_by_task") ||
      !r.String(&a->user, "user", kNoLimit)) {
    return false;
  }
  if (signal < 1 || signal > 64) return r.Fail("vacate_signal", "must be a signal number (1..64)");
  a->vacate_signal = static_cast<int32_t>(signal);
  if (a->vacate_grace < Duration::zero()) return r.Fail("vacate_grace", "must not be negative");
  return true;
}

void Put(BinaryWriter& w, const Assign& m) {
  w.Byte(kBinaryAssign);
  w.Unsigned(m.tasks.size());
  for (const Assignment& a : m.tasks) Put(w, a);
}
bool Get(BinaryReader& r, Assign* m) {
  size_t n = 0;
  if (!r.Count(&n, "tasks", kNoLimit)) return false;
  m->tasks.resize(n);
  for (Assignment& a : m->tasks) {
    if (!Get(r, &a)) return false;
  }
  return true;
}

template <typename M>
std::string Binary(const M& m) {
  std::string out;
  BinaryWriter w(&out);
  Put(w, m);
  return out;
}

template <typename Variant>
WireMessage ForPeer(const Variant& message, bool binary) {
  if (binary && HasBinaryForm(message)) {
    return std::visit(
        [](const auto& m) -> WireMessage {
          using M = std::decay_t<decltype(m)>;
          if constexpr (std::is_same_v<M, Started> || std::is_same_v<M, Finished> ||
                        std::is_same_v<M, Assign> || std::is_same_v<M, Ack>) {
            return WireMessage{true, Binary(m)};
          } else {
            return WireMessage{false, Encode(Variant{m})};
          }
        },
        message);
  }
  return WireMessage{false, Encode(message)};
}

// One message of a frame (its type byte read already) into `out`, when its
// type is one of `Variant`'s.
template <typename M, typename Variant>
bool GetInto(BinaryReader& r, Variant* out) {
  M m;
  if (!Get(r, &m)) return false;
  *out = std::move(m);
  return true;
}

bool GetMessage(BinaryReader& r, uint8_t type, WorkerMessage* out) {
  if (type == kBinaryStarted) return GetInto<Started>(r, out);
  if (type == kBinaryFinished) return GetInto<Finished>(r, out);
  return r.Fail("type", "not a worker message (" + std::to_string(type) + ")");
}
bool GetMessage(BinaryReader& r, uint8_t type, ServerMessage* out) {
  if (type == kBinaryAssign) return GetInto<Assign>(r, out);
  if (type == kBinaryAck) return GetInto<Ack>(r, out);
  return r.Fail("type", "not a server message (" + std::to_string(type) + ")");
}

std::string_view TypeName(uint8_t type) {
  switch (type) {
    case kBinaryStarted:
      return "started";
    case kBinaryFinished:
      return "finished";
    case kBinaryAssign:
      return "assign";
    case kBinaryAck:
      return "ack";
    default:
      return "message";
  }
}

template <typename Variant>
Result<std::vector<Variant>> DecodeBinaryFrameOf(std::string_view data) {
  if (data.size() > kMaxMessageBytes) {
    return InvalidArgument("binary frame: " + std::to_string(data.size()) +
                           " bytes, more than the limit of " + std::to_string(kMaxMessageBytes));
  }
  BinaryReader head(data);
  uint8_t format = 0;
  uint8_t version = 0;
  size_t count = 0;
  if (!head.Byte(&format, "format") || !head.Byte(&version, "version")) {
    return InvalidArgument("binary frame: " + head.error());
  }
  if (format != kMessageFrameFormat) {
    return InvalidArgument("binary frame: format " + std::to_string(format) + ", expected " +
                           std::to_string(kMessageFrameFormat));
  }
  if (version != kMessageFrameVersion) {
    return FailedPrecondition("binary frame has version " + std::to_string(version) +
                              "; this build reads version " + std::to_string(kMessageFrameVersion));
  }
  if (!head.Count(&count, "messages", kMaxBatchMessages)) {
    return InvalidArgument("binary frame: " + head.error());
  }
  if (count == 0) return InvalidArgument("binary frame: messages: holds none");
  std::vector<Variant> out(count);
  auto where = [](size_t i) { return "binary frame: messages[" + std::to_string(i) + "]: "; };
  for (size_t i = 0; i < count; ++i) {
    std::string_view bytes;  // a view: each message is decoded in place
    if (!head.Bytes(&bytes, "length", kMaxMessageBytes)) {
      return InvalidArgument(where(i) + head.error());
    }
    BinaryReader r(bytes);
    uint8_t type = 0;
    if (r.Byte(&type, "type") && GetMessage(r, type, &out[i]) && !r.AtEnd()) {
      r.Fail("message", "has bytes left after byte " + std::to_string(r.position()));
    }
    if (!r.ok()) return InvalidArgument(where(i) + std::string(TypeName(type)) + ": " + r.error());
  }
  if (!head.AtEnd()) {
    return InvalidArgument("binary frame: " + std::to_string(data.size() - head.position()) +
                           " bytes after its last message");
  }
  return out;
}

}  // namespace

bool HasBinaryForm(const WorkerMessage& message) {
  return std::holds_alternative<Started>(message) || std::holds_alternative<Finished>(message);
}
bool HasBinaryForm(const ServerMessage& message) {
  if (std::holds_alternative<Ack>(message)) return true;
  const Assign* assign = std::get_if<Assign>(&message);
  if (assign == nullptr) return false;
  for (const Assignment& a : assign->tasks) {
    if (!Plain(a)) return false;
  }
  return true;
}

WireMessage EncodeForPeer(const WorkerMessage& message, bool binary) {
  return ForPeer(message, binary);
}
WireMessage EncodeForPeer(const ServerMessage& message, bool binary) {
  return ForPeer(message, binary);
}

std::string EncodeBinaryFrame(const std::vector<std::string>& messages) {
  size_t bytes = 12;
  for (const std::string& m : messages) bytes += m.size() + 5;
  std::string out;
  out.reserve(bytes);
  BinaryWriter w(&out);
  w.Byte(kMessageFrameFormat);
  w.Byte(kMessageFrameVersion);
  w.Unsigned(messages.size());
  for (const std::string& m : messages) w.String(m);
  return out;
}

std::vector<WireMessage> FramesFor(std::vector<WireMessage> messages, bool batches) {
  std::vector<WireMessage> frames;
  std::vector<std::string> run;  // of one kind
  bool run_binary = false;
  size_t run_bytes = 0;
  auto close = [&] {
    if (run.empty()) return;
    if (run_binary) {
      frames.push_back(WireMessage{true, EncodeBinaryFrame(run)});
    } else {
      for (std::string& f : FramesOf(std::move(run))) frames.push_back(WireMessage{false, f});
    }
    run.clear();
    run_bytes = 0;
  };
  for (WireMessage& m : messages) {
    const bool fits = m.binary ? run.size() < kMaxBatchMessages &&
                                     run_bytes + m.bytes.size() + 16 <= kMaxMessageBytes
                               : true;  // FramesOf splits text runs itself
    if (!batches || m.binary != run_binary || !fits) close();
    run_binary = m.binary;
    run_bytes += m.bytes.size() + 5;
    run.push_back(std::move(m.bytes));
  }
  close();
  return frames;
}

Result<std::vector<WorkerMessage>> DecodeWorkerBinaryFrame(std::string_view data) {
  return DecodeBinaryFrameOf<WorkerMessage>(data);
}
Result<std::vector<ServerMessage>> DecodeServerBinaryFrame(std::string_view data) {
  return DecodeBinaryFrameOf<ServerMessage>(data);
}

Result<std::string> DescribeBinaryFrame(std::string_view data) {
  std::string out;
  Result<std::vector<WorkerMessage>> worker = DecodeWorkerBinaryFrame(data);
  if (worker.ok()) {
    for (const WorkerMessage& m : *worker) out += Encode(m) + "\n";
    return out;
  }
  Result<std::vector<ServerMessage>> server = DecodeServerBinaryFrame(data);
  if (!server.ok()) {
    return InvalidArgument("not a readable binary frame: as a worker's, " +
                           worker.status().message() + "; as a server's, " +
                           server.status().message());
  }
  for (const ServerMessage& m : *server) out += Encode(m) + "\n";
  return out;
}

}  // namespace drover::proto
