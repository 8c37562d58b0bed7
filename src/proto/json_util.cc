#include "proto/json_util.h"

#include "common/suggest.h"

#include <algorithm>
#include <exception>

namespace drover::proto::internal {

bool DecodeContext::Fail(std::string error_path, std::string error_message, std::string error_key) {
  if (!failed) {
    failed = true;
    path = std::move(error_path);
    message = std::move(error_message);
    key = std::move(error_key);
  }
  return false;
}

std::string DecodeContext::Describe() const {
  return path.empty() ? message : path + ": " + message;
}

namespace {

// Nesting depth of arrays and objects, counted without recursion so that a
// hostile "[[[[..." cannot overflow the stack before nlohmann sees it.
// Returns false as soon as `max_depth` is exceeded.
bool DepthWithin(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        if (++depth > max_depth) return false;
        break;
      case ']':
      case '}':
        --depth;
        break;
      default:
        break;
    }
  }
  return true;
}

}  // namespace

Result<Json> ParseJson(std::string_view text, size_t max_bytes, int max_depth) {
  if (text.size() > max_bytes) {
    return InvalidArgument("message is " + std::to_string(text.size()) +
                           " bytes, more than the limit of " + std::to_string(max_bytes));
  }
  if (!DepthWithin(text, max_depth)) {
    return InvalidArgument("invalid JSON: nested deeper than " + std::to_string(max_depth) +
                           " levels");
  }
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const std::exception& e) {
    // nlohmann prefixes "[json.exception.parse_error.101] "; people need
    // only the part after it.
    std::string what = e.what();
    if (size_t close = what.find("] "); what.starts_with("[json.") && close != std::string::npos) {
      what.erase(0, close + 2);
    }
    return InvalidArgument("invalid JSON: " + what);
  }
}

std::string Dump(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string JoinPath(std::string_view path, std::string_view key) {
  if (path.empty()) return std::string(key);
  std::string out(path);
  out += '.';
  out += key;
  return out;
}

std::string IndexPath(std::string_view path, size_t index) {
  return std::string(path) + "[" + std::to_string(index) + "]";
}

std::string SuggestKey(std::string_view key, const std::vector<std::string_view>& known) {
  return ClosestName(key, known);
}

bool ReadString(const Json& j, const std::string& path, std::string* out, DecodeContext& ctx) {
  if (!j.is_string()) {
    return ctx.Fail(path, std::string("expected a string, got ") + JsonTypeName(j));
  }
  *out = j.get_ref<const std::string&>();
  return true;
}

bool ReadBool(const Json& j, const std::string& path, bool* out, DecodeContext& ctx) {
  if (!j.is_boolean()) {
    return ctx.Fail(path, std::string("expected a boolean, got ") + JsonTypeName(j));
  }
  *out = j.get<bool>();
  return true;
}

namespace {

bool NotAnInteger(const Json& j, const std::string& path, DecodeContext& ctx) {
  if (j.is_number_float()) {
    return ctx.Fail(path, "expected an integer, got number " + Dump(j));
  }
  return ctx.Fail(path, std::string("expected an integer, got ") + JsonTypeName(j));
}

}  // namespace

bool ReadInt64(const Json& j, const std::string& path, int64_t min, int64_t max, int64_t* out,
               DecodeContext& ctx) {
  auto out_of_range = [&](const std::string& shown) {
    return ctx.Fail(path, shown + " is out of range (" + std::to_string(min) + " to " +
                              std::to_string(max) + ")");
  };
  if (j.is_number_unsigned()) {
    uint64_t u = j.get<uint64_t>();
    if (max < 0 || u > static_cast<uint64_t>(max)) return out_of_range(std::to_string(u));
    *out = static_cast<int64_t>(u);
    return true;
  }
  if (j.is_number_integer()) {
    int64_t v = j.get<int64_t>();
    if (v < min || v > max) return out_of_range(std::to_string(v));
    *out = v;
    return true;
  }
  return NotAnInteger(j, path, ctx);
}

bool ReadUint64(const Json& j, const std::string& path, uint64_t max, uint64_t* out,
                DecodeContext& ctx) {
  auto out_of_range = [&](const std::string& shown) {
    return ctx.Fail(path, shown + " is out of range (0 to " + std::to_string(max) + ")");
  };
  if (j.is_number_unsigned()) {
    uint64_t u = j.get<uint64_t>();
    if (u > max) return out_of_range(std::to_string(u));
    *out = u;
    return true;
  }
  if (j.is_number_integer()) {
    int64_t v = j.get<int64_t>();
    if (v < 0 || static_cast<uint64_t>(v) > max) return out_of_range(std::to_string(v));
    *out = static_cast<uint64_t>(v);
    return true;
  }
  return NotAnInteger(j, path, ctx);
}

bool ReadTaskId(const Json& j, const std::string& path, TaskId* out, DecodeContext& ctx) {
  std::string text;
  if (!ReadString(j, path, &text, ctx)) return false;
  Result<TaskId> id = ParseTaskId(text);
  if (!id.ok()) return ctx.Fail(path, id.status().message());
  *out = *id;
  return true;
}

ObjectReader::ObjectReader(const Json& j, std::string path, DecodeContext& ctx)
    : json_(&j), path_(std::move(path)), ctx_(ctx) {
  if (!j.is_object()) {
    ok_ = ctx_.Fail(path_, std::string("expected an object, got ") + JsonTypeName(j));
  }
}

const Json* ObjectReader::Get(std::string_view key, Need need) {
  if (!ok_) return nullptr;
  auto it = json_->find(key);
  if (it == json_->end() || it->is_null()) {
    if (need == Need::kRequired) {
      ok_ = ctx_.Fail(path_, "missing \"" + std::string(key) + "\"");
    }
    return nullptr;
  }
  return &*it;
}

bool ObjectReader::String(std::string_view key, std::string* out, Need need) {
  const Json* j = Get(key, need);
  if (!ok_) return false;
  return j == nullptr || ReadString(*j, PathOf(key), out, ctx_);
}

bool ObjectReader::Bool(std::string_view key, bool* out, Need need) {
  const Json* j = Get(key, need);
  if (!ok_) return false;
  return j == nullptr || ReadBool(*j, PathOf(key), out, ctx_);
}

bool ObjectReader::Task(std::string_view key, TaskId* out, Need need) {
  const Json* j = Get(key, need);
  if (!ok_) return false;
  return j == nullptr || ReadTaskId(*j, PathOf(key), out, ctx_);
}

bool ObjectReader::Micros(std::string_view key, Duration* out, Need need) {
  int64_t us = 0;
  const Json* j = Get(key, need);
  if (!ok_) return false;
  if (j == nullptr) return true;
  if (!ReadInt64(*j, PathOf(key), std::numeric_limits<int64_t>::min(),
                 std::numeric_limits<int64_t>::max(), &us, ctx_)) {
    return false;
  }
  *out = Duration(us);
  return true;
}

bool ObjectReader::TimeMicros(std::string_view key, Time* out, Need need) {
  Duration d;
  const Json* j = Get(key, need);
  if (!ok_) return false;
  if (j == nullptr) return true;
  if (!Micros(key, &d, need)) return false;
  *out = Time(d);
  return true;
}

bool ObjectReader::RejectUnknown(
    const std::vector<std::string_view>& known,
    const std::vector<std::pair<std::string_view, std::string_view>>& hints) {
  if (!ok_) return false;
  for (auto it = json_->begin(); it != json_->end(); ++it) {
    const std::string& key = it.key();
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::string message = "unknown key \"" + key + "\"";
    auto hinted =
        std::find_if(hints.begin(), hints.end(), [&](const auto& h) { return h.first == key; });
    if (hinted != hints.end()) {
      message += " (" + std::string(hinted->second) + ")";
    } else if (std::string hint = SuggestKey(key, known); !hint.empty()) {
      message += " (did you mean \"" + hint + "\"?)";
    }
    ok_ = ctx_.Fail(path_, std::move(message), key);
    return false;
  }
  return true;
}

bool ReadStringMap(const Json& j, const std::string& path, std::map<std::string, std::string>* out,
                   DecodeContext& ctx) {
  out->clear();
  return ForEachMember(j, path, ctx,
                       [&](const std::string& key, const Json& v, const std::string& p) {
                         std::string value;
                         if (!ReadString(v, p, &value, ctx)) return false;
                         (*out)[key] = std::move(value);
                         return true;
                       });
}

bool ReadCounterMap(const Json& j, const std::string& path, std::map<std::string, int64_t>* out,
                    DecodeContext& ctx) {
  out->clear();
  return ForEachMember(j, path, ctx,
                       [&](const std::string& key, const Json& v, const std::string& p) {
                         int64_t value = 0;
                         if (!ReadInteger(v, p, &value, ctx)) return false;
                         (*out)[key] = value;
                         return true;
                       });
}

}  // namespace drover::proto::internal
