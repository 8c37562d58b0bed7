// Labels and custom counters a worker offers besides cores, memory and GPUs.
//
//   labels    "os=linux", "arch=x86_64" by default, plus `--label key=value`
//             from the user; jobs constrain on them (`os = "linux"`).
//   counters  `--counter licenses=2`: named whole-number resources the
//             scheduler hands out like cores (`licenses = 1` in a job).
//
// Keys and counter names: letters, digits and "_-./", starting with a letter
// or digit, at most 63 characters. Label values: not empty, printable ASCII
// without spaces, commas or quotes, at most 255 characters.
//
// Thread safety: pure functions.
#ifndef DROVER_WORKER_RESOURCES_RESOURCES_LABELS_H_
#define DROVER_WORKER_RESOURCES_RESOURCES_LABELS_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace drover::worker {

// {"os": "linux", "arch": "x86_64"} for this machine (from uname).
std::map<std::string, std::string> DefaultLabels();

// Adds each "key=value" of `items` to `labels`. A user label may replace a
// default one ("arch=arm64" on an emulator), but the same key twice among
// `items` is an error. InvalidArgument names the item and says what is
// wrong; `labels` is unchanged on failure.
Status AddLabels(const std::vector<std::string>& items, std::map<std::string, std::string>* labels);

// Parses "name=count" items ("licenses=2") into counters; count is a
// non-negative integer. InvalidArgument names the item; duplicates are
// errors.
Result<std::map<std::string, int64_t>> ParseCounters(const std::vector<std::string>& items);

}  // namespace drover::worker

#endif  // DROVER_WORKER_RESOURCES_RESOURCES_LABELS_H_
