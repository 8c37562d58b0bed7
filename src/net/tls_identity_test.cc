#include "net/tls_identity.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "net/net_test_util.h"
#include "net/private_file.h"

namespace drover::net {
namespace {

using testing::TempDir;

TEST(TlsIdentityTest, MadeOnceAndReusedWithTheSameFingerprint) {
  TempDir dir;
  Result<TlsIdentity> first = LoadOrCreateTlsIdentity(dir.path());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->fingerprint.size(), 64u);
  EXPECT_EQ(first->fingerprint.find_first_not_of("0123456789abcdef"), std::string::npos);

  struct stat st;
  ASSERT_EQ(::stat((dir / "server.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  Result<TlsIdentity> second = LoadOrCreateTlsIdentity(dir.path());
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->fingerprint, first->fingerprint);
  EXPECT_EQ(second->cert_pem, first->cert_pem);

  Result<std::string> fp = FingerprintOfPem(first->cert_pem);
  ASSERT_TRUE(fp.ok());
  EXPECT_EQ(*fp, first->fingerprint);
}

TEST(TlsIdentityTest, TwoDirectoriesGiveDifferentIdentities) {
  TempDir a, b;
  Result<TlsIdentity> x = LoadOrCreateTlsIdentity(a.path());
  Result<TlsIdentity> y = LoadOrCreateTlsIdentity(b.path());
  ASSERT_TRUE(x.ok() && y.ok());
  EXPECT_NE(x->fingerprint, y->fingerprint);
}

TEST(TlsIdentityTest, HalfAnIdentityIsRefusedNotReplaced) {
  TempDir dir;
  ASSERT_TRUE(LoadOrCreateTlsIdentity(dir.path()).ok());
  ASSERT_EQ(::unlink((dir / "server.crt").c_str()), 0);
  Result<TlsIdentity> r = LoadOrCreateTlsIdentity(dir.path());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("server.crt"), std::string::npos);
  EXPECT_FALSE(PathExists(dir / "server.crt"));
}

TEST(TlsIdentityTest, CorruptCertificateNamesTheFile) {
  TempDir dir;
  ASSERT_TRUE(LoadOrCreateTlsIdentity(dir.path()).ok());
  ASSERT_TRUE(WritePrivateFile(dir / "server.crt", "garbage").ok());
  Result<TlsIdentity> r = LoadOrCreateTlsIdentity(dir.path());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(dir / "server.crt"), std::string::npos);
}

TEST(TlsIdentityTest, KeyOfAnotherIdentityIsRefused) {
  TempDir a, b;
  ASSERT_TRUE(LoadOrCreateTlsIdentity(a.path()).ok());
  Result<TlsIdentity> other = LoadOrCreateTlsIdentity(b.path());
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(WritePrivateFile(a / "server.key", other->key_pem).ok());
  Result<TlsIdentity> r = LoadOrCreateTlsIdentity(a.path());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("does not match"), std::string::npos);
}

TEST(TlsIdentityTest, NormalizeFingerprintAcceptsColonForm) {
  std::string canonical(64, 'a');
  std::string colons;
  for (size_t i = 0; i < 64; i += 2) {
    if (!colons.empty()) colons += ':';
    colons += "AA";
  }
  Result<std::string> r = NormalizeFingerprint(colons);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, canonical);
  EXPECT_EQ(NormalizeFingerprint("abcd").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(NormalizeFingerprint(std::string(64, 'z')).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace drover::net
