#include "worker/resources/resources_labels.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace drover::worker {
namespace {

using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

TEST(LabelsTest, DefaultsNameOsAndArch) {
  std::map<std::string, std::string> labels = DefaultLabels();
  EXPECT_EQ(labels.at("os"), "linux");
  EXPECT_FALSE(labels.at("arch").empty());
  EXPECT_EQ(labels.size(), 2u);
}

TEST(LabelsTest, UserLabelsAddAndOverride) {
  std::map<std::string, std::string> labels = {{"os", "linux"}, {"arch", "x86_64"}};
  ASSERT_TRUE(AddLabels({"zone=lab2", "arch=arm64", "gpu.vendor=nvidia"}, &labels).ok());
  EXPECT_THAT(labels, UnorderedElementsAre(Pair("os", "linux"), Pair("arch", "arm64"),
                                           Pair("zone", "lab2"), Pair("gpu.vendor", "nvidia")));
}

TEST(LabelsTest, ErrorsNameTheItemAndLeaveLabelsUnchanged) {
  struct Case {
    std::string item;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {"zone", "expected name=value"},
           {"=lab", "empty name"},
           {"zone=", "empty value"},
           {"zone=lab 2", "may not contain spaces"},
           {"zone=a,b", "commas"},
           {"zo ne=x", "character ' ' not allowed"},
           {"-zone=x", "must start with a letter or digit"},
           {std::string(64, 'k') + "=x", "longer than 63"},
       }) {
    std::map<std::string, std::string> labels = {{"os", "linux"}};
    Status s = AddLabels({"ok=1", c.item}, &labels);
    ASSERT_FALSE(s.ok()) << c.item;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("\"" + c.item + "\"")) << c.item;
    EXPECT_THAT(s.message(), HasSubstr(c.says)) << s.message();
    EXPECT_EQ(labels.size(), 1u) << "labels changed on failure for " << c.item;
  }
}

TEST(LabelsTest, DuplicateUserKeyIsAnError) {
  std::map<std::string, std::string> labels;
  Status s = AddLabels({"zone=a", "zone=b"}, &labels);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("given twice"));
}

TEST(CountersTest, ParsesCounts) {
  Result<std::map<std::string, int64_t>> counters = ParseCounters({"licenses=2", "fpga=0"});
  ASSERT_TRUE(counters.ok()) << counters.status().ToString();
  EXPECT_THAT(*counters, UnorderedElementsAre(Pair("licenses", 2), Pair("fpga", 0)));
}

TEST(CountersTest, Errors) {
  for (const char* bad : {"licenses", "licenses=", "licenses=-1", "licenses=1.5", "licenses=two",
                          "=2", "licenses=99999999999999999999"}) {
    Result<std::map<std::string, int64_t>> counters = ParseCounters({bad});
    ASSERT_FALSE(counters.ok()) << bad;
    EXPECT_EQ(counters.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(counters.status().message(), HasSubstr(std::string("\"") + bad + "\""));
  }
  EXPECT_THAT(ParseCounters({"a=1", "a=2"}).status().message(), HasSubstr("given twice"));
}

}  // namespace
}  // namespace drover::worker
