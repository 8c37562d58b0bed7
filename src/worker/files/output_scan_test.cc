#include "worker/files/output_scan.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "common/quantity.h"
#include "common/unique_fd.h"
#include "worker/files/test_dir.h"

namespace drover::worker {
namespace {

using testing::Sha256Of;
using testing::TempDir;
using testing::WriteFile;

std::vector<std::string> Names(const std::vector<OutputEntry>& entries) {
  std::vector<std::string> names;
  for (const OutputEntry& e : entries) names.push_back(e.name);
  return names;
}

// Expects ScanOutputs(dir) to fail with `code` and exactly `message`.
void ExpectRefused(const std::string& dir, StatusCode code, const std::string& message,
                   const OutputLimits& limits = {}) {
  Result<std::vector<OutputEntry>> got = ScanOutputs(dir, limits);
  ASSERT_FALSE(got.ok()) << "listed " << got->size() << " entries";
  EXPECT_EQ(got.status().code(), code) << got.status().ToString();
  EXPECT_EQ(got.status().message(), message);
}

TEST(OutputScanTest, NestedFilesSortedByFullNameWithSizesAndHashes) {
  TempDir dir;
  WriteFile(dir / "b.txt", "abc");
  WriteFile(dir / "a/x", "");
  WriteFile(dir / "a/y/z", "hello");
  WriteFile(dir / "a.txt", "12");
  ASSERT_EQ(::mkdir((dir / "empty").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((dir / "a/empty").c_str(), 0755), 0);

  Result<std::vector<OutputEntry>> got = ScanOutputs(dir.path(), {});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, (std::vector<OutputEntry>{
                      {"a.txt", 2, Sha256Of("12")},
                      {"a/x", 0, Sha256Of("")},
                      {"a/y/z", 5, Sha256Of("hello")},
                      {"b.txt", 3, Sha256Of("abc")},
                  }));
}

TEST(OutputScanTest, MissingDirectoryIsEmpty) {
  TempDir dir;
  Result<std::vector<OutputEntry>> got = ScanOutputs(dir / "output", {});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got->empty());
}

TEST(OutputScanTest, TrailingSlashGivesTheSameNames) {
  TempDir dir;
  WriteFile(dir / "d/f", "abc");
  Result<std::vector<OutputEntry>> got = ScanOutputs(dir.path() + "/", {});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(Names(*got), std::vector<std::string>{"d/f"});
}

TEST(OutputScanTest, SymlinkInsideIsFollowedUnderItsOwnName) {
  TempDir dir;
  WriteFile(dir / "data/real", "payload");
  ASSERT_EQ(::symlink("data/real", (dir / "link").c_str()), 0);
  ASSERT_EQ(::mkdir((dir / "sub").c_str(), 0755), 0);
  ASSERT_EQ(::symlink("../data/real", (dir / "sub/up").c_str()), 0);

  Result<std::vector<OutputEntry>> got = ScanOutputs(dir.path(), {});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, (std::vector<OutputEntry>{
                      {"data/real", 7, Sha256Of("payload")},
                      {"link", 7, Sha256Of("payload")},
                      {"sub/up", 7, Sha256Of("payload")},
                  }));
}

TEST(OutputScanTest, SymlinkOutsideIsRefusedNamingIt) {
  TempDir outside;
  WriteFile(outside / "secret", "x");
  TempDir dir;
  WriteFile(dir / "ok", "y");
  ASSERT_EQ(::symlink((outside / "secret").c_str(), (dir / "link").c_str()), 0);
  ExpectRefused(
      dir.path(), StatusCode::kInvalidArgument,
      "output link: a symlink to " + (outside / "secret") + ", outside the output directory");
}

TEST(OutputScanTest, RelativeSymlinkClimbingOutIsRefused) {
  TempDir parent;
  WriteFile(parent / "secret", "x");
  WriteFile(parent / "out/keep", "y");
  ASSERT_EQ(::symlink("../secret", (parent / "out/up").c_str()), 0);
  ExpectRefused(
      parent / "out", StatusCode::kInvalidArgument,
      "output up: a symlink to " + (parent / "secret") + ", outside the output directory");
}

TEST(OutputScanTest, DanglingSymlinkIsRefused) {
  TempDir dir;
  ASSERT_EQ(::symlink("nowhere", (dir / "gone").c_str()), 0);
  ExpectRefused(dir.path(), StatusCode::kInvalidArgument,
                "output gone: a dangling symlink to nowhere");
}

TEST(OutputScanTest, SymlinkToDirectoryIsRefused) {
  TempDir dir;
  WriteFile(dir / "d/f", "abc");
  ASSERT_EQ(::symlink("d", (dir / "dlink").c_str()), 0);
  ExpectRefused(dir.path(), StatusCode::kInvalidArgument,
                "output dlink: a symlink to a directory; outputs must be regular files or "
                "symlinks to them");
}

TEST(OutputScanTest, FifoIsRefused) {
  TempDir dir;
  WriteFile(dir / "sub/a", "abc");
  ASSERT_EQ(::mkfifo((dir / "sub/pipe").c_str(), 0600), 0);
  ExpectRefused(dir.path(), StatusCode::kInvalidArgument,
                "output sub/pipe: a FIFO; outputs must be regular files");
}

TEST(OutputScanTest, SocketIsRefused) {
  TempDir dir;
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(fd.valid());
  struct sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  const std::string path = dir / "sock";
  ASSERT_LT(path.size(), sizeof(addr.sun_path));
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  ASSERT_EQ(::bind(fd.fd(), reinterpret_cast<struct sockaddr*>(&addr), sizeof(addr)), 0)
      << std::strerror(errno);
  ExpectRefused(dir.path(), StatusCode::kInvalidArgument,
                "output sock: a socket; outputs must be regular files");
}

TEST(OutputScanTest, MaxBytesIsCheckedFromSizesBeforeHashing) {
  TempDir dir;
  WriteFile(dir / "small", "abc");
  // 3 GiB of holes (plus 3 bytes: "3.0 GiB"): hashing it would read 3 GiB;
  // the limit must refuse it from its size alone.
  UniqueFd fd(::open((dir / "big").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
  ASSERT_TRUE(fd.valid());
  ASSERT_EQ(::ftruncate(fd.fd(), static_cast<off_t>(3 * kGiB)), 0);
  fd.Reset();
  ExpectRefused(dir.path(), StatusCode::kResourceExhausted,
                "outputs are 3.0 GiB, more than max_output 2 GiB", OutputLimits{2 * kGiB, 10000});
}

TEST(OutputScanTest, MaxBytesAllowsExactlyTheLimit) {
  TempDir dir;
  WriteFile(dir / "a", "abc");
  WriteFile(dir / "b", "de");
  Result<std::vector<OutputEntry>> got = ScanOutputs(dir.path(), OutputLimits{5, 10});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->size(), 2u);
  ExpectRefused(dir.path(), StatusCode::kResourceExhausted,
                "outputs are 5 B, more than max_output 4 B", OutputLimits{4, 10});
  ExpectRefused(dir.path(), StatusCode::kResourceExhausted,
                "outputs are 5 B, more than max_output 4 B (the task's)",
                OutputLimits{4, 10, "the task's"});
}

TEST(OutputScanTest, MaxFiles) {
  TempDir dir;
  for (int i = 0; i < 5; ++i) WriteFile(dir / ("d/f" + std::to_string(i)), "x");
  Result<std::vector<OutputEntry>> got = ScanOutputs(dir.path(), OutputLimits{0, 5});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->size(), 5u);
  ExpectRefused(dir.path(), StatusCode::kResourceExhausted,
                "outputs are more than max_files 4 files", OutputLimits{0, 4});
}

}  // namespace
}  // namespace drover::worker
