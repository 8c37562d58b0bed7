// Python functions in warm interpreters, through real processes: a root
// worker with cgroup v1 isolation, per-user accounts and one (fake NVML)
// GPU, and the Python client's Executor in a script. Successive calls of
// one interpreter each run in their own task's room (its memory limit,
// which what the interpreter held before does not count against, its
// cpuset and affinity, its GPU, its account), in the cgroups the
// interpreter waits in, refitted for each call; another account
// or another GPU set gets another interpreter; a call that leaks past its
// limit is OOM-killed without taking the next call down; an interpreter
// killed in the middle of a call is replaced and the call retried.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster.h"
#include "test_accounts.h"

namespace drover::testing {
namespace {

bool CgroupV1Usable() {
  return geteuid() == 0 && access("/sys/fs/cgroup/freezer", W_OK) == 0 &&
         access("/sys/fs/cgroup/memory", W_OK) == 0 && access("/sys/fs/cgroup/cpuacct", W_OK) == 0 &&
         access("/sys/fs/cgroup/cpuset", W_OK) == 0;
}

// What each call sees, one JSON line per call (keyed by "tag"), and the
// endings of the leak and the kill.
constexpr char kScript[] = R"PY(
import json, os, sys, time
import drover

def probe(tag):
    cg = {}
    for line in open("/proc/self/cgroup"):
        _, ctrls, path = line.rstrip("\n").split(":", 2)
        for c in ctrls.split(","):
            cg[c] = path
    def read(ctrl, name):
        with open("/sys/fs/cgroup/%s%s/%s" % (ctrl, cg[ctrl], name)) as f:
            return f.read().strip()
    def cpus(text):
        out = []
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            out += range(int(lo), int(hi or lo) + 1)
        return out
    with open("/proc/self/environ") as f:
        started = dict(kv.split("=", 1) for kv in f.read().split("\0") if "=" in kv)
    usage = int(read("memory", "memory.usage_in_bytes"))  # before this probe's own
    with open("/proc/self/status") as f:
        rss = [int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS:")][0]
    return {"tag": tag, "pid": os.getpid(), "uid": os.getuid(), "rss": rss, "usage": usage,
            "memory_cgroup": cg["memory"], "mem_limit": int(read("memory", "memory.limit_in_bytes")),
            "cpuset": cpus(read("cpuset", "cpuset.cpus")), "affinity": sorted(os.sched_getaffinity(0)),
            "task_cpus": cpus(os.environ["DROVER_CPUS"]),
            "cuda": os.environ["CUDA_VISIBLE_DEVICES"],
            "cuda_at_start": started.get("CUDA_VISIBLE_DEVICES")}

def leak():
    hoard = []
    while True:
        block = bytearray(16 << 20)
        for i in range(0, len(block), 4096):
            block[i] = 1
        hoard.append(block)

def sleeper(path):
    if os.environ["DROVER_ATTEMPT"] == "1":
        with open(path + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(path + ".tmp", path)
        time.sleep(600)
    return os.getpid()

ana, bob = sys.argv[1], sys.argv[2]
client = drover.Client()
py = "/usr/bin/python3"
ana_ex = drover.Executor(client, user="ana", python=py, retries=0)
bob_ex = drover.Executor(client, user="bob", python=py, retries=0)
def show(value):
    print(json.dumps(value), flush=True)
show(ana_ex.submit(probe, "a1", drover_resources={"cpus": 1, "mem": "200MiB", "gpus": 1}).result())
show(ana_ex.submit(probe, "a2", drover_resources={"cpus": 2, "mem": "300MiB", "gpus": 1}).result())
show(ana_ex.submit(probe, "a3", drover_resources={"cpus": 1, "mem": "8MiB", "gpus": 1}).result())
show(bob_ex.submit(probe, "b1", drover_resources={"cpus": 1, "mem": "200MiB", "gpus": 1}).result())
show(ana_ex.submit(probe, "n1", drover_resources={"cpus": 1, "mem": "200MiB"}).result())
try:
    ana_ex.submit(leak, drover_resources={"mem": "64MiB"}).result()
    show({"tag": "leak", "reason": "it returned"})
except drover.TaskFailed as e:
    show({"tag": "leak", "reason": e.reason})
show(ana_ex.submit(probe, "after", drover_resources={"cpus": 1, "mem": "64MiB"}).result())
pidfile = os.path.join(os.environ["SHARED"], "pid")
f = ana_ex.submit(sleeper, pidfile, drover_resources={"retries": 1, "retry_backoff": "0s"})
deadline = time.monotonic() + 60
while not os.path.exists(pidfile) and time.monotonic() < deadline:
    time.sleep(0.01)
killed = int(open(pidfile).read())
os.kill(killed, 9)
show({"tag": "kill", "killed": killed, "ran": f.result(), "attempt": f.task.info().attempt})
)PY";

TEST(WarmInterpreterTest, SuccessiveCallsOfOneInterpreterEachRunInTheirTasksRoom) {
  if (!CgroupV1Usable()) GTEST_SKIP() << "no writable cgroup v1 memory, cpuset and freezer";
  if (!CanMakeAccounts()) GTEST_SKIP() << "needs " << kUseradd << " and " << kUserdel;
  const std::string ana = "drwana" + std::to_string(getpid());
  const std::string bob = "drwbob" + std::to_string(getpid());
  TestAccounts accounts;
  ASSERT_TRUE(accounts.Add({ana, bob}));

  Cluster c;
  ASSERT_EQ(chmod(c.dir().c_str(), 0711), 0);  // the accounts reach their task directories
  const std::string shared = c.dir() + "/shared";
  ASSERT_EQ(mkdir(shared.c_str(), 0700), 0);
  ASSERT_EQ(chmod(shared.c_str(), 01777), 0);
  c.StartServer();
  Process worker({c.binary(), "worker", "--access", c.access_file(), "--name", "w1", "--workdir",
                  c.dir() + "/work-w1", "--isolation", "cgroup1", "--run-as-root", "--user-map",
                  "ana=" + ana, "--user-map", "bob=" + bob},
                 {"FAKE_NVML_DEVICES=1", "LD_LIBRARY_PATH=" + std::string(FAKE_NVML_DIR)});
  ASSERT_TRUE(worker.WaitForLine("attached as worker", In(kStartTimeout))) << worker.output();

  const std::string script = c.WriteFile("calls.py", kScript);
  RunResult run = RunToEnd({"/usr/bin/python3", script, ana, bob}, In(kJobTimeout),
                           {"DROVER_ACCESS=" + c.access_file(),
                            "PYTHONPATH=" + std::string(PYTHON_CLIENT_DIR), "SHARED=" + shared});
  ASSERT_EQ(run.status, 0) << run.output << "\nworker:\n" << worker.output();
  std::map<std::string, nlohmann::json> seen;
  std::istringstream lines(run.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;
    nlohmann::json j = nlohmann::json::parse(line);
    seen[j["tag"]] = j;
  }
  ASSERT_EQ(seen.size(), 8u) << run.output;
  const nlohmann::json &a1 = seen["a1"], &a2 = seen["a2"], &b1 = seen["b1"], &n1 = seen["n1"];

  // One interpreter for both of ana's calls on the GPU, each call with its
  // own limit, on its own cores. The interpreter waits between calls in
  // the cgroups of its first call, the only process left there, and they
  // are refitted for each call: what it held before a call does not count
  // against the call's limit, which is raised by that much.
  EXPECT_EQ(a1["pid"], a2["pid"]) << a1 << a2;
  EXPECT_EQ(a1["memory_cgroup"], a2["memory_cgroup"]);
  EXPECT_EQ(a1["mem_limit"], 200 << 20);  // a new interpreter: it held nothing
  auto limit_above_held = [](const nlohmann::json& call, int64_t limit) {
    const int64_t above = call["mem_limit"].get<int64_t>() - limit;
    EXPECT_GT(above, 0) << call;
    EXPECT_NEAR(above, call["usage"].get<int64_t>(), 4 << 20) << call;
  };
  limit_above_held(a2, 300 << 20);
  // A call limited below the interpreter's size runs in it.
  EXPECT_EQ(seen["a3"]["pid"], a1["pid"]);
  limit_above_held(seen["a3"], 8 << 20);
  EXPECT_GT(seen["a3"]["rss"].get<int64_t>(), 8 << 20) << seen["a3"];
  for (const nlohmann::json* call : {&a1, &a2, &b1, &n1}) {
    EXPECT_EQ((*call)["cpuset"], (*call)["task_cpus"]) << *call;
    EXPECT_EQ((*call)["affinity"], (*call)["task_cpus"]) << *call;
    // The GPU set the interpreter started with is the call's.
    EXPECT_EQ((*call)["cuda_at_start"], (*call)["cuda"]) << *call;
  }
  EXPECT_EQ(a1["task_cpus"].size(), 1u);
  EXPECT_EQ(a2["task_cpus"].size(), 2u);
  EXPECT_EQ(a1["cuda"], "0");
  EXPECT_EQ(n1["cuda"], "");
  // Each account its own interpreter; another GPU set another one.
  EXPECT_EQ(a1["uid"], UidOf(ana));
  EXPECT_EQ(a2["uid"], UidOf(ana));
  EXPECT_EQ(b1["uid"], UidOf(bob));
  EXPECT_NE(b1["pid"], a1["pid"]);
  EXPECT_NE(n1["pid"], a1["pid"]);

  // The leak is the kernel's to stop; the next call runs.
  EXPECT_NE(seen["leak"]["reason"].get<std::string>().find("OOM-killed (limit 64 MiB"),
            std::string::npos)
      << seen["leak"];
  // A new interpreter in a cage of its own: the limit as asked.
  EXPECT_EQ(seen["after"]["mem_limit"], 64 << 20) << seen["after"];
  // Killed in the call: retried, in another interpreter.
  EXPECT_EQ(seen["kill"]["attempt"], 2) << seen["kill"];
  EXPECT_NE(seen["kill"]["ran"], seen["kill"]["killed"]) << seen["kill"];
}

}  // namespace
}  // namespace drover::testing
