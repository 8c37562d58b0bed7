// main.cc builds only the command group its first argument names: every
// command must still be found, with its own help, and `drover --help`
// must still list them all.
#include <gtest/gtest.h>

#include "cluster.h"

namespace drover::testing {
namespace {

const std::vector<std::string> kCommands = {"server", "worker", "up",   "submit", "run",
                                            "status", "workers", "logs", "cancel", "wait",
                                            "drain",  "report",  "sim"};

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
  // An unknown command is a usage error, as before.
  RunResult unknown = c.Drover({"sbumit"});
  EXPECT_EQ(unknown.status, 2) << unknown.output;
  EXPECT_NE(unknown.output.find("see drover --help"), std::string::npos) << unknown.output;
}

}  // namespace
}  // namespace drover::testing
