#include "sim/json_fields.h"

#include <charconv>
#include <cmath>

#include "common/quantity.h"
#include "proto/json_type_name.h"

namespace drover::sim::internal {

using proto::JsonTypeName;

namespace {

Status FieldError(std::string_view field, const std::string& message) {
  return InvalidArgument(std::string(field) + ": " + message);
}

// A JSON number as the text a person would have written ("0.25", "2"), so
// it goes through the same parser as a quoted quantity.
std::string NumberText(const Json& value) {
  if (value.is_number_integer()) {
    return value.is_number_unsigned() ? std::to_string(value.get<uint64_t>())
                                      : std::to_string(value.get<int64_t>());
  }
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value.get<double>());
  return ec == std::errc() ? std::string(buf, end) : std::string("nan");
}

// Reads a quantity written as a string or a number through `parse`.
template <typename T, typename Parse>
Result<T> ReadQuantity(const Json& value, std::string_view field, Parse parse) {
  std::string text;
  if (value.is_string()) {
    text = value.get<std::string>();
  } else if (value.is_number()) {
    text = NumberText(value);
  } else {
    return FieldError(field,
                      std::string("expected a string or a number, got ") + JsonTypeName(value));
  }
  Result<T> parsed = parse(text);
  if (!parsed.ok()) return FieldError(field, parsed.status().message());
  return parsed;
}

}  // namespace

Result<Json> ParseJsonText(std::string_view text) {
  // nlohmann reports positions only through its exception; it is caught here
  // and never leaves this function.
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    return InvalidArgument(std::string("invalid JSON: ") + e.what());
  }
}

Status CheckKeys(const Json& object, std::initializer_list<std::string_view> known) {
  if (!object.is_object()) {
    return InvalidArgument(std::string("expected an object, got ") + JsonTypeName(object));
  }
  for (const auto& item : object.items()) {
    bool ok = false;
    for (std::string_view k : known) ok = ok || item.key() == k;
    if (!ok) {
      std::string list;
      for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      return InvalidArgument("unknown field \"" + item.key() + "\" (known: " + list + ")");
    }
  }
  return Status::Ok();
}

Result<std::string> ReadString(const Json& value, std::string_view field) {
  if (!value.is_string()) {
    return FieldError(field, std::string("expected a string, got ") + JsonTypeName(value));
  }
  return value.get<std::string>();
}

Result<std::vector<std::string>> ReadStrings(const Json& value, std::string_view field) {
  std::vector<std::string> out;
  if (value.is_string()) {
    out.push_back(value.get<std::string>());
    return out;
  }
  if (!value.is_array()) {
    return FieldError(field, std::string("expected a list of strings, got ") + JsonTypeName(value));
  }
  for (size_t i = 0; i < value.size(); ++i) {
    if (!value[i].is_string()) {
      return FieldError(std::string(field) + "[" + std::to_string(i) + "]",
                        std::string("expected a string, got ") + JsonTypeName(value[i]));
    }
    out.push_back(value[i].get<std::string>());
  }
  return out;
}

Result<int64_t> ReadInt(const Json& value, std::string_view field, int64_t min, int64_t max) {
  if (!value.is_number_integer()) {
    return FieldError(field, std::string("expected an integer, got ") + JsonTypeName(value));
  }
  if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return FieldError(field, "out of range");
  }
  const int64_t v = value.get<int64_t>();
  if (v < min || v > max) {
    return FieldError(field, std::to_string(v) + " is outside [" + std::to_string(min) + ", " +
                                 std::to_string(max) + "]");
  }
  return v;
}

Result<int64_t> ReadCpus(const Json& value, std::string_view field) {
  return ReadQuantity<int64_t>(value, field, ParseCpus);
}

Result<int64_t> ReadGpus(const Json& value, std::string_view field) {
  return ReadQuantity<int64_t>(value, field, ParseGpus);
}

Result<uint64_t> ReadBytes(const Json& value, std::string_view field) {
  if (value.is_number_float()) {
    return FieldError(field, "expected a whole number of bytes or a string such as \"4GiB\"");
  }
  return ReadQuantity<uint64_t>(value, field, ParseBytes);
}

Result<Duration> ReadSeconds(const Json& value, std::string_view field) {
  if (value.is_string()) {
    Result<Duration> d = ParseDuration(value.get<std::string>());
    if (!d.ok()) return FieldError(field, d.status().message());
    if (d->count() < 0) return FieldError(field, "must not be negative");
    return d;
  }
  if (!value.is_number()) {
    return FieldError(field, std::string("expected seconds (a number) or a duration such as "
                                         "\"90s\", got ") +
                                 JsonTypeName(value));
  }
  const double seconds = value.get<double>();
  // About 290,000 years fit in int64 microseconds; refuse anything near that.
  if (!std::isfinite(seconds) || seconds < 0 || seconds > 1e12) {
    return FieldError(field, NumberText(value) + " is not a number of seconds in [0, 1e12]");
  }
  return Duration(std::llround(seconds * 1e6));
}

}  // namespace drover::sim::internal
