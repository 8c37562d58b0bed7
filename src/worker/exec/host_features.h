// What this machine lets a task have beyond its cgroups: a network
// namespace of its own (`network = "none"`), and the block device under a
// directory, which disk I/O limits name (`io_read_bps`, `io_write_bps`).
//
// Thread safety: plain functions.
#ifndef DROVER_WORKER_EXEC_HOST_FEATURES_H_
#define DROVER_WORKER_EXEC_HOST_FEATURES_H_

#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"

namespace drover::worker {

// True when this process may give a child a network namespace of its own
// with loopback up: a short-lived child tries what a task's start does
// (root: unshare(CLONE_NEWNET); otherwise inside a user namespace of its
// own, where the kernel allows unprivileged ones).
bool CanMakePrivateNetwork();

// The line of /proc/self/uid_map (or gid_map) that maps `id` to itself and
// nothing else ("1000 1000 1"): what a process that is not root may write
// for the user namespace it made.
std::string SelfIdMap(unsigned id);

// The whole disk that holds `path`, as "major:minor" (a partition's disk:
// cgroup I/O limits take whole devices only). Fails, naming the path and
// its device numbers, when the file system has no block device the kernel
// can name (tmpfs, overlayfs, btrfs subvolumes, NFS): limits there are not
// possible.
Result<std::string> BlockDeviceOf(const std::string& path);

// The space an unprivileged writer may still use on the file system of
// `dir` (statvfs's f_bavail); none when it cannot be read.
std::optional<uint64_t> FreeDiskBytes(const std::string& dir);

}  // namespace drover::worker

#endif  // DROVER_WORKER_EXEC_HOST_FEATURES_H_
