#include "common/quantity.h"

#include <gtest/gtest.h>

namespace drover {
namespace {

TEST(QuantityTest, Cpus) {
  EXPECT_EQ(*ParseCpus("2"), 2000);
  EXPECT_EQ(*ParseCpus("0.5"), 500);
  EXPECT_EQ(*ParseCpus("500m"), 500);
  EXPECT_EQ(*ParseCpus("0.125"), 125);
  EXPECT_EQ(*ParseCpus(" 4 "), 4000);
  EXPECT_FALSE(ParseCpus("0.0001").ok());
  EXPECT_FALSE(ParseCpus("two").ok());
  EXPECT_FALSE(ParseCpus("-1").ok());
  EXPECT_FALSE(ParseCpus("1.5m").ok());
  Result<int64_t> bad = ParseCpus("2x");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "cpus \"2x\" has unknown unit \"x\" (examples: 2, 0.5, 500m)");
}

TEST(QuantityTest, BinaryAndDecimalMemory) {
  EXPECT_EQ(*ParseBytes("512MiB"), 512ULL << 20);
  EXPECT_EQ(*ParseBytes("4GiB"), 4ULL << 30);
  EXPECT_EQ(*ParseBytes("4Gi"), 4ULL << 30);
  EXPECT_EQ(*ParseBytes("1.5GiB"), 3ULL << 29);
  EXPECT_EQ(*ParseBytes("4GB"), 4000000000ULL);
  EXPECT_EQ(*ParseBytes("1024"), 1024ULL);
  EXPECT_EQ(*ParseBytes("100B"), 100ULL);
  EXPECT_EQ(*ParseBytes("2 MiB"), 2ULL << 20);
}

TEST(QuantityTest, AmbiguousMemoryIsRejectedWithBothSpellings) {
  Result<uint64_t> r = ParseBytes("4G");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "memory \"4G\" is ambiguous: write 4GiB (powers of 1024) or 4GB (powers of 1000)");
  EXPECT_FALSE(ParseBytes("512m").ok());
  Result<uint64_t> unknown = ParseBytes("4GiBs");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("unknown unit \"GiBs\""), std::string::npos);
  EXPECT_FALSE(ParseBytes("0.5B").ok());
  EXPECT_FALSE(ParseBytes("").ok());
  EXPECT_FALSE(ParseBytes("99999999999TiB").ok());
}

TEST(QuantityTest, Gpus) {
  EXPECT_EQ(*ParseGpus("1"), 100);
  EXPECT_EQ(*ParseGpus("0.25"), 25);
  EXPECT_EQ(*ParseGpus("4"), 400);
  EXPECT_FALSE(ParseGpus("0.333").ok());
  EXPECT_FALSE(ParseGpus("1.5").ok());
  EXPECT_FALSE(ParseGpus("1GPU").ok());
}

TEST(QuantityTest, Durations) {
  EXPECT_EQ(*ParseDuration("90s"), Seconds(90));
  EXPECT_EQ(*ParseDuration("2h"), Seconds(7200));
  EXPECT_EQ(*ParseDuration("1d"), Seconds(86400));
  EXPECT_EQ(*ParseDuration("1h30m"), Seconds(5400));
  EXPECT_EQ(*ParseDuration("250ms"), Millis(250));
  EXPECT_EQ(*ParseDuration("1.5s"), Millis(1500));
  EXPECT_EQ(*ParseDuration("0"), Duration(0));
  Result<Duration> bare = ParseDuration("90");
  ASSERT_FALSE(bare.ok());
  EXPECT_EQ(bare.status().message(), "duration \"90\" needs a unit (ms, s, m, h, d), for example 90s");
  EXPECT_FALSE(ParseDuration("2w").ok());
  EXPECT_FALSE(ParseDuration("h").ok());
}

TEST(QuantityTest, Formatting) {
  EXPECT_EQ(FormatCpus(500), "0.5");
  EXPECT_EQ(FormatCpus(2000), "2");
  EXPECT_EQ(FormatCpus(125), "0.125");
  EXPECT_EQ(FormatGpus(25), "0.25");
  EXPECT_EQ(FormatGpus(50), "0.5");
  EXPECT_EQ(FormatGpus(200), "2");
  EXPECT_EQ(FormatBytes(64ULL << 20), "64 MiB");
  EXPECT_EQ(FormatBytes(4ULL << 30), "4 GiB");
  EXPECT_EQ(FormatBytes(3ULL << 29), "1.5 GiB");
  EXPECT_EQ(FormatBytes(100), "100 B");
  EXPECT_EQ(FormatDuration(Seconds(7200)), "2h");
  EXPECT_EQ(FormatDuration(Seconds(5400)), "1h30m");
  EXPECT_EQ(FormatDuration(Millis(90)), "90ms");
  EXPECT_EQ(FormatDuration(Duration(0)), "0s");
}

TEST(QuantityTest, RoundTrips) {
  for (const char* s : {"0.5", "2", "0.001", "31.25"}) {
    EXPECT_EQ(FormatCpus(*ParseCpus(s)), s);
  }
  for (const char* s : {"2h", "1h30m", "1d2h", "45s", "250ms"}) {
    EXPECT_EQ(FormatDuration(*ParseDuration(s)), s);
  }
}

}  // namespace
}  // namespace drover
