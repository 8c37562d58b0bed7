// Internal to drover_proto: strict, exception-free reading of JSON values
// with a field path for every error, shared by every codec in this folder.
//
// The decoders here never throw: nlohmann::json's throwing accessors are
// only called after the type was checked. Each Read* function returns false
// after recording the first error in a DecodeContext; callers return false
// in turn, and the front end turns the context into a Status whose message
// (or, for job files, position) fits its input.
//
// Thread safety: pure functions; a DecodeContext belongs to one decode.
#ifndef DROVER_PROTO_JSON_UTIL_H_
#define DROVER_PROTO_JSON_UTIL_H_

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "common/time.h"
#include "proto/json_type_name.h"

namespace drover::proto::internal {

using Json = nlohmann::json;

// The first error of one decode.
struct DecodeContext {
  bool failed = false;
  std::string path;     // "task[1].resources.mem"; empty = the whole value
  std::string message;  // without the path
  std::string key;      // non-empty: the error is about this key of the
                        // object at `path` itself (an unknown key)

  // Records the error unless one was recorded already; returns false.
  bool Fail(std::string error_path, std::string error_message, std::string error_key = {});
  // "path: message" (or just the message when the path is empty).
  std::string Describe() const;
};

// Parses `text` after checking its size against `max_bytes` and its nesting
// depth against `max_depth` (without recursion). Errors are kInvalidArgument
// ("message is 17000000 bytes, more than the limit of 16777216",
// "invalid JSON: ...").
Result<Json> ParseJson(std::string_view text, size_t max_bytes, int max_depth);

// Compact text; invalid UTF-8 in strings is replaced, never thrown.
std::string Dump(const Json& value);

// "path.key" or "key" when path is empty; "path[i]".
std::string JoinPath(std::string_view path, std::string_view key);
std::string IndexPath(std::string_view path, size_t index);

// The closest of `known` to `key` when it is close enough to be a likely
// typo, else empty.
std::string SuggestKey(std::string_view key, const std::vector<std::string_view>& known);

bool ReadString(const Json& j, const std::string& path, std::string* out, DecodeContext& ctx);
bool ReadBool(const Json& j, const std::string& path, bool* out, DecodeContext& ctx);
// Integers only (1.0 is rejected), within [min, max].
bool ReadInt64(const Json& j, const std::string& path, int64_t min, int64_t max, int64_t* out,
               DecodeContext& ctx);
bool ReadUint64(const Json& j, const std::string& path, uint64_t max, uint64_t* out,
                DecodeContext& ctx);
bool ReadTaskId(const Json& j, const std::string& path, TaskId* out, DecodeContext& ctx);

template <typename I>
bool ReadInteger(const Json& j, const std::string& path, I* out, DecodeContext& ctx) {
  if constexpr (std::is_signed_v<I>) {
    int64_t v = 0;
    if (!ReadInt64(j, path, std::numeric_limits<I>::min(), std::numeric_limits<I>::max(), &v,
                   ctx)) {
      return false;
    }
    *out = static_cast<I>(v);
  } else {
    uint64_t v = 0;
    if (!ReadUint64(j, path, std::numeric_limits<I>::max(), &v, ctx)) return false;
    *out = static_cast<I>(v);
  }
  return true;
}

// Calls f(element, element_path) for each element of an array; fails when
// `j` is not an array or f fails.
template <typename F>
bool ForEachElement(const Json& j, const std::string& path, DecodeContext& ctx, F f) {
  if (!j.is_array())
    return ctx.Fail(path, std::string("expected an array, got ") + JsonTypeName(j));
  for (size_t i = 0; i < j.size(); ++i) {
    if (!f(j[i], IndexPath(path, i))) return false;
  }
  return true;
}

// Calls f(key, value, value_path) for each member of an object.
template <typename F>
bool ForEachMember(const Json& j, const std::string& path, DecodeContext& ctx, F f) {
  if (!j.is_object()) {
    return ctx.Fail(path, std::string("expected an object, got ") + JsonTypeName(j));
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!f(it.key(), it.value(), JoinPath(path, it.key()))) return false;
  }
  return true;
}

template <typename T, typename F>
bool ReadVector(const Json& j, const std::string& path, std::vector<T>* out, DecodeContext& ctx,
                F read_one) {
  out->clear();
  out->reserve(j.is_array() ? j.size() : 0);
  return ForEachElement(j, path, ctx, [&](const Json& e, const std::string& p) {
    T value{};
    if (!read_one(e, p, &value, ctx)) return false;
    out->push_back(std::move(value));
    return true;
  });
}

enum class Need { kRequired, kOptional };

// Reads the members of one JSON object. Optional members that are absent or
// null leave the output untouched.
class ObjectReader {
 public:
  // Fails (and the reader is then inert) when `j` is not an object.
  ObjectReader(const Json& j, std::string path, DecodeContext& ctx);

  bool ok() const { return ok_; }
  const std::string& path() const { return path_; }
  std::string PathOf(std::string_view key) const { return JoinPath(path_, key); }

  // The member, or nullptr when absent or null; a required one that is
  // missing fails with `missing "key"`.
  const Json* Get(std::string_view key, Need need);

  bool String(std::string_view key, std::string* out, Need need = Need::kRequired);
  bool Bool(std::string_view key, bool* out, Need need = Need::kRequired);
  bool Task(std::string_view key, TaskId* out, Need need = Need::kRequired);
  // Integer microseconds.
  bool Micros(std::string_view key, Duration* out, Need need = Need::kRequired);
  bool TimeMicros(std::string_view key, Time* out, Need need = Need::kRequired);
  template <typename I>
  bool Integer(std::string_view key, I* out, Need need = Need::kRequired) {
    const Json* j = Get(key, need);
    if (!ok_) return false;
    return j == nullptr || ReadInteger(*j, PathOf(key), out, ctx_);
  }

  // Fails on the first member not in `known` ("unknown key "x" (did you
  // mean "y"?)"), recorded at that key. A key of `hints` gets its text in
  // the parentheses instead: where what was meant is not a near spelling
  // ("mem" in a task: a resource; "after": depends_on).
  bool RejectUnknown(const std::vector<std::string_view>& known,
                     const std::vector<std::pair<std::string_view, std::string_view>>& hints = {});

 private:
  const Json* json_;
  std::string path_;
  DecodeContext& ctx_;
  bool ok_ = true;
};

// Maps of strings and of integers, as used for env, labels and counters.
bool ReadStringMap(const Json& j, const std::string& path, std::map<std::string, std::string>* out,
                   DecodeContext& ctx);
bool ReadCounterMap(const Json& j, const std::string& path, std::map<std::string, int64_t>* out,
                    DecodeContext& ctx);

}  // namespace drover::proto::internal

#endif  // DROVER_PROTO_JSON_UTIL_H_
