#include "common/proc_stat.h"

#include <charconv>
#include <cstddef>

namespace drover {

bool AddCpuStatFields(std::string_view fields, CpuStatJiffies& sum) {
  constexpr size_t kIdleField = 3;
  constexpr size_t kIowaitField = 4;
  constexpr size_t kCountedStatFields = 8;
  for (size_t i = 0; i < kCountedStatFields; ++i) {
    while (!fields.empty() && fields.front() == ' ') fields.remove_prefix(1);
    uint64_t v = 0;
    auto [p, ec] = std::from_chars(fields.data(), fields.data() + fields.size(), v);
    if (ec != std::errc()) return i >= kIowaitField + 1;  // old kernels have fewer fields
    fields.remove_prefix(static_cast<size_t>(p - fields.data()));
    sum.total += v;
    if (i != kIdleField && i != kIowaitField) sum.busy += v;
  }
  return true;
}

}  // namespace drover
