// ParseConfigToml: a Drover config file (TOML), as the tables of flags the
// commands read (`drover server --config FILE` reads [server], `drover
// worker --config FILE` reads [worker]; cli/config_file.h maps each key to
// its flag). Implemented in job_toml.cc, the one translation unit that
// includes toml++.
//
//   [server]
//   port = 7210
//   heartbeat_interval = "2s"
//
//   [worker]
//   server = ["gpu-box:7210", "backup:7210"]
//   label = ["site=lab", "rack=2"]
//   no_tls = false
//
//   [quota.ana]        # the server's user policy (cli/user_policy_file.h)
//   gpus = 2
//
// Thread safety: a pure function.
#ifndef DROVER_PROTO_CONFIG_FILE_H_
#define DROVER_PROTO_CONFIG_FILE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace drover::proto {

// One key of a table: its value as text (an array's items each), and where
// it stood in the file.
struct ConfigEntry {
  enum class Kind { kString, kNumber, kBool, kArray };
  std::string key;
  Kind kind = Kind::kString;
  std::vector<std::string> values;  // one, or an array's items; bools "true"/"false"
  std::vector<Kind> item_kinds;     // an array's: each item's kind (values' order)
  uint32_t line = 0;
  uint32_t column = 0;
};

struct ConfigSection {
  std::string name;  // "server", "worker", "quota"
  // A table of a table ([quota.ana], [quota."*"], [fairshare.shares]): the
  // key under `name` ("ana"); empty for a table of the file's top level.
  // Each comes after its parent's own section.
  std::string sub;
  uint32_t line = 0;
  uint32_t column = 0;
  std::vector<ConfigEntry> entries;  // by key
};

// The largest config file read.
inline constexpr size_t kMaxConfigBytes = 1 << 20;

// The file's tables, by name. Errors ("FILE:LINE:COL: ...") for a
// TOML syntax error, a key outside a table, a table nested deeper than
// [name.sub], an array of tables, a date or a time, or an array holding
// anything but strings, numbers and booleans. Whether a table may hold
// tables at all is the reader's to say (cli/config_file.h: [server] and
// [worker] may not; [quota] and [group] hold nothing else).
Result<std::vector<ConfigSection>> ParseConfigToml(std::string_view text,
                                                   std::string_view file_name);

}  // namespace drover::proto

#endif  // DROVER_PROTO_CONFIG_FILE_H_
