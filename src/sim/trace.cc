#include "sim/trace.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <unordered_map>

#include "common/quantity.h"
#include "sim/json_fields.h"

namespace drover::sim {

namespace {

using internal::Json;

constexpr int64_t kDefaultCpusMilli = 1000;
constexpr const char* kDefaultUser = "default";

// Interns values into a vector, keeping the first index of each.
template <typename T>
class Interner {
 public:
  explicit Interner(std::vector<T>& values) : values_(values) {}
  uint32_t Add(T value) {
    auto [it, inserted] = index_.try_emplace(value, static_cast<uint32_t>(values_.size()));
    if (inserted) values_.push_back(std::move(value));
    return it->second;
  }

 private:
  std::vector<T>& values_;
  std::map<T, uint32_t> index_;
};

// Parses one line's object into `task` (its request and user interned).
class LineReader {
 public:
  explicit LineReader(Trace& trace)
      : trace_(trace), requests_(trace.requests), users_(trace.users), keys_(trace.keys) {}

  Status Read(const Json& line, size_t line_no) {
    if (line.is_object() && line.contains("owner")) return ReadOwner(line, line_no);
    RETURN_IF_ERROR(
        internal::CheckKeys(line, {"id", "submit", "duration", "cpus", "mem", "gpus", "gpu_type",
                                   "gpu_mem", "deps", "priority", "user", "limit", "output",
                                   "key"}));
    TraceTask task;
    std::string id = "line " + std::to_string(line_no);
    if (auto it = line.find("id"); it != line.end()) {
      ASSIGN_OR_RETURN(id, internal::ReadString(*it, "id"));
      if (id.empty()) return InvalidArgument("id: must not be empty");
    }
    auto submit = line.find("submit");
    if (submit == line.end()) return InvalidArgument("submit: missing (seconds since the start)");
    ASSIGN_OR_RETURN(task.submit, internal::ReadSeconds(*submit, "submit"));
    if (!trace_.tasks.empty() && task.submit < trace_.tasks.back().submit) {
      return InvalidArgument(
          "submit: " + FormatDuration(task.submit) + " is before the previous line's " +
          FormatDuration(trace_.tasks.back().submit) + "; lines must be in submission order");
    }
    auto duration = line.find("duration");
    if (duration == line.end()) return InvalidArgument("duration: missing");
    ASSIGN_OR_RETURN(task.duration, internal::ReadSeconds(*duration, "duration"));
    if (auto it = line.find("limit"); it != line.end()) {
      ASSIGN_OR_RETURN(task.limit, internal::ReadSeconds(*it, "limit"));
      if (task.limit <= Duration::zero()) return InvalidArgument("limit: must be above 0");
      if (task.limit < task.duration) {
        return InvalidArgument("limit: " + FormatDuration(task.limit) +
                               " is shorter than duration " + FormatDuration(task.duration) +
                               " (the replay does not model tasks killed at their limit)");
      }
    }

    core::ResourceRequest req;
    req.cpus_milli = kDefaultCpusMilli;
    if (auto it = line.find("cpus"); it != line.end()) {
      ASSIGN_OR_RETURN(req.cpus_milli, internal::ReadCpus(*it, "cpus"));
    }
    if (auto it = line.find("mem"); it != line.end()) {
      ASSIGN_OR_RETURN(req.mem_bytes, internal::ReadBytes(*it, "mem"));
    }
    if (auto it = line.find("gpus"); it != line.end()) {
      ASSIGN_OR_RETURN(req.gpus, internal::ReadGpus(*it, "gpus"));
    }
    if (auto it = line.find("gpu_mem"); it != line.end()) {
      ASSIGN_OR_RETURN(req.gpu_mem_bytes, internal::ReadBytes(*it, "gpu_mem"));
    }
    if (auto it = line.find("gpu_type"); it != line.end()) {
      ASSIGN_OR_RETURN(req.gpu_types, internal::ReadStrings(*it, "gpu_type"));
    }
    if (req.gpus == 0 && (req.gpu_mem_bytes != 0 || !req.gpu_types.empty())) {
      return InvalidArgument("gpus: gpu_mem and gpu_type need gpus above 0");
    }
    if (Status s = req.Validate(); !s.ok()) return s;
    task.request = requests_.Add(std::move(req));

    if (auto it = line.find("output"); it != line.end()) {
      ASSIGN_OR_RETURN(task.output_bytes, internal::ReadBytes(*it, "output"));
    }
    if (auto it = line.find("priority"); it != line.end()) {
      ASSIGN_OR_RETURN(int64_t p, internal::ReadInt(*it, "priority", INT32_MIN, INT32_MAX));
      task.priority = static_cast<int32_t>(p);
    }
    std::string user = kDefaultUser;
    if (auto it = line.find("user"); it != line.end()) {
      ASSIGN_OR_RETURN(user, internal::ReadString(*it, "user"));
    }
    task.user = users_.Add(std::move(user));
    if (auto it = line.find("key"); it != line.end()) {
      ASSIGN_OR_RETURN(std::string key, internal::ReadString(*it, "key"));
      if (key.empty()) return InvalidArgument("key: must not be empty");
      task.key = keys_.Add(std::move(key));
    }

    task.deps_begin = static_cast<uint32_t>(trace_.deps.size());
    if (auto it = line.find("deps"); it != line.end()) {
      ASSIGN_OR_RETURN(std::vector<std::string> deps, internal::ReadStrings(*it, "deps"));
      for (const std::string& dep : deps) {
        auto found = index_.find(dep);
        if (found == index_.end()) {
          trace_.deps.resize(task.deps_begin);
          return InvalidArgument("deps: no earlier task has id \"" + dep +
                                 "\" (a dependency must be on an earlier line)");
        }
        trace_.deps.push_back(found->second);
      }
    }
    task.deps_count = static_cast<uint32_t>(trace_.deps.size()) - task.deps_begin;

    const uint32_t index = static_cast<uint32_t>(trace_.tasks.size());
    if (!index_.emplace(id, index).second) {
      trace_.deps.resize(task.deps_begin);
      return InvalidArgument("id: \"" + id + "\" is used by an earlier line");
    }
    trace_.tasks.push_back(task);
    trace_.ids.push_back(std::move(id));
    return Status::Ok();
  }

  // {"owner":"gpu-2","from":"9h","to":"17h"}
  Status ReadOwner(const Json& line, size_t line_no) {
    RETURN_IF_ERROR(internal::CheckKeys(line, {"owner", "from", "to"}));
    OwnerPresence p;
    p.line = line_no;
    ASSIGN_OR_RETURN(p.worker, internal::ReadString(line.at("owner"), "owner"));
    if (p.worker.empty()) return InvalidArgument("owner: must name a worker");
    auto from = line.find("from");
    if (from == line.end()) return InvalidArgument("from: missing (when the owner comes)");
    ASSIGN_OR_RETURN(p.from, internal::ReadSeconds(*from, "from"));
    auto to = line.find("to");
    if (to == line.end()) return InvalidArgument("to: missing (when the owner leaves)");
    ASSIGN_OR_RETURN(p.to, internal::ReadSeconds(*to, "to"));
    if (p.to <= p.from) {
      return InvalidArgument("to: " + FormatDuration(p.to) + " is not after from " +
                             FormatDuration(p.from));
    }
    trace_.owners.push_back(std::move(p));
    return Status::Ok();
  }

 private:
  Trace& trace_;
  Interner<core::ResourceRequest> requests_;
  Interner<std::string> users_;
  Interner<std::string> keys_;
  std::unordered_map<std::string, uint32_t> index_;
};

bool Blank(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

// One worker's presences that overlap or touch become one (the owner never
// left in between), so the replay sees each worker come and go in turn.
void MergeOwners(std::vector<OwnerPresence>& owners) {
  std::stable_sort(owners.begin(), owners.end(), [](const auto& a, const auto& b) {
    return a.worker != b.worker ? a.worker < b.worker : a.from < b.from;
  });
  std::vector<OwnerPresence> merged;
  for (OwnerPresence& p : owners) {
    if (!merged.empty() && merged.back().worker == p.worker && p.from <= merged.back().to) {
      merged.back().to = std::max(merged.back().to, p.to);
    } else {
      merged.push_back(std::move(p));
    }
  }
  std::stable_sort(merged.begin(), merged.end(), [](const auto& a, const auto& b) {
    return a.from != b.from ? a.from < b.from : a.worker < b.worker;
  });
  owners = std::move(merged);
}

}  // namespace

Result<Trace> ParseTrace(std::istream& in, std::string_view name) {
  Trace trace;
  trace.name = std::string(name);
  LineReader reader(trace);
  std::string line;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (Blank(line)) continue;
    const std::string where = std::string(name) + ":" + std::to_string(line_no);
    Result<Json> json = internal::ParseJsonText(line);
    if (!json.ok()) return json.status().WithContext(where);
    if (Status s = reader.Read(*json, line_no); !s.ok()) return s.WithContext(where);
  }
  if (in.bad()) return InvalidArgument(std::string(name) + ": read error");
  if (trace.tasks.empty()) return InvalidArgument(std::string(name) + ": the trace has no tasks");
  MergeOwners(trace.owners);
  return trace;
}

Result<Trace> LoadTrace(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot open trace " + path);
  return ParseTrace(in, path);
}

}  // namespace drover::sim
