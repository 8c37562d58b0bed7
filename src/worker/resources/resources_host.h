// Host facts for the worker's resource detection: core ids from the
// affinity mask, total memory from /proc/meminfo, hostname, os and arch, and
// the small file and list parsers the other resource files share.
//
// Every reader takes the /proc root as a parameter so tests can point it at a
// fake tree; only ReadAffinity() and the uname/hostname calls read the real
// process state.
//
// Thread safety: free functions without shared state; safe from any thread.
#ifndef DROVER_WORKER_RESOURCES_RESOURCES_HOST_H_
#define DROVER_WORKER_RESOURCES_RESOURCES_HOST_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace drover::worker {

// Reads a small text file (/proc, /sys) whole. NotFound when it does not
// exist, Unavailable for other read errors; the message names the path.
Result<std::string> ReadSmallFile(const std::string& path);

// Parses a Linux cpu list ("0-3,8,10-11", the format of cpuset.cpus and
// /sys/devices/system/cpu/online) into sorted, unique ids. An empty or
// all-space text is an empty list. InvalidArgument names the bad element.
Result<std::vector<int>> ParseCpuList(std::string_view text);

// Formats ids back into the compact list form: {0,1,2,3,8} -> "0-3,8".
std::string FormatCpuList(const std::vector<int>& ids);

// The cores this process may run on (sched_getaffinity), sorted. Fails
// with Internal only if the system call fails.
Result<std::vector<int>> ReadAffinity();

// MemTotal and MemAvailable from <proc_root>/meminfo, in bytes.
struct HostMemory {
  uint64_t total_bytes = 0;
  uint64_t available_bytes = 0;
};
// NotFound/Unavailable if the file cannot be read, DataLoss if MemTotal is
// missing or malformed (MemAvailable missing reads as 0: kernels < 3.14).
Result<HostMemory> ReadHostMemory(const std::string& proc_root);

// gethostname(); "localhost" if it fails or is empty.
std::string ReadHostname();

// uname(): the lower-cased system name ("linux") and machine ("x86_64").
struct HostPlatform {
  std::string os;
  std::string arch;
};
HostPlatform ReadPlatform();

}  // namespace drover::worker

#endif  // DROVER_WORKER_RESOURCES_RESOURCES_HOST_H_
