// ParseJobToml: TOML -> JSON value (remembering where each value and key
// stood in the file) -> the shared JobSpec reader. Converting first keeps one
// set of rules for job files and the submit API, and lets errors found by
// that reader be reported with the file position of the field they name.
//
// This is the only translation unit that includes toml++ (it is slow to
// compile).
#define TOML_EXCEPTIONS 0
// toml++ 3.3 asserts (instead of reporting an error) on a table header
// whose key does not start with a key character, e.g. "[\nx" (found by
// fuzz/job_toml_fuzz.cc). With the assertion off, as in release builds with
// g++, the parser reports a syntax error; tested in job_file_test.cc.
#define TOML_ASSERT(expr) static_assert(true)
#define TOML_ENABLE_FORMATTERS 0
#include <toml++/toml.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <string>

#include "proto/config_file.h"
#include "proto/job_file.h"
#include "proto/job_spec_json.h"
#include "proto/json_util.h"

namespace drover::proto {
namespace {

using internal::DecodeContext;
using internal::Json;

struct Position {
  uint32_t line = 0;
  uint32_t column = 0;
};

// Where each converted value and key stood, by field path.
struct SourceMap {
  std::map<std::string, Position> values;
  std::map<std::string, Position> keys;  // by the path of the key's value
};

Position PositionOf(const toml::source_region& region) {
  return Position{region.begin.line, region.begin.column};
}

bool Convert(const toml::node& node, const std::string& path, Json* out, SourceMap& map,
             DecodeContext& ctx) {
  map.values[path] = PositionOf(node.source());
  switch (node.type()) {
    case toml::node_type::table: {
      *out = Json::object();
      for (const auto& [key, child] : *node.as_table()) {
        std::string child_path = internal::JoinPath(path, key.str());
        map.keys[child_path] = PositionOf(key.source());
        Json value;
        if (!Convert(child, child_path, &value, map, ctx)) return false;
        (*out)[std::string(key.str())] = std::move(value);
      }
      return true;
    }
    case toml::node_type::array: {
      *out = Json::array();
      const toml::array& array = *node.as_array();
      for (size_t i = 0; i < array.size(); ++i) {
        Json value;
        if (!Convert(array[i], internal::IndexPath(path, i), &value, map, ctx)) return false;
        out->push_back(std::move(value));
      }
      return true;
    }
    case toml::node_type::string:
      *out = node.as_string()->get();
      return true;
    case toml::node_type::integer:
      *out = node.as_integer()->get();
      return true;
    case toml::node_type::floating_point:
      *out = node.as_floating_point()->get();
      return true;
    case toml::node_type::boolean:
      *out = node.as_boolean()->get();
      return true;
    default:
      return ctx.Fail(path, "dates and times are not used in job files (quote it as a string)");
  }
}

// The position of the innermost converted node on `path` (an error about a
// value that had to be created, like a missing key, points at its parent).
const Position* Find(const SourceMap& map, const DecodeContext& ctx) {
  if (!ctx.key.empty()) {
    auto it = map.keys.find(internal::JoinPath(ctx.path, ctx.key));
    if (it != map.keys.end()) return &it->second;
  }
  std::string path = ctx.path;
  while (true) {
    auto it = map.values.find(path);
    if (it != map.values.end() && it->second.line != 0) return &it->second;
    if (path.empty()) return nullptr;
    size_t cut = path.find_last_of(".[");
    path.erase(cut == std::string::npos ? 0 : cut);
  }
}

// "FILE:LINE:COL: why".
Status ErrorAt(const std::string& file, const toml::source_position& at, const std::string& why) {
  return InvalidArgument(file + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) +
                         ": " + why);
}

// The checks every TOML file of Drover's gets before toml++ sees it: its
// size and no NUL byte (TOML forbids them anyway, and toml++ 3.3 trips an
// assertion on some: found by fuzz/job_toml_fuzz.cc).
Status CheckText(std::string_view text, const std::string& file, size_t max_bytes,
                 std::string_view what) {
  if (text.size() > max_bytes) {
    return InvalidArgument(file + ": the file is " + std::to_string(text.size()) +
                           " bytes, more than the limit of " + std::to_string(max_bytes));
  }
  if (size_t nul = text.find('\0'); nul != std::string_view::npos) {
    std::string_view before = text.substr(0, nul);
    size_t line = 1 + std::count(before.begin(), before.end(), '\n');
    size_t line_start = before.rfind('\n');
    size_t column = nul - (line_start == std::string_view::npos ? 0 : line_start + 1) + 1;
    return InvalidArgument(file + ":" + std::to_string(line) + ":" + std::to_string(column) +
                           ": NUL byte (a " + std::string(what) + " is text)");
  }
  return Status::Ok();
}

// A scalar as a flag's text; none for a table, an array, a date or a time.
std::optional<std::string> ScalarText(const toml::node& node, ConfigEntry::Kind* kind) {
  switch (node.type()) {
    case toml::node_type::string:
      *kind = ConfigEntry::Kind::kString;
      return node.as_string()->get();
    case toml::node_type::integer:
      *kind = ConfigEntry::Kind::kNumber;
      return std::to_string(node.as_integer()->get());
    case toml::node_type::floating_point: {
      *kind = ConfigEntry::Kind::kNumber;
      char buf[64];
      auto [end, ec] = std::to_chars(buf, buf + sizeof buf, node.as_floating_point()->get());
      return std::string(buf, ec == std::errc() ? end : buf);
    }
    case toml::node_type::boolean:
      *kind = ConfigEntry::Kind::kBool;
      return node.as_boolean()->get() ? "true" : "false";
    default:
      return std::nullopt;
  }
}

}  // namespace

Result<std::vector<ConfigSection>> ParseConfigToml(std::string_view text,
                                                   std::string_view file_name) {
  const std::string file(file_name);
  RETURN_IF_ERROR(CheckText(text, file, kMaxConfigBytes, "config file"));
  try {
    toml::parse_result parsed = toml::parse(text, file_name);
    if (!parsed) {
      return ErrorAt(file, parsed.error().source().begin,
                     std::string(parsed.error().description()));
    }
    std::vector<ConfigSection> sections;
    for (const auto& [name, node] : parsed.table()) {
      const toml::table* table = node.as_table();
      if (node.is_array_of_tables()) {
        return ErrorAt(file, name.source().begin,
                       "[[" + std::string(name.str()) + "]]: one table per command ([" +
                           std::string(name.str()) + "]), not an array of them");
      }
      if (table == nullptr) {
        return ErrorAt(file, name.source().begin,
                       "\"" + std::string(name.str()) +
                           "\" is outside a table: put each key under the table of the command "
                           "that reads it, such as [server] or [worker]");
      }
      ConfigSection& section = sections.emplace_back();
      section.name = std::string(name.str());
      section.line = name.source().begin.line;
      for (const auto& [key, value] : *table) {
        ConfigEntry entry;
        entry.key = std::string(key.str());
        entry.line = key.source().begin.line;
        entry.column = key.source().begin.column;
        const std::string where = "[" + section.name + "] " + entry.key;
        if (const toml::array* array = value.as_array()) {
          entry.kind = ConfigEntry::Kind::kArray;
          for (const toml::node& item : *array) {
            ConfigEntry::Kind item_kind;
            std::optional<std::string> text_value = ScalarText(item, &item_kind);
            if (!text_value) {
              return ErrorAt(file, item.source().begin,
                             where + ": an array of strings, numbers or booleans is expected");
            }
            entry.values.push_back(std::move(*text_value));
          }
        } else if (std::optional<std::string> text_value = ScalarText(value, &entry.kind)) {
          entry.values.push_back(std::move(*text_value));
        } else if (value.is_table()) {
          return ErrorAt(file, value.source().begin,
                         where +
                             ": a table is not a value here (tables nest no deeper than "
                             "[server] and [worker])");
        } else {
          return ErrorAt(file, value.source().begin,
                         where + ": dates and times are not used (quote it as a string)");
        }
        section.entries.push_back(std::move(entry));
      }
    }
    return sections;
  } catch (const std::exception& e) {
    return Internal(file + ": config file parser failed: " + e.what());
  }
}

Result<core::JobSpec> ParseJobToml(std::string_view text, std::string_view file_name) {
  const std::string file(file_name);
  RETURN_IF_ERROR(CheckText(text, file, kMaxJobSpecBytes, "job file"));
  try {
    toml::parse_result parsed = toml::parse(text, file_name);
    if (!parsed) {
      return ErrorAt(file, parsed.error().source().begin,
                     std::string(parsed.error().description()));
    }
    SourceMap map;
    DecodeContext ctx;
    Json root;
    core::JobSpec spec;
    if (Convert(parsed.table(), "", &root, map, ctx) && internal::ReadJobSpec(root, &spec, ctx)) {
      return spec;
    }
    std::string where = file;
    if (const Position* at = Find(map, ctx)) {
      where += ":" + std::to_string(at->line) + ":" + std::to_string(at->column);
    }
    return InvalidArgument(where + ": " + ctx.Describe());
  } catch (const std::exception& e) {
    return Internal(file + ": job file parser failed: " + e.what());
  }
}

}  // namespace drover::proto
