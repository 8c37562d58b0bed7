#include "proto/json_type_name.h"

#include <nlohmann/json.hpp>

namespace drover::proto {

const char* JsonTypeName(const nlohmann::json& value) {
  using Type = nlohmann::json::value_t;
  switch (value.type()) {
    case Type::string:
      return "string";
    case Type::number_integer:
    case Type::number_unsigned:
      return "integer";
    case Type::number_float:
      return "number";
    case Type::boolean:
      return "boolean";
    case Type::array:
      return "array";
    case Type::object:
      return "object";
    case Type::null:
      return "null";
    default:
      return "binary";
  }
}

}  // namespace drover::proto
