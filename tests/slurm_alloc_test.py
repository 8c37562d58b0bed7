#!/usr/bin/env python3
"""Workers borrowed from a real Slurm (`drover alloc`, server/alloc.h).

Starts a one-node Slurm cluster of Debian's slurm-wlm and munge on this
machine (tests/slurm/start.sh: its own config, munge socket, ports and
state in a temporary directory; a one-second scheduling interval) and a
drover server with no workers that asks Slurm every second. Then:

1. A queue whose sbatch fails (a partition that does not exist) shows the
   failure and its backoff in `drover alloc list`, and is removed; so is
   one whose worker cannot start (its allocation ends before a worker
   attaches, which counts as a failure too).
2. A queue of at most 2 allocations: a job of 4 tasks with a timeout makes
   the server submit allocations; their workers attach (knowing when they
   must leave), run the tasks and leave when idle, so `squeue` ends empty
   and every allocation is listed as ended.
3. A task without a timeout gets no allocation: a worker that must leave
   cannot promise to run it to its end.

Skips, saying why, where Slurm is not installed or this is not root.
Usage: slurm_alloc_test.py SOURCE_DIR DROVER
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

src, drover = sys.argv[1], os.path.abspath(sys.argv[2])
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}", file=sys.stderr)
    return cond


def skip(why):
    print(f"slurm_alloc_test: skipped: {why}")
    sys.exit(0)


def wait_for(what, cond, timeout=90):
    """Checks cond() until it holds; a failure naming `what` on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.2)
    check(False, f"timed out after {timeout}s waiting for {what}")
    return None


if os.geteuid() != 0:
    skip("the test's Slurm daemons run as root")
for tool in ("slurmctld", "slurmd", "munged", "sbatch"):
    if not shutil.which(tool):
        skip(f"{tool} is not installed (scripts/install-deps.sh installs slurm-wlm and munge)")

# Short: munge's socket path must fit in 108 bytes.
top = tempfile.mkdtemp(prefix="dsl-", dir="/tmp")
cluster = os.path.join(top, "slurm")
r = subprocess.run(["bash", os.path.join(src, "tests/slurm/start.sh"), cluster],
                   capture_output=True, text=True, timeout=120)
if r.returncode != 0:
    shutil.rmtree(top, ignore_errors=True)
    sys.exit(f"slurm_alloc_test: the test's Slurm did not start: {r.stdout}{r.stderr}")
print(r.stdout.strip())
env = dict(os.environ, SLURM_CONF=os.path.join(cluster, "slurm.conf"),
           DROVER_ACCESS=os.path.join(top, "access.json"))
server = None
log = open(os.path.join(top, "server.log"), "w+")


def cli(*args, timeout=60):
    return subprocess.run([drover, *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def cli_json(*args):
    r = cli(*args, "--json")
    check(r.returncode == 0, f"drover {' '.join(args)}: {r.stdout} {r.stderr}")
    return json.loads(r.stdout) if r.returncode == 0 else {}


def squeue():
    return subprocess.run(["squeue", "-h", "-o", "%i %T %j"], capture_output=True, text=True,
                          env=env, timeout=30).stdout.split("\n")


def queue(qid):
    for q in cli_json("alloc", "list").get("queues", []):
        if q["id"] == qid:
            return q
    return None


try:
    server = subprocess.Popen(
        [drover, "server", "--state-dir", os.path.join(top, "server"), "--port", "0",
         "--bind", "127.0.0.1", "--alloc-interval", "1s", "--no-beacon"],
        stdout=log, stderr=subprocess.STDOUT, env=env)
    wait_for("the server", lambda: os.path.exists(os.path.join(top, "access.json")) and
             cli("status").returncode == 0, timeout=30)
    worker_args = ["--worker-arg=--run-as-root", "--worker-arg=--isolation=none"]

    # 1. A submission Slurm refuses: shown, backed off, removed.
    r = cli("alloc", "add", "slurm", "--max-workers", "1", "--time-limit", "5m", *worker_args,
            "--", "--partition", "nosuch")
    check(r.returncode == 0 and "allocation queue 1" in r.stdout, f"alloc add: {r.stdout} {r.stderr}")
    r = cli("submit", "--timeout", "60s", "--", "true")
    check(r.returncode == 0, f"submit: {r.stdout} {r.stderr}")
    first_job = r.stdout.split()[0] if r.returncode == 0 else "1"
    q = wait_for("the failed submission", lambda: (queue(1) or {}).get("failures", 0) >= 1 and
                 queue(1))
    if q:
        check("nosuch" in q["last_error"] or "partition" in q["last_error"],
              f"the reason is Slurm's: {q['last_error']!r}")
        check(q["retry_at"] is not None, "a failed submission backs off")
        listed = cli("alloc", "list").stdout
        check("submission failed 1 time(s) in a row" in listed, f"alloc list says so: {listed!r}")
    r = cli("alloc", "remove", "1")
    check(r.returncode == 0, f"alloc remove: {r.stdout} {r.stderr}")
    check(queue(1) is None, "the removed queue is gone")

    # An allocation whose worker cannot start (here a flag it does not
    # know) ends at once: counted as a failure and backed off, not asked
    # again every round.
    r = cli("alloc", "add", "slurm", "--max-workers", "1", "--time-limit", "5m", *worker_args,
            "--worker-arg=--no-such-flag")
    check(r.returncode == 0 and "allocation queue 2" in r.stdout, f"alloc add: {r.stdout} {r.stderr}")
    q = wait_for("the allocation that ended without a worker",
                 lambda: (queue(2) or {}).get("failures", 0) >= 1 and queue(2))
    if q:
        check("ended before its worker attached" in q["last_error"],
              f"the reason names it: {q['last_error']!r}")
        check(len(q["allocations"]) == 1, f"not asked again at once: {q['allocations']}")
    check(cli("alloc", "remove", "2").returncode == 0, "alloc remove 2")

    # 2. Work that fits: allocations come, run it, and go.
    r = cli("alloc", "add", "slurm", "--max-workers", "2", "--time-limit", "5m",
            "--idle-timeout", "4s", *worker_args)
    check(r.returncode == 0 and "allocation queue 3" in r.stdout, f"alloc add: {r.stdout} {r.stderr}")
    r = cli("submit", "--array", "0-3", "--timeout", "60s", "--",
            "sh", "-c", "sleep 2; echo task {index} ran")
    check(r.returncode == 0, f"submit: {r.stdout} {r.stderr}")
    job = r.stdout.split()[0] if r.returncode == 0 else "2"
    for j in (first_job, job):
        r = cli("wait", j, timeout=180)
        check(r.returncode == 0, f"job {j} ran on allocated workers: {r.stdout} {r.stderr}")
    workers = cli_json("workers").get("workers", [])
    slurm_workers = [w for w in workers if w["name"].startswith("slurm-3-")]
    check(slurm_workers, f"the workers are the allocations': {[w['name'] for w in workers]}")
    check(all(w.get("ends_at") for w in slurm_workers),
          f"an allocated worker knows when it must leave: {slurm_workers}")
    ran_on = {cli_json("status", f"{job}.{i}").get("worker") for i in range(4)}
    ids = {w["id"] for w in slurm_workers}
    check(ran_on <= ids, f"tasks ran on allocated workers {ids}: {ran_on}")
    q = queue(3) or {}
    check(1 <= len(q.get("allocations", [])) <= 2, f"at most 2 allocations: {q}")
    r = cli("logs", f"{job}.3")
    check("task 3 ran" in r.stdout, f"a task's log: {r.stdout!r}")
    # Idle workers leave, their allocations end, and nothing new is asked.
    wait_for("squeue to empty", lambda: squeue() == [""], timeout=120)
    outputs = os.path.join(top, "server", "alloc")
    said = "".join(open(os.path.join(outputs, f)).read() for f in os.listdir(outputs)
                   if f.endswith(".out"))
    check("drover: worker left: idle for " in said,
          f"an allocated worker says why it left: {said[-2000:]!r}")

    def all_ended():
        allocations = (queue(3) or {}).get("allocations", [])
        return allocations and all(a["ended"] for a in allocations)
    wait_for("every allocation listed as ended", all_ended)

    # 3. No timeout: a worker that must leave cannot take it; no allocation.
    before = len((queue(3) or {}).get("allocations", []))
    r = cli("submit", "--", "true")
    check(r.returncode == 0, f"submit: {r.stdout} {r.stderr}")
    nojob = r.stdout.split()[0] if r.returncode == 0 else "3"
    # Two rounds of the allocation queues see it queued.
    rounds = cli_json("alloc", "list").get("rounds", 0)
    wait_for("two allocation rounds",
             lambda: cli_json("alloc", "list").get("rounds", 0) >= rounds + 2, timeout=30)
    status = cli_json("status", f"{nojob}.0")
    check(status.get("state") == "queued", f"the task without a timeout waits: {status}")
    check(len((queue(3) or {}).get("allocations", [])) == before,
          "no allocation for a task without a timeout")
    check(squeue() == [""], f"squeue stays empty: {squeue()}")
finally:
    if server:
        server.terminate()
        server.wait(timeout=30)
    subprocess.run(["bash", os.path.join(src, "tests/slurm/stop.sh"), cluster],
                   capture_output=True, timeout=120)
    if failures:
        log.seek(0)
        print("--- server log:\n" + log.read()[-6000:], file=sys.stderr)
        for f in sorted(os.listdir(os.path.join(top, "server", "alloc"))) if os.path.isdir(
                os.path.join(top, "server", "alloc")) else []:
            if f.endswith(".out"):
                print(f"--- {f}:\n" + open(os.path.join(top, "server", "alloc", f)).read()[-3000:],
                      file=sys.stderr)
    shutil.rmtree(top, ignore_errors=True)
if failures:
    sys.exit(f"slurm_alloc_test: {len(failures)} failed")
print("slurm_alloc_test: ok")
