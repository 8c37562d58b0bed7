// Identifiers people type: jobs are numbered from 1, a task is `JOB.INDEX`
// ("12.3"), where INDEX counts the job's tasks in submission order after
// array expansion. Workers get a numeric id from the server and keep a name.
//
// Thread safety: plain values.
#ifndef DROVER_COMMON_IDS_H_
#define DROVER_COMMON_IDS_H_

#include <compare>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace drover {

using JobId = uint64_t;
using WorkerId = uint32_t;

struct TaskId {
  JobId job = 0;
  uint32_t index = 0;

  friend auto operator<=>(const TaskId&, const TaskId&) = default;
  // "12.3".
  std::string ToString() const;
};

// Parses "12.3". Errors name the text and what is wrong with it.
Result<TaskId> ParseTaskId(std::string_view text);
// Parses "12".
Result<JobId> ParseJobId(std::string_view text);

}  // namespace drover

template <>
struct std::hash<drover::TaskId> {
  size_t operator()(const drover::TaskId& t) const noexcept {
    return std::hash<uint64_t>()(t.job * 0x9E3779B97F4A7C15ULL ^ t.index);
  }
};

#endif  // DROVER_COMMON_IDS_H_
