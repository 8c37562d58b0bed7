#include "net/grant.h"

#include <openssl/err.h>
#include <openssl/evp.h>

#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>

#include "net/http_types.h"

namespace drover::net {
namespace {

// Names carry a Grant prefix: this file shares a unity batch with
// tls_identity.cc, which has its own helpers of the same kind.
struct GrantPkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct GrantMdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using GrantPkeyPtr = std::unique_ptr<EVP_PKEY, GrantPkeyFree>;
using GrantMdCtxPtr = std::unique_ptr<EVP_MD_CTX, GrantMdCtxFree>;

constexpr size_t kMaxGrantTokenBytes = 512;
constexpr size_t kShaHexDigits = 64;
constexpr size_t kKeyBytes = 32;
constexpr size_t kSignatureBytes = 64;
constexpr size_t kMaxRequesterBytes = 64;
constexpr std::string_view kGrantVersion = "v1.";

std::string GrantHex(const unsigned char* data, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[data[i] >> 4];
    out[2 * i + 1] = kDigits[data[i] & 0xf];
  }
  return out;
}

// The value of a hex digit, or -1. Upper case only where `any_case`.
int GrantHexValue(char c, bool any_case) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (any_case && c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decodes exactly out.size() bytes from 2 * out.size() hex digits.
template <size_t N>
bool GrantUnhex(std::string_view text, bool any_case, std::array<unsigned char, N>& out) {
  if (text.size() != 2 * N) return false;
  for (size_t i = 0; i < N; ++i) {
    const int hi = GrantHexValue(text[2 * i], any_case);
    const int lo = GrantHexValue(text[2 * i + 1], any_case);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<unsigned char>(hi << 4 | lo);
  }
  return true;
}

bool IsLowerHex(std::string_view text, size_t digits) {
  if (text.size() != digits) return false;
  for (char c : text) {
    if (GrantHexValue(c, /*any_case=*/false) < 0) return false;
  }
  return true;
}

bool IsRequester(std::string_view text) {
  if (text.empty() || text.size() > kMaxRequesterBytes) return false;
  for (char c : text) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// A non-negative decimal without sign or leading zeros that fits int64_t.
std::optional<int64_t> ParseMicros(std::string_view text) {
  if (text.empty() || text.size() > 19) return std::nullopt;
  if (text.size() > 1 && text[0] == '0') return std::nullopt;
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<uint64_t>(c - '0');  // 19 digits fit in uint64_t
  }
  if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
  return static_cast<int64_t>(value);
}

// The bytes the signature covers.
std::string SignedText(std::string_view sha256, std::string_view requester,
                       std::string_view micros) {
  std::string text = "drover-grant-v1\n";
  text.append(sha256).append("\n").append(requester).append("\n").append(micros);
  return text;
}

struct ParsedToken {
  std::string_view sha256;
  std::string_view requester;
  std::string_view micros_text;
  int64_t micros = 0;
  std::array<unsigned char, kSignatureBytes> signature{};
};

// Strict and total: any deviation from the grammar in grant.h is nullopt.
std::optional<ParsedToken> ParseToken(std::string_view token) {
  if (token.size() > kMaxGrantTokenBytes) return std::nullopt;
  if (!token.starts_with(kGrantVersion)) return std::nullopt;
  std::string_view rest = token.substr(kGrantVersion.size());
  ParsedToken p;
  if (rest.size() < kShaHexDigits + 1 || rest[kShaHexDigits] != '.') return std::nullopt;
  p.sha256 = rest.substr(0, kShaHexDigits);
  rest.remove_prefix(kShaHexDigits + 1);
  // The requester may hold dots; the last two fields may not.
  const size_t sig_dot = rest.rfind('.');
  if (sig_dot == std::string_view::npos) return std::nullopt;
  const std::string_view signature_hex = rest.substr(sig_dot + 1);
  rest = rest.substr(0, sig_dot);
  const size_t time_dot = rest.rfind('.');
  if (time_dot == std::string_view::npos) return std::nullopt;
  p.micros_text = rest.substr(time_dot + 1);
  p.requester = rest.substr(0, time_dot);
  if (!IsLowerHex(p.sha256, kShaHexDigits) || !IsRequester(p.requester)) return std::nullopt;
  std::optional<int64_t> micros = ParseMicros(p.micros_text);
  if (!micros) return std::nullopt;
  p.micros = *micros;
  if (!GrantUnhex(signature_hex, /*any_case=*/false, p.signature)) return std::nullopt;
  return p;
}

Status Refuse(std::string message) { return PermissionDenied(std::move(message)); }

}  // namespace

bool IsWellFormedGrant(const Grant& grant) {
  return IsLowerHex(grant.sha256, kShaHexDigits) && IsRequester(grant.requester);
}

// Not GrantPkeyPtr: a member type from the anonymous namespace would give
// Key internal linkage.
struct GrantSigner::Key {
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> pkey{nullptr, &EVP_PKEY_free};
  std::string public_hex;
};

GrantSigner::GrantSigner(std::unique_ptr<Key> key) : key_(std::move(key)) {}
GrantSigner::GrantSigner(GrantSigner&&) noexcept = default;
GrantSigner& GrantSigner::operator=(GrantSigner&&) noexcept = default;
GrantSigner::~GrantSigner() = default;

Result<GrantSigner> GrantSigner::Create() {
  GrantPkeyPtr pkey(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"));
  if (!pkey) return Internal("cannot generate an Ed25519 key for grants");
  std::array<unsigned char, kKeyBytes> raw{};
  size_t len = raw.size();
  if (EVP_PKEY_get_raw_public_key(pkey.get(), raw.data(), &len) != 1 || len != raw.size()) {
    return Internal("cannot read the public half of the grant key");
  }
  auto key = std::make_unique<Key>();
  key->pkey.reset(pkey.release());
  key->public_hex = GrantHex(raw.data(), raw.size());
  return GrantSigner(std::move(key));
}

const std::string& GrantSigner::public_key() const { return key_->public_hex; }

std::string GrantSigner::Sign(const Grant& grant) const {
  const std::string micros = std::to_string(ToMicros(grant.expires_at));
  const std::string text = SignedText(grant.sha256, grant.requester, micros);
  GrantMdCtxPtr ctx(EVP_MD_CTX_new());
  if (!ctx) return "";
  std::array<unsigned char, kSignatureBytes> signature{};
  size_t len = signature.size();
  // Ed25519 hashes internally: no digest, one-shot only.
  if (EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key_->pkey.get()) != 1 ||
      EVP_DigestSign(ctx.get(), signature.data(), &len,
                     reinterpret_cast<const unsigned char*>(text.data()), text.size()) != 1 ||
      len != signature.size()) {
    ERR_clear_error();  // leave no error behind for the next OpenSSL user on this thread
    return "";
  }
  std::string token(kGrantVersion);
  token.append(grant.sha256).append(".").append(grant.requester).append(".").append(micros);
  token.append(".").append(GrantHex(signature.data(), signature.size()));
  return token;
}

Result<Grant> VerifyGrant(std::string_view public_key_hex, std::string_view token,
                          std::string_view sha256, std::string_view requester, Time now) {
  std::array<unsigned char, kKeyBytes> raw_key{};
  if (!GrantUnhex(public_key_hex, /*any_case=*/true, raw_key)) {
    return InvalidArgument("the grant public key is not 64 hex digits");
  }
  std::optional<ParsedToken> p = ParseToken(token);
  if (!p) return Refuse("malformed grant");

  GrantPkeyPtr pkey(
      EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, raw_key.data(), raw_key.size()));
  if (!pkey) {
    ERR_clear_error();
    return InvalidArgument("the grant public key is not an Ed25519 key");
  }
  GrantMdCtxPtr ctx(EVP_MD_CTX_new());
  if (!ctx) return Internal("cannot allocate a context to verify a grant");
  const std::string text = SignedText(p->sha256, p->requester, p->micros_text);
  if (EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, pkey.get()) != 1 ||
      EVP_DigestVerify(ctx.get(), p->signature.data(), p->signature.size(),
                       reinterpret_cast<const unsigned char*>(text.data()), text.size()) != 1) {
    ERR_clear_error();
    return Refuse("grant signature does not verify");
  }

  if (p->sha256 != sha256) {
    return Refuse("grant is for another file (" + std::string(p->sha256.substr(0, 12)) + "...)");
  }
  if (p->requester != requester) {
    return Refuse("grant is for requester " + std::string(p->requester) + ", not " +
                  Printable(requester, kMaxRequesterBytes));
  }
  const Time expires_at = TimeFromMicros(p->micros);
  if (now >= expires_at) {
    const int64_t ago = std::chrono::duration_cast<std::chrono::seconds>(now - expires_at).count();
    return Refuse("grant expired " + std::to_string(ago) + " s ago");
  }
  return Grant{std::string(p->sha256), std::string(p->requester), expires_at};
}

}  // namespace drover::net
