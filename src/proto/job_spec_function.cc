// A task group's Python function forms instead of `command` (job_spec_json.h):
// `function` with `args`, `kwargs` and `python`, and `python_runner`; both
// run the function runner (function_task.h).
#include <string>

#include "proto/function_task.h"
#include "proto/job_spec_json.h"
#include "proto/json_type_name.h"

namespace drover::proto::internal {

// Text handed to exec (an argument, an environment value, a user name)
// ends at its first NUL byte: "a\u0000b" would run as "a". Refused instead,
// at the field's path.
bool RefuseNul(const std::string& text, const std::string& path, std::string_view what,
               DecodeContext& ctx) {
  const size_t nul = text.find('\0');
  if (nul == std::string::npos) return true;
  return ctx.Fail(path, "NUL byte (\\u0000) at offset " + std::to_string(nul) + " of " +
                            std::string(what) + ": the program would see only the part before it");
}

// `function` (with `args`, `kwargs`, `python`) instead of `command`: the
// command that calls it and its variables, added to the group's `env`
// (function_task.h).
bool ReadFunction(ObjectReader& r, core::TaskGroupSpec* g, DecodeContext& ctx) {
  std::string function;
  std::string python = "python3";
  if (!r.String("function", &function) || !r.String("python", &python, Need::kOptional)) {
    return false;
  }
  if (Status s = CheckFunctionName(function); !s.ok()) {
    return ctx.Fail(r.PathOf("function"), s.message());
  }
  if (python.empty()) return ctx.Fail(r.PathOf("python"), "is empty: name an interpreter");
  if (!RefuseNul(python, r.PathOf("python"), "the interpreter", ctx)) return false;
  Json args = Json::array();
  Json kwargs = Json::object();
  if (const Json* a = r.Get("args", Need::kOptional)) {
    if (!a->is_array()) {
      return ctx.Fail(
          r.PathOf("args"),
          std::string("expected an array of the function's arguments, got ") + JsonTypeName(*a));
    }
    args = *a;
  }
  if (const Json* k = r.Get("kwargs", Need::kOptional)) {
    if (!k->is_object()) {
      return ctx.Fail(
          r.PathOf("kwargs"),
          std::string("expected a table of keyword arguments, got ") + JsonTypeName(*k));
    }
    kwargs = *k;
  }
  if (!r.ok()) return false;
  const std::string args_json = args.dump(-1, ' ', false, Json::error_handler_t::replace);
  const std::string kwargs_json = kwargs.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (!RefuseNul(args_json, r.PathOf("args"), "an argument", ctx) ||
      !RefuseNul(kwargs_json, r.PathOf("kwargs"), "an argument", ctx)) {
    return false;
  }
  FunctionTask call = FunctionCall(python, function, args_json, kwargs_json, g->env);
  g->command = std::move(call.command);
  g->env = std::move(call.env);
  return true;
}

bool ReadRunner(const Json& j, const std::string& path, core::TaskGroupSpec* g,
                DecodeContext& ctx) {
  std::string python;
  if (!ReadString(j, path, &python, ctx)) return false;
  if (python.empty()) return ctx.Fail(path, "is empty: name an interpreter");
  if (!RefuseNul(python, path, "the interpreter", ctx)) return false;
  g->command = RunnerCommand(python);
  return true;
}

}  // namespace drover::proto::internal
