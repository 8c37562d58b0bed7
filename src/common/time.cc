#include "common/time.h"

namespace drover {

Time RealClock::Now() const {
  return std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now());
}

}  // namespace drover
