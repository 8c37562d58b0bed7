#include "proto/function_task.h"

namespace drover::proto {

namespace {

#include "proto/function_runner.inc"

bool IsIdentifierPath(std::string_view s) {
  if (s.empty()) return false;
  bool start = true;
  for (char c : s) {
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    const bool digit = c >= '0' && c <= '9';
    if (c == '.') {
      if (start) return false;
      start = true;
      continue;
    }
    if (!letter && !(digit && !start)) return false;
    start = false;
  }
  return !start;
}

}  // namespace

Status CheckFunctionName(std::string_view name) {
  const size_t colon = name.find(':');
  if (colon == std::string_view::npos || name.find(':', colon + 1) != std::string_view::npos ||
      !IsIdentifierPath(name.substr(0, colon)) || !IsIdentifierPath(name.substr(colon + 1))) {
    return InvalidArgument("\"" + std::string(name) +
                           "\" is not a function name: expected module:name, as in "
                           "\"mypkg.tasks:heavy\"");
  }
  return Status::Ok();
}

std::vector<std::string> RunnerCommand(const std::string& python) {
  return {python, "-c", kFunctionRunner};
}

std::string_view FunctionRunnerSha256() { return kFunctionRunnerSha256; }

const std::string* RunnerPython(const std::vector<std::string>& command) {
  constexpr std::string_view runner = kFunctionRunner;
  if (command.size() != 3 || command[1] != "-c" || command[2] != runner) return nullptr;
  return &command[0];
}

FunctionTask FunctionCall(const std::string& python, const std::string& function,
                          const std::string& args_json, const std::string& kwargs_json,
                          const std::map<std::string, std::string>& env) {
  FunctionTask t;
  t.command = RunnerCommand(python);
  t.env = env;
  t.env["DROVER_FUNCTION"] = function;
  t.env["DROVER_ARGS"] = args_json;
  t.env["DROVER_KWARGS"] = kwargs_json;
  t.env.try_emplace("DROVER_WARM", "1");
  return t;
}

}  // namespace drover::proto
