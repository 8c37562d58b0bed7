#include "worker/exec/task_account.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace drover::worker {
namespace {

// A user database of four accounts, and the names asked for.
struct FakeAccounts {
  std::map<std::string, uid_t> uids{{"root", 0}, {"daemon", 1}, {"alice", 1001}, {"ana", 1002}};
  std::vector<std::string> asked;
  UserAccounts::Lookup lookup() {
    return [this](const std::string& name) -> Result<TaskAccount> {
      asked.push_back(name);
      auto it = uids.find(name);
      if (it == uids.end()) return NotFound("no account " + name);
      TaskAccount a;
      a.name = name;
      a.home = "/home/" + name;
      a.ids = UserSwitch{it->second, it->second, {it->second}};
      return a;
    };
  }
};

std::string Refusal(const UserAccounts& accounts, const std::string& user) {
  Result<std::shared_ptr<const TaskAccount>> a = accounts.For(user);
  EXPECT_FALSE(a.ok()) << user << " was not refused";
  if (a.ok()) return "";
  EXPECT_EQ(a.status().code(), StatusCode::kFailedPrecondition) << a.status().ToString();
  return a.status().message();
}

TEST(UserAccountsTest, AUserRunsAsTheAccountOfItsNameOrOfTheMap) {
  FakeAccounts db;
  UserAccounts accounts({{"bob", "alice"}}, /*allow_root=*/false, "w1", db.lookup());
  Result<std::shared_ptr<const TaskAccount>> ana = accounts.For("ana");
  ASSERT_TRUE(ana.ok()) << ana.status().ToString();
  EXPECT_EQ((*ana)->name, "ana");
  EXPECT_EQ((*ana)->ids.uid, 1002u);
  Result<std::shared_ptr<const TaskAccount>> bob = accounts.For("bob");
  ASSERT_TRUE(bob.ok()) << bob.status().ToString();
  EXPECT_EQ((*bob)->name, "alice");
  EXPECT_EQ((*bob)->home, "/home/alice");
  // Looked up at each call: an account added later is seen.
  EXPECT_EQ(Refusal(accounts, "carol"),
            "user carol has no account on worker w1 (map it with --user-map carol=ACCOUNT, or "
            "run every task as one account with --user)");
  db.uids["carol"] = 1003;
  EXPECT_TRUE(accounts.For("carol").ok());
  EXPECT_EQ(db.asked, (std::vector<std::string>{"ana", "alice", "carol", "carol"}));
}

TEST(UserAccountsTest, RefusalsSayWhyAndWhatToDo) {
  FakeAccounts db;
  UserAccounts accounts({{"dave", "nosuch"}, {"eve", "root"}, {"web", "daemon"}},
                        /*allow_root=*/false, "w1", db.lookup());
  EXPECT_EQ(Refusal(accounts, ""),
            "the task has no user (its server sends none: it is older than this worker), and "
            "worker w1 runs each task as its user's account (run every task as one account with "
            "--user)");
  EXPECT_EQ(Refusal(accounts, "dave"),
            "user dave maps to account nosuch (--user-map), which does not exist on worker w1");
  EXPECT_EQ(Refusal(accounts, "eve"),
            "user eve maps to root on worker w1: running tasks as root needs --run-as-root");
  EXPECT_EQ(Refusal(accounts, "root"),
            "user root maps to root on worker w1: running tasks as root needs --run-as-root");
  EXPECT_EQ(Refusal(accounts, "daemon"),
            "user daemon names a system account (uid 1) on worker w1: only --user-map "
            "daemon=daemon can run tasks as it");
  // Mapped by the administrator: allowed.
  EXPECT_TRUE(accounts.For("web").ok());
  for (const std::string& bad : {std::string("a/b"), std::string("a b"), std::string("a:b"),
                                 std::string("ana\0x", 5), std::string(257, 'a')}) {
    EXPECT_NE(Refusal(accounts, bad).find("cannot be an account on worker w1"), std::string::npos)
        << bad;
  }
  // Nothing looked up for what is refused on its name.
  EXPECT_EQ(db.asked, (std::vector<std::string>{"nosuch", "root", "root", "daemon", "daemon"}));

  UserAccounts with_root({{"eve", "root"}}, /*allow_root=*/true, "w1", db.lookup());
  Result<std::shared_ptr<const TaskAccount>> eve = with_root.For("eve");
  ASSERT_TRUE(eve.ok()) << eve.status().ToString();
  EXPECT_EQ((*eve)->ids.uid, 0u);
}

TEST(UserAccountsTest, ALookupThatFailsIsUnavailable) {
  UserAccounts accounts({}, false, "w1", [](const std::string&) -> Result<TaskAccount> {
    return Unavailable("cannot look up account ana: Input/output error");
  });
  Result<std::shared_ptr<const TaskAccount>> a = accounts.For("ana");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(a.status().message(),
            "user ana on worker w1: cannot look up account ana: Input/output error");
}

TEST(UserAccountsTest, TheRealDatabaseKnowsRootAndNotANameNoOneHas) {
  Result<TaskAccount> root = LookUpAccount("root");
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  EXPECT_EQ(root->ids.uid, 0u);
  EXPECT_EQ(root->name, "root");
  EXPECT_FALSE(root->ids.groups.empty());
  EXPECT_EQ(LookUpAccount("no-such-drover-account").status().code(), StatusCode::kNotFound);
}

TEST(UserMapTest, EntriesAreUserEqualsAccount) {
  Result<std::map<std::string, std::string>> map = ParseUserMap({"ana=alice", "bob=bob"});
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  EXPECT_EQ(*map, (std::map<std::string, std::string>{{"ana", "alice"}, {"bob", "bob"}}));
  EXPECT_EQ(ParseUserMap({"ana"}).status().message(),
            "--user-map ana: expected USER=ACCOUNT (ana=alice)");
  EXPECT_EQ(ParseUserMap({"ana=alice", "ana=bob"}).status().message(),
            "--user-map ana=bob: user ana is mapped twice");
  for (const char* bad : {"=alice", "ana=", "ana=al ice", "a/b=c"}) {
    Result<std::map<std::string, std::string>> refused = ParseUserMap({bad});
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(refused.status().message().rfind(std::string("--user-map ") + bad + ": ", 0), 0u)
        << refused.status().message();
  }
}

}  // namespace
}  // namespace drover::worker
