// `drover submit [flags] -- CMD...`, `drover run FILE.toml` and `drover
// call MODULE:NAME`: send a job, and (submit --wait, run, call) follow it to
// its end.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "cli/cli11.h"
#include "cli/cli_common.h"
#include "cli/code_files.h"
#include "cli/commands.h"
#include "cli/streams.h"
#include "cli/submit_spec.h"
#include "cli/upload_inputs.h"
#include "cli/views.h"
#include "cli/wait_job.h"
#include "core/model.h"
#include "proto/function_task.h"
#include "proto/job_file.h"

namespace drover::cli {

namespace {

// Posts the body; returns the job id.
Result<JobId> SendJob(ApiClient& api, std::string body) {
  ASSIGN_OR_RETURN(nlohmann::json answer, api.Post("/api/v1/jobs", std::move(body)));
  auto id = answer.find("id");
  if (id == answer.end() || !id->is_number_unsigned()) {
    return Internal("the server's answer has no job id: " + answer.dump());
  }
  PrintSubmitWarnings(id->get<JobId>(), answer);
  return id->get<JobId>();
}

// Exit status for a finished job: 0 when every task succeeded.
int ExitFor(const JobWatch& watch) { return watch.succeeded() ? kExitOk : kExitFailure; }

// The end of `submit --wait`: how it ended on stdout (after the job id), a
// line on stderr when a task did not succeed, and the exit status.
int Finished(JobId job, const JobWatch& watch) {
  std::cout << watch.EndLine() << std::endl;
  if (!watch.succeeded()) {
    std::cerr << "drover: job " << job << ": " << watch.count("failed") << " failed, "
              << watch.count("canceled") << " canceled (drover status " << job << ")"
              << std::endl;
  }
  return ExitFor(watch);
}

struct SubmitOptions {
  ClientFlags client;
  SubmitFlags spec;
  bool wait = false;
};

int RunSubmit(const SubmitOptions& o) {
  if (Status file = CheckNotAJobFile(o.spec.command); !file.ok()) {
    return ReportError(file, /*usage_on_invalid=*/true);
  }
  Result<std::string> body = BuildSubmitBody(o.spec);
  if (!body.ok()) return ReportError(body.status(), /*usage_on_invalid=*/true);
  if (!o.spec.inputs.empty() || !o.spec.code.empty()) {
    // --input: the files go to the server first; the spec names them by
    // hash. --code: hashed here, the files stay.
    Result<core::JobSpec> spec = proto::JobSpecFromJson(*body);
    if (!spec.ok()) return ReportError(spec.status(), /*usage_on_invalid=*/true);
    if (Status hashed = HashCodeFiles(*spec, ""); !hashed.ok()) {
      return ReportError(hashed, /*usage_on_invalid=*/true);
    }
    if (!o.spec.inputs.empty()) {
      Result<ApiClient> api = Connect(o.client);
      if (!api.ok()) return ReportError(api.status());
      Status uploaded = UploadInputFiles(api->options(), *spec, "", std::cerr);
      if (!uploaded.ok()) return ReportError(uploaded);
    }
    body = proto::JobSpecToJson(*spec);
  }
  // The server makes exactly the spec's tasks: knowing their number here
  // saves --wait a request (a TLS connection) before the event stream.
  std::optional<uint64_t> task_count;
  if (o.wait) {
    Result<core::JobSpec> spec = proto::JobSpecFromJson(*body);
    if (spec.ok()) task_count = spec->TaskCount();
  }
  Result<ApiClient> api = Connect(o.client);
  if (!api.ok()) return ReportError(api.status());
  if (o.wait && task_count && api->options().alternates.empty()) {
    // One server: the job and its events share one connection (one TLS
    // handshake). With standbys to fail over to, ApiClient's path below.
    JobWatch watch(*task_count);
    SubmitFollowResult r = SubmitAndFollowJob(
        api->options(), *body, watch, [](JobId job) { std::cout << job << std::endl; }, nullptr);
    if (!r.redirected) {
      if (!r.status.ok()) return ReportError(r.status);
      return Finished(*r.job, watch);
    }
  }
  Result<JobId> job = SendJob(*api, std::move(*body));
  if (!job.ok()) return ReportError(job.status());
  std::cout << *job << std::endl;
  if (!o.wait) return kExitOk;
  Result<JobWatch> watch = WaitForJob(*api, *job, Progress::kNone, task_count);
  if (!watch.ok()) return ReportError(watch.status());
  return Finished(*job, *watch);
}

struct RunOptions {
  ClientFlags client;
  std::string file;
  bool plain = false;
  bool no_cache = false;
};

int RunFile(const RunOptions& o) {
  std::ifstream in(o.file, std::ios::binary);
  if (!in) return ReportError(InvalidArgument(o.file + ": cannot open the job file"), true);
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().size() > proto::kMaxJobSpecBytes) {
    return ReportError(InvalidArgument(o.file + ": larger than the 16 MiB a job may be"), true);
  }
  // Checked here first so a mistake is reported with its line and nothing
  // reaches the server.
  Result<core::JobSpec> spec = proto::ParseJobToml(text.str(), o.file);
  if (!spec.ok()) return ReportError(spec.status(), /*usage_on_invalid=*/true);
  // code: hashed (result_cache.h), unless --no-cache runs everything;
  // like a mistake in the file, a pattern that matches nothing is reported
  // before any connection. input_files: paths relative to the job file,
  // uploaded before the job.
  const size_t slash = o.file.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "" : o.file.substr(0, slash);
  for (core::TaskGroupSpec& group : spec->groups) {
    if (o.no_cache) group.cache = false;
    if (!group.cache) group.code.clear();
  }
  if (Status hashed = HashCodeFiles(*spec, dir); !hashed.ok()) {
    return ReportError(hashed.WithContext(o.file), /*usage_on_invalid=*/true);
  }
  Result<ApiClient> api = Connect(o.client);
  if (!api.ok()) return ReportError(api.status());
  Status uploaded = UploadInputFiles(api->options(), *spec, dir, std::cerr);
  if (!uploaded.ok()) return ReportError(uploaded);
  Result<JobId> job = SendJob(*api, proto::JobSpecToJson(*spec));
  if (!job.ok()) return ReportError(job.status());
  std::cout << "job " << *job << " \"" << spec->name << "\": " << spec->TaskCount() << " tasks"
            << std::endl;
  const Progress progress = o.plain || !StdoutIsTty() ? Progress::kLines : Progress::kBar;
  Result<JobWatch> watch = WaitForJob(*api, *job, progress, spec->TaskCount());
  if (!watch.ok()) return ReportError(watch.status());
  Result<nlohmann::json> info = api->Get("/api/v1/jobs/" + std::to_string(*job));
  if (!info.ok()) return ReportError(info.status());
  std::cout << "\n" << JobView(*info, NowMs());
  return ExitFor(*watch);
}

struct CallOptions {
  ClientFlags client;
  SubmitFlags spec;
  std::string function;
  std::string args = "[]";
  std::string kwargs = "{}";
  std::string python = "python3";
};

// `flag`'s JSON text, which must hold a value of `want` ("array", "object")
// once each "{index}" in it is the array index: the text travels as it is
// and is expanded per call, so "{index}" may stand where a number goes
// ('[{index}, 1000]') or inside a string ('["w{index}"]').
Status CheckJsonFlag(const std::string& flag, const std::string& text, const char* want,
                     const char* example) {
  const std::string expanded = core::ExpandCommand({text}, 0).front();
  nlohmann::json value = nlohmann::json::parse(expanded, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    return InvalidArgument(flag + ": not JSON: " + text + " (for example " + example + ")");
  }
  if (value.type_name() != std::string_view(want)) {
    return InvalidArgument(flag + ": expected a JSON " + want + ", as in " + example + ", got " +
                           value.type_name());
  }
  return Status::Ok();
}

// Calls the function as a task (each task of --array), waits, and prints
// each task's result (the JSON of its return value), one line per task.
int RunCall(CallOptions o) {
  if (Status s = proto::CheckFunctionName(o.function); !s.ok()) {
    return ReportError(s.WithContext("drover call"), /*usage_on_invalid=*/true);
  }
  for (Status s : {CheckJsonFlag("--args", o.args, "array", "'[3, 1000]'"),
                   CheckJsonFlag("--kwargs", o.kwargs, "object", "'{\"scale\": 2}'")}) {
    if (!s.ok()) return ReportError(s, /*usage_on_invalid=*/true);
  }
  // The function's variables go with the --env ones (function_task.h).
  proto::FunctionTask call = proto::FunctionCall(o.python, o.function, o.args, o.kwargs, {});
  o.spec.command = std::move(call.command);
  for (const auto& [name, value] : call.env) {
    const bool own = name == "DROVER_WARM" &&
                     std::any_of(o.spec.env.begin(), o.spec.env.end(), [](const std::string& kv) {
                       return kv.rfind("DROVER_WARM=", 0) == 0;
                     });
    if (!own) o.spec.env.push_back(name + "=" + value);
  }
  if (o.spec.name.empty()) o.spec.name = o.function.substr(o.function.find(':') + 1);
  Result<std::string> body = BuildSubmitBody(o.spec);
  if (!body.ok()) return ReportError(body.status(), /*usage_on_invalid=*/true);
  Result<core::JobSpec> spec = proto::JobSpecFromJson(*body);
  if (!spec.ok()) return ReportError(spec.status(), /*usage_on_invalid=*/true);
  if (!o.spec.code.empty()) {
    if (Status hashed = HashCodeFiles(*spec, ""); !hashed.ok()) {
      return ReportError(hashed, /*usage_on_invalid=*/true);
    }
    body = proto::JobSpecToJson(*spec);
  }
  Result<ApiClient> api = Connect(o.client);
  if (!api.ok()) return ReportError(api.status());
  Result<JobId> job = SendJob(*api, std::move(*body));
  if (!job.ok()) return ReportError(job.status());
  Result<JobWatch> watch = WaitForJob(*api, *job, Progress::kNone, spec->TaskCount());
  if (!watch.ok()) return ReportError(watch.status());
  int exit = kExitOk;
  for (uint64_t i = 0; i < spec->TaskCount(); ++i) {
    const std::string id = std::to_string(*job) + "." + std::to_string(i);
    Result<nlohmann::json> task = api->Get("/api/v1/tasks/" + id);
    if (!task.ok()) return ReportError(task.status());
    const std::string state = task->value("state", "");
    const nlohmann::json outcome = task->value("outcome", nlohmann::json::object());
    const std::string result = outcome.is_object() ? outcome.value("result", "") : "";
    const std::string prefix = spec->TaskCount() > 1 ? id + ": " : "";
    if (state == "succeeded") {
      std::cout << prefix << (result.empty() ? "null" : result) << std::endl;
      continue;
    }
    exit = kExitFailure;
    std::cerr << "drover: " << id << " " << state << ": " << task->value("reason", "")
              << (result.empty() ? std::string() : " (" + result + ")") << " (drover logs " << id
              << ")"
              << std::endl;
  }
  return exit;
}

}  // namespace

void AddCallCommand(CLI::App& root, int& exit_code) {
  auto c = std::make_shared<CallOptions>();
  CLI::App* call = root.add_subcommand(
      "call", "Call a Python function on the cluster and print its result (JSON)");
  AddClientFlags(*call, c->client, /*with_json=*/false);
  call->add_option("function", c->function,
                   "module:name of a function importable on the workers, e.g. mypkg.tasks:heavy")
      ->required();
  call->add_option("--args", c->args,
                   "Its arguments, a JSON array: '[3, 1000]' ({index} too: '[{index}, 1000]')");
  call->add_option("--kwargs", c->kwargs, "Its keyword arguments, a JSON object");
  call->add_option("--python", c->python, "The interpreter on the worker (default python3)");
  call->add_option("--name", c->spec.name, "Job name (default: the function's name)");
  call->add_option("--cpus", c->spec.cpus, "CPUs per call: 2, 0.5, 500m (default 1)");
  call->add_option("--mem", c->spec.mem, "Memory per call: 4GiB, 512MiB");
  call->add_option("--gpus", c->spec.gpus, "GPUs per call: 1, 2, 0.25");
  call->add_option("--array", c->spec.array, "One call per index: 0-99 ({index} in --args)");
  call->add_option("--retries", c->spec.retries, "Extra attempts after a failure");
  call->add_option("--timeout", c->spec.timeout, "Per attempt: 90s, 2h");
  call->add_option("--env", c->spec.env, "Environment KEY=VALUE (repeatable)")
      ->allow_extra_args(false);
  call->add_option("--label", c->spec.labels, "Run only on workers with this label KEY=VALUE")
      ->allow_extra_args(false);
  call->add_flag("--cache", c->spec.cache,
                 "Reuse the result of an earlier call with the same function, arguments and "
                 "--code files");
  call->add_option("--code", c->spec.code,
                   "With --cache: a file (or glob) that is the function's code (repeatable)")
      ->allow_extra_args(false);
  call->callback([c, &exit_code] { exit_code = RunCall(*c); });
}

void AddSubmitCommand(CLI::App& root, int& exit_code) {
  auto s = std::make_shared<SubmitOptions>();
  CLI::App* submit = root.add_subcommand("submit", "Submit one command (or an array of it)");
  AddClientFlags(*submit, s->client, /*with_json=*/false);
  // Each repeatable option takes one value per use: otherwise CLI11 goes on
  // taking values through "--" and the command's own flags ("-- sh -c")
  // are refused.
  submit->add_option("--name", s->spec.name, "Job name (default: the command's name)");
  submit->add_option("--cpus", s->spec.cpus, "CPUs per task: 2, 0.5, 500m (default 1)");
  submit->add_option("--mem", s->spec.mem, "Memory per task: 4GiB, 512MiB");
  submit->add_option("--gpus", s->spec.gpus, "GPUs per task: 1, 2, 0.25");
  submit->add_option("--gpu-type", s->spec.gpu_type, "Accepted GPU models: A100 or A100,H100");
  submit->add_option("--gpu-mem", s->spec.gpu_mem, "Minimum memory per GPU: 16GiB");
  submit->add_option("--array", s->spec.array, "Array of tasks: 0-99, 0-99:2 ({index} in CMD)");
  submit->add_option("--retries", s->spec.retries, "Extra attempts after a failure");
  submit->add_option("--timeout", s->spec.timeout, "Per attempt: 90s, 2h");
  submit->add_option("--replicas", s->spec.replicas,
                     "Copies of the task's outputs to keep, each on its own worker (1-4)");
  submit->add_option("--max-output", s->spec.max_output,
                     "Most the task's outputs may add up to: 2GiB (default: the server's "
                     "--max-output)");
  submit->add_option("--network", s->spec.network,
                     "host (default: the worker's network) or none (a network of its own with "
                     "only loopback; runs only on workers that can make one)");
  submit->add_option("--image", s->spec.image,
                     "The container image the task runs in: docker.io/library/python:3.12 "
                     "(runs only on workers with podman; its directory is mounted at the same "
                     "path)");
  submit->add_option("--image-pull", s->spec.image_pull,
                     "When a worker fetches the image: missing (default: when it lacks it), "
                     "always, or never (only what it has)");
  submit->add_option("--disk", s->spec.disk,
                     "The most the task's directory may hold: 20GiB (placed only where that much "
                     "is free; stopped, failed, past it)");
  submit->add_option("--io-read-bps", s->spec.io_read_bps,
                     "Disk reads per second on the task directory's device: 50MiB");
  submit->add_option("--io-write-bps", s->spec.io_write_bps,
                     "Disk writes per second on the task directory's device: 10MiB (cgroup v1: "
                     "direct I/O only)");
  submit->add_option("--io-weight", s->spec.io_weight,
                     "Its share of the disk against other tasks', 1-10000 (100 without one)");
  submit
      ->add_option("--input", s->spec.inputs,
                   "A local file for the task's directory, uploaded once (repeatable)")
      ->allow_extra_args(false);
  submit->add_option("--priority", s->spec.priority, "Higher runs first");
  submit->add_option("--after", s->spec.after, "Start after job ID or task ID.N succeeded")
      ->allow_extra_args(false);
  submit->add_option("--env", s->spec.env, "Environment KEY=VALUE (repeatable)")
      ->allow_extra_args(false);
  submit
      ->add_option("--label", s->spec.labels,
                   "Run only on workers with this label KEY=VALUE (repeatable)")
      ->allow_extra_args(false);
  submit
      ->add_option("--counter", s->spec.counters,
                   "Custom counter per task NAME=COUNT, e.g. licenses=2 (repeatable)")
      ->allow_extra_args(false);
  submit->add_option("--user", s->spec.user, "The job's user (as `user` in a job file)");
  submit->add_flag("--cache", s->spec.cache,
                   "Reuse the result of an earlier task with the same command, environment, "
                   "inputs and --code files, if its outputs are still held (it then does not run)");
  submit
      ->add_option("--code", s->spec.code,
                   "With --cache: a file (or glob) that is the task's code; its content is in "
                   "the key (repeatable)")
      ->allow_extra_args(false);
  submit->add_flag("--wait", s->wait, "Wait for the end; exit 1 if a task did not succeed");
  submit->add_option("command", s->spec.command, "The command, after --")->required();
  submit->callback([s, &exit_code] { exit_code = RunSubmit(*s); });
}

void AddRunCommand(CLI::App& root, int& exit_code) {
  auto r = std::make_shared<RunOptions>();
  CLI::App* run = root.add_subcommand("run", "Submit a job file and follow it to the end");
  AddClientFlags(*run, r->client, /*with_json=*/false);
  run->add_option("file", r->file, "The job file (TOML)")->required();
  run->add_flag("--plain", r->plain, "One line per change instead of a progress bar");
  run->add_flag("--no-cache", r->no_cache,
                "Run every task, even those with cache = true whose result is known");
  run->callback([r, &exit_code] { exit_code = RunFile(*r); });
}

}  // namespace drover::cli
