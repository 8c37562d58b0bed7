// Small POSIX file helpers shared by the files library (output scan, cache,
// fetch). Internal to src/worker/files; not a general-purpose API.
//
// Every failure is a Status naming the path and the errno text. A write that
// fails for lack of space (ENOSPC, EDQUOT) is kResourceExhausted and its
// message contains "no space left on device", so callers up the stack can
// tell a full disk from a broken one.
//
// Thread safety: plain functions on the file system; safe from any thread.
#ifndef DROVER_WORKER_FILES_FILE_UTIL_H_
#define DROVER_WORKER_FILES_FILE_UTIL_H_

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace drover::worker {

// A Status for `errno_value` while doing `what` ("cannot link a to b"):
// kNotFound for ENOENT, kResourceExhausted ("...: no space left on device")
// for ENOSPC and EDQUOT, kPermissionDenied for EACCES/EPERM, else kInternal.
Status ErrnoStatus(int errno_value, const std::string& what);

// True for the errno values that mean the file system is full.
bool IsNoSpace(int errno_value);

// Writes all of `bytes` to `fd`, retrying short writes and EINTR.
Status WriteAll(int fd, std::string_view bytes, const std::string& path);

// Creates `dir` and its missing parents with `mode` (like mkdir -p). An
// existing directory is fine; an existing non-directory fails.
Status MakeDirs(const std::string& dir, unsigned mode);

// Copies the regular file `from` to the new file `to` (which must not exist;
// O_EXCL), created with `mode`. On failure `to` is removed.
Status CopyFile(const std::string& from, const std::string& to, unsigned mode);

// The names in the directory open as `dir_fd` (not "." or ".."), sorted;
// the descriptor stays the caller's. Errors say "cannot list <what>".
Result<std::vector<std::string>> ListDir(int dir_fd, const std::string& what);

// The first 12 characters of a SHA-256 and "...", for messages and logs.
std::string ShortSha(const std::string& sha256);

// The directory part of `path` ("a/b/c" -> "a/b", "c" -> "").
std::string ParentDir(const std::string& path);

}  // namespace drover::worker

#endif  // DROVER_WORKER_FILES_FILE_UTIL_H_
