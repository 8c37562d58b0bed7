// Choosing what moves on the data plane, with real processes: a
// dependent's `inputs` select which outputs of its dependencies it fetches
// (only those cross the network), a file named there that was never written
// fails the dependent with a reason, and `max_output` (the task's, else the
// server's --max-output, and the worker's own --max-output when lower)
// fails a task whose outputs are larger, naming whose limit it was.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include "cluster.h"
#include "file_service.h"

namespace drover::testing {
namespace {

constexpr char kSelect[] = R"toml(name = "select"

[[task]]
id = "prep"
resources = { labels = { node = "a" } }
command = """
printf small > "$DROVER_OUTPUT_DIR/a.txt"
head -c 8388608 /dev/zero > "$DROVER_OUTPUT_DIR/big.bin"
"""

[[task]]
id = "use"
depends_on = ["prep"]
inputs = ["prep:a.txt"]
resources = { labels = { node = "b" } }
command = 'cd "$DROVER_INPUTS" && find . -type f | sort | tr "\n" " " > "$DROVER_RESULT"'

[[task]]
id = "missing"
depends_on = ["prep"]
inputs = ["prep:*.txt", "prep:c.txt"]
retries = 3
resources = { labels = { node = "b" } }
command = "true"
)toml";

TEST(DataSelectTest, ADependentFetchesOnlyTheOutputsItsInputsSelect) {
  Cluster c;
  c.StartServer();
  Process& a = c.StartWorker("a", {"--label", "node=a"});
  const uint16_t a_port = FilesPort(a);
  ASSERT_NE(a_port, 0) << a.output();
  c.StartWorker("b", {"--label", "node=b"});
  RunResult run = c.Drover({"run", c.WriteFile("select.toml", kSelect)});
  EXPECT_NE(run.status, 0) << "missing fails: " << run.output;
  const std::string j = std::to_string(RunJobId(run.output));
  ASSERT_NE(j, "0") << run.output;

  nlohmann::json use = c.Get("/api/v1/tasks/" + j + ".1");
  EXPECT_EQ(use["state"], "succeeded") << use.dump(2);
  EXPECT_EQ(use["outcome"]["result"], "./" + j + ".0/a.txt ") << use.dump(2);
  nlohmann::json missing = c.Get("/api/v1/tasks/" + j + ".2");
  EXPECT_EQ(missing["state"], "failed") << missing.dump(2);
  EXPECT_EQ(missing["reason"], "input \"prep:c.txt\": prep (" + j +
                                   ".0) wrote no such output (it wrote: a.txt, big.bin)")
      << missing.dump(2);
  EXPECT_EQ(missing["attempt"], 0) << "it never ran: no retry could help";

  // Only a.txt crossed from a to b; the 8 MiB file stayed where it was.
  nlohmann::json stats = FilesStats(c, "a", a_port);
  EXPECT_EQ(stats["served_files"], 1) << stats.dump();
  EXPECT_EQ(stats["served_bytes"], 5) << stats.dump();
}

// A task that writes `kib` KiB of outputs, with the given max_output
// (empty: none).
nlohmann::json Writer(const std::string& id, uint64_t kib, const std::string& max_output) {
  nlohmann::json t = {{"id", id},
                      {"command", "head -c " + std::to_string(kib * 1024) +
                                      " /dev/zero > \"$DROVER_OUTPUT_DIR/out.bin\""}};
  if (!max_output.empty()) t["max_output"] = max_output;
  return t;
}

TEST(DataSelectTest, MaxOutputOfTheTaskTheServerOrTheWorkerFailsItNamingWhose) {
  Cluster c({"--max-output", "1MiB"});
  c.StartServer();
  c.StartWorker("a", {"--max-output", "4MiB"});
  const nlohmann::json spec = {
      {"name", "caps"},
      {"task",
       {Writer("server", 2048, ""),      // over the server's default 1 MiB
        Writer("task", 600, "512KiB"),   // over its own 512 KiB
        Writer("worker", 5120, "8MiB"),  // over the worker's 4 MiB
        Writer("raised", 2048, "3MiB"),  // its own 3 MiB, above the server's
        Writer("within", 512, "")}}};    // under every limit
  Result<nlohmann::json> posted = c.Api().Post("/api/v1/jobs", spec.dump());
  ASSERT_TRUE(posted.ok()) << posted.status().ToString();
  const std::string j = std::to_string((*posted)["id"].get<uint64_t>());
  RunResult wait = c.Drover({"wait", j});
  EXPECT_NE(wait.status, 0) << wait.output;

  const std::string prefix = "outputs refused: outputs are ";
  const std::vector<std::pair<std::string, std::string>> want = {
      {"failed", prefix + "2 MiB, more than max_output 1 MiB (the server's --max-output)"},
      {"failed", prefix + "600 KiB, more than max_output 512 KiB (the task's)"},
      {"failed", prefix + "5 MiB, more than max_output 4 MiB (worker --max-output)"},
      {"succeeded", ""},
      {"succeeded", ""}};
  for (size_t i = 0; i < want.size(); ++i) {
    nlohmann::json t = c.Get("/api/v1/tasks/" + j + "." + std::to_string(i));
    EXPECT_EQ(t["state"], want[i].first) << t.dump(2);
    EXPECT_EQ(t.value("reason", ""), want[i].second) << t.dump(2);
  }
}

// A job submitted --after a task receives that task's outputs like a
// dependency of its own job, and is placed on the worker that holds them:
// the producer runs on b, the second worker, which spread alone ranks
// after a when both are idle.
TEST(DataSelectTest, AJobAfterATaskGetsItsFilesAndRunsWhereTheyAre) {
  Cluster c;
  c.StartServer();
  c.StartWorker("a", {"--label", "node=a"});
  c.StartWorker("b", {"--label", "node=b"});
  RunResult prep = c.Drover({"submit", "--label", "node=b", "--wait", "--", "sh", "-c",
                             "head -c 2097152 /dev/urandom > \"$DROVER_OUTPUT_DIR/model.bin\""});
  ASSERT_EQ(prep.status, 0) << prep.output;
  const std::string p = std::to_string(std::stoull(prep.output)) + ".0";
  RunResult use = c.Drover({"submit", "--after", p, "--wait", "--", "sh", "-c",
                            "sha256sum \"$DROVER_INPUTS/" + p +
                                "/model.bin\" | cut -c1-64 | tr -d '\\n' > \"$DROVER_RESULT\""});
  ASSERT_EQ(use.status, 0) << use.output;
  const std::string u = std::to_string(std::stoull(use.output)) + ".0";
  nlohmann::json producer = c.Get("/api/v1/tasks/" + p);
  nlohmann::json consumer = c.Get("/api/v1/tasks/" + u);
  ASSERT_EQ(producer["outcome"]["outputs"].size(), 1u) << producer.dump(2);
  EXPECT_EQ(consumer["outcome"]["result"], producer["outcome"]["outputs"][0]["sha256"])
      << consumer.dump(2);
  EXPECT_EQ(consumer["worker"], producer["worker"]) << "placed where model.bin is";
}

}  // namespace
}  // namespace drover::testing
