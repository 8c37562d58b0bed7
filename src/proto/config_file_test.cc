// ParseConfigToml: the tables of a config file, each key with its value as
// flag text and its place; and every shape that is not a flag's value
// refused with the file, line and column.
#include "proto/config_file.h"

#include <gtest/gtest.h>

#include <string>

namespace drover::proto {
namespace {

TEST(ConfigFileTest, TablesHoldEachKeysValueAsFlagTextAndWhereItStood) {
  Result<std::vector<ConfigSection>> parsed = ParseConfigToml(
      "# a lab's server\n"
      "[server]\n"
      "port = 7210\n"
      "heartbeat = \"2s\"\n"
      "no_tls = false\n"
      "ratio = 0.25\n"
      "\n"
      "[worker]\n"
      "server = [\"a:7210\", \"b:7210\"]\n",
      "drover.toml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->size(), 2u);
  const ConfigSection& server = (*parsed)[0];
  EXPECT_EQ(server.name, "server");
  EXPECT_EQ(server.line, 2u);
  ASSERT_EQ(server.entries.size(), 4u);
  std::map<std::string, ConfigEntry> by_key;
  for (const ConfigEntry& e : server.entries) by_key[e.key] = e;
  EXPECT_EQ(by_key["port"].values, std::vector<std::string>{"7210"});
  EXPECT_EQ(by_key["port"].kind, ConfigEntry::Kind::kNumber);
  EXPECT_EQ(by_key["port"].line, 3u);
  EXPECT_EQ(by_key["port"].column, 1u);
  EXPECT_EQ(by_key["heartbeat"].values, std::vector<std::string>{"2s"});
  EXPECT_EQ(by_key["heartbeat"].kind, ConfigEntry::Kind::kString);
  EXPECT_EQ(by_key["no_tls"].values, std::vector<std::string>{"false"});
  EXPECT_EQ(by_key["no_tls"].kind, ConfigEntry::Kind::kBool);
  EXPECT_EQ(by_key["ratio"].values, std::vector<std::string>{"0.25"});
  const ConfigSection& worker = (*parsed)[1];
  EXPECT_EQ(worker.name, "worker");
  ASSERT_EQ(worker.entries.size(), 1u);
  EXPECT_EQ(worker.entries[0].kind, ConfigEntry::Kind::kArray);
  EXPECT_EQ(worker.entries[0].values, (std::vector<std::string>{"a:7210", "b:7210"}));
  EXPECT_EQ(worker.entries[0].line, 9u);
}

// A repeatable KEY=VALUE flag may be written as an inline table too.
TEST(ConfigFileTest, AnInlineTableIsAnArrayOfKeyEqualsValue) {
  Result<std::vector<ConfigSection>> parsed =
      ParseConfigToml("[worker]\nuser_map = { ana = \"alice\", bob = \"bob\" }\n", "f.toml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const ConfigEntry& map = (*parsed)[0].entries.at(0);
  EXPECT_EQ(map.key, "user_map");
  EXPECT_EQ(map.kind, ConfigEntry::Kind::kArray);
  EXPECT_EQ(map.values, (std::vector<std::string>{"ana=alice", "bob=bob"}));
}

TEST(ConfigFileTest, WhatIsNotAFlagsValueIsRefusedWithItsPlace) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"port = 1\n", "f.toml:1:1: \"port\" is outside a table"},
      {"[[server]]\nport = 1\n", "f.toml:1:3: [[server]]: one table per command"},
      {"[quota.ana.x]\ncert = \"x\"\n",
       "f.toml:1:1: [quota.ana] x: a table is not a value here (tables nest no deeper than "
       "[quota.ana])"},
      {"[server]\nat = 1979-05-27\n", "f.toml:2:6: [server] at: dates and times are not used"},
      {"[worker]\nlabel = [\"a=b\", {x = 1}]\n",
       "f.toml:2:17: [worker] label: an array of strings, numbers or booleans"},
      {"[worker]\nuser_map = { ana = { x = 1 } }\n",
       "f.toml:2:20: [worker] user_map.ana: an inline table of strings"},
      {"[server\nport = 1\n", "f.toml:1:8: "},
      {std::string("[server]\nport = 1\0", 18), "f.toml:2:9: NUL byte (a config file is text)"},
      {std::string(kMaxConfigBytes + 1, '#'), "f.toml: the file is 1048577 bytes"},
  };
  for (const auto& [text, want] : cases) {
    Result<std::vector<ConfigSection>> parsed = ParseConfigToml(text, "f.toml");
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(parsed.status().message().substr(0, want.size()), want)
        << text.substr(0, 60) << " -> " << parsed.status().message();
  }
}

// [quota.ana] and [fairshare.shares]: tables of a table, each its own
// section after its parent's keys, named by parent and key.
TEST(ConfigFileTest, ATableOfATableIsASectionOfItsOwn) {
  Result<std::vector<ConfigSection>> parsed = ParseConfigToml(
      "[quota.\"*\"]\ngpus = 4\n[quota.ana]\ngpus = 2\nmem = \"64GiB\"\n"
      "[fairshare]\nhalf_life = \"1d\"\n[fairshare.shares]\nana = 2\n",
      "f.toml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  std::vector<std::string> names;
  for (const ConfigSection& s : *parsed) {
    names.push_back(s.name + "/" + s.sub + ":" + std::to_string(s.line) + ":" +
                    std::to_string(s.entries.size()));
  }
  EXPECT_EQ(names, (std::vector<std::string>{"fairshare/:6:1", "fairshare/shares:8:1", "quota/:1:0",
                                             "quota/*:1:1", "quota/ana:3:2"}));
}

}  // namespace
}  // namespace drover::proto
