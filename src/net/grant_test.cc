// Grants: a round trip, each refusal, and that no altered token verifies.

#include "net/grant.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace drover::net {
namespace {

const std::string kGrantSha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const std::string kOtherSha = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";
constexpr Time kGrantNow = TimeFromMicros(1'700'000'000'000'000);

class GrantTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<GrantSigner> s = GrantSigner::Create();
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    signer_.emplace(std::move(*s));
  }

  std::string Mint(std::string requester = "w12", Duration ttl = Seconds(60),
                   std::string sha = kGrantSha) {
    return signer_->Sign(Grant{std::move(sha), std::move(requester), kGrantNow + ttl});
  }

  Result<Grant> Check(std::string_view token, std::string_view sha = kGrantSha,
                      std::string_view requester = "w12", Time now = kGrantNow) {
    return VerifyGrant(signer_->public_key(), token, sha, requester, now);
  }

  // The refusal's message; fails the test if `token` is not refused.
  std::string Refusal(const Result<Grant>& r) {
    EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied) << r.status().ToString();
    return r.ok() ? "" : r.status().message();
  }

  std::optional<GrantSigner> signer_;
};

TEST_F(GrantTest, RoundTrip) {
  const std::string& key = signer_->public_key();
  ASSERT_EQ(key.size(), 64u);
  EXPECT_EQ(key.find_first_not_of("0123456789abcdef"), std::string::npos);

  const std::string token = Mint();
  EXPECT_EQ(
      token.rfind(
          "v1." + kGrantSha + ".w12." + std::to_string(ToMicros(kGrantNow + Seconds(60))) + ".", 0),
      0u)
      << token;
  Result<Grant> g = Check(token);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->sha256, kGrantSha);
  EXPECT_EQ(g->requester, "w12");
  EXPECT_EQ(g->expires_at, kGrantNow + Seconds(60));

  // A requester with dots and dashes, the longest one allowed.
  const std::string dotted = "host-1.example_2";
  EXPECT_TRUE(Check(Mint(dotted), kGrantSha, dotted).ok());
  const std::string longest(64, 'r');
  EXPECT_TRUE(Check(Mint(longest), kGrantSha, longest).ok());
  EXPECT_TRUE(Check(Mint("client"), kGrantSha, "client").ok());

  // The public key is taken in upper case as well.
  std::string upper = key;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_TRUE(VerifyGrant(upper, token, kGrantSha, "w12", kGrantNow).ok());
}

TEST_F(GrantTest, EachRefusalNamesItsReason) {
  const std::string token = Mint();
  EXPECT_EQ(Refusal(Check(token, kOtherSha)), "grant is for another file (0123456789ab...)");
  EXPECT_EQ(Refusal(Check(token, kGrantSha, "w13")), "grant is for requester w12, not w13");
  EXPECT_EQ(Refusal(Check(token, kGrantSha, "w\n1")), "grant is for requester w12, not w\\x0a1");
  EXPECT_EQ(Refusal(Check(token, kGrantSha, "w12", kGrantNow + Seconds(60))),
            "grant expired 0 s ago");
  EXPECT_EQ(Refusal(Check(token, kGrantSha, "w12", kGrantNow + Seconds(61) + Millis(500))),
            "grant expired 1 s ago");
  EXPECT_TRUE(Check(token, kGrantSha, "w12", kGrantNow + Seconds(60) - Micros(1)).ok());
  EXPECT_EQ(Refusal(Check("")), "malformed grant");
  EXPECT_EQ(Refusal(Check("not a grant")), "malformed grant");
}

TEST_F(GrantTest, PublicKeyThatIsNotHexIsInvalidArgument) {
  const std::string token = Mint();
  EXPECT_EQ(VerifyGrant("", token, kGrantSha, "w12", kGrantNow).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(VerifyGrant(signer_->public_key().substr(2), token, kGrantSha, "w12", kGrantNow)
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  std::string bad = signer_->public_key();
  bad[5] = 'g';
  EXPECT_EQ(VerifyGrant(bad, token, kGrantSha, "w12", kGrantNow).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(GrantTest, TokenOfAnotherSignerDoesNotVerify) {
  Result<GrantSigner> other = GrantSigner::Create();
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->public_key(), signer_->public_key());
  const std::string token = other->Sign(Grant{kGrantSha, "w12", kGrantNow + Seconds(60)});
  EXPECT_TRUE(VerifyGrant(other->public_key(), token, kGrantSha, "w12", kGrantNow).ok());
  EXPECT_EQ(Refusal(Check(token)), "grant signature does not verify");
}

TEST_F(GrantTest, AlteredTokensAreRefused) {
  const std::string token = Mint();
  // A flipped hex digit in the signature.
  std::string flipped = token;
  char& last = flipped.back();
  last = last == '0' ? '1' : '0';
  EXPECT_EQ(Refusal(Check(flipped)), "grant signature does not verify");
  // A later expiry, a different requester or file under the old signature.
  const std::string micros = std::to_string(ToMicros(kGrantNow + Seconds(60)));
  std::string later = token;
  later.replace(later.find(micros), micros.size(),
                std::to_string(ToMicros(kGrantNow + Seconds(3600))));
  EXPECT_EQ(Refusal(Check(later)), "grant signature does not verify");
  std::string other_requester = token;
  other_requester.replace(other_requester.find(".w12."), 5, ".w13.");
  EXPECT_EQ(Refusal(Check(other_requester, kGrantSha, "w13")), "grant signature does not verify");
  std::string other_file = token;
  other_file.replace(3, 64, kOtherSha);
  EXPECT_EQ(Refusal(Check(other_file, kOtherSha)), "grant signature does not verify");

  // Truncated, an extra field, upper case, a leading zero, oversized.
  EXPECT_EQ(Refusal(Check(token.substr(0, token.size() - 1))), "malformed grant");
  EXPECT_EQ(Refusal(Check(token.substr(0, token.size() / 2))), "malformed grant");
  EXPECT_EQ(Refusal(Check(token + ".00")), "malformed grant");
  EXPECT_EQ(Refusal(Check(token + "00")), "malformed grant");
  std::string upper_sig = token;
  for (size_t i = upper_sig.size() - 128; i < upper_sig.size(); ++i) {
    upper_sig[i] = static_cast<char>(std::toupper(static_cast<unsigned char>(upper_sig[i])));
  }
  EXPECT_EQ(Refusal(Check(upper_sig)), "malformed grant");
  std::string leading_zero = token;
  leading_zero.insert(leading_zero.find(micros), "0");
  EXPECT_EQ(Refusal(Check(leading_zero)), "malformed grant");
  std::string v2 = token;
  v2[1] = '2';
  EXPECT_EQ(Refusal(Check(v2)), "malformed grant");
  EXPECT_EQ(Refusal(Check(std::string(100000, 'a'))), "malformed grant");
  EXPECT_EQ(Refusal(Check(token + std::string(300, '0'))), "malformed grant");

  // An upper-case sha: signed as given, refused as malformed.
  std::string upper_sha = kGrantSha;
  for (char& c : upper_sha) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_FALSE(IsWellFormedGrant(Grant{upper_sha, "w12", kGrantNow}));
  EXPECT_EQ(Refusal(Check(Mint("w12", Seconds(60), upper_sha), upper_sha)), "malformed grant");
  // Requesters outside [A-Za-z0-9_.-]{1,64}.
  EXPECT_EQ(Refusal(Check(Mint("w 12"), kGrantSha, "w 12")), "malformed grant");
  EXPECT_EQ(Refusal(Check(Mint(std::string(65, 'r')), kGrantSha, std::string(65, 'r'))),
            "malformed grant");
  EXPECT_EQ(Refusal(Check(Mint(""), kGrantSha, "")), "malformed grant");
}

TEST_F(GrantTest, RandomMutationsNeverVerifyNorCrash) {
  const std::string dotted = "w.1-2";
  const std::string token = Mint(dotted);
  ASSERT_TRUE(Check(token, kGrantSha, dotted).ok());
  std::mt19937_64 rng(20240611);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  // Bytes that keep a mutation close to the grammar, and any byte.
  const std::string near = "0123456789abcdefABCDEF.v-_wx";
  int unchanged = 0;
  for (int i = 0; i < 10000; ++i) {
    std::string m = token;
    const int edits = 1 + static_cast<int>(pick(3));
    for (int e = 0; e < edits; ++e) {
      const char c = pick(2) == 0 ? near[pick(near.size())] : static_cast<char>(pick(256));
      switch (pick(5)) {
        case 0:  // replace
          if (!m.empty()) m[pick(m.size())] = c;
          break;
        case 1:  // insert
          m.insert(m.begin() + static_cast<std::ptrdiff_t>(pick(m.size() + 1)), c);
          break;
        case 2:  // delete
          if (!m.empty()) m.erase(pick(m.size()), 1);
          break;
        case 3:  // truncate
          m.resize(pick(m.size() + 1));
          break;
        default:  // swap two bytes
          if (!m.empty()) std::swap(m[pick(m.size())], m[pick(m.size())]);
          break;
      }
    }
    Result<Grant> r = Check(m, kGrantSha, dotted);
    if (m == token) {
      ++unchanged;
      EXPECT_TRUE(r.ok());
      continue;
    }
    ASSERT_FALSE(r.ok()) << "mutation " << i << " verified: " << m;
    EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  }
  EXPECT_LT(unchanged, 1000);
}

}  // namespace
}  // namespace drover::net
