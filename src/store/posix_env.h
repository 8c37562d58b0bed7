// PosixEnv: the Env on the real file system (open/write/fsync/rename).
//
// Errors carry the path and strerror text; ENOSPC and EDQUOT map to
// kResourceExhausted, a missing file to kNotFound, anything else to
// kUnavailable. Interrupted writes (EINTR) and short writes are retried.
//
// Thread safety: PosixEnv is stateless and safe from any thread.
#ifndef DROVER_STORE_POSIX_ENV_H_
#define DROVER_STORE_POSIX_ENV_H_

#include "store/env.h"

namespace drover::store {

class PosixEnv final : public Env {
 public:
  Result<std::string> ReadFile(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> OpenAppendable(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> CreateTruncated(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Status Remove(const std::string& path) override;
  bool Exists(const std::string& path) override;
  Status CreateDirs(const std::string& path) override;
  Status SyncDir(const std::string& dir) override;
};

}  // namespace drover::store

#endif  // DROVER_STORE_POSIX_ENV_H_
