#include "server/user_book.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "net/net_test_util.h"
#include "net/private_file.h"

namespace drover::server {
namespace {

using net::Role;
using net::testing::TempDir;

constexpr char kCluster[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

TEST(UserBookTest, TheClusterTokenIsTheFirstAdminsAndTheFileKeepsOnlyHashes) {
  TempDir dir;
  const std::string path = dir.path() + "/users.json";
  auto book = UserBook::Open(path, "root", kCluster, TimeFromMicros(1));
  ASSERT_TRUE(book.ok()) << book.status().ToString();
  auto who = (*book)->Authenticate(kCluster);
  ASSERT_TRUE(who.has_value());
  EXPECT_EQ(who->name, "root");
  EXPECT_EQ(who->role, Role::kAdmin);

  Result<std::string> ana = (*book)->Add("ana", Role::kUser, TimeFromMicros(2));
  ASSERT_TRUE(ana.ok()) << ana.status().ToString();
  EXPECT_EQ(ana->size(), 64u);
  EXPECT_EQ((*book)->Authenticate(*ana)->name, "ana");
  EXPECT_EQ((*book)->Authenticate(*ana)->role, Role::kUser);

  std::string text = *net::ReadWholeFile(path);
  EXPECT_EQ(text.find(kCluster), std::string::npos);
  EXPECT_EQ(text.find(*ana), std::string::npos);
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  // Read again: the same users, the same tokens work.
  auto again = UserBook::Open(path, "someone-else", "f" + std::string(63, '0'), TimeFromMicros(3));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*again)->Authenticate(*ana)->name, "ana");
  EXPECT_EQ((*again)->Authenticate(kCluster)->name, "root");
  EXPECT_EQ((*again)->List().size(), 2u);
}

TEST(UserBookTest, RevokeAndRotateEndTheOldToken) {
  TempDir dir;
  auto book =
      std::move(UserBook::Open(dir.path() + "/users.json", "root", kCluster, Time{})).value();
  std::string ana = *book->Add("ana", Role::kUser, Time{});
  std::string rotated = *book->Rotate("ana", Time{});
  EXPECT_FALSE(book->Authenticate(ana).has_value());
  EXPECT_EQ(book->Authenticate(rotated)->name, "ana");
  ASSERT_TRUE(book->Revoke("ana", Time{}).ok());
  EXPECT_FALSE(book->Authenticate(rotated).has_value());
  EXPECT_TRUE(book->Find("ana")->revoked);
  EXPECT_EQ(book->Rotate("ana", Time{}).status().code(), StatusCode::kFailedPrecondition);
  // Made again: a new token, the old ones stay dead.
  std::string back = *book->Add("ana", Role::kViewer, Time{});
  EXPECT_EQ(book->Authenticate(back)->role, Role::kViewer);
  EXPECT_FALSE(book->Authenticate(rotated).has_value());
}

TEST(UserBookTest, RefusesWhatWouldBreakItsRules) {
  TempDir dir;
  auto book =
      std::move(UserBook::Open(dir.path() + "/users.json", "root", kCluster, Time{})).value();
  EXPECT_EQ(book->Add("Ana!", Role::kUser, Time{}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(book->Add("", Role::kUser, Time{}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(book->Add(std::string(33, 'a'), Role::kUser, Time{}).status().code(),
            StatusCode::kInvalidArgument);
  ASSERT_TRUE(book->Add("bob", Role::kUser, Time{}).ok());
  EXPECT_EQ(book->Add("bob", Role::kUser, Time{}).status().code(), StatusCode::kAlreadyExists);
  Status last = book->Revoke("root", Time{});
  EXPECT_EQ(last.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(last.message().find("last admin"), std::string::npos) << last.message();
  EXPECT_EQ(book->Revoke("nobody", Time{}).code(), StatusCode::kNotFound);
  EXPECT_FALSE(book->Authenticate("short").has_value());
}

// The cluster token's admin keeps it: workers and drover up's access file
// hold it. Another admin is rotated and revoked as usual.
TEST(UserBookTest, TheClusterTokensAdminIsNeitherRotatedNorRevoked) {
  TempDir dir;
  auto book =
      std::move(UserBook::Open(dir.path() + "/users.json", "root", kCluster, Time{})).value();
  ASSERT_TRUE(book->Add("ada", Role::kAdmin, Time{}).ok());
  for (Status s : {book->Rotate("root", Time{}).status(), book->Revoke("root", Time{})}) {
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(s.message().find("root's token is the cluster token"), std::string::npos)
        << s.message();
  }
  EXPECT_EQ(book->Authenticate(kCluster)->name, "root");
  EXPECT_TRUE(book->Rotate("ada", Time{}).ok());
  EXPECT_TRUE(book->Revoke("ada", Time{}).ok());
  // Also after a restart, from the file.
  book = std::move(UserBook::Open(dir.path() + "/users.json", "x", kCluster, Time{})).value();
  EXPECT_EQ(book->Rotate("root", Time{}).status().code(), StatusCode::kFailedPrecondition);
}

TEST(UserBookTest, AFileThatIsNotAUsersFileIsRefusedNamingIt) {
  TempDir dir;
  const std::string path = dir.path() + "/users.json";
  std::ofstream(path)
      << R"({"users":[{"name":"ana","role":"boss","token_sha256":"x","created_us":1,"changed_us":1}]})";
  auto book = UserBook::Open(path, "root", kCluster, Time{});
  ASSERT_FALSE(book.ok());
  EXPECT_NE(book.status().message().find(path + ": users[0]: \"role\""), std::string::npos)
      << book.status().message();
  std::ofstream(path) << "not json";
  book = UserBook::Open(path, "root", kCluster, Time{});
  ASSERT_FALSE(book.ok());
  EXPECT_NE(book.status().message().find("not a users file"), std::string::npos);
}

TEST(UserBookTest, RefusesAFilePastTheLimitUnreadAndANewUserPastTheMost) {
  TempDir dir;
  const std::string path = dir.path() + "/users.json";
  // Sparse: refused by its size, unread.
  std::ofstream(path).close();
  ASSERT_EQ(truncate(path.c_str(), kMaxUsersFileBytes + 1), 0);
  auto book = UserBook::Open(path, "root", kCluster, Time{});
  ASSERT_FALSE(book.ok());
  EXPECT_EQ(book.status().message(), path + ": " + std::to_string(kMaxUsersFileBytes + 1) +
                                         " bytes, more than a users file may have (" +
                                         std::to_string(kMaxUsersFileBytes) + ")");

  UserMap full;  // every other one revoked
  for (size_t i = 0; i < kMaxUsers; ++i) {
    const std::string n = std::to_string(i);
    UserEntry& e = full["u" + n];
    e.name = "u" + n;
    e.role = i == 0 ? Role::kAdmin : Role::kUser;
    e.revoked = i % 2 == 1;
    if (!e.revoked) e.token_sha256 = std::string(64 - n.size(), 'f') + n;
  }
  ASSERT_TRUE(net::WritePrivateFile(path, UsersFileText(full)).ok());
  book = UserBook::Open(path, "root", kCluster, Time{});
  ASSERT_TRUE(book.ok()) << book.status().ToString();
  EXPECT_EQ((*book)->Add("ana", Role::kUser, Time{}).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_TRUE((*book)->Add("u1", Role::kUser, Time{}).ok());  // made again: not a new user
}

TEST(UserBookTest, AChangeThatCannotBeWrittenChangesNothing) {
  if (geteuid() == 0) GTEST_SKIP() << "root writes into a read-only directory";
  TempDir dir;
  const std::string sub = dir.path() + "/state";
  ASSERT_EQ(mkdir(sub.c_str(), 0700), 0);
  auto book = std::move(UserBook::Open(sub + "/users.json", "root", kCluster, Time{})).value();
  chmod(sub.c_str(), 0500);
  EXPECT_FALSE(book->Add("ana", Role::kUser, Time{}).ok());
  chmod(sub.c_str(), 0700);
  EXPECT_EQ(book->Find("ana"), nullptr);
}

}  // namespace
}  // namespace drover::server
