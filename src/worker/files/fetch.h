// FetchIntoCache: gets one file, named by its SHA-256, into a worker's
// FileCache from the first of several sources that delivers it intact.
// The networking lives elsewhere: a source is a callback that streams the
// file's bytes into a sink (a peer worker, the server, a test's string).
//
//   source 0 ──chunks──► sink: size cap, SHA-256, write ─► <sha>.<rnd>.part
//        │ error / mismatch: AbortFetch, warn, next source     │ size and hash match
//   source 1 ...                                               ▼
//                                                   CommitFetch ─► <dir>/<sha>
//
// Thread safety: safe to run from several threads at once on one cache
// (the cache locks; each download has its own temporary file). Two fetches
// of the same file both download it; the second commit finds the entry and
// drops its copy.
#ifndef DROVER_WORKER_FILES_FETCH_H_
#define DROVER_WORKER_FILES_FETCH_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "worker/files/file_cache.h"

namespace drover::worker {

// Writes the bytes a source streams; returns an error to stop the download
// (the source must then stop and return; its return value is ignored).
using ChunkSink = std::function<Status(std::string_view chunk)>;
// One way to get the file: streams it into the sink; returns the download's
// own error (unreachable host...).
using Source = std::function<Status(const ChunkSink& sink)>;

struct FetchReport {
  size_t source_used = 0;             // index of the source that delivered it
  uint64_t bytes = 0;                 // bytes downloaded by that source; 0 when cached
  bool already_cached = false;        // Has() was true: nothing was downloaded
  std::vector<std::string> failures;  // one line per source that failed, in order
};

// Gets file `sha256` of `size` bytes into `cache` (nothing to do when
// Has()), trying `sources` in order: each download goes to a fresh
// BeginFetch() temporary file, is hashed while written, and is committed
// only when size and SHA-256 match. A mismatch
//   "sha256 mismatch from source 0: got 3fa1c2d4e5f6..., want 9bc2..."
// (a source that sends more than `size` bytes is cut off and counts as one)
// or a source's error is logged (spdlog::warn), recorded in `failures`, and
// the next source is tried.
// Stops at once, without trying further sources:
//   - a write failing with ENOSPC or EDQUOT: kResourceExhausted whose
//     message contains "no space left on device";
//   - BeginFetch's own errors (kResourceExhausted: the cache cannot make
//     room), returned as is; other local write errors, returned as is.
// All sources failing (or none given): kUnavailable listing each failure.
// No temporary file is ever left behind.
// With `mismatched`, the indexes of the sources that sent other bytes than
// `sha256` (a SHA-256 mismatch, or more bytes than `size`) are appended.
Result<FetchReport> FetchIntoCache(FileCache& cache, const std::string& sha256, uint64_t size,
                                   const std::vector<Source>& sources,
                                   std::vector<size_t>* mismatched = nullptr);

}  // namespace drover::worker

#endif  // DROVER_WORKER_FILES_FETCH_H_
