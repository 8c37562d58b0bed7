// Internal to src/net: where the body of a request to an upload route
// (Server::UploadRoute) goes. UploadSink checks the Content-Length against
// the route, makes a fresh temporary file "<dir>/.upload-<random>" (0600)
// in the route's directory, writes the body to it piece by piece (1 MiB at
// most) hashing it on the way (SHA-256), and hands it over as an Upload
// once the body is complete. The connection (http_session.cc) reads each
// piece into buffer() with Beast and answers a refusal; no Boost here.
//
// A file not handed over is removed with the sink (or by Discard);
// RemovingLeftover removes what is left of a handed one once the handler
// answers.
//
// Threading: one connection's, on the loop thread.
#ifndef DROVER_NET_UPLOAD_SINK_H_
#define DROVER_NET_UPLOAD_SINK_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "net/http_types.h"
#include "net/server.h"
#include "net/sha256.h"

namespace drover::net::internal {

// An upload route as registered (Server::UploadRoute).
struct UploadRouteEntry {
  std::string dir;
  uint64_t max_bytes = 0;
  UploadHandler handler;
};

// Why an upload ends without the handler: the answer, and a line for the
// log. The connection is closed after it (the rest of the body is not read).
struct UploadRefusal {
  Response response;
  std::string why;
};

class UploadSink {
 public:
  explicit UploadSink(UploadRouteEntry route);
  ~UploadSink();  // removes a file not handed over
  UploadSink(const UploadSink&) = delete;
  UploadSink& operator=(const UploadSink&) = delete;

  const UploadRouteEntry& route() const { return route_; }

  // For a body of `length` bytes (the Content-Length; nullopt when there is
  // none): makes the temporary file and a buffer for the pieces. Refused,
  // with no file left: 411 without a length (a chunked body), 413 over the
  // route's max_bytes, 500 when no file name could be made, and as Write
  // when the file cannot be made.
  [[nodiscard]] std::optional<UploadRefusal> Open(std::optional<uint64_t> length);

  // Where the next piece of the body is read to (after Open).
  char* buffer() { return buffer_.data(); }
  size_t buffer_size() const { return buffer_.size(); }

  // Hashes the first `got` bytes of buffer() and writes them to the file.
  // When the disk refuses, the file is removed and the refusal is 507 (no
  // space left on device: ENOSPC, EDQUOT) or 500 (another error).
  [[nodiscard]] std::optional<UploadRefusal> Write(size_t got);

  // Removes the partial file (the peer went away, stalled or sent a bad
  // body).
  void Discard();

  // Closes the file and hands it over in `upload` (path, size, SHA-256);
  // the buffer is freed. Refused as Write when closing fails.
  [[nodiscard]] std::optional<UploadRefusal> Finish(Upload& upload);

 private:
  struct File;

  UploadRefusal WriteFailed(int error);

  UploadRouteEntry route_;
  std::unique_ptr<File> file_;
  std::optional<Sha256> sha_;
  uint64_t size_ = 0;
  std::vector<char> buffer_;
};

// `inner` after removing the file at `path`, if still there; the file is
// also removed when the last copy goes unanswered (the handler took it by
// renaming it, or left it). Copies `inner`.
Responder RemovingLeftover(const std::string& path, const Responder& inner);

}  // namespace drover::net::internal

#endif  // DROVER_NET_UPLOAD_SINK_H_
