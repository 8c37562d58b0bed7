// UploadSink (upload_sink.h): an upload route's body to a temporary file,
// hashed on the way.

#include "net/upload_sink.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

#include "common/status.h"
#include "net/token.h"

namespace drover::net::internal {

// An upload's temporary file: removed with its owner unless handed over
// (then whoever holds the handed path removes what is left, see
// Server::UploadRoute).
struct UploadSink::File {
  File() = default;
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  int fd = -1;
  std::string path;
  bool handed = false;
  ~File() {
    if (fd >= 0) ::close(fd);
    if (!handed && !path.empty()) ::unlink(path.c_str());
  }
};

UploadSink::UploadSink(UploadRouteEntry route) : route_(std::move(route)) {}

UploadSink::~UploadSink() = default;

std::optional<UploadRefusal> UploadSink::Open(std::optional<uint64_t> length) {
  if (!length) {
    return UploadRefusal{ErrorResponse(411, StatusCode::kInvalidArgument,
                                       "an upload needs a Content-Length (no chunked body)"),
                         "upload without Content-Length"};
  }
  if (*length > route_.max_bytes) {
    return UploadRefusal{ErrorResponse(413, StatusCode::kResourceExhausted,
                                       "upload of " + std::to_string(*length) +
                                           " bytes, more than " + std::to_string(route_.max_bytes)),
                         "upload too large"};
  }
  Result<std::string> name = GenerateToken();
  if (!name.ok()) {
    return UploadRefusal{ErrorResponse(500, StatusCode::kInternal, name.status().message()),
                         "upload: " + name.status().message()};
  }
  file_ = std::make_unique<File>();
  file_->path = route_.dir + "/.upload-" + name->substr(0, 24);
  file_->fd = ::open(file_->path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (file_->fd < 0) return WriteFailed(errno);
  sha_.emplace();
  size_ = 0;
  buffer_.resize(static_cast<size_t>(std::min<uint64_t>(*length, 1 << 20)) + 1);
  return std::nullopt;
}

std::optional<UploadRefusal> UploadSink::Write(size_t got) {
  std::string_view piece(buffer_.data(), got);
  sha_->Update(piece);
  size_ += got;
  while (!piece.empty()) {
    const ssize_t n = ::write(file_->fd, piece.data(), piece.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return WriteFailed(errno);
    piece.remove_prefix(static_cast<size_t>(n));
  }
  return std::nullopt;
}

void UploadSink::Discard() { file_.reset(); }

std::optional<UploadRefusal> UploadSink::Finish(Upload& upload) {
  if (::close(file_->fd) != 0) {
    file_->fd = -1;
    return WriteFailed(errno);
  }
  file_->fd = -1;
  file_->handed = true;
  upload = Upload{file_->path, size_, sha_->HexDigest()};
  file_.reset();
  sha_.reset();
  std::vector<char>().swap(buffer_);
  return std::nullopt;
}

// The disk refused a write: the partial file removed, and the answer.
UploadRefusal UploadSink::WriteFailed(int error) {
  const std::string what = file_ ? file_->path : route_.dir;
  file_.reset();
  if (error == ENOSPC || error == EDQUOT) {
    return UploadRefusal{
        ErrorResponse(507, StatusCode::kResourceExhausted,
                      "the server cannot store the upload: no space left on device"),
        "upload to " + what + ": no space left on device"};
  }
  return UploadRefusal{
      ErrorResponse(500, StatusCode::kInternal, "the server cannot store the upload"),
      "upload to " + what + ": " + std::strerror(error)};
}

namespace {

// Removes the file at `path`, if still there, when the last copy of the
// upload's responder goes.
struct LeftoverRemover {
  LeftoverRemover() = default;
  LeftoverRemover(const LeftoverRemover&) = delete;
  LeftoverRemover& operator=(const LeftoverRemover&) = delete;
  std::string path;
  ~LeftoverRemover() { ::unlink(path.c_str()); }
};

}  // namespace

Responder RemovingLeftover(const std::string& path, const Responder& inner) {
  auto remover = std::make_shared<LeftoverRemover>();
  remover->path = path;
  return [inner, remover](Response r) {
    ::unlink(remover->path.c_str());
    inner(std::move(r));
  };
}

}  // namespace drover::net::internal
