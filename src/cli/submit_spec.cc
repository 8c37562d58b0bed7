#include "cli/submit_spec.h"

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <nlohmann/json.hpp>

#include "net/http_types.h"
#include "proto/job_file.h"

namespace drover::cli {

namespace {

// "task[0].resources.mem: ..." -> "--mem: ...", "task[0].array: ..." ->
// "--array: ...": people typed flags, not a job file.
std::string FlagMessage(std::string message) {
  for (const std::string prefix : {"task[0].resources.", "task[0]."}) {
    if (message.rfind(prefix, 0) == 0) {
      std::string rest = message.substr(prefix.size());
      if (rest.rfind("gpu_type", 0) == 0) return "--gpu-type" + rest.substr(8);
      if (rest.rfind("gpu_mem", 0) == 0) return "--gpu-mem" + rest.substr(7);
      if (rest.rfind("labels", 0) == 0) return "--label" + rest.substr(6);
      if (rest.rfind("counters", 0) == 0) return "--counter" + rest.substr(8);
      // io_read_bps: ... -> --io-read-bps: ...
      const size_t key_end = std::min(rest.find(':'), rest.size());
      std::replace(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(key_end), '_', '-');
      return "--" + rest;
    }
  }
  return message;
}

// "KEY=VALUE" items of a repeatable flag into a JSON object; `flag` names
// the flag in the error.
Result<nlohmann::json> KeyValues(const std::vector<std::string>& items, const std::string& flag) {
  nlohmann::json out = nlohmann::json::object();
  for (const std::string& kv : items) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgument(flag + ": expected KEY=VALUE, got \"" + kv + "\"");
    }
    out[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return out;
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

Result<std::string> BuildSubmitBody(const SubmitFlags& flags) {
  using nlohmann::json;
  if (flags.command.empty()) return InvalidArgument("no command given (drover submit -- CMD ...)");
  // Job specs are JSON text, which holds UTF-8 only: a file name in another
  // encoding is named here rather than failing (or throwing) later.
  for (size_t i = 0; i < flags.command.size(); ++i) {
    try {
      (void)json(flags.command[i]).dump();
    } catch (const json::exception&) {
      return InvalidArgument("command argument " + std::to_string(i + 1) + " (" +
                             net::Printable(flags.command[i]) +
                             ") is not valid UTF-8; job specs hold UTF-8 text only");
    }
  }
  const std::string name = flags.name.empty() ? BaseName(flags.command[0]) : flags.name;
  json task = {{"id", name}, {"command", flags.command}};
  json resources = json::object();
  if (!flags.cpus.empty()) resources["cpus"] = flags.cpus;
  if (!flags.mem.empty()) resources["mem"] = flags.mem;
  if (!flags.gpus.empty()) resources["gpus"] = flags.gpus;
  if (!flags.gpu_mem.empty()) resources["gpu_mem"] = flags.gpu_mem;
  if (!flags.gpu_type.empty()) {
    json types = json::array();
    size_t start = 0;
    while (start <= flags.gpu_type.size()) {
      const size_t comma = flags.gpu_type.find(',', start);
      const size_t end = comma == std::string::npos ? flags.gpu_type.size() : comma;
      if (end > start) types.push_back(flags.gpu_type.substr(start, end - start));
      start = end + 1;
    }
    resources["gpu_type"] = types;
  }
  if (!flags.labels.empty()) {
    ASSIGN_OR_RETURN(resources["labels"], KeyValues(flags.labels, "--label"));
  }
  if (!flags.counters.empty()) {
    ASSIGN_OR_RETURN(nlohmann::json counters, KeyValues(flags.counters, "--counter"));
    for (auto& [key, value] : counters.items()) {
      const std::string text = value.get<std::string>();
      size_t used = 0;
      long long n = -1;
      try {
        n = std::stoll(text, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != text.size() || text.empty() || n < 0) {
        return InvalidArgument("--counter: " + key + "=" + text +
                               ": the count must be a whole number, 0 or more");
      }
      value = n;
    }
    resources["counters"] = counters;
  }
  if (!resources.empty()) task["resources"] = resources;
  if (!flags.array.empty()) task["array"] = flags.array;
  if (!flags.timeout.empty()) task["timeout"] = flags.timeout;
  if (!flags.max_output.empty()) task["max_output"] = flags.max_output;
  if (!flags.network.empty()) task["network"] = flags.network;
  if (!flags.image.empty()) task["image"] = flags.image;
  if (!flags.image_pull.empty()) task["image_pull"] = flags.image_pull;
  if (!flags.disk.empty()) task["disk"] = flags.disk;
  if (!flags.io_read_bps.empty()) task["io_read_bps"] = flags.io_read_bps;
  if (!flags.io_write_bps.empty()) task["io_write_bps"] = flags.io_write_bps;
  // Checked by the job parser (1 to 10000), which names the flag.
  if (flags.io_weight != -1) task["io_weight"] = flags.io_weight;
  if (!flags.inputs.empty()) task["input_files"] = flags.inputs;
  if (flags.cache) task["cache"] = true;
  if (!flags.code.empty()) {
    if (!flags.cache)
      return InvalidArgument("--code: only with --cache (it is part of the cache key)");
    task["code"] = flags.code;
  }
  if (flags.retries < 0) return InvalidArgument("--retries: must not be negative");
  if (flags.retries != 0) task["retries"] = flags.retries;
  // Checked by the server's job parser, which names the flag (below).
  if (flags.replicas != 1) task["replicas"] = flags.replicas;
  if (flags.priority != 0) task["priority"] = flags.priority;
  if (!flags.env.empty()) {
    ASSIGN_OR_RETURN(task["env"], KeyValues(flags.env, "--env"));
  }
  json job = {{"name", name}, {"task", json::array({task})}};
  if (!flags.user.empty()) job["user"] = flags.user;
  if (!flags.after.empty()) job["after"] = flags.after;

  std::string text;
  try {
    text = job.dump();
  } catch (const json::exception&) {
    return InvalidArgument(
        "a flag's value is not valid UTF-8 (--name, --env, --label, --user, ...); job specs hold "
        "UTF-8 text only");
  }
  Result<core::JobSpec> spec = proto::JobSpecFromJson(text);
  if (!spec.ok()) {
    std::string message = spec.status().message();
    if (message.rfind("after", 0) == 0) message = "--" + message;
    return Status(spec.status().code(), FlagMessage(message));
  }
  return proto::JobSpecToJson(*spec);
}

Status CheckNotAJobFile(const std::vector<std::string>& command) {
  if (command.size() != 1) return Status::Ok();
  const std::string& arg = command[0];
  auto ends_with = [&](std::string_view suffix) {
    return arg.size() > suffix.size() &&
           arg.compare(arg.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (!ends_with(".toml") && !ends_with(".json")) return Status::Ok();
  if (::access(arg.c_str(), F_OK) != 0 || ::access(arg.c_str(), X_OK) == 0) return Status::Ok();
  return InvalidArgument(arg + " is a job file, not a command: `drover run " + arg +
                         "` submits it and follows it (`drover submit` runs one command)");
}

}  // namespace drover::cli
