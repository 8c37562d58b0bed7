#include "net/fd_limit.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace drover::net {
namespace {

uint64_t AsNumber(rlim_t v) { return v == RLIM_INFINITY ? UINT64_MAX : static_cast<uint64_t>(v); }

}  // namespace

uint64_t OpenFileLimit() {
  rlimit l{};
  if (::getrlimit(RLIMIT_NOFILE, &l) != 0) return 1024;
  return AsNumber(l.rlim_cur);
}

Result<uint64_t> RaiseOpenFileLimit() {
  rlimit l{};
  if (::getrlimit(RLIMIT_NOFILE, &l) != 0) {
    return Internal(std::string("getrlimit(RLIMIT_NOFILE): ") + std::strerror(errno));
  }
  if (l.rlim_cur == l.rlim_max) return AsNumber(l.rlim_cur);
  const rlim_t before = l.rlim_cur;
  l.rlim_cur = l.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &l) != 0) {
    return Internal("cannot raise the open-file limit from " + std::to_string(before) + " to " +
                    std::to_string(l.rlim_max) + ": " + std::strerror(errno));
  }
  return AsNumber(l.rlim_cur);
}

}  // namespace drover::net
