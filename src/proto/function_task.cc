#include "proto/function_task.h"

namespace drover::proto {

namespace {

// Runs as `python -c RUNNER FUNCTION ARGS_JSON KWARGS_JSON`.
constexpr char kRunner[] = R"(import importlib, json, os, sys
name, args, kwargs = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
module, _, qualname = name.partition(":")
try:
    target = importlib.import_module(module)
    for part in qualname.split("."):
        target = getattr(target, part)
except Exception as e:
    message = "function %s cannot be imported: %s: %s" % (name, type(e).__name__, e)
    print("drover: " + message, file=sys.stderr)
    if os.environ.get("DROVER_RESULT"):
        with open(os.environ["DROVER_RESULT"], "w") as out:
            out.write(message)
    sys.exit(2)
value = target(*args, **kwargs)
if value is not None and os.environ.get("DROVER_RESULT"):
    with open(os.environ["DROVER_RESULT"], "w") as out:
        json.dump(value, out)
)";

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

std::vector<std::string> FunctionCommand(const std::string& python, const std::string& function,
                                         const std::string& args_json,
                                         const std::string& kwargs_json) {
  return {python, "-c", kRunner, function, args_json, kwargs_json};
}

}  // namespace drover::proto
