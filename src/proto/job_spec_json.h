// Internal to drover_proto: core::JobSpec <-> JSON value, shared by the
// TOML job file parser (which converts TOML to JSON first), the submit API's
// JSON body and the journal's JobRecord.
//
// Thread safety: pure functions.
#ifndef DROVER_PROTO_JOB_SPEC_JSON_H_
#define DROVER_PROTO_JOB_SPEC_JSON_H_

#include <string>
#include <string_view>

#include "core/model.h"
#include "proto/json_util.h"

namespace drover::proto::internal {

// The canonical form described in job_file.h. `compact` (the journal's
// form) gives a task whose command is the function runner's as
// `python_runner` (function_task.h) instead of its 5 KiB.
Json JobSpecJson(const core::JobSpec& spec, bool compact = false);

// Reads and checks a whole spec (see job_file.h for the rules). On failure
// records the error, with its field path, in `ctx` and returns false.
bool ReadJobSpec(const Json& j, core::JobSpec* spec, DecodeContext& ctx);

// A quantity of bytes: a string with a unit ("4GiB") or an integer.
bool ReadBytes(const Json& j, const std::string& path, uint64_t* out, DecodeContext& ctx);

// A group's `network`, `disk`, `io_read_bps`, `io_write_bps` and `io_weight`
// (job_spec_isolation.cc): read into `g`, and written into its JSON form
// `j` where not at their defaults.
bool ReadIsolation(ObjectReader& r, core::TaskGroupSpec* g, DecodeContext& ctx);
void IsolationJson(const core::TaskGroupSpec& g, Json& j);

// Text handed to exec ends at its first NUL byte: refused instead, at
// `path`, naming `what` it is.
bool RefuseNul(const std::string& text, const std::string& path, std::string_view what,
               DecodeContext& ctx);

// A group's Python function forms (job_spec_function.cc): `function`
// (with `args`, `kwargs`, `python`), whose command and variables go into
// `g` (its `env` read already), and `python_runner` (`j`, at `path`): the
// runner under that interpreter as its command, which reads the call from
// the environment; the Python client's calls, without the runner's 5 KiB
// in each.
bool ReadFunction(ObjectReader& r, core::TaskGroupSpec* g, DecodeContext& ctx);
bool ReadRunner(const Json& j, const std::string& path, core::TaskGroupSpec* g, DecodeContext& ctx);

}  // namespace drover::proto::internal

#endif  // DROVER_PROTO_JOB_SPEC_JSON_H_
