#include "net/tls_identity.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cctype>
#include <memory>

#include "net/private_file.h"

namespace drover::net {
namespace {

// OpenSSL objects owned by unique_ptrs with their free functions.
struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

// The most recent OpenSSL error as text, clearing the queue.
std::string OpenSslError() {
  unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(code, buf, sizeof(buf));
  return buf;
}

std::string BioToString(BIO* bio) {
  char* data = nullptr;
  long len = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(len));
}

X509Ptr ParseCert(std::string_view pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return nullptr;
  return X509Ptr(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

PkeyPtr ParseKey(std::string_view pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return nullptr;
  return PkeyPtr(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
}

std::string FingerprintOfCert(X509* cert) {
  unsigned char* der = nullptr;
  int len = i2d_X509(cert, &der);
  if (len <= 0) return "";
  std::string fp = FingerprintOfDer(der, static_cast<size_t>(len));
  OPENSSL_free(der);
  return fp;
}

Result<TlsIdentity> MakeIdentity() {
  PkeyPtr key(EVP_EC_gen("P-256"));
  if (!key) return Internal("cannot generate EC P-256 key: " + OpenSslError());

  X509Ptr cert(X509_new());
  if (!cert) return Internal("cannot allocate certificate: " + OpenSslError());
  X509_set_version(cert.get(), 2);  // v3
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof(serial)) != 1) return Internal("RAND_bytes failed");
  serial[0] &= 0x7f;  // keep the serial positive
  BIGNUM* bn = BN_bin2bn(serial, sizeof(serial), nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -60 * 60);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 10L * 365 * 24 * 60 * 60);
  X509_set_pubkey(cert.get(), key.get());
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("drover"), -1, -1, 0);
  X509_set_issuer_name(cert.get(), name);
  // Clients pin the fingerprint rather than check names, but a SAN keeps
  // ordinary tools (curl --cacert) from rejecting the certificate outright.
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert.get(), cert.get(), nullptr, nullptr, 0);
  X509_EXTENSION* ext =
      X509V3_EXT_conf_nid(nullptr, &ctx, NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1");
  if (ext) {
    X509_add_ext(cert.get(), ext, -1);
    X509_EXTENSION_free(ext);
  }
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) {
    return Internal("cannot sign certificate: " + OpenSslError());
  }

  BioPtr cert_bio(BIO_new(BIO_s_mem()));
  BioPtr key_bio(BIO_new(BIO_s_mem()));
  if (!cert_bio || !key_bio || PEM_write_bio_X509(cert_bio.get(), cert.get()) != 1 ||
      PEM_write_bio_PrivateKey(key_bio.get(), key.get(), nullptr, nullptr, 0, nullptr,
                               nullptr) != 1) {
    return Internal("cannot encode certificate or key: " + OpenSslError());
  }
  TlsIdentity id;
  id.cert_pem = BioToString(cert_bio.get());
  id.key_pem = BioToString(key_bio.get());
  id.fingerprint = FingerprintOfCert(cert.get());
  return id;
}

}  // namespace

std::string FingerprintOfDer(const unsigned char* der, size_t size) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int md_len = 0;
  EVP_Digest(der, size, md, &md_len, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < md_len; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 0xf];
  }
  return out;
}

Result<std::string> FingerprintOfPem(std::string_view cert_pem) {
  X509Ptr cert = ParseCert(cert_pem);
  if (!cert) {
    ERR_clear_error();
    return InvalidArgument("text is not a PEM certificate");
  }
  return FingerprintOfCert(cert.get());
}

Status CheckPeerFingerprint(ssl_st* ssl, std::string_view expected) {
  X509Ptr cert(SSL_get1_peer_certificate(ssl));
  if (!cert) return FailedPrecondition("the server presented no TLS certificate");
  std::string actual = FingerprintOfCert(cert.get());
  if (actual != expected) {
    return FailedPrecondition("server certificate fingerprint " + actual +
                              " does not match the pinned fingerprint " + std::string(expected) +
                              " (wrong server, or its identity was remade: check the access "
                              "file or --fingerprint)");
  }
  return Status::Ok();
}

Result<std::string> NormalizeFingerprint(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == ':') continue;
    if (!std::isxdigit(static_cast<unsigned char>(c))) {
      return InvalidArgument("fingerprint \"" + std::string(text) +
                             "\" must be 64 hex digits (optionally AA:BB:... separated)");
    }
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (out.size() != 64) {
    return InvalidArgument("fingerprint \"" + std::string(text) + "\" has " +
                           std::to_string(out.size()) + " hex digits, expected 64 (SHA-256)");
  }
  return out;
}

Result<TlsIdentity> LoadOrCreateTlsIdentity(const std::string& dir) {
  const std::string cert_path = dir + "/server.crt";
  const std::string key_path = dir + "/server.key";
  const bool have_cert = PathExists(cert_path);
  const bool have_key = PathExists(key_path);
  if (!have_cert && !have_key) {
    ASSIGN_OR_RETURN(TlsIdentity id, MakeIdentity());
    // Key first: a crash between the two writes leaves a key without a
    // certificate, which is reported below rather than silently replaced.
    RETURN_IF_ERROR(WritePrivateFile(key_path, id.key_pem));
    RETURN_IF_ERROR(WritePrivateFile(cert_path, id.cert_pem));
    return id;
  }
  if (!have_cert || !have_key) {
    return FailedPrecondition(
        (have_cert ? key_path : cert_path) + " is missing but " +
        (have_cert ? cert_path : key_path) +
        " exists; remove the remaining file to make a new identity (clients must then "
        "pin the new fingerprint)");
  }
  TlsIdentity id;
  ASSIGN_OR_RETURN(id.cert_pem, ReadWholeFile(cert_path));
  ASSIGN_OR_RETURN(id.key_pem, ReadWholeFile(key_path));
  X509Ptr cert = ParseCert(id.cert_pem);
  if (!cert) return InvalidArgument(cert_path + " is not a PEM certificate: " + OpenSslError());
  PkeyPtr key = ParseKey(id.key_pem);
  if (!key) return InvalidArgument(key_path + " is not a PEM private key: " + OpenSslError());
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return InvalidArgument(key_path + " does not match the certificate in " + cert_path);
  }
  id.fingerprint = FingerprintOfCert(cert.get());
  return id;
}

}  // namespace drover::net
