#include "worker/files/file_cache.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "common/quantity.h"
#include "worker/files/test_dir.h"

namespace drover::worker {
namespace {

using testing::PartFiles;
using testing::ReadFile;
using testing::Sha256Of;
using testing::TempDir;
using testing::WriteFile;

std::unique_ptr<FileCache> OpenCache(const std::string& dir, uint64_t capacity) {
  Result<std::unique_ptr<FileCache>> cache = FileCache::Open(dir, capacity);
  EXPECT_TRUE(cache.ok()) << cache.status().ToString();
  return cache.ok() ? std::move(cache).value() : nullptr;
}

// Puts `content` in the cache the way a fetch does; returns its SHA-256.
std::string Put(FileCache& cache, const std::string& content) {
  const std::string sha = Sha256Of(content);
  Result<std::string> part = cache.BeginFetch(sha, content.size());
  EXPECT_TRUE(part.ok()) << part.status().ToString();
  if (!part.ok()) return sha;
  WriteFile(*part, content);
  Status s = cache.CommitFetch(*part, sha, content.size());
  EXPECT_TRUE(s.ok()) << s.ToString();
  return sha;
}

struct stat Stat(const std::string& path) {
  struct stat st = {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st;
}

TEST(FileCacheTest, OpenCreatesTheDirectory) {
  TempDir tmp;
  auto cache = OpenCache(tmp / "a/b/cache", 0);
  ASSERT_NE(cache, nullptr);
  EXPECT_TRUE(S_ISDIR(Stat(tmp / "a/b/cache").st_mode));
  EXPECT_EQ(cache->PathOf(Sha256Of("x")), tmp / "a/b/cache/" + Sha256Of("x"));
  EXPECT_EQ(cache->stats().entries, 0u);
}

TEST(FileCacheTest, AdoptHardLinksAndMakesTheEntryReadOnly) {
  TempDir tmp;
  auto cache = OpenCache(tmp / "cache", 0);
  ASSERT_NE(cache, nullptr);
  const std::string out = tmp / "task/output/result.bin";
  WriteFile(out, "result");
  const std::string sha = Sha256Of("result");

  ASSERT_TRUE(cache->Adopt(out, sha, 6).ok());
  EXPECT_TRUE(cache->Has(sha));
  struct stat entry = Stat(cache->PathOf(sha));
  EXPECT_EQ(entry.st_ino, Stat(out).st_ino);
  EXPECT_EQ(entry.st_mode & 07777, 0444u);
  EXPECT_EQ(cache->stats().bytes, 6u);
  EXPECT_EQ(cache->stats().entries, 1u);
  EXPECT_TRUE(PartFiles(tmp / "cache").empty());

  // Again: a no-op.
  ASSERT_TRUE(cache->Adopt(out, sha, 6).ok());
  EXPECT_EQ(cache->stats().bytes, 6u);
}

TEST(FileCacheTest, AdoptFollowsASymlinkToItsTarget) {
  TempDir tmp;
  auto cache = OpenCache(tmp / "cache", 0);
  ASSERT_NE(cache, nullptr);
  WriteFile(tmp / "out/real", "data");
  ASSERT_EQ(::symlink("real", (tmp / "out/link").c_str()), 0);
  const std::string sha = Sha256Of("data");
  ASSERT_TRUE(cache->Adopt(tmp / "out/link", sha, 4).ok());
  struct stat entry = {};
  ASSERT_EQ(::lstat(cache->PathOf(sha).c_str(), &entry), 0);
  EXPECT_TRUE(S_ISREG(entry.st_mode));
  EXPECT_EQ(entry.st_ino, Stat(tmp / "out/real").st_ino);
}

TEST(FileCacheTest, AdoptRefusesAWrongSizeOrName) {
  TempDir tmp;
  auto cache = OpenCache(tmp / "cache", 0);
  ASSERT_NE(cache, nullptr);
  WriteFile(tmp / "f", "abc");
  EXPECT_EQ(cache->Adopt(tmp / "f", Sha256Of("abc"), 4).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cache->Adopt(tmp / "f", "abc", 3).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cache->Adopt(tmp / "missing", Sha256Of("abc"), 3).code(), StatusCode::kNotFound);
  EXPECT_EQ(cache->stats().entries, 0u);
  EXPECT_TRUE(PartFiles(tmp / "cache").empty());
}

TEST(FileCacheTest, HasCountsHitsAndMisses) {
  TempDir tmp;
  auto cache = OpenCache(tmp / "cache", 0);
  ASSERT_NE(cache, nullptr);
  const std::string sha = Put(*cache, "abc");
  EXPECT_TRUE(cache->Has(sha));
  EXPECT_TRUE(cache->Has(sha));
  EXPECT_FALSE(cache->Has(Sha256Of("other")));
  FileCacheStats s = cache->stats();
  EXPECT_EQ(s.hits, 2u);
  EXPECT_EQ(s.misses, 1u);
}

TEST(FileCacheTest, LinkIntoHardLinksCreatingParents) {
  TempDir tmp;
  auto cache = OpenCache(tmp / "cache", 0);
  ASSERT_NE(cache, nullptr);
  const std::string sha = Put(*cache, "input data");
  const std::string dest = tmp / "job/0.1/inputs/sub/data.txt";

  ASSERT_TRUE(cache->LinkInto(sha, dest).ok());
  EXPECT_EQ(ReadFile(dest), "input data");
  EXPECT_EQ(Stat(dest).st_ino, Stat(cache->PathOf(sha)).st_ino);
  EXPECT_EQ(Stat(dest).st_mode & 07777, 0444u);

  EXPECT_EQ(cache->LinkInto(sha, dest).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(cache->LinkInto(Sha256Of("absent"), tmp / "x").code(), StatusCode::kNotFound);
}

TEST(FileCacheTest, EvictsTheLeastRecentlyUsed) {
  TempDir tmp;
  auto cache = OpenCache(tmp / "cache", 30);
  ASSERT_NE(cache, nullptr);
  const std::string a = Put(*cache, "aaaaaaaaaa");
  const std::string b = Put(*cache, "bbbbbbbbbb");
  const std::string c = Put(*cache, "cccccccccc");
  // a used after c: b is now the oldest, then c.
  ASSERT_TRUE(cache->LinkInto(a, tmp / "in/a").ok());

  const std::string d = Put(*cache, "dddddddddd");
  EXPECT_FALSE(cache->Has(b));
  EXPECT_TRUE(cache->Has(a));
  EXPECT_TRUE(cache->Has(c));
  EXPECT_TRUE(cache->Has(d));
  EXPECT_EQ(::access(cache->PathOf(b).c_str(), F_OK), -1);

  const std::string e = Put(*cache, "eeeeeeeeee");
  EXPECT_FALSE(cache->Has(c));
  EXPECT_TRUE(cache->Has(a));
  FileCacheStats s = cache->stats();
  EXPECT_EQ(s.evictions, 2u);
  EXPECT_EQ(s.bytes, 30u);
  EXPECT_EQ(s.entries, 3u);
  EXPECT_EQ(s.capacity, 30u);
}

TEST(FileCacheTest, PinnedEntriesAreNotEvicted) {
  TempDir tmp;
  auto cache = OpenCache(tmp / "cache", 30);
  ASSERT_NE(cache, nullptr);
  const std::string a = Put(*cache, "aaaaaaaaaa");
  const std::string b = Put(*cache, "bbbbbbbbbb");
  const std::string c = Put(*cache, "cccccccccc");
  cache->Pin(a);
  cache->Pin(a);
  cache->Unpin(a);  // still pinned once

  Put(*cache, "dddddddddd");
  EXPECT_TRUE(cache->Has(a));
  EXPECT_FALSE(cache->Has(b));

  // 20 bytes: both unpinned entries (c, d) go, a stays.
  Put(*cache, std::string(20, 'e'));
  EXPECT_TRUE(cache->Has(a));
  EXPECT_FALSE(cache->Has(c));
  EXPECT_EQ(cache->stats().entries, 2u);

  cache->Unpin(a);
  cache->Unpin(a);  // ignored
  Put(*cache, std::string(20, 'f'));
  EXPECT_FALSE(cache->Has(a));
}

TEST(FileCacheTest, PinBeforeTheEntryArrives) {
  TempDir tmp;
  auto cache = OpenCache(tmp / "cache", 20);
  ASSERT_NE(cache, nullptr);
  cache->Pin(Sha256Of("aaaaaaaaaa"));
  const std::string a = Put(*cache, "aaaaaaaaaa");
  Put(*cache, "bbbbbbbbbb");
  Put(*cache, "cccccccccc");
  EXPECT_TRUE(cache->Has(a));
}

TEST(FileCacheTest, RefusesWhatCannotFitAndEvictsNothing) {
  TempDir tmp;
  auto big = OpenCache(tmp / "big", 50 * kMiB);
  ASSERT_NE(big, nullptr);
  const std::string sha = Sha256Of("x");
  Result<std::string> part = big->BeginFetch(sha, 200 * kMiB);
  ASSERT_FALSE(part.ok());
  EXPECT_EQ(part.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(part.status().message().rfind(
                "cache of 50 MiB cannot hold 200 MiB for " + sha.substr(0, 12) + "...", 0),
            0u)
      << part.status().message();

  auto cache = OpenCache(tmp / "cache", 30);
  ASSERT_NE(cache, nullptr);
  const std::string a = Put(*cache, "aaaaaaaaaa");
  const std::string b = Put(*cache, "bbbbbbbbbb");
  Put(*cache, "cccccccccc");
  cache->Pin(a);
  cache->Pin(b);
  Result<std::string> no = cache->BeginFetch(Sha256Of("d"), 11);
  ASSERT_FALSE(no.ok());
  EXPECT_EQ(no.status().message(), "cache of 30 B cannot hold 11 B for " +
                                       Sha256Of("d").substr(0, 12) +
                                       "...: 20 B are pinned by running tasks and 0 B are "
                                       "being fetched");
  EXPECT_EQ(cache->stats().entries, 3u);
  EXPECT_EQ(cache->stats().evictions, 0u);
}

TEST(FileCacheTest, FetchesInProgressReserveRoom) {
  TempDir tmp;
  auto cache = OpenCache(tmp / "cache", 30);
  ASSERT_NE(cache, nullptr);
  Result<std::string> first = cache->BeginFetch(Sha256Of("1"), 20);
  ASSERT_TRUE(first.ok());
  Result<std::string> second = cache->BeginFetch(Sha256Of("2"), 20);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("20 B are being fetched"), std::string::npos)
      << second.status().message();
  cache->AbortFetch(*first);
  cache->AbortFetch(*first);  // twice: harmless
  Result<std::string> third = cache->BeginFetch(Sha256Of("2"), 20);
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_NE(*third, *first);
  EXPECT_EQ(third->rfind(tmp / "cache/" + Sha256Of("2") + ".", 0), 0u);
  EXPECT_EQ(third->substr(third->size() - 5), ".part");
  cache->AbortFetch(*third);
}

TEST(FileCacheTest, CommitRefusesAFileOfTheWrongSize) {
  TempDir tmp;
  auto cache = OpenCache(tmp / "cache", 0);
  ASSERT_NE(cache, nullptr);
  const std::string sha = Sha256Of("abc");
  Result<std::string> part = cache->BeginFetch(sha, 3);
  ASSERT_TRUE(part.ok());
  WriteFile(*part, "abcd");
  EXPECT_EQ(cache->CommitFetch(*part, sha, 3).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(cache->Has(sha));
  EXPECT_TRUE(PartFiles(tmp / "cache").empty());
}

TEST(FileCacheTest, OpenRemovesPartFilesAndReindexesEntries) {
  TempDir tmp;
  std::string a, b;
  {
    auto cache = OpenCache(tmp / "cache", 0);
    ASSERT_NE(cache, nullptr);
    a = Put(*cache, "aaaaaaaaaa");
    b = Put(*cache, "bbbbbbbbbb");
  }
  WriteFile(tmp / ("cache/" + a + ".0123456789abcdef.part"), "half");
  WriteFile(tmp / "cache/x.part", "junk");
  WriteFile(tmp / "cache/notes.txt", "not an entry");
  // b was used long ago, a recently.
  const struct timespec old_times[2] = {{1000, 0}, {1000, 0}};
  const struct timespec new_times[2] = {{2000, 0}, {2000, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, (tmp / ("cache/" + b)).c_str(), old_times, 0), 0);
  ASSERT_EQ(::utimensat(AT_FDCWD, (tmp / ("cache/" + a)).c_str(), new_times, 0), 0);

  auto cache = OpenCache(tmp / "cache", 20);
  ASSERT_NE(cache, nullptr);
  EXPECT_TRUE(PartFiles(tmp / "cache").empty());
  EXPECT_EQ(ReadFile(tmp / "cache/notes.txt"), "not an entry");
  FileCacheStats s = cache->stats();
  EXPECT_EQ(s.entries, 2u);
  EXPECT_EQ(s.bytes, 20u);
  EXPECT_TRUE(cache->Has(a));
  EXPECT_TRUE(cache->Has(b));
  ASSERT_TRUE(cache->LinkInto(b, tmp / "in/b").ok());

  // Linking b made it the most recent; a (newer at open) is now the oldest.
  Put(*cache, "cccccccccc");
  EXPECT_FALSE(cache->Has(a));
  EXPECT_TRUE(cache->Has(b));
}

TEST(FileCacheTest, OpenOrdersByTimesAndShrinksToCapacity) {
  TempDir tmp;
  std::string a, b, c;
  {
    auto cache = OpenCache(tmp / "cache", 0);
    ASSERT_NE(cache, nullptr);
    a = Put(*cache, "aaaaaaaaaa");
    b = Put(*cache, "bbbbbbbbbb");
    c = Put(*cache, "cccccccccc");
  }
  const struct timespec t1[2] = {{1000, 0}, {1000, 0}};
  const struct timespec t2[2] = {{3000, 0}, {2000, 0}};  // atime is the later one
  const struct timespec t3[2] = {{2500, 0}, {2500, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, (tmp / ("cache/" + c)).c_str(), t1, 0), 0);
  ASSERT_EQ(::utimensat(AT_FDCWD, (tmp / ("cache/" + a)).c_str(), t2, 0), 0);
  ASSERT_EQ(::utimensat(AT_FDCWD, (tmp / ("cache/" + b)).c_str(), t3, 0), 0);

  auto cache = OpenCache(tmp / "cache", 20);  // c (oldest) must go
  ASSERT_NE(cache, nullptr);
  EXPECT_FALSE(cache->Has(c));
  EXPECT_EQ(::access((tmp / ("cache/" + c)).c_str(), F_OK), -1);
  Put(*cache, "dddddddddd");  // then b (2500 < 3000)
  EXPECT_FALSE(cache->Has(b));
  EXPECT_TRUE(cache->Has(a));
}

TEST(FileCacheTest, TamperedEntryIsDetectedAndDropped) {
  TempDir tmp;
  auto cache = OpenCache(tmp / "cache", 0);
  ASSERT_NE(cache, nullptr);
  const std::string sha = Put(*cache, "original");
  const std::string path = cache->PathOf(sha);
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  WriteFile(path, "0riginal");  // same size, one byte changed

  Status s = cache->LinkInto(sha, tmp / "in/f");
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  EXPECT_NE(s.message().find("was modified"), std::string::npos) << s.message();
  EXPECT_FALSE(cache->Has(sha));
  EXPECT_EQ(::access(path.c_str(), F_OK), -1);
  EXPECT_EQ(::access((tmp / "in/f").c_str(), F_OK), -1);
  EXPECT_EQ(cache->stats().bytes, 0u);
}

TEST(FileCacheTest, TouchedButIntactEntryIsKeptAndMadeReadOnlyAgain) {
  TempDir tmp;
  auto cache = OpenCache(tmp / "cache", 0);
  ASSERT_NE(cache, nullptr);
  const std::string sha = Put(*cache, "original");
  const std::string path = cache->PathOf(sha);
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);

  ASSERT_TRUE(cache->LinkInto(sha, tmp / "in/f").ok());
  EXPECT_EQ(ReadFile(tmp / "in/f"), "original");
  EXPECT_EQ(Stat(path).st_mode & 07777, 0444u);
  EXPECT_TRUE(cache->Has(sha));
}

TEST(FileCacheTest, OpenRehashesWritableEntries) {
  TempDir tmp;
  std::string good, bad;
  {
    auto cache = OpenCache(tmp / "cache", 0);
    ASSERT_NE(cache, nullptr);
    good = Put(*cache, "good");
    bad = Put(*cache, "bad!");
  }
  ASSERT_EQ(::chmod((tmp / ("cache/" + good)).c_str(), 0644), 0);
  ASSERT_EQ(::chmod((tmp / ("cache/" + bad)).c_str(), 0644), 0);
  WriteFile(tmp / ("cache/" + bad), "evil");

  auto cache = OpenCache(tmp / "cache", 0);
  ASSERT_NE(cache, nullptr);
  EXPECT_TRUE(cache->Has(good));
  EXPECT_FALSE(cache->Has(bad));
  EXPECT_EQ(Stat(tmp / ("cache/" + good)).st_mode & 07777, 0444u);
  EXPECT_EQ(::access((tmp / ("cache/" + bad)).c_str(), F_OK), -1);
}

TEST(FileCacheTest, ConcurrentFetchesKeepTheAccountsRight) {
  TempDir tmp;
  auto cache = OpenCache(tmp / "cache", 100);
  ASSERT_NE(cache, nullptr);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&cache, t] {
      for (int i = 0; i < 25; ++i) {
        // Threads 0/1 and 2/3 write the same contents: commits race.
        Put(*cache, std::string(10, static_cast<char>('a' + (t / 2) * 25 + i)));
      }
    });
  }
  for (std::thread& th : threads) th.join();
  FileCacheStats s = cache->stats();
  EXPECT_LE(s.bytes, 100u);
  EXPECT_EQ(s.bytes, s.entries * 10);
  EXPECT_TRUE(PartFiles(tmp / "cache").empty());
}

// Outputs kept for a job are not evicted, by any number of fetches, until
// the job is released; an entry two jobs keep stays until both are.
TEST(FileCacheTest, KeptEntriesAreNotEvictedUntilTheirJobsAreReleased) {
  TempDir tmp;
  auto cache = OpenCache(tmp / "cache", 30);
  ASSERT_NE(cache, nullptr);
  const std::string a = Put(*cache, "aaaaaaaaaa");
  const std::string b = Put(*cache, "bbbbbbbbbb");
  const std::string c = Put(*cache, "cccccccccc");
  ASSERT_TRUE(cache->Keep(1, {a}).ok());
  ASSERT_TRUE(cache->Keep(2, {a, b}).ok());
  EXPECT_EQ(cache->KeptJobs(), (std::vector<uint64_t>{1, 2}));
  EXPECT_TRUE(cache->Kept(a));
  EXPECT_FALSE(cache->Kept(c));

  const std::string d = Put(*cache, "dddddddddd");  // c (unkept) goes, not a
  EXPECT_FALSE(cache->Has(c));
  const std::string e = Put(*cache, "eeeeeeeeee");  // then d
  EXPECT_FALSE(cache->Has(d));
  EXPECT_TRUE(cache->Has(a));
  EXPECT_TRUE(cache->Has(b));

  // 20 bytes cannot fit past 20 kept: refused, nothing evicted.
  cache->Pin(e);
  Result<std::string> no = cache->BeginFetch(Sha256Of("f"), 20);
  ASSERT_FALSE(no.ok());
  EXPECT_EQ(no.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(no.status().message(),
            "cache of 30 B cannot hold 20 B for " + Sha256Of("f").substr(0, 12) +
                "...: 10 B are pinned by running tasks, 20 B are kept for unreleased jobs "
                "(drover server --keep-outputs) and 0 B are being fetched");
  EXPECT_EQ(cache->stats().entries, 3u);
  cache->Unpin(e);

  cache->Unkeep(2);  // b is free; a is still job 1's
  cache->Unkeep(2);  // again: ignored
  EXPECT_EQ(cache->KeptJobs(), (std::vector<uint64_t>{1}));
  Put(*cache, std::string(20, 'f'));
  EXPECT_FALSE(cache->Has(b));
  EXPECT_FALSE(cache->Has(e));
  EXPECT_TRUE(cache->Has(a));

  cache->Unkeep(1);
  EXPECT_EQ(cache->stats().kept_jobs, 0u);
  Put(*cache, std::string(20, 'g'));
  EXPECT_FALSE(cache->Has(a));
}

TEST(FileCacheTest, KeepBeforeTheEntryArrivesAndRefuseAMalformedName) {
  TempDir tmp;
  auto cache = OpenCache(tmp / "cache", 20);
  ASSERT_NE(cache, nullptr);
  ASSERT_TRUE(cache->Keep(3, {Sha256Of("aaaaaaaaaa")}).ok());
  const std::string a = Put(*cache, "aaaaaaaaaa");
  Put(*cache, "bbbbbbbbbb");
  Put(*cache, "cccccccccc");
  EXPECT_TRUE(cache->Has(a));

  Status bad = cache->Keep(4, {a, "../etc/passwd"});
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("../etc/passwd"), std::string::npos) << bad.message();
  EXPECT_EQ(cache->KeptJobs(), (std::vector<uint64_t>{3}));
}

// A worker restarted on the same cache keeps what it kept: the records in
// <cache>/.keep/ are read back before the capacity is enforced.
TEST(FileCacheTest, KeepsSurviveAReopenAndUnkeepRemovesTheRecord) {
  TempDir tmp;
  std::string a, b;
  {
    auto cache = OpenCache(tmp / "cache", 0);
    ASSERT_NE(cache, nullptr);
    a = Put(*cache, "aaaaaaaaaa");
    b = Put(*cache, "bbbbbbbbbb");
    ASSERT_TRUE(cache->Keep(7, {a}).ok());
    ASSERT_TRUE(cache->Keep(7, {b, a}).ok());  // a once only
    ASSERT_TRUE(cache->Keep(9, {Sha256Of("never arrived")}).ok());
  }
  EXPECT_EQ(ReadFile(tmp / "cache/.keep/7"), a + "\n" + b + "\n");
  EXPECT_EQ(Stat(tmp / "cache/.keep/7").st_mode & 07777, 0600u);
  {
    // Over its capacity, and nothing may go.
    auto cache = OpenCache(tmp / "cache", 10);
    ASSERT_NE(cache, nullptr);
    EXPECT_EQ(cache->KeptJobs(), (std::vector<uint64_t>{7, 9}));
    EXPECT_TRUE(cache->Has(a));
    EXPECT_TRUE(cache->Has(b));
    EXPECT_EQ(cache->stats().evictions, 0u);
    EXPECT_FALSE(cache->BeginFetch(Sha256Of("c"), 1).ok());
    cache->Unkeep(7);
    EXPECT_EQ(::access((tmp / "cache/.keep/7").c_str(), F_OK), -1);
  }
  auto cache = OpenCache(tmp / "cache", 10);
  ASSERT_NE(cache, nullptr);
  EXPECT_EQ(cache->KeptJobs(), (std::vector<uint64_t>{9}));
  EXPECT_EQ(cache->stats().entries, 1u);  // shrunk to its capacity now
  EXPECT_EQ(cache->stats().evictions, 1u);
}

// A record whose last line a crash cut short keeps its whole lines, and is
// rewritten without the torn one so that the next append starts a line.
TEST(FileCacheTest, ATornKeepRecordKeepsItsWholeLines) {
  TempDir tmp;
  const std::string a = Sha256Of("a");
  const std::string b = Sha256Of("b");
  WriteFile(tmp / "cache/.keep/5", a + "\n" + b.substr(0, 20));
  WriteFile(tmp / "cache/.keep/5.tmp", "a rewrite cut short");
  WriteFile(tmp / "cache/.keep/notes", "not a record");
  {
    auto cache = OpenCache(tmp / "cache", 0);
    ASSERT_NE(cache, nullptr);
    EXPECT_EQ(cache->KeptJobs(), (std::vector<uint64_t>{5}));
    EXPECT_TRUE(cache->Kept(a));
    EXPECT_EQ(ReadFile(tmp / "cache/.keep/5"), a + "\n");
    EXPECT_EQ(::access((tmp / "cache/.keep/5.tmp").c_str(), F_OK), -1);
    EXPECT_EQ(ReadFile(tmp / "cache/.keep/notes"), "not a record");
    ASSERT_TRUE(cache->Keep(5, {b}).ok());
  }
  auto cache = OpenCache(tmp / "cache", 0);
  ASSERT_NE(cache, nullptr);
  EXPECT_TRUE(cache->Kept(a));
  EXPECT_TRUE(cache->Kept(b));
}

TEST(FileCacheTest, DefaultCapacityIsAQuarterOfFreeSpaceButAtLeastOneGiB) {
  TempDir tmp;
  struct statvfs vfs;
  ASSERT_EQ(::statvfs(tmp.path().c_str(), &vfs), 0);
  const uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  const uint64_t want = std::max(free_bytes / 4, std::min(free_bytes, kGiB));
  // Free space moves as other programs write; allow a little drift.
  const uint64_t got = DefaultCacheCapacity(tmp / "not/yet/made");
  EXPECT_NEAR(static_cast<double>(got), static_cast<double>(want), 64.0 * kMiB);
  EXPECT_GE(got, std::min(free_bytes, kGiB) - 64 * kMiB);
}

}  // namespace
}  // namespace drover::worker
