// ScanOutputs: what a finished task leaves in its output directory, as the
// list of files the data plane offers to dependent tasks (name, size,
// SHA-256).
//
// Rules, decided here once:
//   - regular files become entries, named by their path relative to the
//     output directory with '/' separators, sorted by name (byte order);
//   - directories are walked (openat, never following a symlink to a
//     directory); empty ones leave no trace;
//   - a symlink whose resolved target is a regular file inside the output
//     directory is followed and listed under the link's own name (with the
//     target's size and hash); a symlink pointing outside, a dangling one,
//     and a symlink to a directory (even one inside: its files are already
//     listed under their own names) are refused;
//   - FIFOs, sockets and devices are refused.
// A refusal is kInvalidArgument naming the entry and why:
//   "output sock: a socket; outputs must be regular files"
//   "output link: a symlink to /etc/passwd, outside the output directory"
// Limits are checked from the sizes (lstat/stat) before any file is read, so
// a task that wrote too much costs no hashing: kResourceExhausted
//   "outputs are 3.0 GiB, more than max_output 2 GiB" (FormatBytes), and
//   with OutputLimits::whose "... 2 GiB (the task's)"
//   "outputs are more than max_files 10000 files"
// A missing output directory is an empty list (the task wrote nothing).
//
// Thread safety: a pure function of the file system; safe from any thread.
// The task must have stopped writing: a file changed during the scan gets
// the hash of whatever was read.
#ifndef DROVER_WORKER_FILES_OUTPUT_SCAN_H_
#define DROVER_WORKER_FILES_OUTPUT_SCAN_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace drover::worker {

struct OutputEntry {
  std::string name;  // path relative to the output directory, '/' separated
  uint64_t size = 0;
  std::string sha256;  // 64 lower-case hex

  friend bool operator==(const OutputEntry&, const OutputEntry&) = default;
};

struct OutputLimits {
  uint64_t max_bytes = 0;  // total of all entries; 0 = no limit
  size_t max_files = 10000;
  // Whose limit max_bytes is, for the message ("the task's", "worker
  // --max-output"); empty: not said.
  std::string whose;
};

// Walks `dir` and hashes its files; see the rules above. Other failures
// (unreadable directory, I/O error) name the path and the errno text.
Result<std::vector<OutputEntry>> ScanOutputs(const std::string& dir, const OutputLimits& limits);

}  // namespace drover::worker

#endif  // DROVER_WORKER_FILES_OUTPUT_SCAN_H_
