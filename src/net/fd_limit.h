// The process's limit on open file descriptors (RLIMIT_NOFILE).
//
// The default soft limit (1,024 on most systems) is far below the hard one
// and below what a server with many clients and workers, or a worker with
// many tasks (pipes, pidfds, log files), needs. `drover server`, `worker`
// and `up` raise the soft limit to the hard one first thing.
//
// Thread safety: process-wide; call before starting threads.
#ifndef DROVER_NET_FD_LIMIT_H_
#define DROVER_NET_FD_LIMIT_H_

#include <cstdint>

#include "common/status.h"

namespace drover::net {

// The soft limit now (RLIM_INFINITY reads as UINT64_MAX).
uint64_t OpenFileLimit();

// Raises the soft limit to the hard limit. Returns the soft limit now;
// kInternal naming both values if setrlimit refuses.
Result<uint64_t> RaiseOpenFileLimit();

}  // namespace drover::net

#endif  // DROVER_NET_FD_LIMIT_H_
