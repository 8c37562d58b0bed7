// The limits the worker's own cgroup puts on it: a CPU quota and a memory
// limit, read for cgroup v1 (cpu.cfs_quota_us / cpu.cfs_period_us,
// memory.limit_in_bytes) and v2 (cpu.max, memory.max).
//
// The process's cgroup comes from <proc_root>/self/cgroup; the hierarchies
// are expected under <sys_root>/fs/cgroup (v1: one directory per controller,
// "cpu,cpuacct" or "cpu"; v2: the unified tree with cgroup.controllers at its
// top). A limit set on a parent cgroup binds its children, so each limit is
// the smallest one found from the process's cgroup up to the hierarchy root.
// When the path from /proc/self/cgroup does not exist under the mount (a
// container that sees the host's path but mounts only its own subtree), the
// leading components are dropped until a directory exists.
//
// Thread safety: free functions without shared state; safe from any thread.
#ifndef DROVER_WORKER_RESOURCES_RESOURCES_CGROUP_H_
#define DROVER_WORKER_RESOURCES_RESOURCES_CGROUP_H_

#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"

namespace drover::worker {

struct CgroupLimits {
  // Milli-cpus allowed by the tightest CPU quota; nullopt when none is set.
  std::optional<int64_t> cpu_quota_milli;
  // The tightest memory limit in bytes; nullopt when unlimited.
  std::optional<uint64_t> memory_limit_bytes;
  // The process's own memory cgroup directory (for usage sampling) and its
  // version (1 or 2); empty and 0 when no memory controller was found.
  std::string memory_dir;
  int memory_version = 0;
};

// Reads the limits. No cgroup support at all (no <proc_root>/self/cgroup,
// no mounted controller) is not an error: it yields empty limits. DataLoss
// names the file and text when a limit file holds something unreadable.
Result<CgroupLimits> ReadCgroupLimits(const std::string& proc_root, const std::string& sys_root);

// Memory in use by the cgroup at `dir`, page cache that can be dropped
// (inactive_file) excluded: v1 memory.usage_in_bytes, v2 memory.current.
// NotFound/Unavailable if the files cannot be read, DataLoss if malformed.
Result<uint64_t> ReadCgroupMemoryUsage(const std::string& dir, int version);

}  // namespace drover::worker

#endif  // DROVER_WORKER_RESOURCES_RESOURCES_CGROUP_H_
