// main.cc builds only the command its first argument names (none for a
// lone --version): every command must still be found, with its own help
// and its own options, and `drover --help` must still list them all.
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <regex>

#include "cluster.h"

namespace drover::testing {
namespace {

const std::vector<std::string> kCommands = {"server", "worker",  "up",   "submit", "run",
                                            "status", "workers", "logs", "cancel", "wait",
                                            "drain",  "report",  "sim",  "get",
                                            "retry",  "quota",   "user", "whoami", "audit",
                                            "call"};

TEST(CliHelpTest, EveryCommandHasItsHelpAndTheRootListsThemAll) {
  Cluster c;
  RunResult root = c.Drover({"--help"});
  ASSERT_EQ(root.status, 0) << root.output;
  for (const std::string& name : kCommands) {
    EXPECT_NE(root.output.find("\n  " + name + " "), std::string::npos) << name << "\n"
                                                                        << root.output;
    RunResult help = c.Drover({name, "--help"});
    EXPECT_EQ(help.status, 0) << name << "\n" << help.output;
    EXPECT_NE(help.output.find("Usage: drover " + name), std::string::npos)
        << name << "\n" << help.output;
  }
  // An unknown command is a usage error naming it, with --help too (which
  // printed the general help and exited 0), and the nearest name.
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"sbumit"}, {"sbumit", "--help"}, {"sbumit", "-h", "--", "true"}}) {
    RunResult unknown = c.Drover(args);
    EXPECT_EQ(unknown.status, 2) << unknown.output;
    EXPECT_NE(unknown.output.find("drover: \"sbumit\" is not a command of drover; did you mean "
                                  "\"submit\"? (see drover --help)"),
              std::string::npos)
        << unknown.output;
    EXPECT_EQ(unknown.output.find("Usage:"), std::string::npos) << unknown.output;
  }
  RunResult far = c.Drover({"NOSUCHCOMMAND", "--help"});
  EXPECT_EQ(far.status, 2) << far.output;
  EXPECT_NE(far.output.find("drover: \"NOSUCHCOMMAND\" is not a command of drover (see drover "
                            "--help)"),
            std::string::npos)
      << far.output;
  // The same one level down: `drover user ad --help`.
  RunResult nested = c.Drover({"user", "ad", "--help"});
  EXPECT_EQ(nested.status, 2) << nested.output;
  EXPECT_NE(nested.output.find("drover: \"ad\" is not a command of drover user; did you mean "
                               "\"add\"? (see drover user --help)"),
            std::string::npos)
      << nested.output;
  EXPECT_EQ(c.Drover({"user", "add", "--help"}).status, 0);
  EXPECT_EQ(c.Drover({"user", "--help"}).status, 0);
}

// A server that stopped leaves its access file behind: a command that
// reads it and is refused says where the address came from and what to do.
TEST(CliHelpTest, ARefusedConnectionNamesTheAccessFileItsAddressCameFrom) {
  Cluster c;
  c.StartServer();
  c.KillServer(SIGKILL);
  RunResult r = c.Drover({"status"});
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("Connection refused (the address is from " + c.access_file() +
                          ": is its server still running? Start one with `drover up`"),
            std::string::npos)
      << r.output;
}

// With no server (and so no access file), a command whose flags parse
// fails at run time (1) on the access file; one given another command's
// flag is a usage error (2), as when every command was built.
TEST(CliHelpTest, EachCommandParsesItsOwnFlagsAndNoOtherCommandsFlags) {
  Cluster c;
  const std::vector<std::vector<std::string>> parse = {
      {"submit", "--cpus", "2", "--env", "A=1", "--wait", "--", "/bin/true"},
      {"status", "--json", "--state", "active", "--limit", "5"},
      {"workers", "--json"},
      {"logs", "--stderr", "-f", "12.3"},
      {"cancel", "--json", "12"},
      {"wait", "-q", "12"},
      {"drain", "--undo", "3"},
      {"report", "--html", c.dir() + "/report.html", "12"},
  };
  for (const std::vector<std::string>& args : parse) {
    RunResult r = c.Drover(args);
    EXPECT_EQ(r.status, 1) << args[0] << "\n" << r.output;
    EXPECT_NE(r.output.find("no access file"), std::string::npos) << args[0] << "\n" << r.output;
  }
  RunResult run = c.Drover({"run", "--plain", c.dir() + "/missing.toml"});
  EXPECT_EQ(run.status, 2) << run.output;
  EXPECT_NE(run.output.find("cannot open the job file"), std::string::npos) << run.output;

  const std::vector<std::vector<std::string>> refuse = {
      {"submit", "--plain", "--", "/bin/true"},  // run's
      {"workers", "--state", "active"},          // status's
      {"cancel", "-q", "12"},                    // wait's
      {"wait", "--undo", "12"},                  // drain's
      {"status", "--follow"},                    // logs'
  };
  for (const std::vector<std::string>& args : refuse) {
    RunResult r = c.Drover(args);
    EXPECT_EQ(r.status, 2) << args[0] << "\n" << r.output;
    EXPECT_NE(r.output.find("not expected"), std::string::npos) << args[0] << "\n" << r.output;
    EXPECT_NE(r.output.find("see drover --help"), std::string::npos) << args[0] << "\n"
                                                                     << r.output;
  }
}

// An unknown flag is named in the error, not the argument CLI11 could not
// place after it.
TEST(CliHelpTest, AnUnknownFlagIsNamed) {
  Cluster c;
  RunResult r = c.Drover({"submit", "--labl", "os=linux", "--", "true"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("the flag --labl is not expected by drover submit"), std::string::npos)
      << r.output;
  r = c.Drover({"submit", "--priority", "-1", "--nme=x", "--", "true"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("the flag --nme is not expected"), std::string::npos) << r.output;
  // A subcommand's own flags count as known: a bad value of one is said as
  // such, and an unknown flag is named with the whole command.
  r = c.Drover({"user", "add", "ana", "--role", "superuser"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--role: superuser not in {admin,user,viewer,worker}"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("not expected"), std::string::npos) << r.output;
  r = c.Drover({"user", "add", "ana", "--rol", "user"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("the flag --rol is not expected by drover user add"), std::string::npos)
      << r.output;
}

TEST(CliHelpTest, VersionAloneAndAfterACommand) {
  Cluster c;
  RunResult version = c.Drover({"--version"});
  EXPECT_EQ(version.status, 0) << version.output;
  EXPECT_TRUE(std::regex_match(version.output, std::regex("[0-9]+\\.[0-9]+\\.[0-9]+\n")))
      << version.output;
  // After a command it is that command's unknown flag, before one the
  // root's, as when every command was built.
  RunResult after = c.Drover({"status", "--version"});
  EXPECT_EQ(after.status, 2) << after.output;
  RunResult before = c.Drover({"--version", "status"});
  EXPECT_EQ(before.status, 0) << before.output;
  EXPECT_EQ(before.output, version.output);
}

// `drover sim` is wired to the simulator: it generates a trace and
// replays it (the wiring lives in src/cli/cmd_sim.cc, not in src/sim).
TEST(CliHelpTest, SimGeneratesATraceAndReplaysIt) {
  Cluster c;
  const std::string trace = c.dir() + "/cli.jsonl";
  RunResult gen = c.Drover({"sim", "--generate", trace, "--seed", "3", "--tasks", "60", "--gpus",
                            "4", "--load", "1.3"});
  ASSERT_EQ(gen.status, 0) << gen.output;
  std::ifstream in(trace);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) ++lines;
  EXPECT_EQ(lines, 60);
  const std::string cluster = c.dir() + "/cluster.json";
  std::ofstream(cluster) << R"({"workers": [{"name": "gpu", "count": 1, "cpus": 32, "mem": "256GiB", "gpus": 4}]})";
  RunResult replay = c.Drover({"sim", trace, "--cluster", cluster, "--json"});
  EXPECT_EQ(replay.status, 0) << replay.output;
  EXPECT_NE(replay.output.find("makespan"), std::string::npos) << replay.output;
}

}  // namespace
}  // namespace drover::testing
