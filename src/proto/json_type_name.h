// The name of a JSON value's type as error messages show it ("expected a
// string, got array"), for every reader of JSON in Drover: the codecs in
// this folder and the simulator's trace reader (src/sim).
//
// Thread safety: a pure function.
#ifndef DROVER_PROTO_JSON_TYPE_NAME_H_
#define DROVER_PROTO_JSON_TYPE_NAME_H_

#include <nlohmann/json_fwd.hpp>

namespace drover::proto {

// "string", "integer", "number", "boolean", "array", "object", "null";
// "binary" for a binary value (which parsed text never holds).
const char* JsonTypeName(const nlohmann::json& value);

}  // namespace drover::proto

#endif  // DROVER_PROTO_JSON_TYPE_NAME_H_
