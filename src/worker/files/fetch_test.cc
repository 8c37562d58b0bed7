#include "worker/files/fetch.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/quantity.h"
#include "common/unique_fd.h"
#include "worker/files/test_dir.h"

namespace drover::worker {
namespace {

using testing::PartFiles;
using testing::Pattern;
using testing::ReadFile;
using testing::Sha256Of;
using testing::TempDir;

// A source that streams `content` in chunks of `chunk` bytes and stops at
// the sink's first error. Counts its calls in `*calls` when given.
Source Serve(std::string content, size_t chunk = 4096, int* calls = nullptr) {
  return [content = std::move(content), chunk, calls](const ChunkSink& sink) -> Status {
    if (calls != nullptr) ++*calls;
    for (size_t at = 0; at < content.size(); at += chunk) {
      Status s = sink(std::string_view(content).substr(at, chunk));
      if (!s.ok()) return s;
    }
    return Status::Ok();
  };
}

Source Fail(Status status) {
  return [status = std::move(status)](const ChunkSink&) { return status; };
}

std::string FlipByte(std::string s, size_t at) {
  s[at] = static_cast<char>(s[at] ^ 0x01);
  return s;
}

class FetchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<FileCache>> c = FileCache::Open(tmp_ / "cache", 0);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cache_ = std::move(c).value();
  }

  TempDir tmp_;
  std::unique_ptr<FileCache> cache_;
};

TEST_F(FetchTest, GetsTheFileFromTheFirstSource) {
  const std::string content = Pattern(100000);
  const std::string sha = Sha256Of(content);
  Result<FetchReport> got = FetchIntoCache(*cache_, sha, content.size(), {Serve(content)});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->source_used, 0u);
  EXPECT_EQ(got->bytes, content.size());
  EXPECT_FALSE(got->already_cached);
  EXPECT_TRUE(got->failures.empty());
  EXPECT_TRUE(cache_->Has(sha));
  EXPECT_EQ(ReadFile(cache_->PathOf(sha)), content);
  EXPECT_TRUE(PartFiles(tmp_ / "cache").empty());
}

TEST_F(FetchTest, EmptyFile) {
  Result<FetchReport> got = FetchIntoCache(*cache_, Sha256Of(""), 0, {Serve("")});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(cache_->Has(Sha256Of("")));
}

TEST_F(FetchTest, NothingToDoWhenCached) {
  const std::string content = "abc";
  int calls = 0;
  ASSERT_TRUE(FetchIntoCache(*cache_, Sha256Of(content), 3, {Serve(content, 1, &calls)}).ok());
  Result<FetchReport> again =
      FetchIntoCache(*cache_, Sha256Of(content), 3, {Serve(content, 1, &calls)});
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->already_cached);
  EXPECT_EQ(again->bytes, 0u);
  EXPECT_EQ(calls, 1);
}

TEST_F(FetchTest, CorruptFirstSourceThenGoodSecond) {
  const std::string content = Pattern(50000, 7);
  const std::string sha = Sha256Of(content);
  const std::string corrupt = FlipByte(content, 1234);
  std::vector<size_t> mismatched;
  Result<FetchReport> got =
      FetchIntoCache(*cache_, sha, content.size(), {Serve(corrupt), Serve(content)}, &mismatched);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->source_used, 1u);
  EXPECT_EQ(mismatched, std::vector<size_t>{0});
  ASSERT_EQ(got->failures.size(), 1u);
  EXPECT_EQ(got->failures[0], "sha256 mismatch from source 0: got " +
                                  Sha256Of(corrupt).substr(0, 12) + "..., want " +
                                  sha.substr(0, 12) + "...");
  EXPECT_EQ(ReadFile(cache_->PathOf(sha)), content);
  EXPECT_TRUE(PartFiles(tmp_ / "cache").empty());
}

TEST_F(FetchTest, SourceErrorThenGoodSource) {
  const std::string content = "payload";
  Result<FetchReport> got = FetchIntoCache(
      *cache_, Sha256Of(content), content.size(),
      {Fail(Unavailable("peer w7 unreachable: connection refused")), Serve(content)});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->source_used, 1u);
  EXPECT_EQ(got->failures, std::vector<std::string>{
                               "source 0: unavailable: peer w7 unreachable: connection refused"});
}

TEST_F(FetchTest, AllSourcesBadIsUnavailable) {
  const std::string content = Pattern(10000, 3);
  const std::string sha = Sha256Of(content);
  Result<FetchReport> got = FetchIntoCache(
      *cache_, sha, content.size(),
      {Serve(FlipByte(content, 0)), Fail(Unavailable("host down")), Serve(content.substr(1))});
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable);
  const std::string& msg = got.status().message();
  EXPECT_NE(msg.find("from any of 3 sources"), std::string::npos) << msg;
  EXPECT_NE(msg.find("sha256 mismatch from source 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("source 1: unavailable: host down"), std::string::npos) << msg;
  EXPECT_NE(msg.find("size mismatch from source 2: got 9999 bytes, want 10000"), std::string::npos)
      << msg;
  EXPECT_FALSE(cache_->Has(sha));
  EXPECT_TRUE(PartFiles(tmp_ / "cache").empty());
  EXPECT_EQ(cache_->stats().bytes, 0u);
}

TEST_F(FetchTest, NoSourcesIsUnavailable) {
  Result<FetchReport> got = FetchIntoCache(*cache_, Sha256Of("x"), 1, {});
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable);
}

TEST_F(FetchTest, OversizeStreamIsCutOffAsAMismatch) {
  const std::string content = "exact";
  const std::string sha = Sha256Of(content);
  Status seen_by_source;
  Source chatty = [&](const ChunkSink& sink) -> Status {
    seen_by_source = sink(content + "and more");
    if (!seen_by_source.ok()) return seen_by_source;
    return sink("still more");  // ignores the sink's answer
  };
  Result<FetchReport> got = FetchIntoCache(*cache_, sha, content.size(), {chatty});
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable);
  EXPECT_FALSE(seen_by_source.ok());
  EXPECT_NE(got.status().message().find("sha256 mismatch from source 0: sent more than 5 bytes"),
            std::string::npos)
      << got.status().message();
  EXPECT_FALSE(cache_->Has(sha));
  EXPECT_TRUE(PartFiles(tmp_ / "cache").empty());
}

TEST_F(FetchTest, CacheWithoutRoomReturnsBeginFetchsError) {
  Result<std::unique_ptr<FileCache>> small = FileCache::Open(tmp_ / "small", 10);
  ASSERT_TRUE(small.ok());
  int calls = 0;
  const std::string content = Pattern(100);
  Result<FetchReport> got =
      FetchIntoCache(**small, Sha256Of(content), 100, {Serve(content, 10, &calls)});
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(got.status().message().rfind("cache of 10 B cannot hold 100 B", 0), 0u);
  EXPECT_EQ(calls, 0);
}

TEST_F(FetchTest, MalformedShaIsInvalidArgument) {
  Result<FetchReport> got = FetchIntoCache(*cache_, "ABC", 3, {Serve("abc")});
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
}

// A file of many pieces, in chunks that fall across them at odd places, and
// with an odd tail, arrives whole; a byte changed in its middle is caught.
TEST_F(FetchTest, ALargeFileArrivesWholeAndIsChecked) {
  const std::string content = Pattern(17 * kMiB + 123, 3);
  const std::string sha = Sha256Of(content);
  std::vector<size_t> mismatched;
  Result<FetchReport> got = FetchIntoCache(
      *cache_, sha, content.size(),
      {Serve(FlipByte(content, 5 * kMiB + 7), 16384), Serve(content, 300001)}, &mismatched);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->source_used, 1u);
  EXPECT_EQ(mismatched, std::vector<size_t>{0});
  ASSERT_EQ(got->failures.size(), 1u);
  EXPECT_NE(got->failures[0].find("sha256 mismatch from source 0"), std::string::npos)
      << got->failures[0];
  EXPECT_EQ(ReadFile(cache_->PathOf(sha)), content);
  EXPECT_TRUE(PartFiles(tmp_ / "cache").empty());
}

// How many of the file's pages are in the page cache.
size_t ResidentPages(const std::string& path, size_t size) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return SIZE_MAX;
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd.fd(), 0);
  if (map == MAP_FAILED) return SIZE_MAX;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in((size + page - 1) / page);
  size_t resident = SIZE_MAX;
  if (::mincore(map, size, in.data()) == 0) {
    resident = 0;
    for (unsigned char c : in) resident += c & 1;
  }
  ::munmap(map, size);
  return resident;
}

// A big input goes around the page cache (where the file system takes
// O_DIRECT): only its odd tail is cached; a small one is cached as written.
TEST_F(FetchTest, ABigFileIsWrittenAroundThePageCache) {
  {
    UniqueFd probe(::open((tmp_ / "probe").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
    ASSERT_TRUE(probe.valid());
    int flags = ::fcntl(probe.fd(), F_GETFL);
    if (::fcntl(probe.fd(), F_SETFL, flags | O_DIRECT) != 0) {
      GTEST_SKIP() << "this file system refuses O_DIRECT (" << std::strerror(errno) << ")";
    }
  }
  const std::string big = Pattern(32 * kMiB + 5, 4);
  ASSERT_TRUE(FetchIntoCache(*cache_, Sha256Of(big), big.size(), {Serve(big, 65536)}).ok());
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t big_pages = (big.size() + page - 1) / page;
  size_t resident = ResidentPages(cache_->PathOf(Sha256Of(big)), big.size());
  ASSERT_NE(resident, SIZE_MAX) << std::strerror(errno);
  EXPECT_LE(resident, (1 * kMiB) / page + 1) << "of " << big_pages << " pages";

  const std::string small = Pattern(2 * kMiB, 5);
  ASSERT_TRUE(FetchIntoCache(*cache_, Sha256Of(small), small.size(), {Serve(small, 65536)}).ok());
  EXPECT_EQ(ResidentPages(cache_->PathOf(Sha256Of(small)), small.size()), small.size() / page);
}

// Unmounts what it mounted when the test ends, passed or not.
struct Unmount {
  std::string dir;
  ~Unmount() { ::umount2(dir.c_str(), MNT_DETACH); }
};

TEST(FetchNoSpaceTest, FullDiskStopsAtOnceAndLeavesNothing) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "needs root to mount a 1 MiB tmpfs as a full cache directory";
  }
  TempDir tmp;
  const std::string dir = tmp / "cache";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=1m") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here (" << std::strerror(errno)
                 << "); the no-space path is not exercised";
  }
  Unmount unmount{dir};

  Result<std::unique_ptr<FileCache>> cache = FileCache::Open(dir, 0);
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  const std::string content = Pattern(4 * kMiB, 9);
  int calls = 0;
  Result<FetchReport> got = FetchIntoCache(**cache, Sha256Of(content), content.size(),
                                           {Serve(content, 65536), Serve(content, 65536, &calls)});
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(got.status().message().find("no space left on device"), std::string::npos)
      << got.status().message();
  EXPECT_EQ(calls, 0) << "a full disk must not be retried with the next source";
  EXPECT_TRUE(PartFiles(dir).empty());
  EXPECT_FALSE((*cache)->Has(Sha256Of(content)));
}

}  // namespace
}  // namespace drover::worker
