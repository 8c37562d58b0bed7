// FilePlane's file service: GET /v1/files/<sha256> answered from the cache
// against a grant (file_plane.h).
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>

#include "common/quantity.h"
#include "common/time.h"
#include "core/model.h"
#include "net/grant.h"
#include "net/http_types.h"
#include "worker/agent/file_plane_impl.h"
#include "worker/files/file_util.h"

namespace drover::worker {
namespace {

// A copy of `path` with its middle byte flipped (the corrupting test hook).
Result<std::string> CorruptCopy(const std::string& path, const std::string& dir) {
  RETURN_IF_ERROR(MakeDirs(dir, 0700));
  const std::string copy = dir + "/corrupt";
  int in = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return Unavailable("cannot open " + path + ": " + std::strerror(errno));
  int out = ::open(copy.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (out < 0) {
    ::close(in);
    return Unavailable("cannot create " + copy + ": " + std::strerror(errno));
  }
  struct stat st {};
  ::fstat(in, &st);
  const off_t middle = st.st_size / 2;
  std::string buffer(1 << 20, '\0');
  off_t at = 0;
  Status status = Status::Ok();
  for (;;) {
    ssize_t n = ::read(in, buffer.data(), buffer.size());
    if (n <= 0) break;
    if (middle >= at && middle < at + n) buffer[static_cast<size_t>(middle - at)] ^= 0x01;
    if (::write(out, buffer.data(), static_cast<size_t>(n)) != n) {
      status = Unavailable("cannot write " + copy);
      break;
    }
    at += n;
  }
  ::close(in);
  ::close(out);
  RETURN_IF_ERROR(status);
  return copy;
}

}  // namespace

void FilePlane::Impl::Serve(const net::Request& request, net::Responder done) {
  auto refuse = [&](int http, StatusCode code, const std::string& why) {
    {
      std::lock_guard lock(stats_mu);
      ++stats.refused;
    }
    spdlog::warn("file service: refused {} {} from {}: {}", request.method,
                 net::Printable(request.path, 120), request.remote, why);
    done(net::ErrorResponse(http, code, why));
  };
  const auto sha_it = request.path_params.find("sha256");
  const std::string sha = sha_it == request.path_params.end() ? "" : sha_it->second;
  if (!core::IsSha256Hex(sha)) {
    return refuse(400, StatusCode::kInvalidArgument,
                  "not a file name: expected 64 lower-case hex digits");
  }
  auto header = [&](const char* name) {
    auto it = request.headers.find(name);
    return it == request.headers.end() ? std::string() : it->second;
  };
  const std::string grant = header("x-drover-grant");
  const std::string who = header("x-drover-requester");
  if (grant.empty()) return refuse(403, StatusCode::kPermissionDenied, "no grant");
  if (grant_key.empty()) {
    return refuse(503, StatusCode::kUnavailable, "no grant key yet (not attached to a server)");
  }
  Result<net::Grant> checked = net::VerifyGrant(grant_key, grant, sha, who, options.clock->Now());
  if (!checked.ok()) {
    return refuse(403, StatusCode::kPermissionDenied, checked.status().message());
  }
  if (!cache->Has(sha)) {
    return refuse(404, StatusCode::kNotFound, "file " + sha.substr(0, 12) + "... is not here");
  }
  std::string path = cache->PathOf(sha);
  struct stat st {};
  const uint64_t size = ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  if (corrupt_serves > 0) {
    --corrupt_serves;
    Result<std::string> copy = CorruptCopy(path, options.tls_dir + "/test-corrupt");
    if (copy.ok()) {
      spdlog::warn("file service: test hook: serving {} with one byte flipped", sha);
      path = *copy;
    }
  }
  {
    std::lock_guard lock(stats_mu);
    ++stats.served_files;
    stats.served_bytes += size;
  }
  spdlog::info("file service: serving {}... ({}) to {} at {}", sha.substr(0, 12), FormatBytes(size),
               net::Printable(who, 64), request.remote);
  net::Response response;
  response.content_type = "application/octet-stream";
  response.file_path = path;
  done(std::move(response));
}

}  // namespace drover::worker
