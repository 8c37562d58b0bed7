#include "server/user_requests.h"

#include <gtest/gtest.h>

#include <string>

namespace drover::server {
namespace {

// The error ParseUserAddRequest gives for `body`, or "accepted".
std::string AddErrorOf(const std::string& body) {
  Result<UserAddRequest> add = ParseUserAddRequest(body);
  if (!add.ok()) {
    EXPECT_EQ(add.status().code(), StatusCode::kInvalidArgument);
    return add.status().message();
  }
  return "accepted";
}

TEST(UserRequestsTest, AUserAddNamesAUserAndMayNameARole) {
  Result<UserAddRequest> add = ParseUserAddRequest(R"({"name":"ana","role":"viewer"})");
  ASSERT_TRUE(add.ok()) << add.status().ToString();
  EXPECT_EQ(add->name, "ana");
  EXPECT_EQ(add->role, net::Role::kViewer);
  add = ParseUserAddRequest(R"({"name":"bob"})");
  ASSERT_TRUE(add.ok()) << add.status().ToString();
  EXPECT_EQ(add->role, net::Role::kUser);
}

TEST(UserRequestsTest, AUserAddThatIsWrongSaysWhat) {
  EXPECT_EQ(AddErrorOf("not json"), R"(expected a JSON object {"name", "role"})");
  EXPECT_EQ(AddErrorOf(R"(["ana"])"), R"(expected a JSON object {"name", "role"})");
  EXPECT_EQ(AddErrorOf(R"({"name":"ana","shell":"sh"})"), R"(unknown field "shell" (name, role))");
  EXPECT_EQ(AddErrorOf(R"({"role":"user"})"), R"("name" must be text)");
  EXPECT_EQ(AddErrorOf(R"({"name":1})"), R"("name" must be text)");
  EXPECT_EQ(AddErrorOf(R"({"name":"ana","role":1})"), R"("role" must be text)");
  EXPECT_EQ(AddErrorOf(R"({"name":"ana","role":"boss"})"),
            R"(role "boss": expected admin, user, viewer or worker)");
  EXPECT_EQ(AddErrorOf(R"({"name":"Ana!"})"), CheckUserName("Ana!"));
  EXPECT_EQ(AddErrorOf(R"({"name":""})"), CheckUserName(""));
}

// The error ParseAuditQuery gives for `query`, or "accepted".
std::string AuditErrorOf(const std::map<std::string, std::string>& query) {
  Result<AuditQuery> q = ParseAuditQuery(query);
  return q.ok() ? "accepted" : q.status().message();
}

TEST(UserRequestsTest, AnAuditQueryReadsItsNumbersAndUser) {
  Result<AuditQuery> q =
      ParseAuditQuery({{"user", "ana"}, {"after", "12"}, {"limit", "5"}, {"since_us", "7"}});
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->user, "ana");
  EXPECT_EQ(q->after_seq, 12u);
  EXPECT_EQ(q->limit, 5u);
  EXPECT_EQ(q->since, TimeFromMicros(7));
  q = ParseAuditQuery({{"other", "x"}});
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->limit, AuditQuery{}.limit);
  EXPECT_EQ(q->after_seq, 0u);
  EXPECT_FALSE(q->since.has_value());
}

TEST(UserRequestsTest, AnAuditLimitIsOneToTheMost) {
  EXPECT_EQ(ParseAuditQuery({{"limit", "999999999999999999"}})->limit, kMaxAuditLimit);
  // 0 would be "no limit" to AuditLog::Read: a whole log in one answer.
  EXPECT_EQ(ParseAuditQuery({{"limit", "0"}})->limit, kMaxAuditLimit);
  EXPECT_EQ(ParseAuditQuery({{"limit", "1"}})->limit, 1u);
}

TEST(UserRequestsTest, AnAuditNumberThatIsNotOneIsRefusedQuotingIt) {
  EXPECT_EQ(AuditErrorOf({{"after", ""}}), R"(after: expected a number, got "")");
  EXPECT_EQ(AuditErrorOf({{"limit", "-1"}}), R"(limit: expected a number, got "-1")");
  EXPECT_EQ(AuditErrorOf({{"since_us", "1234567890123456789"}}),
            R"(since_us: expected a number, got "1234567890123456789")");
  EXPECT_EQ(AuditErrorOf({{"after", "1\n"}}), R"(after: expected a number, got "1\x0a")");
}

}  // namespace
}  // namespace drover::server
