// Small file helpers for secrets: the cluster token, the TLS key and the
// access file are written with these so they are never readable by others.
//
// Thread safety: plain functions; safe from any thread (they touch only the
// files named).
#ifndef DROVER_NET_PRIVATE_FILE_H_
#define DROVER_NET_PRIVATE_FILE_H_

#include <string>

#include "common/status.h"

namespace drover::net {

// Writes `content` to `path` with mode 0600: a temporary file next to it is
// written, fsynced and renamed over `path`, so readers never see half a file.
// Creates missing parent directories (mode 0700). Fails with kInternal naming
// the path and the OS error.
Status WritePrivateFile(const std::string& path, const std::string& content);

// Reads the whole file. Fails with kNotFound if it does not exist, kInternal
// on other errors; the message names the path.
Result<std::string> ReadWholeFile(const std::string& path);

// True if `path` exists (any type).
bool PathExists(const std::string& path);

}  // namespace drover::net

#endif  // DROVER_NET_PRIVATE_FILE_H_
