// The cluster token: a shared secret of 256 random bits, written as 64
// lower-case hex digits, that every worker and client presents to the server
// (`Authorization: Bearer <token>`).
//
// Thread safety: plain functions; safe from any thread.
#ifndef DROVER_NET_TOKEN_H_
#define DROVER_NET_TOKEN_H_

#include <string>
#include <string_view>

#include "common/status.h"

namespace drover::net {

// 32 bytes from OpenSSL's RAND_bytes as 64 lower-case hex digits. Fails with
// kInternal only if the OpenSSL random generator cannot be seeded.
Result<std::string> GenerateToken();

// Reads the token at `path` (surrounding whitespace trimmed). Fails with
// kNotFound if the file is missing, kInvalidArgument (naming the file) if it
// is empty or holds characters other than hex digits.
Result<std::string> LoadToken(const std::string& path);

// Loads the token at `path`, or, if the file does not exist, generates one
// and writes it there with mode 0600. Errors as for LoadToken and
// WritePrivateFile.
Result<std::string> LoadOrCreateToken(const std::string& path);

// Constant-time comparison (CRYPTO_memcmp) so a network peer cannot learn
// the token byte by byte from response timing. Tokens of different lengths
// compare unequal (the length itself is not secret).
bool TokenEquals(std::string_view a, std::string_view b);

}  // namespace drover::net

#endif  // DROVER_NET_TOKEN_H_
