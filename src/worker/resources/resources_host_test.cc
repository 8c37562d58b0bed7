#include "worker/resources/resources_host.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>

#include "worker/resources/resources_test_util.h"

namespace drover::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ParseCpuListTest, RangesAndSingles) {
  Result<std::vector<int>> ids = ParseCpuList("0-3,8,10-11\n");
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  EXPECT_THAT(*ids, ElementsAre(0, 1, 2, 3, 8, 10, 11));
}

TEST(ParseCpuListTest, SortsAndDropsDuplicates) {
  Result<std::vector<int>> ids = ParseCpuList("5, 1-2,2");
  ASSERT_TRUE(ids.ok());
  EXPECT_THAT(*ids, ElementsAre(1, 2, 5));
}

TEST(ParseCpuListTest, EmptyIsEmpty) {
  Result<std::vector<int>> ids = ParseCpuList("  \n");
  ASSERT_TRUE(ids.ok());
  EXPECT_TRUE(ids->empty());
}

TEST(ParseCpuListTest, ErrorsNameTheElement) {
  for (const char* bad : {"1-", "3-1", "a", "1,,2", "-2", "0-99999999"}) {
    Result<std::vector<int>> ids = ParseCpuList(bad);
    ASSERT_FALSE(ids.ok()) << bad;
    EXPECT_EQ(ids.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(ids.status().message(), HasSubstr(bad));
  }
}

TEST(FormatCpuListTest, CompactsRuns) {
  EXPECT_EQ(FormatCpuList({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(FormatCpuList({}), "");
  EXPECT_EQ(FormatCpuList({7}), "7");
}

TEST(ReadHostMemoryTest, ParsesFakeMeminfo) {
  testing::TempDir dir;
  dir.Write("proc/meminfo",
            "MemTotal:       24683620 kB\nMemFree:        24432556 kB\n"
            "MemAvailable:   24393488 kB\nBuffers:            1234 kB\n");
  Result<HostMemory> mem = ReadHostMemory(dir.path() + "/proc");
  ASSERT_TRUE(mem.ok()) << mem.status().ToString();
  EXPECT_EQ(mem->total_bytes, 24683620ULL * 1024);
  EXPECT_EQ(mem->available_bytes, 24393488ULL * 1024);
}

TEST(ReadHostMemoryTest, MissingOrMalformed) {
  testing::TempDir dir;
  EXPECT_EQ(ReadHostMemory(dir.path()).status().code(), StatusCode::kNotFound);
  dir.Write("meminfo", "MemFree: 1 kB\n");
  EXPECT_EQ(ReadHostMemory(dir.path()).status().code(), StatusCode::kDataLoss);
  dir.Write("meminfo", "MemTotal: lots kB\n");
  Result<HostMemory> mem = ReadHostMemory(dir.path());
  EXPECT_EQ(mem.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(mem.status().message(), HasSubstr("MemTotal: lots kB"));
}

TEST(ReadHostMemoryTest, RealMachineMatchesSysconf) {
  Result<HostMemory> mem = ReadHostMemory("/proc");
  ASSERT_TRUE(mem.ok()) << mem.status().ToString();
  uint64_t pages = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES));
  uint64_t page_size = static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
  EXPECT_EQ(mem->total_bytes, pages * page_size);
  EXPECT_GT(mem->available_bytes, 0u);
  EXPECT_LE(mem->available_bytes, mem->total_bytes);
}

TEST(ReadAffinityTest, RealMachineMatchesCpuCount) {
  Result<std::vector<int>> ids = ReadAffinity();
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  EXPECT_EQ(static_cast<int>(ids->size()), CPU_COUNT(&set));
  for (int id : *ids) EXPECT_TRUE(CPU_ISSET(id, &set)) << id;
  EXPECT_TRUE(std::is_sorted(ids->begin(), ids->end()));
}

TEST(ReadAffinityTest, FollowsANarrowedMask) {
  // Narrow this thread's mask to its first core, read, and restore.
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof(saved), &saved), 0);
  Result<std::vector<int>> all = ReadAffinity();
  ASSERT_TRUE(all.ok() && !all->empty());
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(all->back(), &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  Result<std::vector<int>> narrowed = ReadAffinity();
  ASSERT_EQ(sched_setaffinity(0, sizeof(saved), &saved), 0);
  ASSERT_TRUE(narrowed.ok());
  EXPECT_THAT(*narrowed, ElementsAre(all->back()));
}

TEST(ReadPlatformTest, LowerCaseOsAndArch) {
  HostPlatform p = ReadPlatform();
  EXPECT_EQ(p.os, "linux");
  EXPECT_FALSE(p.arch.empty());
  EXPECT_FALSE(ReadHostname().empty());
}

}  // namespace
}  // namespace drover::worker
