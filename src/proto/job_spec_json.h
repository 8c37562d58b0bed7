// Internal to drover_proto: core::JobSpec <-> JSON value, shared by the
// TOML job file parser (which converts TOML to JSON first), the submit API's
// JSON body and the journal's JobRecord.
//
// Thread safety: pure functions.
#ifndef DROVER_PROTO_JOB_SPEC_JSON_H_
#define DROVER_PROTO_JOB_SPEC_JSON_H_

#include "core/model.h"
#include "proto/json_util.h"

namespace drover::proto::internal {

// The canonical form described in job_file.h.
Json JobSpecJson(const core::JobSpec& spec);

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

}  // namespace drover::proto::internal

#endif  // DROVER_PROTO_JOB_SPEC_JSON_H_
