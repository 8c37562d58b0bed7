// A Python function named by reference as a task: `function =
// "mypkg.tasks:heavy"` with `args = [...]` (and `kwargs`, `python`) in a
// job file or the submit API's JSON, and `drover call`. The task runs the
// worker's interpreter (`python`, default python3) on a small runner that
// imports the module, looks the name up, calls it with the JSON arguments
// and writes the JSON of its return value to $DROVER_RESULT. Code deployed
// on every worker is what a lab's task registry names; closures and
// lambdas go through the Python client's Executor instead (cloudpickle).
//
// Nothing is unpickled: arguments and the result are JSON. A name that
// does not import fails the task (exit code 2) with the import error in
// its result and its stderr.
#ifndef DROVER_PROTO_FUNCTION_TASK_H_
#define DROVER_PROTO_FUNCTION_TASK_H_

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace drover::proto {

// "module.path:qualified.name": Python identifiers joined by dots, on each
// side of one colon. An error names what is wrong.
Status CheckFunctionName(std::string_view name);

// The argv that calls `function` with `args_json` (a JSON array) and
// `kwargs_json` (a JSON object) under `python`.
std::vector<std::string> FunctionCommand(const std::string& python, const std::string& function,
                                         const std::string& args_json,
                                         const std::string& kwargs_json);

}  // namespace drover::proto

#endif  // DROVER_PROTO_FUNCTION_TASK_H_
