// Input selection: the selectors of `inputs`, which outputs they
// pick, and what the scheduler does with them: only those files in the
// assignment and in the start bound, and a dependent that fails at once
// when a file it names was never written.
#include "core/input_select.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/scheduler.h"
#include "core/testing/test_cluster.h"

namespace drover::core {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::JobBuilder;
using testing::T;
using testing::TaskBuilder;
using testing::TestCluster;
using testing::WorkerBuilder;

const std::string kSha(64, 'a');

OutputFile File(std::string name, uint64_t size = 1) { return OutputFile{name, size, kSha}; }

std::vector<std::string> Names(const std::vector<OutputFile>& files) {
  std::vector<std::string> names;
  for (const OutputFile& f : files) names.push_back(f.name);
  return names;
}

TaskGroupSpec Consumer(std::optional<std::vector<std::string>> inputs,
                       std::vector<std::string> depends_on = {"prep", "other"}) {
  TaskGroupSpec g;
  g.name = "train";
  g.command = {"run"};
  g.depends_on = std::move(depends_on);
  g.inputs = std::move(inputs);
  return g;
}

TEST(InputSelectorTest, AGroupAFileOrAGlob) {
  const std::vector<std::string> deps = {"prep", "a:b"};
  EXPECT_EQ(*ParseInputSelector("prep", deps), (InputSelector{"prep", "", false}));
  EXPECT_EQ(*ParseInputSelector("prep:train.csv", deps),
            (InputSelector{"prep", "train.csv", false}));
  EXPECT_EQ(*ParseInputSelector("prep:d/*.csv", deps), (InputSelector{"prep", "d/*.csv", true}));
  EXPECT_EQ(*ParseInputSelector("prep:a:b", deps), (InputSelector{"prep", "a:b", false}));
  // A group whose name holds ':' is selected whole by its name.
  EXPECT_EQ(*ParseInputSelector("a:b", deps), (InputSelector{"a:b", "", false}));
}

TEST(InputSelectorTest, MistakesSayWhatIsWrong) {
  const std::vector<std::string> deps = {"prep", "fit"};
  auto error = [&](std::string_view text) {
    Result<InputSelector> sel = ParseInputSelector(text, deps);
    EXPECT_FALSE(sel.ok()) << text;
    return sel.ok() ? std::string() : sel.status().message();
  };
  EXPECT_EQ(error(""), "the selector is empty");
  EXPECT_EQ(error("prepp:x"),
            "\"prepp\" is not a task this one depends on (depends_on: prep, fit)");
  EXPECT_EQ(error("prepp"), "\"prepp\" is not a task this one depends on (depends_on: prep, fit)");
  EXPECT_EQ(error("prep:"), "the file name after ':' is empty");
  EXPECT_EQ(error("prep:../x"), "the file name has a \"..\" path part");
  EXPECT_EQ(error("prep:/etc/passwd"), "the file name is an absolute path");
  EXPECT_EQ(error("prep:a\nb"), "the file name holds a control character");
  EXPECT_EQ(ParseInputSelector("x", {}).status().message(),
            "\"x\" is not a task this one depends on (it has no depends_on)");
}

TEST(InputSelectorTest, CheckInputsNamesTheTaskAndTheSelector) {
  EXPECT_TRUE(CheckInputs(Consumer(std::nullopt)).ok());
  EXPECT_TRUE(CheckInputs(Consumer(std::vector<std::string>{})).ok());
  EXPECT_TRUE(CheckInputs(Consumer(std::vector<std::string>{"prep:a", "other"})).ok());
  Status bad = CheckInputs(Consumer(std::vector<std::string>{"prep:a", "prep:../a"}));
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(),
            "task \"train\": inputs \"prep:../a\": the file name has a \"..\" path part");
}

TEST(InputSelectorTest, WithoutInputsEverythingWithAnEmptyListNothing) {
  const std::vector<OutputFile> files = {File("a.csv"), File("b.txt")};
  EXPECT_EQ(SelectOutputs(Consumer(std::nullopt), "prep", files), files);
  EXPECT_THAT(SelectOutputs(Consumer(std::vector<std::string>{}), "prep", files), IsEmpty());
}

TEST(InputSelectorTest, SelectorsPickFromTheirOwnGroupOnly) {
  const std::vector<OutputFile> files = {File("a.csv", 10), File("b.csv", 20), File("d/c.csv", 40),
                                         File("notes.txt", 80)};
  const TaskGroupSpec g = Consumer(std::vector<std::string>{"prep:*.csv", "other:notes.txt"});
  EXPECT_THAT(Names(SelectOutputs(g, "prep", files)), ElementsAre("a.csv", "b.csv"))
      << "'*' does not cross a '/' (FNM_PATHNAME)";
  EXPECT_THAT(Names(SelectOutputs(g, "other", files)), ElementsAre("notes.txt"));
  EXPECT_EQ(SelectedBytes(g, "prep", files), 30u);
  EXPECT_EQ(SelectedBytes(g, "other", files), 80u);
  EXPECT_EQ(SelectedBytes(Consumer(std::nullopt), "prep", files), 150u);
  const TaskGroupSpec whole = Consumer(std::vector<std::string>{"prep", "prep:a.csv", "prep:*/*"});
  EXPECT_EQ(SelectOutputs(whole, "prep", files), files);
  EXPECT_THAT(SelectOutputs(whole, "other", files), IsEmpty());
  EXPECT_THAT(Names(SelectOutputs(Consumer(std::vector<std::string>{"prep:*/*"}), "prep", files)),
              ElementsAre("d/c.csv"));
}

TEST(InputSelectorTest, AFileNamedWithoutAGlobMustBeThere) {
  const std::vector<OutputFile> files = {File("a.csv"), File("b.csv")};
  const TaskGroupSpec g =
      Consumer(std::vector<std::string>{"prep:a.csv", "prep:*.json", "prep:train.csv"});
  EXPECT_EQ(MissingInput(g, "prep", "prep[0] (1.0)", files),
            "input \"prep:train.csv\": prep[0] (1.0) wrote no such output (it wrote: a.csv, "
            "b.csv)");
  EXPECT_EQ(MissingInput(g, "prep", "prep (1.0)", {}),
            "input \"prep:a.csv\": prep (1.0) wrote no such output (it wrote none)");
  EXPECT_EQ(MissingInput(g, "other", "other (1.1)", {}), "") << "nothing named from other";
  EXPECT_EQ(MissingInput(Consumer(std::nullopt), "prep", "prep (1.0)", {}), "");
  std::vector<OutputFile> many;
  for (int i = 0; i < 12; ++i) many.push_back(File("f" + std::to_string(i)));
  EXPECT_THAT(MissingInput(g, "prep", "prep (1.0)", many),
              HasSubstr("(it wrote: f0, f1, f2, f3, f4, f5, f6, f7, f8, f9 and 2 more)"));
}

// --- in the scheduler ----------------------------------------------------------

const AssignTask* AssignOf(const std::vector<Command>& out, TaskId task) {
  for (const Command& cmd : out) {
    if (const auto* a = std::get_if<AssignTask>(&cmd); a != nullptr && a->task == task) return a;
  }
  return nullptr;
}

TEST(InputSelectTest, TheAssignmentCarriesOnlyTheSelectedFilesAndEveryResult) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(4));
  c.Submit(
      JobBuilder()
          .Add(TaskBuilder("prep"))
          .Add(TaskBuilder("other"))
          .Add(TaskBuilder("use").DependsOn("prep").DependsOn("other").Inputs({"prep:train.csv"})));
  c.Run(T(1, 0));
  TaskOutcome prep;
  prep.result = "p";
  prep.outputs = {File("test.csv"), File("train.csv")};
  c.FinishWith(T(1, 0), prep);
  c.Run(T(1, 1));
  TaskOutcome other;
  other.result = "o";
  other.outputs = {File("big.bin", 2ull << 30)};
  c.FinishWith(T(1, 1), other);
  c.TakeRaw();
  c.Grant(T(1, 2));
  const std::vector<Command> out = c.TakeRaw();
  const AssignTask* assign = AssignOf(out, T(1, 2));
  ASSERT_NE(assign, nullptr);
  ASSERT_NE(assign->inputs, nullptr);
  // other's result still goes; its file does not, and names no holder.
  EXPECT_THAT(*assign->inputs, ElementsAre(DependencyInput{T(1, 0), "p", {File("train.csv")}, 1},
                                           DependencyInput{T(1, 1), "o", {}, 0}));
}

TEST(InputSelectTest, TheStartBoundCountsOnlyTheSelectedBytes) {
  SchedulerConfig config;
  config.start_timeout = Seconds(30);
  config.renew_interval = Seconds(100);
  config.input_fetch_rate = 10 << 20;  // 10 MiB/s
  TestCluster c(config);
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder()
               .Add(TaskBuilder("prep"))
               .Add(TaskBuilder("use").DependsOn("prep").Inputs({"prep:small.bin"})));
  c.Run(T(1, 0));
  TaskOutcome o;
  o.outputs = {File("small.bin", 100ull << 20), File("huge.bin", 2000ull << 20)};
  c.FinishWith(T(1, 0), o);
  c.Advance(Seconds(1));
  c.Grant(T(1, 1));
  c.Take();
  c.Advance(Seconds(39));
  EXPECT_THAT(c.Take(), IsEmpty()) << "30 s + 10 s for the 100 MiB selected";
  c.Advance(Seconds(1));
  EXPECT_THAT(c.Take(),
              ::testing::Contains("kill 1.1#1 on w1: worker 1 did not start it within 40s"));
}

TEST(InputSelectTest, ADependentWhoseNamedFileWasNotWrittenFailsWithoutItsRetries) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(4));
  c.Submit(JobBuilder()
               .Add(TaskBuilder("prep").Array(0, 2))
               .Add(TaskBuilder("use").DependsOn("prep").Inputs({"prep:train.csv"}).Retries(3))
               .Add(TaskBuilder("last").DependsOn("use")));
  c.Run(T(1, 0));
  c.Run(T(1, 1));
  TaskOutcome wrote;
  wrote.outputs = {File("a.csv"), File("train.csv")};
  c.FinishWith(T(1, 0), wrote);
  c.Take();
  TaskOutcome short_of_one;
  short_of_one.outputs = {File("a.csv"), File("b.csv")};
  c.FinishWith(T(1, 1), short_of_one);
  const std::string why =
      "input \"prep:train.csv\": prep[1] (1.1) wrote no such output (it wrote: a.csv, b.csv)";
  EXPECT_THAT(c.Take(),
              ElementsAre("release 1.1#1 on w1 [lease:1:slot:1.1]", "persist outcome 1.1#1",
                          "state 1.1 running->succeeded #1", "state 1.2 waiting->failed #0: " + why,
                          "state 1.3 waiting->canceled #0: dependency 1.2 failed"));
  EXPECT_EQ(c.scheduler().GetTask(T(1, 2))->reason, why);
}

TEST(InputSelectTest, SubmitRefusesABadSelector) {
  TestCluster c;
  Outbox out;
  Result<JobId> id = c.scheduler().Submit(
      c.now(),
      JobBuilder()
          .Add(TaskBuilder("prep"))
          .Add(TaskBuilder("use").DependsOn("prep").Inputs({"prep:a", "fit:b"}))
          .Build(),
      out);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().message(),
            "task \"use\": inputs \"fit:b\": \"fit\" is not a task this one depends on "
            "(depends_on: prep)");
  EXPECT_THAT(out, IsEmpty());
}

// Files from the client (TaskGroupSpec::input_files): only uploaded ones,
// and never under a name the executor uses in the task's directory.
TEST(InputSelectTest, SubmitRefusesAClientFileNotUploadedOrNamedLikeTheExecutorsOwn) {
  TestCluster c;
  auto submit = [&](OutputFile f) {
    core::JobSpec spec = *JobBuilder(TaskBuilder("train")).Build();
    spec.groups[0].input_files = {std::move(f)};
    Outbox out;
    return c.scheduler().Submit(c.now(), std::make_shared<const core::JobSpec>(spec), out);
  };
  const std::string sha(64, 'a');
  EXPECT_TRUE(submit(OutputFile{"data.csv", 1, sha}).ok());
  EXPECT_THAT(submit(OutputFile{"data.csv", 1, ""}).status().message(),
              HasSubstr("input file \"data.csv\" was not uploaded"));
  EXPECT_THAT(submit(OutputFile{"output/x", 1, sha}).status().message(),
              HasSubstr("\"output\" is Drover's own in the task's directory"));
  EXPECT_THAT(submit(OutputFile{"stdout", 1, sha}).status().message(),
              HasSubstr("\"stdout\" is Drover's own"));
}

}  // namespace
}  // namespace drover::core
