// Grants: permission for one worker (or the client) to fetch one file from
// another worker on the data plane. The server mints a grant with its
// GrantSigner (Ed25519) when it tells a worker to fetch a file; the holder
// of the file checks it with VerifyGrant against the server's public key,
// which it learned over its authenticated channel to the server. A grant is
// short-lived and names exactly one file (by SHA-256) and one requester, so
// a leaked grant opens nothing else and not for long.
//
// Token text (all ASCII, at most 512 bytes):
//
//   v1.<sha256>.<requester>.<expires_at_us>.<signature>
//
//   sha256         64 lower-case hex digits
//   requester      [A-Za-z0-9_.-]{1,64}: a worker id ("w12") or "client"
//   expires_at_us  microseconds since the Unix epoch, decimal, no sign, no
//                  leading zeros (common/time.h's ToMicros)
//   signature      Ed25519 over "drover-grant-v1\n<sha256>\n<requester>\n
//                  <expires_at_us>", 128 lower-case hex digits
//
// The requester may itself contain '.', so the token is split at its first
// two dots and its last two. Every field has one spelling only, so a token
// that differs from a valid one in any byte does not verify.
//
// Thread safety: GrantSigner is immutable after Create() and safe to use
// from any thread; VerifyGrant is a plain function.
#ifndef DROVER_NET_GRANT_H_
#define DROVER_NET_GRANT_H_

#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "common/time.h"

namespace drover::net {

struct Grant {
  std::string sha256;     // the file: 64 lower-case hex digits
  std::string requester;  // who may fetch it: "w12" or "client"; [A-Za-z0-9_.-]{1,64}
  Time expires_at;        // valid while now < expires_at
};

// True when `grant`'s sha256 and requester are spelled as above (what Sign
// needs to make a token that can verify).
bool IsWellFormedGrant(const Grant& grant);

// The server's signing key. A fresh key per Create(): grants are
// short-lived, so one minted before a server restart may simply be asked
// for again. Movable, not copyable; a moved-from signer may only be
// assigned to or destroyed.
class GrantSigner {
 public:
  // A fresh Ed25519 key. Fails with kInternal only if OpenSSL cannot make
  // one (no entropy, no memory).
  static Result<GrantSigner> Create();

  GrantSigner(GrantSigner&&) noexcept;
  GrantSigner& operator=(GrantSigner&&) noexcept;
  GrantSigner(const GrantSigner&) = delete;
  GrantSigner& operator=(const GrantSigner&) = delete;
  ~GrantSigner();

  // The raw 32-byte Ed25519 public key as 64 lower-case hex digits: what
  // holders pass to VerifyGrant.
  const std::string& public_key() const;

  // The token for `grant`. `grant` must be well-formed (IsWellFormedGrant)
  // and expire after the epoch; otherwise the token is still made but
  // VerifyGrant refuses it as malformed. Empty only if OpenSSL fails to sign
  // (out of memory); an empty token never verifies.
  std::string Sign(const Grant& grant) const;

 private:
  struct Key;
  explicit GrantSigner(std::unique_ptr<Key> key);
  std::unique_ptr<Key> key_;
};

// Checks `token` against the holder's copy of the server's public key, the
// file asked for (`sha256`), the requester the peer claims to be and `now`.
// Returns the grant, or kPermissionDenied with a message a log line can show
// (peer-supplied text passes through Printable):
//   "malformed grant"                        not a token as above
//   "grant signature does not verify"        forged, altered or another key's
//   "grant is for another file (<first 12 hex of the grant's sha>...)"
//   "grant is for requester X, not Y"
//   "grant expired <N> s ago"                now >= expires_at (N rounded down)
// kInvalidArgument for a public key that is not 64 hex digits (either case).
// The checks run in that order: nothing in a token is believed before its
// signature verifies.
Result<Grant> VerifyGrant(std::string_view public_key_hex, std::string_view token,
                          std::string_view sha256, std::string_view requester, Time now);

}  // namespace drover::net

#endif  // DROVER_NET_GRANT_H_
