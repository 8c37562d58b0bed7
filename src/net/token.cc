#include "net/token.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <array>
#include <cctype>

#include "net/private_file.h"

namespace drover::net {
namespace {

bool IsHex(std::string_view s) {
  for (char c : s) {
    bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    if (!hex) return false;
  }
  return true;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

Result<std::string> GenerateToken() {
  std::array<unsigned char, 32> bytes;
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
    return Internal("OpenSSL RAND_bytes failed to produce a token");
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 0xf];
  }
  return out;
}

Result<std::string> LoadToken(const std::string& path) {
  ASSIGN_OR_RETURN(std::string raw, ReadWholeFile(path));
  std::string_view token = Trim(raw);
  if (token.empty()) return InvalidArgument("token file " + path + " is empty");
  if (!IsHex(token)) {
    return InvalidArgument("token file " + path + " must hold only hex digits");
  }
  return std::string(token);
}

Result<std::string> LoadOrCreateToken(const std::string& path) {
  if (PathExists(path)) return LoadToken(path);
  ASSIGN_OR_RETURN(std::string token, GenerateToken());
  RETURN_IF_ERROR(WritePrivateFile(path, token + "\n"));
  return token;
}

bool TokenEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  if (a.empty()) return true;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace drover::net
