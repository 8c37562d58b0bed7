// The container start as a command line and files, without podman: what
// ContainerCommand hands the executor, what CollectContainerEnd reads back.
// (tests/integration/container_test.cc runs real containers.)
#include "worker/exec/container.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "worker/exec/exec_test_util.h"

namespace drover::worker {
namespace {

using testing::Put;
using testing::ReadFile;
using testing::TempDir;

ContainerRuntime Runtime(const std::string& dir) {
  ContainerRuntime rt;
  rt.podman = "/usr/bin/podman";
  rt.oci_runtime = "runc";
  rt.description = "podman 4.3.1 (runc)";
  rt.init = true;
  rt.state_dir = dir;
  rt.label = "drover.workdir=/w";
  return rt;
}

// Whether `args` holds `a` followed at once by `b`.
bool Pair(const std::vector<std::string>& args, const std::string& a, const std::string& b) {
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == a && args[i + 1] == b) return true;
  }
  return false;
}

TEST(ContainerTest, TheStartIsTheFetchStepThenPodmanRunInTheCagesCgroups) {
  TempDir dir;
  const ContainerRuntime rt = Runtime(dir.path());
  ContainerRun run;
  run.name = "drover-1-12.3.1";
  run.image = "docker.io/library/debian:12";
  run.pull = core::ImagePull::kNever;
  run.argv = {"python", "-c", "print(1)"};
  run.env = {{"DROVER_TASK_ID", "12.3"}, {"SECRET", "a b=c"}};
  run.cwd = "/w/12/3.1";
  run.mounts = {"/w/12/3.1", "/w/12/3.checkpoint"};
  run.read_only_mounts = {"/w/.no-inputs"};
  run.user.emplace(65534, 65534);
  run.private_network = true;
  Result<std::vector<std::string>> argv = ContainerCommand(rt, run);
  ASSERT_TRUE(argv.ok()) << argv.status().ToString();
  const std::vector<std::string>& a = *argv;
  const ContainerFiles files = ContainerFilesOf(rt, run.name);
  // sh -c SCRIPT $0 podman image pull digest error, then podman's own.
  ASSERT_GE(a.size(), 9u);
  EXPECT_EQ(a[0], "/bin/sh");
  EXPECT_EQ(a[1], "-c");
  EXPECT_EQ(
      std::vector<std::string>(a.begin() + 4, a.begin() + 9),
      (std::vector<std::string>{"/usr/bin/podman", run.image, "never", files.digest, files.error}));
  EXPECT_TRUE(Pair(a, "--runtime", "runc"));
  EXPECT_TRUE(Pair(a, "--cgroup-manager", "cgroupfs"));
  EXPECT_TRUE(Pair(a, "--cgroups", "no-conmon"));
  // Relative: below the cgroups its runc process is in, the cage's.
  EXPECT_TRUE(Pair(a, "--cgroup-parent", "container"));
  EXPECT_TRUE(Pair(a, "--label", "drover.workdir=/w"));
  EXPECT_TRUE(Pair(a, "--pull", "never"));
  EXPECT_TRUE(Pair(a, "--network", "none"));
  EXPECT_TRUE(Pair(a, "--user", "65534:65534"));
  EXPECT_TRUE(Pair(a, "--workdir", "/w/12/3.1"));
  EXPECT_TRUE(Pair(a, "--volume", "/w/12/3.1:/w/12/3.1"));
  EXPECT_TRUE(Pair(a, "--volume", "/w/12/3.checkpoint:/w/12/3.checkpoint"));
  EXPECT_TRUE(Pair(a, "--volume", "/w/.no-inputs:/w/.no-inputs:ro"));
  EXPECT_TRUE(Pair(a, "--env-file", files.env));
  EXPECT_TRUE(Pair(a, "--entrypoint", ""));  // the command runs as written
  EXPECT_NE(std::find(a.begin(), a.end(), "--init"), a.end());
  // The image, then the task's command as it wrote it, last.
  EXPECT_EQ(std::vector<std::string>(a.end() - 4, a.end()),
            (std::vector<std::string>{run.image, "python", "-c", "print(1)"}));
  // Its variables in a file only the worker reads, not on a command line.
  EXPECT_EQ(ReadFile(files.env), "DROVER_TASK_ID=12.3\nSECRET=a b=c\n");
  struct stat st {};
  ASSERT_EQ(stat(files.env.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  for (const std::string& arg : a) EXPECT_EQ(arg.find("a b=c"), std::string::npos) << arg;

  run.private_network = false;
  run.user.reset();
  argv = ContainerCommand(rt, run);
  ASSERT_TRUE(argv.ok());
  EXPECT_TRUE(Pair(*argv, "--network", "host"));
  EXPECT_EQ(std::find(argv->begin(), argv->end(), "--user"), argv->end());

  run.env = {{"NOTE", "two\nlines"}};
  argv = ContainerCommand(rt, run);
  ASSERT_FALSE(argv.ok());
  EXPECT_EQ(argv.status().message(),
            "environment variable NOTE holds a newline, which a container's environment cannot "
            "take");
}

// The task's variables go in, the worker's stay out; GPUs count from 0.
TEST(ContainerTest, TheContainerGetsTheTasksVariablesAndItsGpusFromZero) {
  const std::vector<std::pair<std::string, std::string>> worker = {
      {"PATH", "/usr/local/bin:/usr/bin"}, {"LANG", "C.UTF-8"}, {"HOME", "/root"}};
  const std::vector<std::string> task = {"PATH=/usr/local/bin:/usr/bin",
                                         "LANG=C.UTF-8",
                                         "HOME=/home/ada",
                                         "USER=ada",
                                         "LR=0.1",
                                         "DROVER_TASK_ID=12.3",
                                         "CUDA_VISIBLE_DEVICES=2,5",
                                         "NVIDIA_VISIBLE_DEVICES=2,5"};
  EXPECT_EQ(ContainerEnvironment(task, worker, 2),
            (std::vector<std::pair<std::string, std::string>>{{"USER", "ada"},
                                                              {"LR", "0.1"},
                                                              {"DROVER_TASK_ID", "12.3"},
                                                              {"CUDA_VISIBLE_DEVICES", "0,1"}}));
  // A task that set a worker's variable to another value keeps its own.
  EXPECT_EQ(
      ContainerEnvironment(
          {"LANG=de_DE.UTF-8", "CUDA_VISIBLE_DEVICES=", "NVIDIA_VISIBLE_DEVICES=void"}, worker, 0),
      (std::vector<std::pair<std::string, std::string>>{{"LANG", "de_DE.UTF-8"},
                                                        {"CUDA_VISIBLE_DEVICES", ""},
                                                        {"NVIDIA_VISIBLE_DEVICES", "void"}}));
}

TEST(ContainerTest, TheEndReadsTheDigestAndOnExit125WhyTheImageCouldNotBeHad) {
  TempDir dir;
  const ContainerRuntime rt = Runtime(dir.path());
  const ContainerFiles files = ContainerFilesOf(rt, "c1");
  Put(files.digest, "sha256:" + std::string(64, 'a') + "\n");
  ContainerEnd end = CollectContainerEnd(rt, "c1", "debian:12", 0);
  EXPECT_EQ(end.digest, "sha256:" + std::string(64, 'a'));
  EXPECT_EQ(end.start_error, "");
  EXPECT_FALSE(std::filesystem::exists(files.digest));  // each attempt's files go

  Put(files.error,
      "Trying to pull registry.lab/x:1...\nError: initializing source docker://registry.lab/x:1: "
      "manifest unknown\n");
  end = CollectContainerEnd(rt, "c1", "registry.lab/x:1", 125);
  EXPECT_EQ(end.digest, "");
  EXPECT_EQ(end.start_error,
            "image registry.lab/x:1: initializing source docker://registry.lab/x:1: manifest "
            "unknown");
  // 125 from the program itself, with no fetch error: its own exit code.
  end = CollectContainerEnd(rt, "c1", "debian:12", 125);
  EXPECT_EQ(end.start_error, "");
}

// What keeps a worker from running containers, said as a person reads it
// in `drover worker --check`.
TEST(ContainerTest, AWorkerThatCannotRunContainersSaysWhy) {
  if (geteuid() != 0) {
    Result<ContainerRuntime> rt = FindContainerRuntime(IsolationMode::kCgroup1, "/w", true);
    ASSERT_FALSE(rt.ok());
    EXPECT_EQ(rt.status().message().rfind("the worker is not root", 0), 0u);
    return;
  }
  Result<ContainerRuntime> rt = FindContainerRuntime(IsolationMode::kRlimit, "/w", true);
  ASSERT_FALSE(rt.ok());
  EXPECT_EQ(rt.status().message(),
            "isolation is rlimit; containers run in the task's cgroups on cgroup v1 workers only "
            "for now");
  rt = FindContainerRuntime(IsolationMode::kCgroup1, "/srv/a:b", true);
  ASSERT_FALSE(rt.ok());
  EXPECT_EQ(rt.status().message(),
            "the work directory /srv/a:b holds ':' or ',', which a container mount cannot name");
}

TEST(ContainerTest, TheCleanupRemovesEveryContainerWithTheWorkersLabelTryingTwice) {
  TempDir dir;
  ContainerRuntime rt = Runtime(dir.path());
  rt.conf = dir.path() + "/containers.conf";
  std::vector<std::string> env;
  const std::vector<std::string> argv = ContainerCleanupCommand(rt, &env);
  EXPECT_EQ(argv.front(), "/bin/sh");
  EXPECT_EQ(argv.back(), "label=drover.workdir=/w");
  EXPECT_TRUE(Pair(argv, "rm", "--force"));
  EXPECT_NE(std::find(env.begin(), env.end(), "CONTAINERS_CONF=" + rt.conf), env.end());
}

}  // namespace
}  // namespace drover::worker
