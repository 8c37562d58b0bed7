#include "common/ids.h"

#include <charconv>

namespace drover {
namespace {

template <typename T>
bool ParseUnsigned(std::string_view s, T* out) {
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

}  // namespace

std::string TaskId::ToString() const {
  return std::to_string(job) + "." + std::to_string(index);
}

Result<JobId> ParseJobId(std::string_view text) {
  JobId id = 0;
  if (!ParseUnsigned(text, &id) || id == 0) {
    return InvalidArgument("job id \"" + std::string(text) + "\" is not a positive number");
  }
  return id;
}

Result<TaskId> ParseTaskId(std::string_view text) {
  size_t dot = text.find('.');
  if (dot == std::string_view::npos) {
    return InvalidArgument("task id \"" + std::string(text) +
                           "\" must look like JOB.TASK, for example 12.3");
  }
  TaskId id;
  if (!ParseUnsigned(text.substr(0, dot), &id.job) || id.job == 0 ||
      !ParseUnsigned(text.substr(dot + 1), &id.index)) {
    return InvalidArgument("task id \"" + std::string(text) +
                           "\" must look like JOB.TASK, for example 12.3");
  }
  return id;
}

}  // namespace drover
