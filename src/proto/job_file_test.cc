#include "proto/job_file.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "common/quantity.h"
#include "proto/function_task.h"

namespace drover::proto {
namespace {

constexpr std::string_view kDesignExample = R"(name = "sweep"

[[task]]
id = "prep"
command = ["python", "prep.py"]
resources = { cpus = 2, mem = "4GiB" }

[[task]]
id = "train"
array = "0-7"
command = ["python", "train.py", "--seed", "{index}"]
resources = { gpus = 1, gpu_mem = "16GiB" }
depends_on = ["prep"]
retries = 2
timeout = "2h"

[[task]]
id = "report"
command = ["python", "aggregate.py"]
depends_on = ["train"]
)";


TEST(JobFileTest, DesignExampleParsesToTheExpectedSpec) {
  Result<core::JobSpec> spec = ParseJobToml(kDesignExample, "sweep.toml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();

  core::JobSpec want;
  want.name = "sweep";
  core::TaskGroupSpec prep;
  prep.name = "prep";
  prep.command = {"python", "prep.py"};
  prep.resources.cpus_milli = 2000;
  prep.resources.mem_bytes = 4 * kGiB;
  core::TaskGroupSpec train;
  train.name = "train";
  train.array = core::ArrayRange{0, 8, 1};
  train.command = {"python", "train.py", "--seed", "{index}"};
  train.resources.gpus = 100;
  train.resources.gpu_mem_bytes = 16 * kGiB;
  train.depends_on = {"prep"};
  train.retries = 2;
  train.timeout = Seconds(7200);
  core::TaskGroupSpec report;
  report.name = "report";
  report.command = {"python", "aggregate.py"};
  report.depends_on = {"train"};
  want.groups = {prep, train, report};

  EXPECT_EQ(*spec, want);
  EXPECT_EQ(spec->TaskCount(), 10u);
}

TEST(JobFileTest, OneGroupAsJsonShowsWhatItRuns) {
  Result<core::JobSpec> spec = ParseJobToml(kDesignExample, "sweep.toml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  const nlohmann::json train = TaskGroupSpecJson(spec->groups[1]);
  EXPECT_EQ(train["id"], "train");
  EXPECT_EQ(train["command"], nlohmann::json({"python", "train.py", "--seed", "{index}"}));
  EXPECT_EQ(train["resources"]["gpus"], 1);
  EXPECT_EQ(train["resources"]["gpu_mem"], 16 * kGiB);
  EXPECT_EQ(train["retries"], 2);
  EXPECT_EQ(train["timeout"], "2h");
}

TEST(JobFileTest, EveryFieldIsRead) {
  Result<core::JobSpec> spec = ParseJobToml(R"(
name = "all"
user = "ana"
after = ["12", "12.3"]
[[task]]
id = "t"
command = "echo $HOME | wc -c"
array = "0-99:2"
env = { FOO = "bar", EMPTY = "" }
resources = { cpus = "500m", mem = 1048576, gpus = 0.25, gpu_mem = "8GB", gpu_type = "A100", licenses = 2, counters = { seats = 1 }, labels = { os = "linux" } }
retries = 3
retry_backoff = "1m30s"
timeout = "250ms"
priority = -5
)",
                                            "all.toml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->user, "ana");
  EXPECT_EQ(spec->after_jobs, std::vector<JobId>{12});
  EXPECT_EQ(spec->after_tasks, (std::vector<TaskId>{{12, 3}}));
  const core::TaskGroupSpec& g = spec->groups.at(0);
  EXPECT_EQ(g.command, (std::vector<std::string>{"sh", "-c", "echo $HOME | wc -c"}));
  EXPECT_EQ(g.array, (core::ArrayRange{0, 50, 2}));
  EXPECT_EQ(g.env, (std::map<std::string, std::string>{{"EMPTY", ""}, {"FOO", "bar"}}));
  EXPECT_EQ(g.resources.cpus_milli, 500);
  EXPECT_EQ(g.resources.mem_bytes, 1048576u);
  EXPECT_EQ(g.resources.gpus, 25);
  EXPECT_EQ(g.resources.gpu_mem_bytes, 8'000'000'000u);
  EXPECT_EQ(g.resources.gpu_types, std::vector<std::string>{"A100"});
  EXPECT_EQ(g.resources.counters, (std::map<std::string, int64_t>{{"licenses", 2}, {"seats", 1}}));
  EXPECT_EQ(g.resources.labels, (std::map<std::string, std::string>{{"os", "linux"}}));
  EXPECT_EQ(g.retries, 3u);
  EXPECT_EQ(g.retry_backoff, Seconds(90));
  EXPECT_EQ(g.timeout, Millis(250));
  EXPECT_EQ(g.priority, -5);
}

TEST(JobFileTest, CpusAcceptNumbersAndStrings) {
  for (auto [text, milli] : std::vector<std::pair<std::string, int64_t>>{
           {"2", 2000}, {"0.5", 500}, {"\"500m\"", 500}, {"\"1.25\"", 1250}, {"0", 0}}) {
    Result<core::JobSpec> spec = ParseJobToml(
        "name = \"j\"\n[[task]]\ncommand = [\"x\"]\nresources = { cpus = " + text + " }\n", "j");
    ASSERT_TRUE(spec.ok()) << text << ": " << spec.status().ToString();
    EXPECT_EQ(spec->groups[0].resources.cpus_milli, milli) << text;
  }
}

// Builds a one-task job file whose task has the given extra lines.
std::string OneTask(const std::string& lines) {
  return "name = \"j\"\n[[task]]\nid = \"a\"\ncommand = [\"x\"]\n" + lines;
}

std::string TomlError(std::string_view text) {
  Result<core::JobSpec> spec = ParseJobToml(text, "sweep.toml");
  EXPECT_FALSE(spec.ok());
  if (spec.ok()) return "";
  EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
  return spec.status().message();
}

TEST(JobFileTest, AmbiguousMemoryNamesFileLineColumnAndField) {
  std::string text = OneTask("") +
                     "\n[[task]]\nid = \"b\"\ncommand = [\"y\"]\n"
                     "resources = { cpus = 1, mem = \"4G\" }\n";
  std::string want =
      "sweep.toml:9:31: task[1].resources.mem: " + ParseBytes("4G").status().message();
  EXPECT_EQ(TomlError(text), want);
  EXPECT_NE(want.find("ambiguous"), std::string::npos);
}

// input_files: paths in a job file (the client uploads them, then sends
// {name, size, sha256}); uploaded entries are checked where decoded.
TEST(JobFileTest, InputFilesArePathsInAJobFileAndUploadedFilesInJson) {
  Result<core::JobSpec> spec =
      ParseJobToml(OneTask("input_files = [\"data/train.csv\"]\n"), "sweep.toml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_EQ(spec->groups[0].input_files.size(), 1u);
  EXPECT_EQ(spec->groups[0].input_files[0].name, "data/train.csv");
  EXPECT_TRUE(spec->groups[0].input_files[0].sha256.empty());
  const std::string sha(64, 'a');
  auto decode = [](const std::string& files) {
    return JobSpecFromJson(R"({"name":"j","task":[{"id":"t","command":["x"],"input_files":)" +
                           files + "}]}");
  };
  Result<core::JobSpec> uploaded =
      decode(R"([{"name":"train.csv","size":3,"sha256":")" + sha + R"("}])");
  ASSERT_TRUE(uploaded.ok()) << uploaded.status().ToString();
  EXPECT_EQ(uploaded->groups[0].input_files[0], (core::OutputFile{"train.csv", 3, sha}));
  Result<core::JobSpec> back = JobSpecFromJson(JobSpecToJson(*uploaded));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->groups[0].input_files, uploaded->groups[0].input_files);
  EXPECT_NE(decode(R"([{"name":"../x","size":1,"sha256":")" + sha + R"("}])")
                .status()
                .message()
                .find("task[0].input_files[0].name"),
            std::string::npos);
  EXPECT_NE(decode(R"([{"name":"x","size":1,"sha256":"abc"}])")
                .status()
                .message()
                .find("task[0].input_files[0].sha256: expected 64 lower-case hex digits"),
            std::string::npos);
  EXPECT_NE(decode(R"([{"name":"x","sha":"abc"}])").status().message().find("unknown field"),
            std::string::npos);
  EXPECT_NE(decode(R"([{"name":"x","size":1,"sha256":")" + sha +
                   R"("},{"name":"x","size":1,"sha256":")" + sha + R"("}])")
                .status()
                .message()
                .find("a second input file named \"x\""),
            std::string::npos);
  EXPECT_NE(decode("[3]").status().message().find("expected a path or {name, size, sha256}"),
            std::string::npos);
}

TEST(JobFileTest, UnknownKeyIsReportedAtTheKeyWithASuggestion) {
  EXPECT_EQ(TomlError("name = \"j\"\n[[task]]\nid = \"a\"\ncomand = [\"x\"]\n"),
            "sweep.toml:4:1: task[0]: unknown key \"comand\" (did you mean \"command\"?)");
  EXPECT_EQ(TomlError("nmae = \"j\"\n"),
            "sweep.toml:1:1: unknown key \"nmae\" (did you mean \"name\"?)");
  EXPECT_EQ(TomlError(OneTask("colour = \"blue\"\n")),
            "sweep.toml:5:1: task[0]: unknown key \"colour\"");
  // Keys meant for elsewhere: what was meant, not a near spelling.
  EXPECT_EQ(TomlError(OneTask("mem = \"4GB\"\n")),
            "sweep.toml:5:1: task[0]: unknown key \"mem\" (a resource: resources = { mem = "
            "\"4GiB\" })");
  EXPECT_EQ(TomlError(OneTask("after = [\"prep\"]\n")),
            "sweep.toml:5:1: task[0]: unknown key \"after\" (a task waits for groups of its job "
            "with depends_on = [\"prep\"]; after, a key of the job, names other jobs and their "
            "tasks)");
}

TEST(JobFileTest, IntegerResourceKeysAreCountersUnlessTheyLookMisspelt) {
  EXPECT_EQ(TomlError(OneTask("resources = { cpu = 2 }\n")),
            "sweep.toml:5:15: task[0].resources: unknown key \"cpu\" (did you mean \"cpus\"? For a "
            "custom counter of that name write counters = { cpu = 2 })");
  EXPECT_EQ(TomlError(OneTask("resources = { memory = \"4GiB\" }\n")),
            "sweep.toml:5:15: task[0].resources: unknown key \"memory\" (did you mean \"mem\"?)");
  Result<core::JobSpec> spec =
      ParseJobToml(OneTask("resources = { counters = { cpu = 2 } }\n"), "j");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->groups[0].resources.counters.at("cpu"), 2);
}

TEST(JobFileTest, BadDurationNamesTheField) {
  EXPECT_EQ(TomlError(OneTask("timeout = \"2 hours\"\n")),
            "sweep.toml:5:11: task[0].timeout: " + ParseDuration("2 hours").status().message());
  EXPECT_EQ(TomlError(OneTask("timeout = 7200\n")),
            "sweep.toml:5:11: task[0].timeout: expected a duration string such as \"2h\" or "
            "\"90s\", got integer");
}

// A Python function by reference: the task calls it through the runner with
// its JSON arguments, under the interpreter named (python3 by default).
TEST(JobFileTest, AFunctionTaskCallsItWithItsJsonArguments) {
  Result<core::JobSpec> spec = ParseJobToml(R"(name = "calls"
[[task]]
id = "heavy"
function = "mypkg.tasks:heavy"
args = [3, 1000, "{index}"]
kwargs = { scale = 0.5, tags = ["a"] }
array = "0-1"

[[task]]
id = "plain"
function = "mypkg.tasks:Runner.go"
python = "/opt/venv/bin/python"
)",
                                            "calls.toml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  // One command for every call (the runner), so that calls share warm
  // interpreters; the function and its arguments in the environment.
  const core::TaskGroupSpec& heavy = spec->groups[0];
  ASSERT_EQ(heavy.command.size(), 3u);
  EXPECT_EQ(heavy.command[0], "python3");
  EXPECT_EQ(heavy.command[1], "-c");
  EXPECT_EQ(heavy.env.at("DROVER_FUNCTION"), "mypkg.tasks:heavy");
  EXPECT_EQ(heavy.env.at("DROVER_ARGS"), R"([3,1000,"{index}"])");  // the runner expands {index}
  EXPECT_EQ(heavy.env.at("DROVER_KWARGS"), R"({"scale":0.5,"tags":["a"]})");
  EXPECT_EQ(heavy.env.at("DROVER_WARM"), "1");
  const core::TaskGroupSpec& plain = spec->groups[1];
  EXPECT_EQ(plain.command[0], "/opt/venv/bin/python");
  EXPECT_EQ(plain.command[2], heavy.command[2]);
  EXPECT_EQ(plain.env.at("DROVER_FUNCTION"), "mypkg.tasks:Runner.go");
  EXPECT_EQ(plain.env.at("DROVER_ARGS"), "[]");
  EXPECT_EQ(plain.env.at("DROVER_KWARGS"), "{}");
  // The same from the submit API's JSON; a task's own env stays, and its
  // DROVER_WARM wins (0: an interpreter per call).
  Result<core::JobSpec> json = JobSpecFromJson(
      R"({"name":"calls","task":[{"id":"heavy","function":"mypkg.tasks:heavy","args":[3,1000],)"
      R"("env":{"DROVER_WARM":"0","PYTHONPATH":"/srv/lab"}}]})");
  ASSERT_TRUE(json.ok()) << json.status().ToString();
  EXPECT_EQ(json->groups[0].env.at("DROVER_ARGS"), "[3,1000]");
  EXPECT_EQ(json->groups[0].env.at("DROVER_WARM"), "0");
  EXPECT_EQ(json->groups[0].env.at("PYTHONPATH"), "/srv/lab");
}

TEST(JobFileTest, AFunctionTaskIsCheckedNamingTheField) {
  auto fn = [](const std::string& lines) {
    return "name = \"j\"\n[[task]]\nid = \"a\"\n" + lines;
  };
  EXPECT_EQ(TomlError(fn("function = \"heavy\"\n")),
            "sweep.toml:4:12: task[0].function: \"heavy\" is not a function name: expected "
            "module:name, as in \"mypkg.tasks:heavy\"");
  EXPECT_NE(TomlError(fn("function = \"my-pkg:run\"\n")).find("is not a function name"),
            std::string::npos);
  EXPECT_NE(TomlError(fn("function = \"m:run\"\ncommand = [\"x\"]\n"))
                .find("task[0].function: a task runs a command or a function, not both"),
            std::string::npos);
  EXPECT_NE(TomlError(fn("function = \"m:run\"\nargs = { a = 1 }\n"))
                .find("task[0].args: expected an array of the function's arguments, got object"),
            std::string::npos);
  EXPECT_NE(TomlError(fn("function = \"m:run\"\nkwargs = [1]\n"))
                .find("task[0].kwargs: expected a table of keyword arguments, got array"),
            std::string::npos);
  EXPECT_NE(TomlError(fn("command = [\"x\"]\nargs = [1]\n"))
                .find("task[0].args: only with function"),
            std::string::npos);
}

// The Python client's calls give their command as `python_runner`: the
// runner under that interpreter, without the runner's 5 KiB in each task.
TEST(JobFileTest, APythonRunnerTaskRunsTheFunctionRunnerAndIsChecked) {
  Result<core::JobSpec> spec =
      JobSpecFromJson(R"({"name":"m","task":[{"id":"c","python_runner":"/usr/bin/python3",)"
                      R"("env":{"DROVER_CALL":"gASVAA=="}}]})");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->groups[0].command, RunnerCommand("/usr/bin/python3"));
  EXPECT_EQ(spec->groups[0].env.at("DROVER_CALL"), "gASVAA==");
  // A function by name runs the same runner.
  Result<core::JobSpec> by_name = JobSpecFromJson(
      R"({"name":"m","task":[{"id":"c","function":"m:f","python":"/usr/bin/python3"}]})");
  ASSERT_TRUE(by_name.ok()) << by_name.status().ToString();
  EXPECT_EQ(by_name->groups[0].command, spec->groups[0].command);
  ASSERT_NE(RunnerPython(spec->groups[0].command), nullptr);
  EXPECT_EQ(*RunnerPython(spec->groups[0].command), "/usr/bin/python3");
  EXPECT_EQ(RunnerPython({"/usr/bin/python3", "-c", "print(1)"}), nullptr);
  // The API's form of a spec keeps the whole command.
  EXPECT_NE(JobSpecToJson(*spec).find("\"command\""), std::string::npos);

  auto refused = [](const std::string& task) {
    Result<core::JobSpec> r = JobSpecFromJson(R"({"name":"m","task":[{"id":"c",)" + task + "}]}");
    return r.ok() ? std::string("accepted") : r.status().message();
  };
  EXPECT_NE(refused(R"("python_runner":"py","command":["x"])")
                .find("task[0].python_runner: a task runs a command, a function or the runner"),
            std::string::npos);
  EXPECT_NE(refused(R"("python_runner":"py","function":"m:f")").find("not two of them"),
            std::string::npos);
  EXPECT_NE(refused(R"("python_runner":"")").find("task[0].python_runner: is empty"),
            std::string::npos);
  EXPECT_NE(refused(R"("python_runner":3)").find("task[0].python_runner"), std::string::npos);
}

TEST(JobFileTest, HowATaskIsVacatedIsReadCheckedAndRoundTrips) {
  Result<core::JobSpec> spec = ParseJobToml(
      OneTask("vacate_signal = \"usr1\"\nvacate_grace = \"2m\"\npreemptible = false\n"), "j");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->groups[0].vacate_signal, 10);  // SIGUSR1
  EXPECT_EQ(spec->groups[0].vacate_grace, Seconds(120));
  EXPECT_FALSE(spec->groups[0].preemptible);
  // The journal's form reads back the same; defaults are not written.
  const std::string json = JobSpecToJson(*spec);
  Result<core::JobSpec> back = JobSpecFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, *spec);
  EXPECT_NE(json.find("\"vacate_signal\":\"SIGUSR1\""), std::string::npos) << json;
  Result<core::JobSpec> plain = ParseJobToml(OneTask(""), "j");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(JobSpecToJson(*plain).find("vacate"), std::string::npos);
  EXPECT_EQ(plain->groups[0].vacate_signal, 15);
  EXPECT_TRUE(plain->groups[0].preemptible);
  EXPECT_EQ(TomlError(OneTask("vacate_signal = \"KILL\"\n")),
            "sweep.toml:5:17: task[0].vacate_signal: unknown signal \"KILL\"; expected one of "
            "SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGQUIT");
  EXPECT_EQ(TomlError(OneTask("preemptible = \"no\"\n")),
            "sweep.toml:5:15: task[0].preemptible: expected a boolean, got string");
}

// A task's network and disk I/O limits: read, checked with positions, and
// round-tripped through the journal's JSON; `network` decides placement,
// so it lives in the resource request.
TEST(JobFileTest, NetworkAndDiskIoLimitsAreReadCheckedAndRoundTrip) {
  Result<core::JobSpec> spec =
      ParseJobToml(OneTask("network = \"none\"\nio_read_bps = \"50MiB\"\nio_write_bps = 1048576\n"
                           "io_weight = 200\ndisk = \"20GiB\"\n"),
                   "j");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  const core::TaskGroupSpec& g = spec->groups[0];
  EXPECT_TRUE(g.resources.private_network);
  EXPECT_EQ(g.io.read_bps, 50ull << 20);
  EXPECT_EQ(g.io.write_bps, 1ull << 20);
  EXPECT_EQ(g.io.weight, 200u);
  EXPECT_EQ(g.resources.disk_bytes, 20ull << 30);
  EXPECT_EQ(g.resources.ToString(), "cpus=1 network=none disk=20 GiB");
  const std::string json = JobSpecToJson(*spec);
  Result<core::JobSpec> back = JobSpecFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, *spec) << json;

  Result<core::JobSpec> host = ParseJobToml(OneTask("network = \"host\"\n"), "j");
  ASSERT_TRUE(host.ok()) << host.status().ToString();
  EXPECT_FALSE(host->groups[0].resources.private_network);
  EXPECT_FALSE(host->groups[0].io.Any());
  const std::string plain = JobSpecToJson(*host);
  EXPECT_EQ(plain.find("network"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("io_"), std::string::npos) << plain;

  EXPECT_EQ(TomlError(OneTask("network = \"off\"\n")),
            "sweep.toml:5:11: task[0].network: unknown network \"off\"; expected \"host\" (the "
            "worker's network, the default) or \"none\" (a network of its own with only "
            "loopback)");
  EXPECT_EQ(ParseJobToml(OneTask("io_write_bps = \"10MB\"\n"), "j")->groups[0].io.write_bps,
            10'000'000u);  // decimal units are as written
  EXPECT_EQ(TomlError(OneTask("io_write_bps = \"10 potatoes\"\n"))
                .rfind("sweep.toml:5:16: "
                       "task[0].io_write_bps: ",
                       0),
            0u);
  EXPECT_EQ(TomlError(OneTask("disk = \"20G\"\n")).rfind("sweep.toml:5:8: task[0].disk: ", 0), 0u);
  EXPECT_EQ(TomlError(OneTask("disk = 0\n")),
            "sweep.toml:5:8: task[0].disk: must be above zero: the most its directory may hold, "
            "such as \"20GiB\" (leave it out for no limit)");
  EXPECT_EQ(TomlError(OneTask("io_read_bps = 0\n")),
            "sweep.toml:5:15: task[0].io_read_bps: must be above zero: bytes per second, such as "
            "\"10MiB\" (leave it out for no limit)");
  EXPECT_EQ(TomlError(OneTask("io_weight = 20000\n")),
            "sweep.toml:5:13: task[0].io_weight: 20000: expected 1 to 10000 (its share of the "
            "disk against other tasks', 100 without one)");
}

// A task's container image: read, checked with positions, round-tripped
// through the journal's JSON; an image decides placement (a worker with a
// runtime), so it marks the resource request too.
TEST(JobFileTest, AnImageAndItsPullPolicyAreReadCheckedAndRoundTrip) {
  Result<core::JobSpec> spec = ParseJobToml(
      OneTask("image = \"registry.lab:5000/team/torch:2.3\"\nimage_pull = \"never\"\n"), "j");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  const core::TaskGroupSpec& g = spec->groups[0];
  EXPECT_EQ(g.image, "registry.lab:5000/team/torch:2.3");
  EXPECT_EQ(g.image_pull, core::ImagePull::kNever);
  EXPECT_TRUE(g.resources.container);
  EXPECT_EQ(g.resources.ToString(), "cpus=1 container");
  const std::string json = JobSpecToJson(*spec);
  Result<core::JobSpec> back = JobSpecFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, *spec) << json;

  Result<core::JobSpec> plain = ParseJobToml(OneTask("image = \"debian@sha256:abc\"\n"), "j");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->groups[0].image_pull, core::ImagePull::kMissing);
  EXPECT_EQ(JobSpecToJson(*plain).find("image_pull"), std::string::npos);
  EXPECT_EQ(JobSpecToJson(*ParseJobToml(OneTask(""), "j")).find("image"), std::string::npos);

  EXPECT_EQ(TomlError(OneTask("image = \"--privileged\"\n")),
            "sweep.toml:5:9: task[0].image: \"--privileged\" starts with '-'; an image reference "
            "starts with a letter or digit");
  EXPECT_EQ(TomlError(OneTask("image = \"debian 12\"\n")),
            "sweep.toml:5:9: task[0].image: \"debian 12\" has a character an image reference "
            "cannot hold (' ')");
  EXPECT_EQ(TomlError(OneTask("image = \"\"\n")),
            "sweep.toml:5:9: task[0].image: is empty; expected an image such as "
            "\"docker.io/library/debian:12\"");
  EXPECT_EQ(TomlError(OneTask("image = \"debian\"\nimage_pull = \"sometimes\"\n")),
            "sweep.toml:6:14: task[0].image_pull: unknown image_pull \"sometimes\"; expected "
            "\"missing\" (fetch it when the worker lacks it, the default), \"always\" or "
            "\"never\" (only what the worker has)");
  EXPECT_EQ(TomlError(OneTask("image_pull = \"never\"\n")),
            "sweep.toml:5:14: task[0].image_pull: is set without an image");
}

// Which outputs a dependent fetches, and how much its outputs may add up
// to: read, checked with positions, and round-tripped through
// the journal's JSON, where [] (nothing) stays apart from absent (all).
TEST(JobFileTest, InputsAndMaxOutputAreReadCheckedAndRoundTrip) {
  const std::string two =
      "name = \"j\"\n[[task]]\nid = \"prep\"\ncommand = [\"x\"]\n"
      "[[task]]\nid = \"use\"\ncommand = [\"y\"]\ndepends_on = [\"prep\"]\n";
  Result<core::JobSpec> spec = ParseJobToml(
      two + "inputs = [\"prep:train.csv\", \"prep:d/*.csv\", \"prep\"]\nmax_output = \"2GiB\"\n",
      "j");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  const core::TaskGroupSpec& use = spec->groups[1];
  EXPECT_EQ(use.inputs, (std::vector<std::string>{"prep:train.csv", "prep:d/*.csv", "prep"}));
  EXPECT_EQ(use.max_output_bytes, 2 * kGiB);
  EXPECT_FALSE(spec->groups[0].inputs.has_value()) << "absent: every output";
  EXPECT_EQ(spec->groups[0].max_output_bytes, 0u) << "absent: the server's default";
  std::string json = JobSpecToJson(*spec);
  Result<core::JobSpec> back = JobSpecFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, *spec) << json;
  EXPECT_EQ(json.find("\"inputs\"", json.find("\"prep\"")), json.rfind("\"inputs\"")) << json;

  Result<core::JobSpec> none = ParseJobToml(two + "inputs = []\nmax_output = 4000000000\n", "j");
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(none->groups[1].inputs, std::vector<std::string>{});
  EXPECT_EQ(none->groups[1].max_output_bytes, 4'000'000'000u);
  json = JobSpecToJson(*none);
  EXPECT_NE(json.find("\"inputs\":[]"), std::string::npos) << json;
  back = JobSpecFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, *none);
  EXPECT_EQ(ParseJobToml(two + "max_output = \"4GB\"\n", "j")->groups[1].max_output_bytes,
            4'000'000'000u);

  Result<core::JobSpec> copies = ParseJobToml(two + "replicas = 2\n", "j");
  ASSERT_TRUE(copies.ok()) << copies.status().ToString();
  EXPECT_EQ(copies->groups[1].replicas, 2u);
  EXPECT_EQ(copies->groups[0].replicas, 1u) << "absent: one copy, the holder's";
  back = JobSpecFromJson(JobSpecToJson(*copies));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, *copies);
  EXPECT_EQ(TomlError(two + "replicas = 0\n"),
            "sweep.toml:9:12: task[1].replicas: 0: expected 1 to 4 (the copies of its outputs to "
            "keep, the first included)");
  EXPECT_EQ(TomlError(two + "replicas = 5\n"),
            "sweep.toml:9:12: task[1].replicas: 5: expected 1 to 4 (the copies of its outputs to "
            "keep, the first included)");

  EXPECT_EQ(TomlError(two + "inputs = [\"prep:a\", \"prepp:b\"]\n"),
            "sweep.toml:9:21: task[1].inputs[1]: input \"prepp:b\" of task \"use\": \"prepp\" is "
            "not a task this one depends on (depends_on: prep)");
  EXPECT_EQ(TomlError(two + "inputs = [\"prep:../etc/passwd\"]\n"),
            "sweep.toml:9:11: task[1].inputs[0]: input \"prep:../etc/passwd\" of task \"use\": "
            "the file name has a \"..\" path part");
  EXPECT_EQ(TomlError(two + "inputs = [\"prep:/abs\"]\n"),
            "sweep.toml:9:11: task[1].inputs[0]: input \"prep:/abs\" of task \"use\": the file "
            "name is an absolute path");
  EXPECT_EQ(TomlError(two + "inputs = [\"\"]\n"),
            "sweep.toml:9:11: task[1].inputs[0]: input \"\" of task \"use\": the selector is "
            "empty");
  EXPECT_EQ(TomlError(two + "inputs = [\"prep:a\\u0001\"]\n"),
            "sweep.toml:9:11: task[1].inputs[0]: input \"prep:a\x01\" of task \"use\": the file "
            "name holds a control character");
  EXPECT_EQ(TomlError(OneTask("inputs = [\"a\"]\n")),
            "sweep.toml:5:11: task[0].inputs[0]: input \"a\" of task \"a\": \"a\" is not a task "
            "this one depends on (it has no depends_on)");
  EXPECT_EQ(TomlError(OneTask("inputs = \"prep\"\n")),
            "sweep.toml:5:10: task[0].inputs: expected an array, got string");
  EXPECT_EQ(TomlError(OneTask("max_output = \"4G\"\n")),
            "sweep.toml:5:14: task[0].max_output: " + ParseBytes("4G").status().message());
  EXPECT_EQ(TomlError(OneTask("max_output = 0\n")),
            "sweep.toml:5:14: task[0].max_output: must be above zero (leave it out for the "
            "server's default)");
  EXPECT_EQ(TomlError(OneTask("max_ouptut = \"1GiB\"\n")),
            "sweep.toml:5:1: task[0]: unknown key \"max_ouptut\" (did you mean \"max_output\"?)");
  Result<core::JobSpec> from_json =
      JobSpecFromJson(R"({"name":"j","task":[{"id":"p","command":["x"]},)"
                      R"({"id":"u","command":["y"],"depends_on":["p"],"inputs":["q:a"]}]})");
  ASSERT_FALSE(from_json.ok());
  EXPECT_EQ(from_json.status().message(),
            "task[1].inputs[0]: input \"q:a\" of task \"u\": \"q\" is not a task this one "
            "depends on (depends_on: p)");
}

TEST(JobFileTest, WrongTypesAndMissingFields) {
  EXPECT_EQ(TomlError("name = \"j\"\n[[task]]\nid = \"a\"\n"),
            "sweep.toml:2:1: task[0]: missing \"command\"");
  EXPECT_EQ(TomlError("[[task]]\ncommand = [\"x\"]\n"), "sweep.toml:1:1: missing \"name\"");
  EXPECT_EQ(TomlError(OneTask("retries = -1\n")),
            "sweep.toml:5:11: task[0].retries: -1 is out of range (0 to 1000)");
  EXPECT_EQ(TomlError(OneTask("env = { A = 1 }\n")),
            "sweep.toml:5:13: task[0].env.A: expected a string, got integer");
  EXPECT_EQ(TomlError("name = \"j\"\n[[task]]\nid = \"a\"\ncommand = []\n"),
            "sweep.toml:4:11: task[0].command: command is empty: the first element names the "
            "program");
  EXPECT_EQ(TomlError(OneTask("resources = { mem = 1.5 }\n")),
            "sweep.toml:5:21: task[0].resources.mem: expected a string with a unit (\"4GiB\") or "
            "an integer number of bytes, got number 1.5");
  EXPECT_EQ(TomlError(OneTask("resources = { gpus = 1.5 }\n")),
            "sweep.toml:5:22: task[0].resources.gpus: " + ParseGpus("1.5").status().message());
  EXPECT_EQ(TomlError(OneTask("resources = { gpu_mem = \"8GiB\" }\n")),
            "sweep.toml:5:13: task[0].resources: gpu_mem and gpu_type need gpus > 0");
  EXPECT_EQ(TomlError(OneTask("when = 1979-05-27\n")),
            "sweep.toml:5:8: task[0].when: dates and times are not used in job files (quote it "
            "as a string)");
}

TEST(JobFileTest, TomlSyntaxErrorsHavePositions) {
  std::string message = TomlError("name = \"j\"\n[[task]\n");
  EXPECT_EQ(message.rfind("sweep.toml:2:", 0), 0u) << message;
}

TEST(JobFileTest, NulBytesAreRejectedBeforeToml) {
  // Found by fuzz/job_toml_fuzz.cc: toml++ asserted on a NUL in a header.
  EXPECT_EQ(TomlError(std::string_view("name = \"sweep\"\n\n[\0\0]\n", 19)),
            "sweep.toml:3:2: NUL byte (a job file is text)");
}

TEST(JobFileTest, TableHeaderWithoutAKeyIsASyntaxError) {
  // Found by fuzz/job_toml_fuzz.cc: toml++ asserted here in debug builds.
  std::string message = TomlError("name = \"weep\"\n\n[\ncafter = [");
  EXPECT_EQ(message.rfind("sweep.toml:3:", 0), 0u) << message;
}

TEST(JobFileTest, NonAsciiOutsideStringsIsASyntaxErrorNotUndefinedBehaviour) {
  // Found by fuzz/job_toml_fuzz.cc: toml++'s Unicode tables reached
  // "unreachable" for U+0391 outside a string.
  for (const char* text : {"a-task\xce\x91n", "name = \"j\" \xce\x91\n", "\xe3\x80\x80x = 1\n"}) {
    std::string message = TomlError(text);
    EXPECT_EQ(message.rfind("sweep.toml:1:", 0), 0u) << message;
  }
  // Inside strings and comments it is text as usual.
  Result<core::JobSpec> ok =
      ParseJobToml("name = \"\xce\x91\" # \xce\x91\n[[task]]\ncommand = [\"x\"]\n", "sweep.toml");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->name, "\xce\x91");
}

TEST(JobFileTest, DependenciesAreCheckedWithPositions) {
  std::string three =
      "name = \"j\"\n"
      "[[task]]\nid = \"prep\"\ncommand = [\"x\"]\n"
      "[[task]]\nid = \"train\"\ncommand = [\"x\"]\ndepends_on = [\"prep\", \"rep\"]\n"
      "[[task]]\nid = \"report\"\ncommand = [\"x\"]\n";
  EXPECT_EQ(TomlError(three),
            "sweep.toml:8:23: task[1].depends_on[1]: unknown task id \"rep\" (did you mean "
            "\"prep\"?)");
  std::string cycle =
      "name = \"j\"\n"
      "[[task]]\nid = \"a\"\ncommand = [\"x\"]\ndepends_on = [\"c\"]\n"
      "[[task]]\nid = \"b\"\ncommand = [\"x\"]\ndepends_on = [\"a\"]\n"
      "[[task]]\nid = \"c\"\ncommand = [\"x\"]\ndepends_on = [\"b\"]\n";
  EXPECT_EQ(TomlError(cycle),
            "sweep.toml:5:14: task[0].depends_on: dependency cycle: a -> c -> b -> a");
  EXPECT_EQ(TomlError(OneTask("depends_on = [\"a\"]\n")),
            "sweep.toml:5:15: task[0].depends_on[0]: a task cannot depend on itself");
  std::string twice = OneTask("") + "[[task]]\nid = \"a\"\ncommand = [\"x\"]\n";
  EXPECT_EQ(TomlError(twice), "sweep.toml:6:6: task[1].id: duplicate id \"a\" (also task[0])");
  std::string no_id = OneTask("") + "[[task]]\ncommand = [\"x\"]\n";
  EXPECT_EQ(TomlError(no_id),
            "sweep.toml:5:1: task[1]: missing \"id\" (needed when a job has several tasks)");
}

TEST(JobFileTest, JsonBodyHasTheSameRulesWithPathsInsteadOfPositions) {
  Result<core::JobSpec> spec = JobSpecFromJson(
      R"({"name":"j","task":[{"id":"a","command":["x"]},{"id":"b","command":["y"],"resources":{"mem":"4G"}}]})");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().message(),
            "task[1].resources.mem: " + ParseBytes("4G").status().message());
  spec = JobSpecFromJson(R"({"name":"j","task":[{"id":"a","comand":["x"]}]})");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().message(), "task[0]: unknown key \"comand\" (did you mean \"command\"?)");
  spec = JobSpecFromJson(R"({"name":"j","task":[{"id":"a","command":["x"], "retries": 1e400}]})");
  EXPECT_FALSE(spec.ok());
  spec = JobSpecFromJson("{\"name\":\"j\",\"task\":[");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().message().rfind("invalid JSON: ", 0), 0u) << spec.status().message();
}

// A NUL byte would cut what exec sees ("a\u0000b" ran as "a"): refused at
// the field, from TOML escapes and from JSON alike.
TEST(JobFileTest, NulInWhatReachesExecIsRefusedNamingTheField) {
  const std::string why = ": the program would see only the part before it";
  EXPECT_EQ(TomlError("name = \"j\"\n[[task]]\nid = \"a\"\ncommand = [\"echo\", \"a\\u0000b\"]\n"),
            "sweep.toml:4:20: task[0].command[1]: NUL byte (\\u0000) at offset 1 of a command "
            "argument" + why);
  EXPECT_EQ(TomlError("name = \"j\"\n[[task]]\nid = \"a\"\ncommand = \"echo a\\u0000b\"\n"),
            "sweep.toml:4:11: task[0].command: NUL byte (\\u0000) at offset 6 of the command" + why);
  EXPECT_EQ(TomlError(OneTask("env = { A = \"x\\u0000y\" }\n")),
            "sweep.toml:5:13: task[0].env.A: NUL byte (\\u0000) at offset 1 of an environment "
            "value" + why);

  Result<core::JobSpec> spec =
      JobSpecFromJson(R"({"name":"j","task":[{"id":"a","command":["echo","a\u0000b"]}]})");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().message(),
            "task[0].command[1]: NUL byte (\\u0000) at offset 1 of a command argument" + why);
  spec = JobSpecFromJson(R"({"name":"j","user":"root\u0000x","task":[{"id":"a","command":["x"]}]})");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().message(),
            "user: NUL byte (\\u0000) at offset 4 of the user name" + why);
  // Elsewhere a NUL does no harm and is kept (a job's name, say).
  EXPECT_TRUE(JobSpecFromJson(R"({"name":"j\u0000","task":[{"id":"a","command":["x"]}]})").ok());
}

TEST(JobFileTest, JsonRoundTripsTheDesignExampleAndOddValues) {
  Result<core::JobSpec> spec = ParseJobToml(kDesignExample, "sweep.toml");
  ASSERT_TRUE(spec.ok());
  spec->user = "ana";
  spec->after_jobs = {3, 4};
  spec->after_tasks = {{5, 6}};
  core::TaskGroupSpec& g = spec->groups[1];
  g.resources.cpus_milli = 1;
  g.resources.gpus = 25;
  g.resources.gpu_types = {"A100", "H100"};
  g.resources.counters = {{"licenses", 3}};
  g.resources.labels = {{"os", "linux"}};
  g.retry_backoff = Micros(1500);
  g.timeout = Seconds(3600) + Millis(5);
  g.array = core::ArrayRange{7, 1, 3};
  g.env = {{"A", "b c"}};
  g.priority = -3;
  std::string json = JobSpecToJson(*spec);
  Result<core::JobSpec> back = JobSpecFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << json;
  EXPECT_EQ(*back, *spec) << json;
}

TEST(JobFileTest, AJobOverTheTaskLimitIsRefusedNamingTheLimit) {
  const std::string over = std::to_string(kMaxJobTasks);  // 0..limit: one too many
  Result<core::JobSpec> spec = JobSpecFromJson(
      R"({"name":"j","task":[{"id":"a","command":["x"],"array":"0-)" + over + R"("}]})");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().message(), "task: the job has " + std::to_string(kMaxJobTasks + 1) +
                                         " tasks, more than the limit of 1000000");
  // Two groups together count too; exactly the limit is fine.
  const std::string half = std::to_string(kMaxJobTasks / 2 - 1);
  spec = JobSpecFromJson(R"({"name":"j","task":[{"id":"a","command":["x"],"array":"0-)" + half +
                         R"("},{"id":"b","command":["y"],"array":"0-)" + half + R"("}]})");
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  spec = JobSpecFromJson(R"({"name":"j","task":[{"id":"a","command":["x"],"array":"0-)" + half +
                         R"("},{"id":"b","command":["y"],"array":"0-)" + over + R"("}]})");
  EXPECT_FALSE(spec.ok());
}

TEST(JobFileTest, OversizedInputIsRejectedFirst) {
  std::string huge(kMaxJobSpecBytes + 1, ' ');
  EXPECT_FALSE(ParseJobToml(huge, "big.toml").ok());
  EXPECT_FALSE(JobSpecFromJson(huge).ok());
}

}  // namespace
}  // namespace drover::proto
