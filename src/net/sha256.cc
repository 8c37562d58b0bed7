#include "net/sha256.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <cstring>
#include <vector>

#include "common/unique_fd.h"

namespace drover::net {

struct Sha256::Ctx {
  EVP_MD_CTX* md = nullptr;
  bool finished = false;
  ~Ctx() { EVP_MD_CTX_free(md); }
};

Sha256::Sha256() : ctx_(std::make_unique<Ctx>()) {
  ctx_->md = EVP_MD_CTX_new();
  // Allocation failure here is as fatal as any other out-of-memory.
  assert(ctx_->md != nullptr);
  EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr);
}

Sha256::~Sha256() = default;
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;

void Sha256::Update(std::string_view bytes) {
  assert(!ctx_->finished);
  if (!bytes.empty()) EVP_DigestUpdate(ctx_->md, bytes.data(), bytes.size());
}

std::string Sha256::HexDigest() {
  assert(!ctx_->finished);
  ctx_->finished = true;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx_->md, digest, &len);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(len * 2);
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 0xf]);
  }
  return out;
}

Result<std::string> Sha256OfFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    int err = errno;
    std::string msg = "cannot open " + path + " to hash it: " + std::strerror(err);
    if (err == ENOENT) return NotFound(std::move(msg));
    return Internal(std::move(msg));
  }
  Sha256 sha;
  std::vector<char> buf(size_t{1} << 20);
  for (;;) {
    ssize_t n = ::read(fd.fd(), buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Internal("cannot read " + path + " to hash it: " + std::strerror(errno));
    }
    if (n == 0) break;
    sha.Update(std::string_view(buf.data(), static_cast<size_t>(n)));
  }
  return sha.HexDigest();
}

bool IsSha256Hex(std::string_view text) {
  if (text.size() != 64) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace drover::net
