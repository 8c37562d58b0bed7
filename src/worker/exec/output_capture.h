// OutputCapture: one task output stream (stdout or stderr) written to a
// file with a size cap.
//
// The task writes into a pipe; the worker moves the bytes into the file
// (splice, no copy through user space) until the cap, then writes one
// marker line "[drover: output truncated at 64 MiB]" (the cap: the worker's
// --log-cap, 64 MiB by default) and from there on reads
// and discards. The task is never blocked by a full pipe for long and never
// gets SIGPIPE: the read end stays open until the task has ended.
//
// A deferred capture (CreateDeferred) makes its file only with the first
// byte, or when OpenFile is called: most tasks of a big array print
// nothing, and creating a file costs about as much as a directory.
//
// Threading: owned by the executor's loop thread.
#ifndef DROVER_WORKER_EXEC_OUTPUT_CAPTURE_H_
#define DROVER_WORKER_EXEC_OUTPUT_CAPTURE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "common/status.h"
#include "common/unique_fd.h"

namespace drover::worker {

class OutputCapture {
 public:
  // Creates (truncates) `path` with `mode` and a pipe. Fails if either
  // cannot be created.
  static Result<std::unique_ptr<OutputCapture>> Create(const std::string& path, uint64_t cap_bytes,
                                                       mode_t mode = 0644);
  // Makes only the pipe; the file (created, truncated, and handed to
  // `owner` uid/gid when given) comes with the first byte or OpenFile.
  static Result<std::unique_ptr<OutputCapture>> CreateDeferred(
      const std::string& path, uint64_t cap_bytes, mode_t mode = 0644,
      std::optional<std::pair<uid_t, gid_t>> owner = std::nullopt);
  ~OutputCapture() = default;
  OutputCapture(const OutputCapture&) = delete;
  OutputCapture& operator=(const OutputCapture&) = delete;

  // The fd to watch for readability (the pipe's non-blocking read end).
  int read_fd() const { return read_fd_.fd(); }
  // The pipe's write end, to hand to the child; close it with
  // CloseWriteEnd() once the child has it.
  int write_fd() const { return write_fd_.fd(); }
  void CloseWriteEnd();
  // The file, for chown by the caller; -1 while a deferred file is not made.
  int file_fd() const { return file_fd_.fd(); }
  // Makes the file now if it is not made yet. A failure is also kept in
  // write_error() (and the stream's bytes are then discarded).
  Status OpenFile();

  // Moves what is readable now into the file. Returns true at end of
  // stream (every writer closed the pipe). A failure to write the file
  // (disk full) is treated like the cap: the rest is discarded, and
  // the error is kept in write_error().
  bool Drain();

  uint64_t bytes_seen() const { return seen_; }
  uint64_t bytes_written() const { return written_; }
  bool truncated() const { return truncated_; }
  const std::string& write_error() const { return write_error_; }

 private:
  OutputCapture(UniqueFd rfd, UniqueFd wfd, UniqueFd file, uint64_t cap)
      : read_fd_(std::move(rfd)), write_fd_(std::move(wfd)), file_fd_(std::move(file)), cap_(cap) {}
  void MarkTruncated();
  // Deferred file, nothing written yet: waits for the first byte.
  bool DrainBeforeFile();

  UniqueFd read_fd_;
  UniqueFd write_fd_;
  UniqueFd file_fd_;  // none while a deferred file is not made
  uint64_t cap_;
  std::string path_;  // deferred: where the file goes
  mode_t mode_ = 0644;
  std::optional<std::pair<uid_t, gid_t>> owner_;
  bool eof_ = false;
  uint64_t seen_ = 0;
  uint64_t written_ = 0;
  bool truncated_ = false;
  std::string write_error_;
};

}  // namespace drover::worker

#endif  // DROVER_WORKER_EXEC_OUTPUT_CAPTURE_H_
