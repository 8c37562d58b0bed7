#include "cli/prefault.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>

#include <gtest/gtest.h>

namespace drover::cli {
namespace {

constexpr std::size_t kPage = 4096;
constexpr std::size_t kPages = 16;

// Whole pages of .bss and .data that nothing else in this binary touches.
alignas(kPage) char control_bss[kPages * kPage];
alignas(kPage) char prefaulted_bss[kPages * kPage];
alignas(kPage) char control_data[kPages * kPage] = {1};
alignas(kPage) char prefaulted_data[kPages * kPage] = {1, 2, 3};

long MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_minflt;
}

// Writes one byte per page; returns the minor faults that took.
[[gnu::noinline]] long FaultsToWrite(char* region, std::size_t size) {
  volatile char* bytes = region;
  const long before = MinorFaults();
  for (std::size_t i = 0; i < size; i += kPage) bytes[i] = static_cast<char>(bytes[i] + 1);
  return MinorFaults() - before;
}

TEST(PrefaultTest, DataAndBssTakeNoFaultOncePopulated) {
  // Without it, each page's first write faults (this also brings in the
  // pages of the code that measures).
  EXPECT_GE(FaultsToWrite(control_bss, sizeof(control_bss)), static_cast<long>(kPages));
  EXPECT_GE(FaultsToWrite(control_data, sizeof(control_data)), static_cast<long>(kPages));

  const PrefaultReport report = PrefaultStartPages();
  if (report.failures > 0 && report.error == EINVAL) {
    GTEST_SKIP() << "this kernel has no MADV_POPULATE_WRITE (Linux < 5.14)";
  }
  ASSERT_EQ(report.failures, 0) << std::strerror(report.error);
  EXPECT_GE(report.data_bytes, sizeof(prefaulted_bss) + sizeof(prefaulted_data));
  EXPECT_GT(report.heap_bytes, 0u);

  EXPECT_EQ(FaultsToWrite(prefaulted_bss, sizeof(prefaulted_bss)), 0);
  EXPECT_EQ(FaultsToWrite(prefaulted_data, sizeof(prefaulted_data)), 0);
  // .data kept its contents: the first page's bytes were 1, 2, 3 before
  // the +1 above.
  EXPECT_EQ(prefaulted_data[0], 2);
  EXPECT_EQ(prefaulted_data[1], 2);
  EXPECT_EQ(prefaulted_data[2], 3);
  EXPECT_EQ(prefaulted_bss[kPage], 1);
}

TEST(PrefaultTest, CallingAgainIsHarmless) {
  const PrefaultReport first = PrefaultStartPages();
  const PrefaultReport second = PrefaultStartPages();
  EXPECT_EQ(second.failures, first.failures);
  EXPECT_EQ(second.data_bytes, first.data_bytes);
}

}  // namespace
}  // namespace drover::cli
