// A Python function named by reference as a task: `function =
// "mypkg.tasks:heavy"` with `args = [...]` (and `kwargs`, `python`) in a
// job file or the submit API's JSON, and `drover call`. The task runs the
// worker's interpreter (`python`, default python3) on the Python client's
// runner (python/drover/_call.py, copied into function_runner.inc by
// scripts/gen-function-runner), which imports the module, looks the name
// up, calls it with the JSON arguments and writes the JSON of its return
// value to $DROVER_RESULT. The function and its arguments travel in the
// environment (DROVER_FUNCTION, DROVER_ARGS, DROVER_KWARGS), so every call
// under one interpreter has the same command, and runs in a warm
// interpreter (DROVER_WARM=1, unless the task sets it) as the Executor's
// calls do. Code deployed on every worker is what a lab's task registry
// names; closures and lambdas go through the Python client's Executor
// instead (cloudpickle).
//
// Nothing is unpickled: arguments and the result are JSON. A name that
// does not import fails the task (exit code 2) with the import error in
// its result and its stderr.
#ifndef DROVER_PROTO_FUNCTION_TASK_H_
#define DROVER_PROTO_FUNCTION_TASK_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace drover::proto {

// "module.path:qualified.name": Python identifiers joined by dots, on each
// side of one colon. An error names what is wrong.
Status CheckFunctionName(std::string_view name);

// What a task that calls `function` with `args_json` (a JSON array, where
// "{index}" is the array index) and `kwargs_json` (a JSON object) under
// `python` runs: its command, and the variables added to its environment
// (`env`, the task's own, wins for DROVER_WARM only).
struct FunctionTask {
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
};
// The runner's command under `python`: what a `function` task runs, and
// what a task given as `python_runner` (the Python client's Executor,
// whose calls carry their pickle in DROVER_CALL) runs.
std::vector<std::string> RunnerCommand(const std::string& python);
// The SHA-256 (hex) of the runner's program unpacked (the Python client's
// RUNNER, whose packed form is the command's).
std::string_view FunctionRunnerSha256();
// The interpreter of `command` when it is RunnerCommand's; null when not.
const std::string* RunnerPython(const std::vector<std::string>& command);

FunctionTask FunctionCall(const std::string& python, const std::string& function,
                          const std::string& args_json, const std::string& kwargs_json,
                          const std::map<std::string, std::string>& env);

}  // namespace drover::proto

#endif  // DROVER_PROTO_FUNCTION_TASK_H_
