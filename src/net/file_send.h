// Internal to src/net: the body of a file response (Response::file_path)
// as a connection sends it. FileSend opens the file and checks that it is a
// regular file before the header goes out (Content-Length: its size), then
// reads it from disk one piece of up to 1 MiB at a time, at the offset
// sent so far. (Beast's file_body writes 4 KiB at a time: a TLS record and
// an async step per 4 KiB, an eighth of curl's throughput.) The connection
// (http_session.cc) writes the header and each piece with Beast, under a
// deadline per piece; no Boost here.
//
// Threading: one connection's, on the loop thread.
#ifndef DROVER_NET_FILE_SEND_H_
#define DROVER_NET_FILE_SEND_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace drover::net::internal {

class FileSend {
 public:
  FileSend() = default;
  ~FileSend();  // closes the file
  FileSend(const FileSend&) = delete;
  FileSend& operator=(const FileSend&) = delete;

  // Opens `path` for sending: empty when it is a regular file that could
  // be opened, else why not (for the log; the client gets a 404).
  std::string Open(const std::string& path);

  // The file's size when opened: the Content-Length promised.
  uint64_t size() const { return size_; }
  bool done() const { return sent_ == size_; }

  // Reads the next piece (not done()) into a buffer of its own. False, with
  // `why`, when the file has shrunk or cannot be read since it was opened:
  // the peer must not take what it got for the whole file.
  bool ReadNext(std::string_view* piece, std::string* why);

  // `n` more bytes were written.
  void Sent(size_t n) { sent_ += n; }

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
  uint64_t sent_ = 0;
  std::vector<char> buffer_;
};

}  // namespace drover::net::internal

#endif  // DROVER_NET_FILE_SEND_H_
