// A config file's table as a command's flags: each key to its flag, the
// command line winning, and every mismatch of kind refused with its place.
#include "cli/config_file.h"

#include <gtest/gtest.h>

#include "cli/cli11.h"

namespace drover::cli {
namespace {

// A command with a value flag, a switch and a repeatable flag.
struct Command {
  CLI::App app{"drover", "drover"};
  CLI::App* cmd = app.add_subcommand("worker", "");
  std::string heartbeat;
  bool no_tls = false;
  std::vector<std::string> labels;
  Command() {
    cmd->add_option("--heartbeat-interval,-i", heartbeat, "");
    cmd->add_flag("--no-tls", no_tls, "");
    cmd->add_option("--label", labels, "");
  }
};

proto::ConfigSection Section(std::vector<proto::ConfigEntry> entries) {
  proto::ConfigSection s;
  s.name = "worker";
  s.line = 1;
  s.entries = std::move(entries);
  return s;
}

proto::ConfigEntry Entry(std::string key, proto::ConfigEntry::Kind kind,
                         std::vector<std::string> values, uint32_t line) {
  proto::ConfigEntry e;
  e.key = std::move(key);
  e.kind = kind;
  e.values = std::move(values);
  e.line = line;
  e.column = 1;
  return e;
}

using Kind = proto::ConfigEntry::Kind;

TEST(ConfigFlagsTest, KeysBecomeTheirFlagsAndTheCommandLineWins) {
  Command c;
  proto::ConfigSection section = Section({Entry("heartbeat_interval", Kind::kString, {"2s"}, 2),
                                          Entry("no-tls", Kind::kBool, {"true"}, 3),
                                          Entry("label", Kind::kArray, {"a=1", "b=2"}, 4)});
  Result<ConfigFlags> flags = FlagsFromSection(*c.cmd, section, "w.toml", {});
  ASSERT_TRUE(flags.ok()) << flags.status().ToString();
  EXPECT_EQ(flags->args, (std::vector<std::string>{"--heartbeat-interval=2s", "--no-tls",
                                                   "--label=a=1", "--label=b=2"}));
  EXPECT_EQ(flags->origins.at("--label"), "w.toml:4:1");

  // Given on the command line (by any of its names): the file's is left out.
  flags = FlagsFromSection(*c.cmd, section, "w.toml", {"-i", "5s", "--label=x=y"});
  ASSERT_TRUE(flags.ok());
  EXPECT_EQ(flags->args, std::vector<std::string>{"--no-tls"});
  // A false switch adds nothing; after "--" nothing is a flag.
  flags = FlagsFromSection(*c.cmd,
                           Section({Entry("no_tls", Kind::kBool, {"false"}, 2),
                                    Entry("label", Kind::kString, {"z=1"}, 3)}),
                           "w.toml", {"--", "--label=q"});
  ASSERT_TRUE(flags.ok());
  EXPECT_EQ(flags->args, std::vector<std::string>{"--label=z=1"});
}

TEST(ConfigFlagsTest, AKeyOfTheWrongKindOrNoFlagIsRefusedWithItsPlace) {
  Command c;
  const std::vector<std::pair<proto::ConfigEntry, std::string>> cases = {
      {Entry("heartbeat", Kind::kString, {"2s"}, 5),
       "w.toml:5:1: [worker] heartbeat: unknown key: drover worker has no --heartbeat flag"},
      {Entry("help", Kind::kBool, {"true"}, 5), "w.toml:5:1: [worker] help: unknown key"},
      {Entry("config", Kind::kString, {"x"}, 5), "w.toml:5:1: [worker] config: unknown key"},
      {Entry("no_tls", Kind::kString, {"yes"}, 6),
       "w.toml:6:1: [worker] no_tls: --no-tls is a switch: write true or false"},
      {Entry("heartbeat_interval", Kind::kBool, {"true"}, 7),
       "w.toml:7:1: [worker] heartbeat_interval: --heartbeat-interval takes a value"},
      {Entry("heartbeat_interval", Kind::kArray, {"1s", "2s"}, 8),
       "w.toml:8:1: [worker] heartbeat_interval: --heartbeat-interval takes one value"},
  };
  for (const auto& [entry, want] : cases) {
    Result<ConfigFlags> flags = FlagsFromSection(*c.cmd, Section({entry}), "w.toml", {});
    ASSERT_FALSE(flags.ok()) << entry.key;
    EXPECT_EQ(flags.status().message().substr(0, want.size()), want) << flags.status().message();
  }
}

TEST(ConfigFlagsTest, AMessageAboutAFlagFromTheFileNamesItsPlace) {
  SetFlagOrigins({{"--cpus", "w.toml:3:1"}});
  EXPECT_EQ(WithFlagOrigin("--cpus: not a list"), "w.toml:3:1: --cpus: not a list");
  EXPECT_EQ(WithFlagOrigin("--cpus-max: other"), "--cpus-max: other");
  EXPECT_EQ(WithFlagOrigin("--mem: bad"), "--mem: bad");
  SetFlagOrigins({});
  EXPECT_EQ(WithFlagOrigin("--cpus: not a list"), "--cpus: not a list");
}

TEST(ConfigFlagsTest, TheConfigPathComesFromEitherSpellingBeforeADoubleDash) {
  EXPECT_EQ(*ConfigPathIn({"--port", "1", "--config", "a.toml"}).value(), "a.toml");
  EXPECT_EQ(*ConfigPathIn({"--config=b.toml"}).value(), "b.toml");
  EXPECT_FALSE(ConfigPathIn({"--", "--config", "c.toml"}).value().has_value());
  EXPECT_FALSE(ConfigPathIn({}).value().has_value());
  EXPECT_FALSE(ConfigPathIn({"--config"}).ok());
}

// The server's user policy has tables of its own beside [server] and
// [worker]; a table inside those two, or a table nobody reads, is refused.
TEST(ConfigFlagsTest, PolicyTablesAreKnownAndOnlyThey) {
  auto section = [](std::string name, std::string sub) {
    proto::ConfigSection s;
    s.name = std::move(name);
    s.sub = std::move(sub);
    s.line = 4;
    s.column = 8;
    return s;
  };
  EXPECT_TRUE(CheckTableName(section("quota", "ana"), "f.toml").ok());
  EXPECT_TRUE(CheckTableName(section("group", "vision"), "f.toml").ok());
  EXPECT_TRUE(CheckTableName(section("fairshare", ""), "f.toml").ok());
  EXPECT_TRUE(CheckTableName(section("server", ""), "f.toml").ok());
  EXPECT_EQ(CheckTableName(section("server", "tls"), "f.toml").message(),
            "f.toml:4:8: [server] tls: a table is not a value here (tables nest no deeper than "
            "[server])");
  EXPECT_EQ(CheckTableName(section("quotas", ""), "f.toml").message().substr(0, 33),
            "f.toml:4: unknown table [quotas]:");
}

}  // namespace
}  // namespace drover::cli
