// The server's TLS identity: a self-signed certificate and its private key,
// made on first start and reused afterwards, and the SHA-256 fingerprint
// that clients pin instead of trusting a certificate authority.
//
// Fingerprint format: the SHA-256 of the certificate's DER encoding as 64
// lower-case hex digits without separators ("3f9a..."). NormalizeFingerprint
// also accepts the common upper-case "3F:9A:..." form people copy from
// `openssl x509 -fingerprint -sha256`.
//
// Files in the certificate directory: `server.crt` (PEM, mode 0644 is fine
// but it is written 0600 like the key) and `server.key` (PEM, PKCS#8, mode
// 0600). The key is EC P-256; the certificate is valid for 10 years.
//
// Thread safety: plain functions; safe from any thread.
#ifndef DROVER_NET_TLS_IDENTITY_H_
#define DROVER_NET_TLS_IDENTITY_H_

#include <string>
#include <string_view>

#include "common/status.h"

struct ssl_st;  // OpenSSL's SSL

namespace drover::net {

struct TlsIdentity {
  std::string cert_pem;
  std::string key_pem;
  std::string fingerprint;  // 64 lower-case hex digits
};

// Loads `dir`/server.crt and `dir`/server.key; if neither exists, makes a
// new key and self-signed certificate and writes them first. Fails with
// kFailedPrecondition if only one of the two files exists (remove the other
// to make a new identity), kInvalidArgument if a file does not parse or the
// key does not match the certificate, kInternal on I/O or OpenSSL errors.
// Every message names the file concerned.
Result<TlsIdentity> LoadOrCreateTlsIdentity(const std::string& dir);

// The fingerprint of a PEM certificate. Fails with kInvalidArgument if the
// text holds no certificate.
Result<std::string> FingerprintOfPem(std::string_view cert_pem);

// The fingerprint of a DER-encoded certificate (never fails).
std::string FingerprintOfDer(const unsigned char* der, size_t size);

// Compares the certificate the peer of an established TLS connection
// presented with the pinned fingerprint `expected` (canonical form). Fails
// with kFailedPrecondition naming both fingerprints on a mismatch, or saying
// that the peer sent no certificate.
Status CheckPeerFingerprint(ssl_st* ssl, std::string_view expected);

// Accepts 64 hex digits with or without ':' separators, in either case, and
// returns the canonical lower-case form. Fails with kInvalidArgument.
Result<std::string> NormalizeFingerprint(std::string_view text);

}  // namespace drover::net

#endif  // DROVER_NET_TLS_IDENTITY_H_
