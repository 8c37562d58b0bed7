// SHA-256 of byte streams and files, the content address of Drover's data
// plane: a task's outputs are named by it and a worker's file cache keys its
// entries by it.
//
// Digests are written as 64 lower-case hex characters everywhere (in the
// protocol, in cache file names, in logs).
//
// Thread safety: a Sha256 is one stream; use it from one thread at a time.
// The free functions are safe to call from any thread.
#ifndef DROVER_NET_SHA256_H_
#define DROVER_NET_SHA256_H_

#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace drover::net {

// An incremental SHA-256 (OpenSSL EVP). Feed it with Update(), then read the
// digest once with HexDigest(); Update() after HexDigest() is a programming
// error (asserts in debug builds). Move-only.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(std::string_view bytes);
  // 64 lower-case hex characters. Call once.
  std::string HexDigest();

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

// The SHA-256 of the file at `path`, read in 1 MiB blocks. Fails with
// kNotFound when it does not exist, kInternal (naming the path and the
// errno text) for other read errors.
Result<std::string> Sha256OfFile(const std::string& path);

// True when `text` is exactly 64 lower-case hex characters.
bool IsSha256Hex(std::string_view text);

}  // namespace drover::net

#endif  // DROVER_NET_SHA256_H_
