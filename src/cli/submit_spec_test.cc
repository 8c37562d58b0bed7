#include "cli/submit_spec.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "proto/job_file.h"

namespace drover::cli {
namespace {

// A new user's first try: `drover submit job.toml`.
TEST(SubmitSpecTest, AJobFileGivenAsTheCommandPointsToDroverRun) {
  const std::string dir = std::filesystem::temp_directory_path() / "drover-submit-XXXXXX";
  std::string tmpl = dir;
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  const std::string toml = tmpl + "/job.toml";
  const std::string script = tmpl + "/make.json";
  std::ofstream(toml) << "name = \"j\"\n";
  std::ofstream(script) << "#!/bin/sh\n";
  ASSERT_EQ(::chmod(script.c_str(), 0755), 0);
  Status s = CheckNotAJobFile({toml});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), toml + " is a job file, not a command: `drover run " + toml +
                             "` submits it and follows it (`drover submit` runs one command)");
  EXPECT_TRUE(CheckNotAJobFile({script}).ok()) << "an executable is a command";
  EXPECT_TRUE(CheckNotAJobFile({toml, "--fast"}).ok()) << "arguments: a command";
  EXPECT_TRUE(CheckNotAJobFile({tmpl + "/missing.toml"}).ok());
  EXPECT_TRUE(CheckNotAJobFile({"python3"}).ok());
  std::filesystem::remove_all(tmpl);
}

TEST(SubmitSpecTest, FlagsBecomeAOneGroupJob) {
  SubmitFlags f;
  f.command = {"/usr/bin/python3", "train.py", "--seed", "{index}"};
  f.cpus = "0.5";
  f.mem = "4GiB";
  f.gpus = "1";
  f.gpu_type = "A100,H100";
  f.array = "0-7";
  f.retries = 2;
  f.timeout = "2h";
  f.priority = 5;
  f.after = {"3", "4.1"};
  f.env = {"A=b=c"};
  Result<std::string> body = BuildSubmitBody(f);
  ASSERT_TRUE(body.ok()) << body.status().ToString();
  Result<core::JobSpec> spec = proto::JobSpecFromJson(*body);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->name, "python3");
  ASSERT_EQ(spec->groups.size(), 1u);
  const core::TaskGroupSpec& g = spec->groups[0];
  EXPECT_EQ(g.command, f.command);
  EXPECT_EQ(g.resources.cpus_milli, 500);
  EXPECT_EQ(g.resources.mem_bytes, 4ull << 30);
  EXPECT_EQ(g.resources.gpus, 100);
  EXPECT_EQ(g.resources.gpu_types, (std::vector<std::string>{"A100", "H100"}));
  EXPECT_EQ(g.TaskCount(), 8u);
  EXPECT_EQ(g.retries, 2u);
  EXPECT_EQ(g.timeout, Seconds(7200));
  EXPECT_EQ(g.priority, 5);
  EXPECT_EQ(g.env.at("A"), "b=c");
  EXPECT_EQ(spec->after_jobs, (std::vector<JobId>{3}));
  ASSERT_EQ(spec->after_tasks.size(), 1u);
  EXPECT_EQ(spec->after_tasks[0].ToString(), "4.1");
}

TEST(SubmitSpecTest, ErrorsNameTheFlag) {
  SubmitFlags f;
  f.command = {"true"};
  f.mem = "4G";
  Result<std::string> body = BuildSubmitBody(f);
  ASSERT_FALSE(body.ok());
  EXPECT_EQ(body.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(body.status().message().rfind("--mem", 0), 0u) << body.status().message();

  f.mem.clear();
  f.array = "7-";
  body = BuildSubmitBody(f);
  ASSERT_FALSE(body.ok());
  EXPECT_EQ(body.status().message().rfind("--array", 0), 0u) << body.status().message();

  f.array.clear();
  f.max_output = "2G";
  body = BuildSubmitBody(f);
  ASSERT_FALSE(body.ok());
  EXPECT_EQ(body.status().message().rfind("--max-output: ", 0), 0u) << body.status().message();

  f.max_output = "2GiB";
  body = BuildSubmitBody(f);
  ASSERT_TRUE(body.ok()) << body.status().ToString();
  EXPECT_NE(body->find("\"max_output\":2147483648"), std::string::npos) << *body;

  f.max_output.clear();
  f.replicas = 5;
  body = BuildSubmitBody(f);
  ASSERT_FALSE(body.ok());
  EXPECT_EQ(body.status().message(),
            "--replicas: 5: expected 1 to 4 (the copies of its outputs to keep, the first "
            "included)");
  f.replicas = 2;
  body = BuildSubmitBody(f);
  ASSERT_TRUE(body.ok()) << body.status().ToString();
  EXPECT_NE(body->find("\"replicas\":2"), std::string::npos) << *body;

  f.replicas = 1;
  f.env = {"NOEQUALS"};
  EXPECT_FALSE(BuildSubmitBody(f).ok());
}

TEST(SubmitSpecTest, ImageFlagsBecomeTheTasksKeysAndErrorsNameTheFlag) {
  SubmitFlags f;
  f.command = {"python", "train.py"};
  f.image = "docker.io/pytorch/pytorch:2.3";
  f.image_pull = "never";
  Result<std::string> body = BuildSubmitBody(f);
  ASSERT_TRUE(body.ok()) << body.status().ToString();
  for (const char* want :
       {"\"image\":\"docker.io/pytorch/pytorch:2.3\"", "\"image_pull\":\"never\""}) {
    EXPECT_NE(body->find(want), std::string::npos) << want << " in " << *body;
  }
  f.image_pull = "daily";
  body = BuildSubmitBody(f);
  ASSERT_FALSE(body.ok());
  EXPECT_EQ(body.status().message().rfind("--image-pull: unknown image_pull \"daily\"", 0), 0u)
      << body.status().message();
  f.image_pull.clear();
  f.image = "-it";
  body = BuildSubmitBody(f);
  ASSERT_FALSE(body.ok());
  EXPECT_EQ(body.status().message().rfind("--image: \"-it\" starts with '-'", 0), 0u)
      << body.status().message();
}

TEST(SubmitSpecTest, NetworkAndDiskIoFlagsBecomeTheTasksKeysAndErrorsNameTheFlag) {
  SubmitFlags f;
  f.command = {"true"};
  f.network = "none";
  f.io_read_bps = "50MiB";
  f.io_write_bps = "10MiB";
  f.io_weight = 300;
  f.disk = "20GiB";
  Result<std::string> body = BuildSubmitBody(f);
  ASSERT_TRUE(body.ok()) << body.status().ToString();
  for (const char* want :
       {"\"network\":\"none\"", "\"io_read_bps\":52428800", "\"io_write_bps\":10485760",
        "\"io_weight\":300", "\"disk\":21474836480"}) {
    EXPECT_NE(body->find(want), std::string::npos) << want << " in " << *body;
  }
  f.network = "lan";
  body = BuildSubmitBody(f);
  ASSERT_FALSE(body.ok());
  EXPECT_EQ(body.status().message().rfind("--network: unknown network \"lan\"", 0), 0u)
      << body.status().message();
  f.network.clear();
  f.io_write_bps = "0";
  body = BuildSubmitBody(f);
  ASSERT_FALSE(body.ok());
  EXPECT_EQ(body.status().message().rfind("--io-write-bps: must be above zero", 0), 0u)
      << body.status().message();
  f.io_write_bps.clear();
  f.io_weight = 0;
  body = BuildSubmitBody(f);
  ASSERT_FALSE(body.ok());
  EXPECT_EQ(body.status().message().rfind("--io-weight: 0: expected 1 to 10000", 0), 0u)
      << body.status().message();
}

TEST(SubmitSpecTest, LabelsCountersAndUser) {
  SubmitFlags f;
  f.command = {"true"};
  f.labels = {"os=linux", "zone=b"};
  f.counters = {"licenses=2"};
  f.user = "ana";
  Result<std::string> body = BuildSubmitBody(f);
  ASSERT_TRUE(body.ok()) << body.status().ToString();
  Result<core::JobSpec> spec = proto::JobSpecFromJson(*body);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->user, "ana");
  const core::TaskGroupSpec& g = spec->groups[0];
  EXPECT_EQ(g.resources.labels.at("os"), "linux");
  EXPECT_EQ(g.resources.labels.at("zone"), "b");
  EXPECT_EQ(g.resources.counters.at("licenses"), 2);
}

TEST(SubmitSpecTest, LabelAndCounterErrorsNameTheFlag) {
  SubmitFlags f;
  f.command = {"true"};
  f.labels = {"os"};
  Result<std::string> body = BuildSubmitBody(f);
  ASSERT_FALSE(body.ok());
  EXPECT_EQ(body.status().message().rfind("--label", 0), 0u) << body.status().message();
  f.labels.clear();
  for (const char* bad : {"licenses=two", "licenses=-1", "licenses="}) {
    f.counters = {bad};
    body = BuildSubmitBody(f);
    ASSERT_FALSE(body.ok()) << bad;
    EXPECT_EQ(body.status().message().rfind("--counter", 0), 0u) << body.status().message();
  }
}

// Bytes that are not UTF-8 (a Latin-1 file name) are named, not thrown.
TEST(SubmitSpecTest, TextThatIsNotUtf8IsNamed) {
  SubmitFlags f;
  f.command = {"cat", "caf\xe9.txt"};
  Result<std::string> body = BuildSubmitBody(f);
  ASSERT_FALSE(body.ok());
  EXPECT_EQ(body.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(body.status().message().find("command argument 2 (caf\\xe9.txt)"), std::string::npos)
      << body.status().message();
  f.command = {"true"};
  f.env = {"A=\xff"};
  body = BuildSubmitBody(f);
  ASSERT_FALSE(body.ok());
  EXPECT_NE(body.status().message().find("not valid UTF-8"), std::string::npos)
      << body.status().message();
}

TEST(SubmitSpecTest, NeedsACommand) {
  EXPECT_EQ(BuildSubmitBody(SubmitFlags{}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace drover::cli
