// Tasks in container images (`image = ...`): the runtime a worker found,
// and the command that runs one attempt in its image.
//
// A task with an image runs as `podman run` (rootful, cgroupfs manager)
// started in the task's cage like any task's process: the container's
// cgroups are made under the cage's own in every hierarchy (a relative
// `--cgroup-parent`, which runc takes from its own cgroups, and conmon
// stays in the cage: `--cgroups no-conmon`), so the cage's limits hold
// for the container, its freezer stops it and its kill ends it. A short
// shell step before the run fetches the image as `image_pull` says and
// notes its digest; a fetch that fails is the attempt's start error.
//
// Thread safety: plain functions.
#ifndef DROVER_WORKER_EXEC_CONTAINER_H_
#define DROVER_WORKER_EXEC_CONTAINER_H_

#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "core/model.h"
#include "worker/exec/isolator.h"

namespace drover::worker {

// What runs containers on this worker (FindContainerRuntime).
struct ContainerRuntime {
  std::string podman;       // absolute path of podman
  std::string oci_runtime;  // "runc" where it is chosen over podman's default; "": the default
  // For people and the scheduler: "podman 4.3.1 (runc)".
  std::string description;
  // A CDI spec of the NVIDIA container toolkit is there: a container can
  // be given exactly the task's GPUs (`--device nvidia.com/gpu=N`).
  bool gpus = false;
  // podman's init (catatonit) is installed: the container's first process
  // is it (`--init`), which passes on a stop signal to the program as a
  // bare task's process group gets it (a program as process 1 would
  // ignore a SIGTERM it has no handler for).
  bool init = false;
  // containers.conf for podman (CONTAINERS_CONF): one the worker wrote,
  // which keeps the worker's own rlimits in the container as a bare task
  // has them; empty: the worker's environment names one.
  std::string conf;
  // Where the worker keeps each attempt's container files (environment,
  // digest, fetch error): a directory only the worker reads.
  std::string state_dir;
  // The label on every container this worker starts
  // ("drover.workdir=<workdir>"), by which its reaper finds them.
  std::string label;
};

// Looks for a way to run containers: root, cgroup v1 isolation (the
// container's cgroups go under the cage's), podman on PATH, and on
// cgroup v1 runc (crun refuses hierarchies of v1 controllers). Writes the
// containers.conf and the state directory under `workdir` unless
// `check_only`. Fails with the reason a person reads in `drover worker
// --check` ("podman is not installed (...)").
Result<ContainerRuntime> FindContainerRuntime(IsolationMode isolation, const std::string& workdir,
                                              bool check_only = false);

// One attempt's container, as the executor knows it.
struct ContainerRun {
  std::string name;  // unique on the machine: "drover-<worker pid>-12.3.1"
  std::string image;
  core::ImagePull pull = core::ImagePull::kMissing;
  std::vector<std::string> argv;  // the task's command, run in the image
  // What the task's program gets: DROVER_*, its own env, CUDA_*, ... (not
  // the worker's inherited variables: the image has its own PATH).
  std::vector<std::pair<std::string, std::string>> env;
  std::string cwd;                  // inside the container
  std::vector<std::string> mounts;  // host directories, mounted read-write at the same path
  std::vector<std::string> read_only_mounts;
  std::optional<std::pair<unsigned, unsigned>> user;  // uid, gid; none: root
  std::vector<int> gpus;
  bool private_network = false;
};

// What a container's program gets of a task's environment ("K=V", as a
// bare task's would be): the task's own variables, not those it would
// have inherited from the worker (`inherited`: the image keeps its own
// PATH, and HOME goes, the image's account has its own); with `gpus` GPUs,
// CUDA_VISIBLE_DEVICES counts them from 0 (the container sees only its
// own, its first is 0) and NVIDIA_VISIBLE_DEVICES goes (CDI gives them).
std::vector<std::pair<std::string, std::string>> ContainerEnvironment(
    const std::vector<std::string>& environment,
    const std::vector<std::pair<std::string, std::string>>& inherited, size_t gpus);

// The files of one attempt under ContainerRuntime::state_dir.
struct ContainerFiles {
  std::string env;     // the --env-file
  std::string digest;  // the image's digest, written before the run
  std::string error;   // why the image could not be had
};
ContainerFiles ContainerFilesOf(const ContainerRuntime& runtime, const std::string& name);

// Writes the environment file and returns the argv of the process the
// executor starts (argv[0] is /bin/sh, run as the worker: podman is
// rootful; the program inside runs as `run.user`). Fails on an environment
// value podman's env file cannot hold (a newline).
Result<std::vector<std::string>> ContainerCommand(const ContainerRuntime& runtime,
                                                  const ContainerRun& run);

// After the attempt: the digest it ran ("sha256:..."; empty when unknown),
// and, for an exit code of 125, why the image could not be had (empty:
// not that). Removes the attempt's files.
struct ContainerEnd {
  std::string digest;
  std::string start_error;
};
ContainerEnd CollectContainerEnd(const ContainerRuntime& runtime, const std::string& name,
                                 const std::string& image, int exit_code);

// What the worker's reaper runs once it has killed the task cgroups at
// the worker's death (Reaper::Start's `then`): podman removes every
// container with this worker's label, which it would otherwise go on
// listing as running. `env` is its environment.
std::vector<std::string> ContainerCleanupCommand(const ContainerRuntime& runtime,
                                                 std::vector<std::string>* env);

// Removes what is left of the attempt's container in podman's store after
// a kill (no `--rm` ran), in a process of its own that nobody waits for.
void ForgetContainer(const ContainerRuntime& runtime, const std::string& name);

}  // namespace drover::worker

#endif  // DROVER_WORKER_EXEC_CONTAINER_H_
