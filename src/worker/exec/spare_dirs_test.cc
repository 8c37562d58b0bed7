// SpareDirs: a succeeded task's empty directories serve the next task of
// the same account, by rename.
#include "worker/exec/spare_dirs.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "common/run_program.h"
#include "worker/exec/exec_test_util.h"
#include "worker/exec/executor.h"

namespace drover::worker {
namespace {

using testing::Harness;
using testing::Put;
using testing::TempDir;

// An ext4 file system of 64 MiB in a file, mounted on a loop device, with
// or without a journal; why not when it cannot be (not root, no mkfs.ext4).
class LoopExt4 {
 public:
  explicit LoopExt4(bool journal) : mount_(dir_.path() + "/mnt") {
    const std::string image = dir_.path() + "/image";
    if (geteuid() != 0) {
      why_not_ = "needs root to mount a file system";
      return;
    }
    std::vector<std::string> mkfs = {"mkfs.ext4", "-q", "-F"};
    if (!journal) mkfs.insert(mkfs.end(), {"-O", "^has_journal"});
    mkfs.push_back(image);
    for (const std::vector<std::string>& argv :
         {std::vector<std::string>{"truncate", "-s", "64M", image}, mkfs,
          std::vector<std::string>{"mkdir", mount_},
          std::vector<std::string>{"mount", "-o", "loop", image, mount_}}) {
      Result<std::string> ran = RunProgram(argv, Seconds(60));
      if (!ran.ok()) {
        why_not_ = ran.status().ToString();
        return;
      }
    }
    mounted_ = true;
  }
  ~LoopExt4() {
    if (mounted_) umount2(mount_.c_str(), MNT_DETACH);
  }
  const std::string& why_not() const { return why_not_; }
  const std::string& path() const { return mount_; }

 private:
  TempDir dir_;
  std::string mount_;
  std::string why_not_;
  bool mounted_ = false;
};

ino_t InodeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_ino;
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

timespec AccessTimeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_atim;
}

// Sets `path`'s access and change times two days back: a read on a
// relatime mount then updates the access time.
void Age(const std::string& path) {
  timespec old{};
  clock_gettime(CLOCK_REALTIME, &old);
  old.tv_sec -= 2 * 86400;
  const timespec times[2] = {old, old};
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

TEST(HasEntriesTest, SeesOneEntryAmongManyAndNoneInAnEmptyOrMissingDirectory) {
  TempDir dir;
  const std::string d = dir.path() + "/d";
  ASSERT_EQ(mkdir(d.c_str(), 0700), 0);
  EXPECT_FALSE(HasEntries(d));
  EXPECT_FALSE(HasEntries(dir.path() + "/missing"));
  Put(d + "/.hidden", "x");
  EXPECT_TRUE(HasEntries(d));
  // More names than one read of the directory returns.
  for (int i = 0; i < 200; ++i) Put(d + "/file-with-a-long-name-" + std::to_string(i), "");
  EXPECT_TRUE(HasEntries(d));
  EXPECT_FALSE(HasEntries(d + "/.hidden"));  // a file is no directory
}

TEST(HasEntriesTest, LeavesTheDirectorysAccessTimeAlone) {
  TempDir dir;
  const std::string d = dir.path() + "/output";
  ASSERT_EQ(mkdir(d.c_str(), 0700), 0);
  // Only where a plain read would have updated it can this fail.
  Age(d);
  const timespec aged = AccessTimeOf(d);
  ASSERT_TRUE(std::filesystem::is_empty(d));
  if (AccessTimeOf(d).tv_sec == aged.tv_sec) {
    GTEST_SKIP() << dir.path() << " is mounted without access times";
  }
  Age(d);
  EXPECT_FALSE(HasEntries(d));
  EXPECT_EQ(AccessTimeOf(d).tv_sec, aged.tv_sec);
}

TEST(HasEntriesTest, ReadsADirectoryItMayNotKeepTheAccessTimeOf) {
  // O_NOATIME is refused (EPERM) on another account's directory unless the
  // reader is root: the read goes on without it.
  if (geteuid() != 0) GTEST_SKIP() << "needs root to read as another account";
  TempDir dir;
  ASSERT_EQ(chmod(dir.path().c_str(), 0755), 0);
  const std::string d = dir.path() + "/d";
  ASSERT_EQ(mkdir(d.c_str(), 0755), 0);
  Put(d + "/a", "x");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(3);
    const int refused = open(d.c_str(), O_RDONLY | O_DIRECTORY | O_NOATIME) < 0 && errno == EPERM;
    _exit(!refused ? 4 : HasEntries(d) ? 0 : 5);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "3: cannot become nobody; 4: O_NOATIME not refused; "
                                       "5: the entry was not seen";
}

TEST(SpareDirsTest, AnEmptyDirectoryComesBackAsTheNextOneWithItsModeSetAgain) {
  TempDir dir;
  SpareDirs spare(dir.path() + "/.spare");
  ASSERT_TRUE(spare.Open().ok());
  const std::string first = dir.path() + "/a";
  ASSERT_TRUE(spare.Make(first, 0700, geteuid()).ok());  // none kept yet: made
  const ino_t inode = InodeOf(first);
  ASSERT_EQ(chmod(first.c_str(), 0777), 0);  // what a task may do to its own
  ASSERT_TRUE(spare.Recycle(first));
  EXPECT_FALSE(std::filesystem::exists(first));
  EXPECT_EQ(spare.kept(), 1u);

  const std::string second = dir.path() + "/b";
  ASSERT_TRUE(spare.Make(second, 0700, geteuid()).ok());
  EXPECT_EQ(InodeOf(second), inode);  // the same directory, no new inode
  EXPECT_EQ(ModeOf(second), 0700u);
  EXPECT_EQ(spare.kept(), 0u);
  EXPECT_FALSE(HasEntries(second));
}

TEST(SpareDirsTest, WhatHoldsAnythingOrBelongsToAnotherAccountIsNotHandedOn) {
  TempDir dir;
  SpareDirs spare(dir.path() + "/.spare", /*per_owner=*/1);
  ASSERT_TRUE(spare.Open().ok());
  const std::string full = dir.path() + "/full";
  ASSERT_TRUE(spare.Make(full, 0700, geteuid()).ok());
  Put(full + "/left", "x");
  EXPECT_FALSE(spare.Recycle(full));  // it holds a file: stays
  EXPECT_TRUE(std::filesystem::exists(full + "/left"));
  EXPECT_FALSE(spare.Recycle(dir.path() + "/missing"));
  Put(dir.path() + "/file", "x");
  EXPECT_FALSE(spare.Recycle(dir.path() + "/file"));  // not a directory
  // Nor a symlink to an empty one: the next task's chmod would follow it.
  std::filesystem::create_directory(dir.path() + "/elsewhere");
  std::filesystem::create_directory_symlink(dir.path() + "/elsewhere", dir.path() + "/link");
  EXPECT_FALSE(spare.Recycle(dir.path() + "/link"));
  EXPECT_TRUE(std::filesystem::is_symlink(dir.path() + "/link"));

  const std::string one = dir.path() + "/one";
  const std::string two = dir.path() + "/two";
  ASSERT_TRUE(spare.Make(one, 0700, geteuid()).ok());
  ASSERT_TRUE(spare.Make(two, 0700, geteuid()).ok());
  const ino_t first = InodeOf(one);
  EXPECT_TRUE(spare.Recycle(one));
  EXPECT_FALSE(spare.Recycle(two));  // one kept per owner here
  EXPECT_TRUE(std::filesystem::exists(two));

  // Another account's task gets a new directory, not this account's.
  const std::string other = dir.path() + "/other";
  ASSERT_TRUE(spare.Make(other, 0700, geteuid() + 1).ok());
  EXPECT_NE(InodeOf(other), first);
  EXPECT_EQ(spare.kept(), 1u);
}

TEST(SpareDirsTest, ASpareWrittenToWhileKeptIsNotHandedOn) {
  TempDir dir;
  SpareDirs spare(dir.path() + "/.spare");
  ASSERT_TRUE(spare.Open().ok());
  const std::string a = dir.path() + "/a";
  ASSERT_TRUE(spare.Make(a, 0700, geteuid()).ok());
  // A process of the last task still has it as its working directory.
  const int held = open(a.c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(held, 0);
  ASSERT_TRUE(spare.Recycle(a));
  const int late = openat(held, "late", O_WRONLY | O_CREAT, 0600);
  ASSERT_GE(late, 0);
  close(late);
  const ino_t written = InodeOf("/proc/self/fd/" + std::to_string(held));
  close(held);
  const std::string b = dir.path() + "/b";
  ASSERT_TRUE(spare.Make(b, 0700, geteuid()).ok());
  EXPECT_NE(InodeOf(b), written);
  EXPECT_FALSE(HasEntries(b));
}

TEST(SpareDirsTest, AnExistingPathStaysAndTheSpareIsKept) {
  TempDir dir;
  SpareDirs spare(dir.path() + "/.spare");
  ASSERT_TRUE(spare.Open().ok());
  const std::string a = dir.path() + "/a";
  ASSERT_TRUE(spare.Make(a, 0700, geteuid()).ok());
  ASSERT_TRUE(spare.Recycle(a));
  // A checkpoint directory that an earlier attempt made, with its files.
  const std::string kept = dir.path() + "/kept";
  std::filesystem::create_directory(kept);
  Put(kept + "/step", "3");
  ASSERT_TRUE(spare.Make(kept, 0700, geteuid()).ok());
  EXPECT_TRUE(std::filesystem::exists(kept + "/step"));
  EXPECT_EQ(spare.kept(), 1u);
  // Where the parent is missing, mkdir's error, and the spare is kept.
  Status missing = spare.Make(dir.path() + "/no/such", 0700, geteuid());
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("cannot create " + dir.path() + "/no/such"), std::string::npos)
      << missing.ToString();
  EXPECT_EQ(spare.kept(), 1u);
}

TEST(SpareDirsTest, OpenRemovesWhatAnEarlierRunLeft) {
  TempDir dir;
  {
    SpareDirs spare(dir.path() + "/.spare");
    ASSERT_TRUE(spare.Open().ok());
    ASSERT_TRUE(spare.Make(dir.path() + "/a", 0700, geteuid()).ok());
    ASSERT_TRUE(spare.Recycle(dir.path() + "/a"));
  }
  SpareDirs again(dir.path() + "/.spare");
  ASSERT_TRUE(again.Open().ok());
  EXPECT_TRUE(std::filesystem::is_empty(dir.path() + "/.spare"));
  EXPECT_EQ(ModeOf(dir.path() + "/.spare"), 0700u);
}

TEST(SpareDirsTest, OnlyExt4WithoutAJournalMakesNewInodesDear) {
  LoopExt4 with(/*journal=*/true);
  LoopExt4 without(/*journal=*/false);
  if (!with.why_not().empty()) GTEST_SKIP() << with.why_not();
  ASSERT_TRUE(without.why_not().empty()) << without.why_not();
  EXPECT_FALSE(InodesDearAfterDeletes(with.path()));
  EXPECT_TRUE(InodesDearAfterDeletes(without.path()));
  EXPECT_FALSE(InodesDearAfterDeletes("/proc"));
  EXPECT_FALSE(InodesDearAfterDeletes("/no/such/dir"));
}

// Where new inodes are dear, a succeeded task's empty directories are the
// next task's; where they are not, every task's are new.
TEST(SpareDirsTest, TheExecutorHandsASucceededTasksEmptyDirectoriesOnOnlyWhereInodesAreDear) {
  for (bool journal : {false, true}) {
    LoopExt4 fs(journal);
    if (!fs.why_not().empty()) GTEST_SKIP() << fs.why_not();
    ExecutorOptions options;
    options.workdir = fs.path() + "/work";
    Harness h(MakeNoIsolator(), options);
    Result<TaskDirs> first = h.executor().PrepareDirs(TaskId{1, 0}, 0);
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    const ino_t output = InodeOf(first->output);
    const ino_t checkpoint = InodeOf(first->checkpoint);
    TaskSpec spec;
    spec.id = TaskId{1, 0};
    spec.argv = {"true"};
    ASSERT_EQ(h.Run(spec).outcome, TaskOutcome::kSucceeded);
    h.executor().Recycle(spec.id, *first);
    EXPECT_EQ(std::filesystem::exists(first->output), journal) << journal;
    EXPECT_EQ(std::filesystem::exists(first->checkpoint), journal) << journal;

    Result<TaskDirs> second = h.executor().PrepareDirs(TaskId{1, 1}, 0);
    ASSERT_TRUE(second.ok()) << second.status().ToString();
    EXPECT_EQ(InodeOf(second->output) == output || InodeOf(second->output) == checkpoint, !journal)
        << journal;
    EXPECT_EQ(ModeOf(second->output), 0700u);
    EXPECT_EQ(ModeOf(second->checkpoint), 0700u);
    EXPECT_FALSE(HasEntries(second->output));
  }
}

}  // namespace
}  // namespace drover::worker
