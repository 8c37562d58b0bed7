#include "proto/job_spec_json.h"

#include <algorithm>
#include <cctype>
#include <csignal>
#include <map>
#include <string>
#include <vector>

#include "common/quantity.h"
#include "core/dag.h"
#include "core/input_select.h"
#include "core/resources.h"
#include "proto/function_task.h"
#include "proto/job_file.h"

namespace drover::proto::internal {
namespace {

constexpr uint32_t kMaxRetries = 1000;

const std::vector<std::string_view> kJobKeys = {"name", "user", "after", "task"};
const std::vector<std::string_view> kTaskKeys = {
    "id",           "command",       "array",      "env",         "resources",     "depends_on",
    "retries",      "retry_backoff", "timeout",    "priority",    "vacate_signal", "vacate_grace",
    "preemptible",  "inputs",        "max_output", "input_files", "replicas",      "function",
    "args",         "kwargs",        "python",     "cache",       "code",          "network",
    "io_read_bps",  "io_write_bps",  "io_weight",  "disk",        "image",         "image_pull",
    "python_runner"};

// What a task's keys that are not its keys were most likely meant to be.
const std::vector<std::pair<std::string_view, std::string_view>> kTaskKeyHints = {
    {"cpus", "a resource: resources = { cpus = 2 }"},
    {"mem", "a resource: resources = { mem = \"4GiB\" }"},
    {"memory", "the memory a task needs is a resource: resources = { mem = \"4GiB\" }"},
    {"gpus", "a resource: resources = { gpus = 1 }"},
    {"gpu_mem", "a resource: resources = { gpu_mem = \"16GiB\" }"},
    {"gpu_type", "a resource: resources = { gpu_type = \"A100\" }"},
    {"labels", "a resource: resources = { labels = { os = \"linux\" } }"},
    {"counters", "a resource: resources = { counters = { licenses = 2 } }"},
    {"after",
     "a task waits for groups of its job with depends_on = [\"prep\"]; after, a key "
     "of the job, names other jobs and their tasks"},
    {"dependencies", "did you mean \"depends_on\"?"},
    {"deps", "did you mean \"depends_on\"?"},
};

// Signals a task may ask to be vacated with (`vacate_signal`), by name.
const std::vector<std::pair<std::string_view, int32_t>> kVacateSignals = {
    {"SIGTERM", SIGTERM}, {"SIGINT", SIGINT},   {"SIGHUP", SIGHUP},
    {"SIGUSR1", SIGUSR1}, {"SIGUSR2", SIGUSR2}, {"SIGQUIT", SIGQUIT}};

std::string_view VacateSignalName(int32_t sig) {
  for (const auto& [name, number] : kVacateSignals) {
    if (number == sig) return name;
  }
  return "SIGTERM";
}
const std::vector<std::string_view> kResourceKeys = {"cpus",     "mem",    "gpus",    "gpu_mem",
                                                     "gpu_type", "labels", "counters"};

// ---- encoding --------------------------------------------------------------

// A duration string ParseDuration reads back exactly: "2h", "250ms", "1.5ms".
std::string ExactDuration(Duration d) {
  int64_t us = d.count();
  if (us % 1'000'000 == 0 || us < 0) return FormatDuration(d);
  std::string out = std::to_string(us / 1000);
  if (int64_t frac = us % 1000; frac != 0) {
    std::string digits = std::to_string(frac);
    digits.insert(0, 3 - digits.size(), '0');
    while (digits.back() == '0') digits.pop_back();
    out += "." + digits;
  }
  return out + "ms";
}

// An integer when whole, else a number with the fraction (0.5, 0.125).
Json Scaled(int64_t value, int64_t unit) {
  if (value % unit == 0) return Json(value / unit);
  return Json(static_cast<double>(value) / static_cast<double>(unit));
}

std::string FormatArray(const core::ArrayRange& range) {
  if (range.count == 1 && range.step == 1) return std::to_string(range.first);
  std::string out =
      std::to_string(range.first) + "-" + std::to_string(range.IndexAt(range.count - 1));
  if (range.step != 1) out += ":" + std::to_string(range.step);
  return out;
}

Json ResourcesJson(const core::ResourceRequest& r) {
  Json j = Json::object();
  j["cpus"] = Scaled(r.cpus_milli, 1000);
  if (r.mem_bytes != 0) j["mem"] = r.mem_bytes;
  if (r.gpus != 0) j["gpus"] = Scaled(r.gpus, core::kWholeGpu);
  if (r.gpu_mem_bytes != 0) j["gpu_mem"] = r.gpu_mem_bytes;
  if (!r.gpu_types.empty()) j["gpu_type"] = r.gpu_types;
  if (!r.counters.empty()) j["counters"] = r.counters;
  if (!r.labels.empty()) j["labels"] = r.labels;
  return j;
}

Json GroupJson(const core::TaskGroupSpec& g, bool compact) {
  Json j = Json::object();
  j["id"] = g.name;
  if (const std::string* python = compact ? RunnerPython(g.command) : nullptr) {
    j["python_runner"] = *python;
  } else {
    j["command"] = g.command;
  }
  if (g.array) j["array"] = FormatArray(*g.array);
  if (!g.env.empty()) j["env"] = g.env;
  j["resources"] = ResourcesJson(g.resources);
  if (!g.depends_on.empty()) j["depends_on"] = g.depends_on;
  j["retries"] = g.retries;
  j["retry_backoff"] = ExactDuration(g.retry_backoff);
  if (g.timeout != Duration::zero()) j["timeout"] = ExactDuration(g.timeout);
  j["priority"] = g.priority;
  if (g.vacate_signal != core::kDefaultVacateSignal) {
    j["vacate_signal"] = VacateSignalName(g.vacate_signal);
  }
  if (g.vacate_grace != core::TaskGroupSpec{}.vacate_grace) {
    j["vacate_grace"] = ExactDuration(g.vacate_grace);
  }
  if (!g.preemptible) j["preemptible"] = false;
  if (g.inputs) j["inputs"] = *g.inputs;  // [] (nothing) differs from absent (everything)
  if (g.max_output_bytes != 0) j["max_output"] = g.max_output_bytes;
  if (g.replicas != 1) j["replicas"] = g.replicas;
  IsolationJson(g, j);
  if (!g.input_files.empty()) {
    Json files = Json::array();
    for (const core::OutputFile& f : g.input_files) {
      // Not uploaded yet (a client's job file): the path alone.
      if (f.sha256.empty()) {
        files.push_back(f.name);
      } else {
        files.push_back({{"name", f.name}, {"size", f.size}, {"sha256", f.sha256}});
      }
    }
    j["input_files"] = std::move(files);
  }
  if (g.cache) j["cache"] = true;
  if (!g.code.empty()) {
    Json files = Json::array();
    for (const core::OutputFile& f : g.code) {
      // Not hashed yet (a client's job file): the pattern alone.
      if (f.sha256.empty()) {
        files.push_back(f.name);
      } else {
        files.push_back({{"path", f.name}, {"sha256", f.sha256}});
      }
    }
    j["code"] = std::move(files);
  }
  return j;
}

// ---- decoding --------------------------------------------------------------

// cpus and gpus: a number (2, 0.5) or a string ("500m"), read by the same
// parser as the command line so both accept the same spellings.
bool ReadFractional(const Json& j, const std::string& path,
                    Result<int64_t> (*parse)(std::string_view), int64_t* out, DecodeContext& ctx) {
  std::string text;
  if (j.is_string()) {
    text = j.get_ref<const std::string&>();
  } else if (j.is_number()) {
    text = Dump(j);  // the shortest spelling that reads back as the same number
  } else {
    return ctx.Fail(path, std::string("expected a number or a string, got ") + JsonTypeName(j));
  }
  Result<int64_t> value = parse(text);
  if (!value.ok()) return ctx.Fail(path, value.status().message());
  *out = *value;
  return true;
}

bool ReadDurationString(const Json& j, const std::string& path, Duration* out, DecodeContext& ctx) {
  if (!j.is_string()) {
    return ctx.Fail(path,
                    std::string("expected a duration string such as \"2h\" or \"90s\", got ") +
                        JsonTypeName(j));
  }
  Result<Duration> d = ParseDuration(j.get_ref<const std::string&>());
  if (!d.ok()) return ctx.Fail(path, d.status().message());
  *out = *d;
  return true;
}

bool ReadStringList(const Json& j, const std::string& path, std::vector<std::string>* out,
                    DecodeContext& ctx) {
  return ReadVector<std::string>(j, path, out, ctx, ReadString);
}

// Files named by their SHA-256: `input_files`, each a path (a client's, not
// uploaded yet) or {name, size, sha256}; `code`, each a pattern (a client's,
// not hashed yet) or {path, sha256}.
struct HashedFiles {
  const char* name_key;  // "name" or "path"
  bool with_size;
  const char* what;    // "input file", "code file"
  const char* fields;  // its fields, for an unknown one's error ...
  const char* shape;   // ... and for a wrong type's
};
const HashedFiles kInputFiles{"name", true, "input file", "name, size and sha256",
                              "{name, size, sha256}"};
const HashedFiles kCodeFiles{"path", false, "code file", "path and sha256", "{path, sha256}"};
bool ReadHashedFiles(const Json& j, const std::string& path, std::vector<core::OutputFile>* out,
                     DecodeContext& ctx, const HashedFiles& kind) {
  const bool read = ForEachElement(j, path, ctx, [&](const Json& e, const std::string& p) {
    core::OutputFile f;
    if (e.is_string()) {
      f.name = e.get<std::string>();
      if (f.name.empty()) return ctx.Fail(p, "an empty path");
      out->push_back(std::move(f));
      return true;
    }
    if (!e.is_object()) {
      return ctx.Fail(p,
                      std::string("expected a path or ") + kind.shape + ", got " + JsonTypeName(e));
    }
    for (auto it = e.begin(); it != e.end(); ++it) {
      const std::string& key = it.key();
      const std::string kp = JoinPath(p, key);
      bool ok = true;
      if (key == kind.name_key) {
        ok = ReadString(it.value(), kp, &f.name, ctx);
      } else if (key == "size" && kind.with_size) {
        ok = ReadUint64(it.value(), kp, UINT64_MAX, &f.size, ctx);
      } else if (key == "sha256") {
        ok = ReadString(it.value(), kp, &f.sha256, ctx);
      } else {
        return ctx.Fail(
            kp, std::string("unknown field (an ") + kind.what + " has " + kind.fields + ")", key);
      }
      if (!ok) return false;
    }
    const std::string problem = kind.with_size   ? core::OutputNameProblem(f.name)
                                : f.name.empty() ? "missing or empty"
                                                 : "";
    if (!problem.empty()) return ctx.Fail(JoinPath(p, kind.name_key), problem);
    if (!core::IsSha256Hex(f.sha256)) {
      return ctx.Fail(JoinPath(p, "sha256"), "expected 64 lower-case hex digits");
    }
    out->push_back(std::move(f));
    return true;
  });
  if (!read) return false;
  for (size_t a = 0; a < out->size(); ++a) {
    for (size_t b = 0; b < a; ++b) {
      if ((*out)[a].sha256.empty() || (*out)[a].name != (*out)[b].name) continue;
      return ctx.Fail(IndexPath(path, a),
                      std::string("a second ") + kind.what + " named \"" + (*out)[a].name + "\"");
    }
  }
  return true;
}

bool ReadResources(const Json& j, const std::string& path, core::ResourceRequest* r,
                   DecodeContext& ctx) {
  if (!j.is_object()) {
    return ctx.Fail(path, std::string("expected a table, got ") + JsonTypeName(j));
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const Json& v = it.value();
    const std::string p = JoinPath(path, key);
    bool ok = true;
    if (key == "cpus") {
      ok = ReadFractional(v, p, ParseCpus, &r->cpus_milli, ctx);
    } else if (key == "gpus") {
      ok = ReadFractional(v, p, ParseGpus, &r->gpus, ctx);
    } else if (key == "mem") {
      ok = ReadBytes(v, p, &r->mem_bytes, ctx);
    } else if (key == "gpu_mem") {
      ok = ReadBytes(v, p, &r->gpu_mem_bytes, ctx);
    } else if (key == "gpu_type") {
      if (v.is_string()) {
        r->gpu_types = {v.get<std::string>()};
      } else {
        ok = ReadStringList(v, p, &r->gpu_types, ctx);
      }
    } else if (key == "labels") {
      ok = ReadStringMap(v, p, &r->labels, ctx);
    } else if (key == "counters") {
      std::map<std::string, int64_t> counters;
      ok = ReadCounterMap(v, p, &counters, ctx);
      r->counters.insert(counters.begin(), counters.end());
    } else {
      // Shorthand: `licenses = 2` is a custom counter, unless the key looks
      // like a misspelt resource name.
      std::string hint = key == "memory" ? "mem" : SuggestKey(key, kResourceKeys);
      if (!v.is_number_integer() || !hint.empty()) {
        std::string message = "unknown key \"" + key + "\"";
        if (!hint.empty()) {
          message += " (did you mean \"" + hint + "\"?";
          if (v.is_number_integer()) {
            message += " For a custom counter of that name write counters = { " + key + " = " +
                       Dump(v) + " }";
          }
          message += ")";
        }
        return ctx.Fail(path, message, key);
      }
      ok = ReadInteger(v, p, &r->counters[key], ctx);
    }
    if (!ok) return false;
  }
  if (Status s = r->Validate(); !s.ok()) {
    // Validate's messages start with "resources"; the path says that already.
    std::string message = s.message();
    if (message.starts_with("resources.") || message.starts_with("resources ")) {
      message.erase(0, 10);
    }
    return ctx.Fail(path, message);
  }
  return true;
}

bool ReadCommand(const Json& j, const std::string& path, std::vector<std::string>* out,
                 DecodeContext& ctx) {
  if (j.is_string()) {
    const std::string& line = j.get_ref<const std::string&>();
    if (line.find_first_not_of(" \t\n") == std::string::npos) {
      return ctx.Fail(path, "command is empty");
    }
    if (!RefuseNul(line, path, "the command", ctx)) return false;
    *out = {"sh", "-c", line};
    return true;
  }
  if (!j.is_array()) {
    return ctx.Fail(path, std::string("expected an array of strings (argv) or a string (run by "
                                      "sh -c), got ") +
                              JsonTypeName(j));
  }
  if (!ReadStringList(j, path, out, ctx)) return false;
  if (out->empty() || (*out)[0].empty()) {
    return ctx.Fail(path, "command is empty: the first element names the program");
  }
  for (size_t i = 0; i < out->size(); ++i) {
    if (!RefuseNul((*out)[i], IndexPath(path, i), "a command argument", ctx)) return false;
  }
  return true;
}

bool ReadGroup(const Json& j, const std::string& path, core::TaskGroupSpec* g, DecodeContext& ctx) {
  ObjectReader r(j, path, ctx);
  if (!r.RejectUnknown(kTaskKeys, kTaskKeyHints)) return false;
  if (!r.String("id", &g->name, Need::kOptional)) return false;
  const bool function = r.Get("function", Need::kOptional) != nullptr;
  const Json* runner = r.Get("python_runner", Need::kOptional);
  if (runner != nullptr) {
    if (function || r.Get("command", Need::kOptional) != nullptr) {
      return ctx.Fail(r.PathOf("python_runner"),
                      "a task runs a command, a function or the runner, not two of them");
    }
    if (!ReadRunner(*runner, r.PathOf("python_runner"), g, ctx)) return false;
  } else if (function) {
    if (r.Get("command", Need::kOptional) != nullptr) {
      return ctx.Fail(r.PathOf("function"), "a task runs a command or a function, not both");
    }
  } else {
    for (std::string_view key : {"args", "kwargs", "python"}) {
      if (r.Get(key, Need::kOptional) != nullptr) {
        return ctx.Fail(r.PathOf(key), "only with function (a task that calls a Python function)");
      }
    }
    if (const Json* c = r.Get("command", Need::kRequired);
        !r.ok() || !ReadCommand(*c, r.PathOf("command"), &g->command, ctx)) {
      return false;
    }
  }
  if (const Json* a = r.Get("array", Need::kOptional)) {
    std::string text;
    if (!ReadString(*a, r.PathOf("array"), &text, ctx)) return false;
    Result<core::ArrayRange> range = core::ParseArrayRange(text);
    if (!range.ok()) return ctx.Fail(r.PathOf("array"), range.status().message());
    g->array = *range;
  }
  if (const Json* e = r.Get("env", Need::kOptional)) {
    if (!ReadStringMap(*e, r.PathOf("env"), &g->env, ctx)) return false;
    for (const auto& [name, value] : g->env) {
      if (name.empty() || name.find('=') != std::string::npos ||
          name.find('\0') != std::string::npos) {
        return ctx.Fail(r.PathOf("env"), "\"" + name + "\" is not a valid variable name", name);
      }
      if (!RefuseNul(value, JoinPath(r.PathOf("env"), name), "an environment value", ctx)) {
        return false;
      }
    }
  }
  if (function && !ReadFunction(r, g, ctx)) return false;
  if (const Json* res = r.Get("resources", Need::kOptional)) {
    if (!ReadResources(*res, r.PathOf("resources"), &g->resources, ctx)) return false;
  }
  if (!ReadIsolation(r, g, ctx)) return false;
  if (const Json* d = r.Get("depends_on", Need::kOptional)) {
    if (!ReadStringList(*d, r.PathOf("depends_on"), &g->depends_on, ctx)) return false;
  }
  if (const Json* in = r.Get("inputs", Need::kOptional)) {
    // Checked against depends_on in CheckGroups.
    if (!ReadStringList(*in, r.PathOf("inputs"), &g->inputs.emplace(), ctx)) return false;
  }
  if (const Json* f = r.Get("input_files", Need::kOptional)) {
    if (!ReadHashedFiles(*f, r.PathOf("input_files"), &g->input_files, ctx, kInputFiles)) {
      return false;
    }
  }
  if (const Json* c = r.Get("code", Need::kOptional)) {
    if (!ReadHashedFiles(*c, r.PathOf("code"), &g->code, ctx, kCodeFiles)) return false;
  }
  if (const Json* m = r.Get("max_output", Need::kOptional)) {
    if (!ReadBytes(*m, r.PathOf("max_output"), &g->max_output_bytes, ctx)) return false;
    if (g->max_output_bytes == 0) {
      return ctx.Fail(r.PathOf("max_output"),
                      "must be above zero (leave it out for the server's default)");
    }
  }
  if (const Json* n = r.Get("replicas", Need::kOptional)) {
    uint64_t replicas = 0;
    if (!ReadUint64(*n, r.PathOf("replicas"), UINT32_MAX, &replicas, ctx)) return false;
    if (replicas == 0 || replicas > core::kMaxReplicas) {
      return ctx.Fail(r.PathOf("replicas"),
                      std::to_string(replicas) + ": expected 1 to " +
                          std::to_string(core::kMaxReplicas) +
                          " (the copies of its outputs to keep, the first included)");
    }
    g->replicas = static_cast<uint32_t>(replicas);
  }
  if (const Json* n = r.Get("retries", Need::kOptional)) {
    uint64_t retries = 0;
    if (!ReadUint64(*n, r.PathOf("retries"), kMaxRetries, &retries, ctx)) return false;
    g->retries = static_cast<uint32_t>(retries);
  }
  if (const Json* b = r.Get("retry_backoff", Need::kOptional)) {
    if (!ReadDurationString(*b, r.PathOf("retry_backoff"), &g->retry_backoff, ctx)) return false;
  }
  if (const Json* t = r.Get("timeout", Need::kOptional)) {
    if (!ReadDurationString(*t, r.PathOf("timeout"), &g->timeout, ctx)) return false;
  }
  if (const Json* v = r.Get("vacate_signal", Need::kOptional)) {
    std::string name;
    if (!ReadString(*v, r.PathOf("vacate_signal"), &name, ctx)) return false;
    std::string upper;
    for (char c : name) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (upper.rfind("SIG", 0) != 0) upper = "SIG" + upper;
    auto it = std::find_if(kVacateSignals.begin(), kVacateSignals.end(),
                           [&](const auto& e) { return e.first == upper; });
    if (it == kVacateSignals.end()) {
      return ctx.Fail(r.PathOf("vacate_signal"),
                      "unknown signal \"" + name +
                          "\"; expected one of SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGQUIT");
    }
    g->vacate_signal = it->second;
  }
  if (const Json* v = r.Get("vacate_grace", Need::kOptional)) {
    if (!ReadDurationString(*v, r.PathOf("vacate_grace"), &g->vacate_grace, ctx)) return false;
  }
  return r.Bool("preemptible", &g->preemptible, Need::kOptional) &&
         r.Bool("cache", &g->cache, Need::kOptional) &&
         r.Integer("priority", &g->priority, Need::kOptional);
}

bool ReadAfter(const Json& j, const std::string& path, core::JobSpec* spec, DecodeContext& ctx) {
  return ForEachElement(j, path, ctx, [&](const Json& e, const std::string& p) {
    std::string text;
    if (!ReadString(e, p, &text, ctx)) return false;
    if (text.find('.') != std::string::npos) {
      Result<TaskId> task = ParseTaskId(text);
      if (!task.ok()) return ctx.Fail(p, task.status().message());
      spec->after_tasks.push_back(*task);
    } else {
      Result<JobId> job = ParseJobId(text);
      if (!job.ok()) return ctx.Fail(p, job.status().message());
      spec->after_jobs.push_back(*job);
    }
    return true;
  });
}

// Names, references and cycles between groups, each reported at the
// offending entry (core::BuildGroupGraph checks the same, less precisely).
bool CheckGroups(const core::JobSpec& spec, DecodeContext& ctx) {
  const size_t n = spec.groups.size();
  std::map<std::string, size_t> index;
  std::vector<std::string_view> names;
  uint64_t tasks = 0;
  for (size_t i = 0; i < n; ++i) {
    const std::string path = IndexPath("task", i);
    const std::string& name = spec.groups[i].name;
    if (name.empty() && n > 1) {
      return ctx.Fail(path, "missing \"id\" (needed when a job has several tasks)");
    }
    if (auto [it, fresh] = index.emplace(name, i); !fresh) {
      return ctx.Fail(JoinPath(path, "id"), "duplicate id \"" + name + "\" (also task[" +
                                                std::to_string(it->second) + "])");
    }
    names.push_back(name);
    tasks += spec.groups[i].TaskCount();
  }
  if (tasks > kMaxJobTasks) {
    return ctx.Fail("task", "the job has " + std::to_string(tasks) +
                                " tasks, more than the limit of " + std::to_string(kMaxJobTasks));
  }
  std::vector<std::vector<size_t>> deps(n);
  for (size_t i = 0; i < n; ++i) {
    const auto& depends_on = spec.groups[i].depends_on;
    for (size_t k = 0; k < depends_on.size(); ++k) {
      const std::string path = IndexPath(JoinPath(IndexPath("task", i), "depends_on"), k);
      auto it = index.find(depends_on[k]);
      if (it == index.end()) {
        std::string message = "unknown task id \"" + depends_on[k] + "\"";
        if (std::string hint = SuggestKey(depends_on[k], names); !hint.empty()) {
          message += " (did you mean \"" + hint + "\"?)";
        }
        return ctx.Fail(path, message);
      }
      if (it->second == i) return ctx.Fail(path, "a task cannot depend on itself");
      deps[i].push_back(it->second);
    }
    const core::TaskGroupSpec& g = spec.groups[i];
    for (size_t k = 0; g.inputs && k < g.inputs->size(); ++k) {
      const std::string& text = (*g.inputs)[k];
      Result<core::InputSelector> sel = core::ParseInputSelector(text, g.depends_on);
      if (!sel.ok()) {
        return ctx.Fail(
            IndexPath(JoinPath(IndexPath("task", i), "inputs"), k),
            "input \"" + text + "\" of task \"" + g.name + "\": " + sel.status().message());
      }
    }
  }
  // Iterative depth-first search; a grey node reached again closes a cycle.
  enum Color : uint8_t { kWhite, kGrey, kBlack };
  std::vector<Color> color(n, kWhite);
  for (size_t root = 0; root < n; ++root) {
    if (color[root] != kWhite) continue;
    std::vector<std::pair<size_t, size_t>> stack = {{root, 0}};  // node, next edge
    color[root] = kGrey;
    while (!stack.empty()) {
      auto& [node, edge] = stack.back();
      if (edge == deps[node].size()) {
        color[node] = kBlack;
        stack.pop_back();
        continue;
      }
      size_t next = deps[node][edge++];
      if (color[next] == kGrey) {
        std::string cycle = spec.groups[next].name;
        size_t from = 0;
        while (stack[from].first != next) ++from;
        for (size_t s = from + 1; s < stack.size(); ++s)
          cycle += " -> " + spec.groups[stack[s].first].name;
        cycle += " -> " + spec.groups[next].name;
        return ctx.Fail(JoinPath(IndexPath("task", next), "depends_on"),
                        "dependency cycle: " + cycle);
      }
      if (color[next] == kWhite) {
        color[next] = kGrey;
        stack.emplace_back(next, 0);
      }
    }
  }
  if (Result<core::GroupGraph> graph = core::BuildGroupGraph(spec); !graph.ok()) {
    return ctx.Fail("task", graph.status().message());
  }
  return true;
}

}  // namespace

Json JobSpecJson(const core::JobSpec& spec, bool compact) {
  Json j = Json::object();
  j["name"] = spec.name;
  if (!spec.user.empty()) j["user"] = spec.user;
  if (!spec.after_jobs.empty() || !spec.after_tasks.empty()) {
    Json after = Json::array();
    for (JobId job : spec.after_jobs) after.push_back(std::to_string(job));
    for (const TaskId& task : spec.after_tasks) after.push_back(task.ToString());
    j["after"] = std::move(after);
  }
  Json tasks = Json::array();
  for (const core::TaskGroupSpec& g : spec.groups) tasks.push_back(GroupJson(g, compact));
  j["task"] = std::move(tasks);
  return j;
}

bool ReadJobSpec(const Json& j, core::JobSpec* spec, DecodeContext& ctx) {
  *spec = core::JobSpec{};
  ObjectReader r(j, "", ctx);
  if (!r.RejectUnknown(kJobKeys)) return false;
  if (!r.String("name", &spec->name)) return false;
  if (spec->name.empty()) return ctx.Fail("name", "must not be empty");
  if (!r.String("user", &spec->user, Need::kOptional)) return false;
  if (!RefuseNul(spec->user, "user", "the user name", ctx)) return false;
  if (const Json* after = r.Get("after", Need::kOptional)) {
    if (!ReadAfter(*after, "after", spec, ctx)) return false;
  }
  const Json* tasks = r.Get("task", Need::kRequired);
  if (!r.ok()) return false;
  if (!ReadVector<core::TaskGroupSpec>(*tasks, "task", &spec->groups, ctx, ReadGroup)) return false;
  if (spec->groups.empty()) return ctx.Fail("task", "a job needs at least one [[task]]");
  return CheckGroups(*spec, ctx);
}

}  // namespace drover::proto::internal

namespace drover::proto {

Result<core::JobSpec> JobSpecFromJson(std::string_view json_text) {
  ASSIGN_OR_RETURN(internal::Json j, internal::ParseJson(json_text, kMaxJobSpecBytes, 64));
  internal::DecodeContext ctx;
  core::JobSpec spec;
  try {
    if (!internal::ReadJobSpec(j, &spec, ctx)) return InvalidArgument(ctx.Describe());
  } catch (const std::exception& e) {
    return Internal(std::string("job spec decoder failed: ") + e.what());
  }
  return spec;
}

Result<std::vector<Result<core::JobSpec>>> JobSpecBatchFromJson(std::string_view json_text) {
  ASSIGN_OR_RETURN(internal::Json j, internal::ParseJson(json_text, kMaxJobSpecBytes, 64));
  if (!j.is_object()) return InvalidArgument(R"(expected an object {"jobs": [job, ...]})");
  for (const auto& [key, value] : j.items()) {
    if (key != "jobs") return InvalidArgument("unknown key \"" + key + "\": expected \"jobs\"");
  }
  auto jobs = j.find("jobs");
  if (jobs == j.end() || !jobs->is_array()) {
    return InvalidArgument("jobs: expected an array of jobs");
  }
  if (jobs->empty() || jobs->size() > kMaxBatchJobs) {
    return InvalidArgument("jobs: " + std::to_string(jobs->size()) + " jobs; a batch holds 1 to " +
                           std::to_string(kMaxBatchJobs));
  }
  std::vector<Result<core::JobSpec>> specs;
  specs.reserve(jobs->size());
  for (const internal::Json& one : *jobs) {
    internal::DecodeContext ctx;
    core::JobSpec spec;
    try {
      if (!internal::ReadJobSpec(one, &spec, ctx)) {
        specs.emplace_back(InvalidArgument(ctx.Describe()));
        continue;
      }
    } catch (const std::exception& e) {
      return Internal(std::string("job spec decoder failed: ") + e.what());
    }
    specs.emplace_back(std::move(spec));
  }
  return specs;
}

std::string JobSpecToJson(const core::JobSpec& spec) {
  return internal::Dump(internal::JobSpecJson(spec));
}

nlohmann::json TaskGroupSpecJson(const core::TaskGroupSpec& group) {
  return internal::GroupJson(group, /*compact=*/false);
}

}  // namespace drover::proto
