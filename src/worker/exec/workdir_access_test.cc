#include "worker/exec/workdir_access.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace drover::worker {
namespace {

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

class WorkdirAccessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/drover-workdir-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    ASSERT_EQ(chmod(root_.c_str(), 0755), 0);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::string root_;
};

// A parent only its owner may enter: refused, naming it and its mode.
TEST_F(WorkdirAccessTest, APrivateParentIsRefusedNamingItsMode) {
  const std::string parent = root_ + "/private";
  ASSERT_EQ(mkdir(parent.c_str(), 0700), 0);
  ASSERT_EQ(chmod(parent.c_str(), 0700), 0);
  const std::string workdir = parent + "/w1";
  Result<WorkdirFix> r = CheckWorkdirReachable(workdir, nullptr, /*fix=*/true);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.status().message(),
            "tasks run as other accounts cannot reach --workdir " + workdir + ": " + parent +
                " (mode 0700, owner root) does not let them pass; give them its search bit "
                "(chmod o+x " +
                parent + ") or choose a --workdir they can reach");
  // One account in the directory's group passes by its group bit.
  ASSERT_EQ(chmod(parent.c_str(), 0710), 0);
  ASSERT_EQ(chown(parent.c_str(), 0, 4242), 0);
  UserSwitch member{5000, 4242, {4242}};
  UserSwitch stranger{5001, 5001, {5001}};
  EXPECT_TRUE(CheckWorkdirReachable(workdir, &member, true).ok());
  EXPECT_FALSE(CheckWorkdirReachable(workdir, &stranger, true).ok());
  EXPECT_FALSE(CheckWorkdirReachable(workdir, nullptr, true).ok()) << "per user: any account";
  ASSERT_EQ(chmod(parent.c_str(), 0711), 0);
  EXPECT_TRUE(CheckWorkdirReachable(workdir, nullptr, true).ok());
}

// The work directory is the worker's: it gets the bit, and says so; a check
// only says what it would do.
TEST_F(WorkdirAccessTest, TheWorkDirectoryItselfIsGivenTheSearchBit) {
  const std::string workdir = root_ + "/w1";
  ASSERT_EQ(mkdir(workdir.c_str(), 0700), 0);
  ASSERT_EQ(chmod(workdir.c_str(), 0700), 0);
  Result<WorkdirFix> checked = CheckWorkdirReachable(workdir, nullptr, /*fix=*/false);
  ASSERT_TRUE(checked.ok()) << checked.status().ToString();
  EXPECT_EQ(checked->note,
            "would give " + workdir + " the search bit for other accounts (mode 0700 -> 0711)");
  EXPECT_EQ(ModeOf(workdir), 0700u);
  Result<WorkdirFix> fixed = CheckWorkdirReachable(workdir, nullptr, /*fix=*/true);
  ASSERT_TRUE(fixed.ok()) << fixed.status().ToString();
  EXPECT_EQ(fixed->note, "gave " + workdir + " the search bit for other accounts (mode 0700 -> 0711)");
  EXPECT_EQ(ModeOf(workdir), 0711u);
  Result<WorkdirFix> again = CheckWorkdirReachable(workdir, nullptr, true);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->note, "");
}

// Directories still to be made are the worker's to make passable; a file
// on the way is named.
TEST_F(WorkdirAccessTest, MissingDirectoriesPassAndAFileOnTheWayIsNamed) {
  EXPECT_TRUE(CheckWorkdirReachable(root_ + "/a/b/w1", nullptr, true).ok());
  const std::string file = root_ + "/file";
  std::FILE* f = std::fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  Result<WorkdirFix> r = CheckWorkdirReachable(file + "/w1", nullptr, true);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "--workdir " + file + "/w1: " + file + " is not a directory");
  EXPECT_FALSE(CheckWorkdirReachable("relative/w1", nullptr, true).ok());
}

}  // namespace
}  // namespace drover::worker
