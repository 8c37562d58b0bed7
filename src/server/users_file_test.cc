#include "server/users_file.h"

#include <gtest/gtest.h>

#include <string>

namespace drover::server {
namespace {

constexpr char kPath[] = "/s/users.json";
const std::string kHashA(64, 'a');
const std::string kHashB(64, 'b');

// A users file whose users are these JSON objects.
std::string FileOf(const std::string& users) { return R"({"users":[)" + users + "]}"; }

std::string Admin(const std::string& name = "root", const std::string& hash = kHashA) {
  return R"({"name":")" + name + R"(","role":"admin","token_sha256":")" + hash +
         R"(","created_us":1,"changed_us":2})";
}

// The error ParseUsersFile gives for `text`, or "accepted".
std::string ErrorOf(const std::string& text) {
  Result<UserMap> users = ParseUsersFile(text, kPath);
  return users.ok() ? "accepted" : users.status().message();
}

TEST(UsersFileTest, WhatItWritesItReadsBackEqual) {
  UserMap users;
  users["root"] = {"root", net::Role::kAdmin, kHashA, TimeFromMicros(1), TimeFromMicros(2), false};
  users["ana"] = {"ana", net::Role::kViewer, "", TimeFromMicros(-5), TimeFromMicros(7), true};
  users["bo.b"] = {"bo.b", net::Role::kWorker, kHashB, Time{}, Time{}, false};
  Result<UserMap> again = ParseUsersFile(UsersFileText(users), kPath);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, users);
}

TEST(UsersFileTest, ErrorsNameTheFileTheEntryAndTheField) {
  EXPECT_EQ(ErrorOf("[]"),
            std::string(kPath) + R"(: not a users file (expected {"users": [...]}))");
  EXPECT_EQ(ErrorOf(R"({"users":{}})").rfind(std::string(kPath) + ": not a users file", 0), 0u);
  EXPECT_EQ(ErrorOf(FileOf(Admin() + ",7")), std::string(kPath) + ": users[1]: expected an object");
  EXPECT_EQ(ErrorOf(FileOf(R"({"name":7})")),
            std::string(kPath) + R"(: users[0]: "name" must be text)");
  EXPECT_EQ(ErrorOf(FileOf(R"({"name":"Ana"})"))
                .rfind(std::string(kPath) + R"(: users[0]: user name "Ana" is not valid)", 0),
            0u);
  EXPECT_EQ(ErrorOf(FileOf(R"({"name":"ana","role":["admin"]})")),
            std::string(kPath) + R"(: users[0]: "role" must be admin, user, viewer or worker)");
  EXPECT_EQ(ErrorOf(FileOf(R"({"name":"ana","role":"user","token_sha256":"ABC"})")),
            std::string(kPath) + R"(: users[0]: "token_sha256" must be 64 lower-case hex digits)");
  EXPECT_EQ(ErrorOf(FileOf(Admin() + "," + Admin("root", kHashB))),
            std::string(kPath) + ": users[1]: user root is named twice");
  EXPECT_EQ(ErrorOf(FileOf(Admin() + "," + Admin("ana"))),
            std::string(kPath) + ": two users have the same token (root and ana)");
  EXPECT_EQ(ErrorOf(FileOf(R"({"name":"ana","role":"user","token_sha256":")" + kHashA +
                           R"(","created_us":1,"changed_us":2})")),
            std::string(kPath) + ": no admin that is not revoked");
  EXPECT_EQ(ErrorOf(FileOf("")), std::string(kPath) + ": no admin that is not revoked");
}

// A file anyone who can write the state directory may have written: valid
// JSON of the wrong shapes and sizes is an error naming the field, never a
// crash (an exception out of the parser would stop the server).
TEST(UsersFileTest, HostileValuesAreErrorsNamingTheField) {
  const std::string head =
      R"({"name":"root","role":"admin","token_sha256":")" + kHashA + R"(","created_us":)";
  const std::string created =
      std::string(kPath) + R"(: users[0]: "created_us" must be microseconds since the epoch)";
  EXPECT_EQ(ErrorOf(FileOf(head + R"(18446744073709551615,"changed_us":1})")), created);
  EXPECT_EQ(ErrorOf(FileOf(head + R"(9223372036854775808,"changed_us":1})")), created);
  EXPECT_EQ(ErrorOf(FileOf(head + R"(1e300,"changed_us":1})")), created);
  EXPECT_EQ(ErrorOf(FileOf(head + R"("1","changed_us":1})")), created);
  EXPECT_EQ(
      ErrorOf(FileOf(head + R"(1})")),
      std::string(kPath) + R"(: users[0]: "changed_us" must be microseconds since the epoch)");
  // Past what a double holds: not JSON nlohmann reads.
  EXPECT_EQ(ErrorOf(FileOf(head + R"(1e999,"changed_us":1})"))
                .rfind(std::string(kPath) + ": not a users file", 0),
            0u);
  EXPECT_EQ(ErrorOf(FileOf(head + R"(-9223372036854775808,"changed_us":9223372036854775807})")),
            "accepted");
  EXPECT_EQ(ErrorOf(FileOf(head + R"(1,"changed_us":1,"revoked":1})")),
            std::string(kPath) + R"(: users[0]: "revoked" must be true or false)");
  EXPECT_EQ(ErrorOf(FileOf(head + R"(1,"changed_us":1,"revoked":null})")),
            std::string(kPath) + R"(: users[0]: "revoked" must be true or false)");
  EXPECT_EQ(ErrorOf(FileOf(R"({"name":")" + std::string(100000, 'a') + R"(","role":"admin"})"))
                .rfind(std::string(kPath) + R"(: users[0]: user name ")" + std::string(64, 'a') +
                           "\" is not valid",
                       0),
            0u);
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(ErrorOf(FileOf(deep)), std::string(kPath) + ": users[0]: expected an object");
  // Unknown fields are kept for a newer server's sake: ignored.
  EXPECT_EQ(ErrorOf(FileOf(head + R"(1,"changed_us":1,"shell":{"x":[1,2]}})")), "accepted");
}

// Reading a file costs about ten times its size in memory and a second per
// 10 MB: a file past the limits is refused before it is parsed.
TEST(UsersFileTest, AFileMayHoldSoManyUsersAndBytes) {
  EXPECT_EQ(ErrorOf(std::string(kMaxUsersFileBytes + 1, ' ')),
            std::string(kPath) + ": " + std::to_string(kMaxUsersFileBytes + 1) +
                " bytes, more than a users file may have (" + std::to_string(kMaxUsersFileBytes) +
                ")");
  std::string many = Admin();
  for (size_t i = 0; i < kMaxUsers; ++i) many += ",0";
  EXPECT_EQ(ErrorOf(FileOf(many)), std::string(kPath) + ": " + std::to_string(kMaxUsers + 1) +
                                       " users, more than the limit of " +
                                       std::to_string(kMaxUsers));
  // The most users, with the longest names, roles and times, fit well
  // within the bytes: the server never writes a file it would refuse.
  UserMap users;
  for (size_t i = 0; i < kMaxUsers; ++i) {
    const std::string n = std::to_string(i);
    const std::string name = "u" + std::string(31 - n.size(), '_') + n;
    users[name] = {name,
                   i == 0 ? net::Role::kAdmin : net::Role::kWorker,
                   std::string(64 - n.size(), 'f') + n,
                   TimeFromMicros(INT64_MIN),
                   TimeFromMicros(INT64_MIN),
                   false};
  }
  const std::string text = UsersFileText(users);
  EXPECT_LT(text.size(), kMaxUsersFileBytes / 2);
  Result<UserMap> again = ParseUsersFile(text, kPath);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->size(), kMaxUsers);
}

TEST(UsersFileTest, ARevokedUserNeedsNoTokenAndKeepsNone) {
  Result<UserMap> users = ParseUsersFile(
      FileOf(Admin() + R"(,{"name":"ana","role":"user","token_sha256":")" + kHashA +
             R"(","created_us":1,"changed_us":2,"revoked":true},)" +
             R"({"name":"bob","role":"user","created_us":1,"changed_us":2,"revoked":true})"),
      kPath);
  ASSERT_TRUE(users.ok()) << users.status().ToString();
  EXPECT_TRUE(users->at("ana").revoked);
  EXPECT_EQ(users->at("ana").token_sha256, "");
  EXPECT_EQ(users->at("root").token_sha256, kHashA);
}

TEST(UsersFileTest, ANameIsALowerCaseLetterOrUnderscoreThenUpTo31More) {
  EXPECT_EQ(CheckUserName("ana"), "");
  EXPECT_EQ(CheckUserName("_svc-1.x"), "");
  EXPECT_EQ(CheckUserName(std::string(32, 'a')), "");
  EXPECT_NE(CheckUserName(std::string(33, 'a')), "");
  EXPECT_NE(CheckUserName(""), "");
  EXPECT_NE(CheckUserName("1ana"), "");
  EXPECT_NE(CheckUserName("Ana"), "");
  EXPECT_NE(CheckUserName(std::string("a\0b", 3)), "");
}

}  // namespace
}  // namespace drover::server
