#include "worker/exec/container.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/run_program.h"
#include "worker/exec/cgroup_files.h"
#include "worker/exec/spawn.h"

namespace drover::worker {
namespace {

// The shell step in front of `podman run`: fetches the image as
// `image_pull` says (a failure is written to the error file, exit 125,
// podman's own code for "the container could not be made"), notes its
// digest, then becomes the run. Its arguments: podman, image, pull,
// digest file, error file, then podman's arguments for the run.
constexpr const char* kStartScript = R"sh(podman=$1 image=$2 pull=$3 digest=$4 error=$5
shift 5
case $pull in
always) "$podman" pull --quiet "$image" >/dev/null 2>"$error" || exit 125 ;;
never) "$podman" image exists "$image" || {
  echo "not on this worker, and image_pull = \"never\" fetches nothing" >"$error"
  exit 125
} ;;
*) "$podman" image exists "$image" || "$podman" pull --quiet "$image" >/dev/null 2>"$error" || exit 125 ;;
esac
"$podman" image inspect --format '{{.Digest}}' "$image" >"$digest" 2>/dev/null
exec "$podman" "$@"
)sh";

// The start script's word for `pull` (core's names; this library does
// not link the core).
const char* PullWord(core::ImagePull pull) {
  switch (pull) {
    case core::ImagePull::kAlways:
      return "always";
    case core::ImagePull::kNever:
      return "never";
    case core::ImagePull::kMissing:
      break;
  }
  return "missing";
}

// Runs podman's removal ("$0" "$@") a second time when the first fails:
// right after a container's processes were killed (and before their
// parent reaped them), podman 4 may fail a removal with "container state
// improper: stopped" and leave the container "Stopping"; the next one
// removes it.
constexpr const char* kTwice = "\"$0\" \"$@\" || \"$0\" \"$@\"";

// The absolute path of `name` on the worker's PATH and the sbin
// directories (runc is in /usr/sbin), or "".
std::string FindOnPath(const std::string& name) {
  const char* path = getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  Result<std::string> found = ResolveCommand(name, dirs + ":/usr/local/sbin:/usr/sbin:/sbin", "/");
  return found.ok() ? *found : "";
}

// A small file the start step wrote, without its trailing newline; "" when
// it is absent.
std::string ReadSmall(const std::string& path) {
  std::string text = ReadCgroupFile(path).value_or("");
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

Status WriteSmall(const std::string& path, const std::string& text, mode_t mode) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return Unavailable("cannot write " + path + ": " + strerror(errno));
  const ssize_t n = write(fd, text.data(), text.size());
  const int saved = errno;
  close(fd);
  if (n != static_cast<ssize_t>(text.size())) {
    return Unavailable("cannot write " + path + ": " + strerror(n < 0 ? saved : ENOSPC));
  }
  return Status::Ok();
}

}  // namespace

Result<ContainerRuntime> FindContainerRuntime(IsolationMode isolation, const std::string& workdir,
                                              bool check_only) {
  if (geteuid() != 0) {
    return FailedPrecondition(
        "the worker is not root (containers run with rootful podman, in the task's cgroups)");
  }
  if (isolation != IsolationMode::kCgroup1) {
    return FailedPrecondition(
        std::string("isolation is ") + std::string(IsolationModeName(isolation)) +
        "; containers run in the task's cgroups on cgroup v1 workers only for now");
  }
  if (workdir.find_first_of(":,") != std::string::npos) {
    // podman's --volume takes SOURCE:TARGET:OPTIONS.
    return FailedPrecondition("the work directory " + workdir +
                              " holds ':' or ',', which a container mount cannot name");
  }
  ContainerRuntime rt;
  rt.podman = FindOnPath("podman");
  if (rt.podman.empty()) {
    return FailedPrecondition("podman is not installed (apt-get install podman runc)");
  }
  Result<std::string> version = RunProgram({rt.podman, "--version"}, Seconds(30));
  if (!version.ok()) return FailedPrecondition("podman --version: " + version.status().message());
  // "podman version 4.3.1"
  std::string number = *version;
  if (const size_t at = number.rfind(' '); at != std::string::npos) number = number.substr(at + 1);
  while (!number.empty() && (number.back() == '\n' || number.back() == ' ')) number.pop_back();
  // crun refuses hierarchies of v1 controllers beside a v2 mount; runc
  // takes them.
  if (FindOnPath("runc").empty()) {
    return FailedPrecondition(
        "runc is not installed (cgroup v1 containers need it: apt-get "
        "install runc)");
  }
  rt.oci_runtime = "runc";
  rt.description = "podman " + number + " (" + rt.oci_runtime + ")";
  for (const char* spec : {"/etc/cdi/nvidia.yaml", "/var/run/cdi/nvidia.yaml",
                           "/etc/cdi/nvidia.json", "/var/run/cdi/nvidia.json"}) {
    if (access(spec, R_OK) == 0) rt.gpus = true;
  }
  rt.init = access("/usr/libexec/podman/catatonit", X_OK) == 0;
  rt.state_dir = workdir + "/.containers";
  rt.label = "drover.workdir=" + workdir;
  if (check_only) return rt;
  RETURN_IF_ERROR(MakeDir(rt.state_dir, 0700));
  if (chmod(rt.state_dir.c_str(), 0700) != 0) {
    return Unavailable("cannot make " + rt.state_dir + " private: " + strerror(errno));
  }
  if (getenv("CONTAINERS_CONF") == nullptr) {
    // podman raises the open-file and process limits of a rootful
    // container by default; a task keeps the worker's, as a bare one does.
    rt.conf = rt.state_dir + "/containers.conf";
    RETURN_IF_ERROR(WriteSmall(rt.conf, "[containers]\ndefault_ulimits = []\n", 0644));
  }
  return rt;
}

std::vector<std::pair<std::string, std::string>> ContainerEnvironment(
    const std::vector<std::string>& environment,
    const std::vector<std::pair<std::string, std::string>>& inherited, size_t gpus) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& kv : environment) {
    const size_t eq = kv.find('=');
    std::string key = kv.substr(0, eq);
    std::string value = eq == std::string::npos ? "" : kv.substr(eq + 1);
    if (key == "HOME") continue;
    bool from_worker = false;
    for (const auto& [k, v] : inherited) from_worker |= k == key && v == value;
    if (from_worker) continue;
    if (key == "CUDA_VISIBLE_DEVICES" && gpus > 0) {
      value.clear();
      for (size_t i = 0; i < gpus; ++i) value += (i ? "," : "") + std::to_string(i);
    }
    if (key == "NVIDIA_VISIBLE_DEVICES" && gpus > 0) continue;
    out.emplace_back(std::move(key), std::move(value));
  }
  return out;
}

ContainerFiles ContainerFilesOf(const ContainerRuntime& runtime, const std::string& name) {
  const std::string base = runtime.state_dir + "/" + name;
  return ContainerFiles{base + ".env", base + ".digest", base + ".error"};
}

Result<std::vector<std::string>> ContainerCommand(const ContainerRuntime& runtime,
                                                  const ContainerRun& run) {
  const ContainerFiles files = ContainerFilesOf(runtime, run.name);
  std::string env;
  for (const auto& [key, value] : run.env) {
    if (key.find_first_of("=\n") != std::string::npos || value.find('\n') != std::string::npos) {
      return InvalidArgument("environment variable " + key +
                             " holds a newline, which a container's environment cannot take");
    }
    env += key + "=" + value + "\n";
  }
  RETURN_IF_ERROR(WriteSmall(files.env, env, 0600));
  unlink(files.digest.c_str());
  unlink(files.error.c_str());

  std::vector<std::string> argv = {"/bin/sh",          "-c",           kStartScript,
                                   "drover-container", runtime.podman, run.image,
                                   PullWord(run.pull), files.digest,   files.error};
  if (!runtime.oci_runtime.empty()) {
    argv.insert(argv.end(), {"--runtime", runtime.oci_runtime});
  }
  argv.insert(argv.end(),
              {"--cgroup-manager", "cgroupfs", "run", "--rm", "--name", run.name, "--pull", "never",
               "--cgroups", "no-conmon",
               // Relative: under the cage's cgroup in every
               // hierarchy (runc's own, which it joined).
               "--cgroup-parent", "container", "--label", runtime.label, "--pids-limit", "-1",
               "--log-driver", "none", "--entrypoint", "", "--env-file", files.env, "--network",
               run.private_network ? "none" : "host", "--workdir", run.cwd});
  if (runtime.init) argv.push_back("--init");
  if (run.user) {
    argv.insert(argv.end(), {"--user", std::to_string(run.user->first) + ":" +
                                           std::to_string(run.user->second)});
  }
  for (const std::string& dir : run.mounts) argv.insert(argv.end(), {"--volume", dir + ":" + dir});
  for (const std::string& dir : run.read_only_mounts) {
    argv.insert(argv.end(), {"--volume", dir + ":" + dir + ":ro"});
  }
  for (int gpu : run.gpus)
    argv.insert(argv.end(), {"--device", "nvidia.com/gpu=" + std::to_string(gpu)});
  argv.push_back(run.image);
  argv.insert(argv.end(), run.argv.begin(), run.argv.end());
  return argv;
}

ContainerEnd CollectContainerEnd(const ContainerRuntime& runtime, const std::string& name,
                                 const std::string& image, int exit_code) {
  const ContainerFiles files = ContainerFilesOf(runtime, name);
  ContainerEnd end;
  end.digest = ReadSmall(files.digest);
  if (end.digest.size() > 200 || end.digest.find('\n') != std::string::npos) end.digest.clear();
  if (exit_code == 125) {
    std::string why = ReadSmall(files.error);
    // podman's last line says it ("Error: initializing source ...: ...").
    if (const size_t at = why.rfind('\n'); at != std::string::npos) why = why.substr(at + 1);
    if (why.rfind("Error: ", 0) == 0) why = why.substr(7);
    if (why.size() > 1000) why = why.substr(0, 1000) + "...";
    if (!why.empty()) end.start_error = "image " + image + ": " + why;
  }
  for (const std::string* f : {&files.env, &files.digest, &files.error}) unlink(f->c_str());
  return end;
}

std::vector<std::string> ContainerCleanupCommand(const ContainerRuntime& runtime,
                                                 std::vector<std::string>* env) {
  env->clear();
  if (const char* path = getenv("PATH")) env->push_back(std::string("PATH=") + path);
  const char* conf = getenv("CONTAINERS_CONF");
  if (!runtime.conf.empty()) {
    env->push_back("CONTAINERS_CONF=" + runtime.conf);
  } else if (conf != nullptr) {
    env->push_back(std::string("CONTAINERS_CONF=") + conf);
  }
  return {"/bin/sh", "-c",     kTwice, runtime.podman, "--cgroup-manager",      "cgroupfs", "rm",
          "--force", "--time", "0",    "--filter",     "label=" + runtime.label};
}

void ForgetContainer(const ContainerRuntime& runtime, const std::string& name) {
  // Everything the child needs is made before the fork: after it only
  // async-signal-safe calls (this worker has threads).
  std::vector<std::string> args = {"/bin/sh",          "-c",       kTwice, runtime.podman,
                                   "--cgroup-manager", "cgroupfs", "rm",   "--force",
                                   "--ignore",         "--time",   "0",    name};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) {
    if (!runtime.conf.empty() && std::strncmp(*e, "CONTAINERS_CONF=", 16) == 0) continue;
    vars.emplace_back(*e);
  }
  if (!runtime.conf.empty()) vars.push_back("CONTAINERS_CONF=" + runtime.conf);
  std::vector<char*> envp;
  for (std::string& v : vars) envp.push_back(v.data());
  envp.push_back(nullptr);
  // A grandchild: the child exits at once (reaped here), the grandchild is
  // nobody's to wait for.
  const pid_t child = fork();
  if (child < 0) return;
  if (child == 0) {
    if (fork() == 0) {
      setsid();
      const int null = open("/dev/null", O_RDWR);
      if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
      }
      execve("/bin/sh", argv.data(), envp.data());
      _exit(127);
    }
    _exit(0);
  }
  int status;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace drover::worker
