// Internal to drover_sim: strict reading of the fields of one JSON object
// (a trace line or a cluster entry), with errors that name the field.
//
// Quantities go through common/quantity.h, so a trace accepts exactly what a
// job file accepts: "0.5" or 0.5 GPUs, "4GiB" or a byte count, "90s" or a
// number of seconds. Every function returns an InvalidArgument Status whose
// message starts with the field name ("gpus: ..."); callers prefix the line.
//
// Thread safety: pure functions.
#ifndef DROVER_SIM_JSON_FIELDS_H_
#define DROVER_SIM_JSON_FIELDS_H_

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/time.h"

namespace drover::sim::internal {

using Json = nlohmann::json;

// Parses `text` as one JSON value; errors carry nlohmann's description
// ("invalid JSON: syntax error at byte 7 ...").
Result<Json> ParseJsonText(std::string_view text);

// Checks that `object` is an object and has no key outside `known`.
// Errors: "expected an object, got array", "unknown field \"gpu\"".
Status CheckKeys(const Json& object, std::initializer_list<std::string_view> known);

Result<std::string> ReadString(const Json& value, std::string_view field);
// A list of strings, or one string standing for a list of one.
Result<std::vector<std::string>> ReadStrings(const Json& value, std::string_view field);
// An integer within [min, max] (1.0 is rejected).
Result<int64_t> ReadInt(const Json& value, std::string_view field, int64_t min, int64_t max);
// Milli-cpus from "2", "500m" or 0.5.
Result<int64_t> ReadCpus(const Json& value, std::string_view field);
// Hundredths of a GPU from "0.25" or 0.25.
Result<int64_t> ReadGpus(const Json& value, std::string_view field);
// Bytes from "4GiB" or a whole number of bytes.
Result<uint64_t> ReadBytes(const Json& value, std::string_view field);
// A non-negative duration from "1h30m" or a number of seconds (rounded to
// the microsecond).
Result<Duration> ReadSeconds(const Json& value, std::string_view field);

}  // namespace drover::sim::internal

#endif  // DROVER_SIM_JSON_FIELDS_H_
