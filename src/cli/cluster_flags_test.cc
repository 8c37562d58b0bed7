// The server's flags, from the command line or its config file's [server]
// table, as the scheduler's config (cluster_flags.h).
#include "cli/cluster_flags.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cli/cli11.h"
#include "cli/config_file.h"

namespace drover::cli {
namespace {

// `drover server` with its flags, parsed from `args`.
struct ServerCommand {
  CLI::App app{"drover", "drover"};
  CLI::App* cmd = app.add_subcommand("server", "");
  ServerFlags flags;
  ServerCommand() {
    AddServerFlags(*cmd, flags, /*with_bind=*/true);
    flags.state_dir = "/var/lib/drover-test";
    flags.access_file = "-";
  }
  Result<server::ServerConfig> Parse(const std::vector<std::string>& args) {
    std::string line = "server";
    for (const std::string& a : args) line += " " + a;
    app.parse(line, /*program_name_included=*/false);
    return MakeServerConfig(flags);
  }
};

// Batch frames: on for `drover server` and `drover up` unless turned off.
TEST(ServerFlagsTest, WorkerBatchesAreOnByDefault) {
  for (const auto& [up, args, want] : std::vector<std::tuple<bool, std::vector<std::string>, bool>>{
           {false, {}, true},
           {false, {"--no-worker-batches"}, false},
           {false, {"--worker-batches"}, true},
           {true, {}, true},
           {true, {"--no-worker-batches"}, false}}) {
    ServerCommand c;
    if (up) {
      c.flags = UpServerFlags();
      c.flags.state_dir = "/var/lib/drover-test";
      c.flags.access_file = "-";
    }
    Result<server::ServerConfig> config = c.Parse(args);
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    EXPECT_EQ(config->worker_batches, want) << (up ? "up " : "server ") << args.size();
  }
  EXPECT_EQ(UpServerFlags().bind, "127.0.0.1");
}

// Binary frames with workers unless --worker-json.
TEST(ServerFlagsTest, WorkerJsonKeepsTheWorkerChannelInJson) {
  for (const auto& [args, want] : std::vector<std::pair<std::vector<std::string>, bool>>{
           {{}, false}, {{"--worker-json"}, true}}) {
    ServerCommand c;
    Result<server::ServerConfig> config = c.Parse(args);
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    EXPECT_EQ(config->worker_json, want) << args.size();
  }
}

TEST(ServerFlagsTest, PreemptionIsOffUntilAPriorityIsGiven) {
  ServerCommand c;
  Result<server::ServerConfig> config = c.Parse({});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_FALSE(config->scheduler.preempt_priority.has_value());
  EXPECT_EQ(config->scheduler.preempt_gap, 10);
  EXPECT_EQ(config->scheduler.max_preemptions, 3u);
  EXPECT_EQ(config->scheduler.preempt_cooldown, Seconds(600));
}

TEST(ServerFlagsTest, PreemptionFlagsSetTheSchedulersConfig) {
  ServerCommand c;
  Result<server::ServerConfig> config =
      c.Parse({"--preempt-priority", "-5", "--preempt-gap", "20", "--max-preemptions", "2",
               "--preempt-cooldown", "1h30m"});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->scheduler.preempt_priority, -5);
  EXPECT_EQ(config->scheduler.preempt_gap, 20);
  EXPECT_EQ(config->scheduler.max_preemptions, 2u);
  EXPECT_EQ(config->scheduler.preempt_cooldown, Seconds(5400));
}

TEST(ServerFlagsTest, PreemptionFlagsAreConfigKeysToo) {
  ServerCommand c;
  proto::ConfigSection section;
  section.name = "server";
  section.line = 1;
  uint32_t line = 1;
  for (const auto& [key, kind, value] :
       std::vector<std::tuple<std::string, proto::ConfigEntry::Kind, std::string>>{
           {"preempt_priority", proto::ConfigEntry::Kind::kNumber, "90"},
           {"preempt-gap", proto::ConfigEntry::Kind::kNumber, "5"},
           {"max_preemptions", proto::ConfigEntry::Kind::kNumber, "4"},
           {"preempt_cooldown", proto::ConfigEntry::Kind::kString, "0"}}) {
    proto::ConfigEntry e;
    e.key = key;
    e.kind = kind;
    e.values = {value};
    e.line = ++line;
    e.column = 1;
    section.entries.push_back(e);
  }
  Result<ConfigFlags> flags = FlagsFromSection(*c.cmd, section, "s.toml", {});
  ASSERT_TRUE(flags.ok()) << flags.status().ToString();
  EXPECT_EQ(flags->args, (std::vector<std::string>{"--preempt-priority=90", "--preempt-gap=5",
                                                   "--max-preemptions=4", "--preempt-cooldown=0"}));
  Result<server::ServerConfig> config = c.Parse(flags->args);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->scheduler.preempt_priority, 90);
  EXPECT_EQ(config->scheduler.preempt_gap, 5);
  EXPECT_EQ(config->scheduler.max_preemptions, 4u);
  EXPECT_EQ(config->scheduler.preempt_cooldown, Duration::zero());
}

TEST(ServerFlagsTest, BadPreemptionFlagsAreRefusedByName) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--preempt-priority", "high"}, "--preempt-priority: \"high\" is not a whole number"},
      {{"--preempt-gap", "0"}, "--preempt-gap: must be at least 1"},
      {{"--max-preemptions", "0"}, "--max-preemptions: must be at least 1"},
      {{"--preempt-cooldown", "soon"}, "--preempt-cooldown"},
  };
  for (const auto& [args, message] : cases) {
    ServerCommand c;
    Result<server::ServerConfig> config = c.Parse(args);
    ASSERT_FALSE(config.ok()) << args[0];
    EXPECT_NE(config.status().message().find(message), std::string::npos)
        << config.status().ToString();
  }
}

TEST(ServerFlagsTest, KeepOutputsIsADayByDefaultZeroOrADuration) {
  ServerCommand c;
  Result<server::ServerConfig> config = c.Parse({});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->keep_outputs, Seconds(24 * 3600));
  ServerCommand hours;
  config = hours.Parse({"--keep-outputs", "6h"});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->keep_outputs, Seconds(6 * 3600));
  ServerCommand zero;
  config = zero.Parse({"--keep-outputs", "0"});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->keep_outputs, Duration::zero());
  ServerCommand bad;
  config = bad.Parse({"--keep-outputs", "soon"});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message().rfind("--keep-outputs: ", 0), 0u)
      << config.status().ToString();
}

TEST(ServerFlagsTest, QuarantineThresholdsAreSettingsWithDefaults) {
  ServerCommand defaults;
  Result<server::ServerConfig> config = defaults.Parse({});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_TRUE(config->scheduler.quarantine.enabled);
  EXPECT_EQ(config->scheduler.quarantine.min_failures, 5u);
  EXPECT_EQ(config->scheduler.quarantine.short_attempt, Seconds(30));
  EXPECT_EQ(config->scheduler.quarantine.cooldown, Seconds(600));
  ServerCommand set;
  config = set.Parse({"--quarantine-after", "3", "--quarantine-quick", "2m", "--quarantine-for",
                      "1h", "--no-quarantine"});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_FALSE(config->scheduler.quarantine.enabled);
  EXPECT_EQ(config->scheduler.quarantine.min_failures, 3u);
  EXPECT_EQ(config->scheduler.quarantine.short_attempt, Seconds(120));
  EXPECT_EQ(config->scheduler.quarantine.cooldown, Seconds(3600));
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--quarantine-after", "0"}, "--quarantine-after: must be at least 1"},
      {{"--quarantine-quick", "0"}, "--quarantine-quick: must be positive"},
      {{"--quarantine-for", "soon"}, "--quarantine-for"},
  };
  for (const auto& [args, message] : bad) {
    ServerCommand c;
    Result<server::ServerConfig> refused = c.Parse(args);
    ASSERT_FALSE(refused.ok()) << args[0];
    EXPECT_NE(refused.status().message().find(message), std::string::npos)
        << refused.status().ToString();
  }
}

}  // namespace
}  // namespace drover::cli
