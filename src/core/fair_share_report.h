// FairShareLine: one user's fair-share use, share and standing, as
// Scheduler::FairShares gives them (fair_share.h says how use is charged).
//
// Thread safety: plain values.
#ifndef DROVER_CORE_FAIR_SHARE_REPORT_H_
#define DROVER_CORE_FAIR_SHARE_REPORT_H_

#include <string>

namespace drover::core {

struct FairShareLine {
  std::string user;
  // The user, or the group whose share its use counts against.
  std::string party;
  // The user's own use, decayed to the instant asked: CPU-seconds plus
  // gpu_weight x GPU-seconds.
  double use_s = 0;
  double share = 1;  // the party's
  // The party's use over its share as the queues order by it now (as of
  // the last Tick); 0 with fair share off.
  double standing = 0;
};

}  // namespace drover::core

#endif  // DROVER_CORE_FAIR_SHARE_REPORT_H_
