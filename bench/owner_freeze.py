#!/usr/bin/env python3
"""Idle-desktop mode: how fast an owner gets the machine back.

A server and one `drover worker --desktop` (its owner's input is a file this
script touches, `--idle-source file:PATH`; cgroup v1 isolation when this
machine has it, so the freezer does the work) run one long task. Then, N
times: the owner "types" (the file's modification time becomes now) and the
script reads the task's cgroup until the kernel says FROZEN; the task is
resumed after the owner is quiet for --resume-after, and the next trial
waits for THAWED. Measured: input -> FROZEN as this script saw it (its
polling adds up to ~0.1 ms), and the worker's own figure (from the input's
time to every task frozen, `drover_owner_freeze_seconds` on the server).
Baseline, in the same run: the worker's poll interval (20 ms), the floor a
sampling detector can reach; and the goal, 100 ms p99.

Then one vacate: a second worker whose owner stays past --suspend-for; the
time from the worker's vacate (its log line's time) to the task seen queued
again on the server (`drover status` polled, so it includes one CLI run).

Usage: bench/owner_freeze.py [--build build] [--trials 100]. Root (cgroups).
The last line is JSON.
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time


def percentile(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--trials", type=int, default=100)
    args = ap.parse_args()
    drover = os.path.abspath(os.path.join(args.build, "drover"))
    tmp = tempfile.mkdtemp(prefix="drover-freeze-")
    access = os.path.join(tmp, "access.json")
    owner = os.path.join(tmp, "owner")
    env = dict(os.environ, DROVER_ACCESS=access)
    procs = []
    try:
        server = subprocess.Popen(
            [drover, "server", "--bind", "127.0.0.1", "--port", "0", "--state-dir",
             os.path.join(tmp, "state"), "--access-file", access],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        procs.append(server)
        for line in server.stdout:
            if line.startswith("drover: listening on"):
                break
        wlog = open(os.path.join(tmp, "worker.log"), "w")
        worker = subprocess.Popen(
            [drover, "worker", "--access", access, "--name", "ws", "--workdir",
             os.path.join(tmp, "work"), "--run-as-root", "--desktop", "--idle-source",
             "file:" + owner, "--idle-after", "1s", "--resume-after", "150ms", "--suspend-for",
             "1h", "--max-outside-load", "1000"],
            stdout=wlog, stderr=subprocess.STDOUT, text=True)
        procs.append(worker)
        wait_for(lambda: "offering work" in read(wlog.name), 30, "the worker to offer work")
        r = subprocess.run([drover, "submit", "--", "sh", "-c",
                            "echo $$ > %s/pid; while :; do sleep 0.05; done" % tmp],
                           env=env, capture_output=True, text=True)
        job = r.stdout.strip()
        wait_for(lambda: os.path.exists(os.path.join(tmp, "pid")) and read(
            os.path.join(tmp, "pid")).strip(), 30, "the task to start")
        pid = read(os.path.join(tmp, "pid")).strip()
        state_file = freezer_state(pid)
        how = "cgroup freezer" if state_file else "SIGSTOP"

        def frozen():
            if state_file:
                return read(state_file).startswith("FROZEN")
            return proc_state(pid) == "T"

        seen = []
        for _ in range(args.trials):
            wait_for(lambda: not frozen(), 10, "the task to resume")
            t0 = time.time()
            os.utime(owner if os.path.exists(owner) else touch(owner), None)
            while not frozen():
                pass
            seen.append((time.time() - t0) * 1000)
        reported = [float(m) for m in
                    re.findall(r"tasks frozen ([0-9.]+) ms after", read(wlog.name))]
        subprocess.run([drover, "cancel", job], env=env, capture_output=True)
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)

        # One vacate: a second worker whose owner stays past --suspend-for.
        wlog2 = open(os.path.join(tmp, "worker2.log"), "w")
        worker = subprocess.Popen(
            [drover, "worker", "--access", access, "--name", "ws2", "--workdir",
             os.path.join(tmp, "work2"), "--run-as-root", "--desktop", "--idle-source",
             "file:" + owner, "--idle-after", "1s", "--resume-after", "1h", "--suspend-for",
             "300ms", "--max-outside-load", "1000"],
            stdout=wlog2, stderr=subprocess.STDOUT, text=True)
        procs.append(worker)
        wait_for(lambda: "offering work" in read(wlog2.name), 30, "the second worker to offer work")
        os.unlink(os.path.join(tmp, "pid"))
        r = subprocess.run([drover, "submit", "--", "sh", "-c",
                            "echo $$ > %s/pid; while :; do sleep 0.05; done" % tmp],
                           env=env, capture_output=True, text=True)
        task = r.stdout.strip() + ".0"
        wait_for(lambda: read(os.path.join(tmp, "pid")).strip(), 30, "the task to start")
        os.utime(owner, None)
        wait_for(lambda: "vacating " in read(wlog2.name), 10, "the vacate")

        def state():
            out = subprocess.run([drover, "status", task, "--json"], env=env,
                                 capture_output=True, text=True).stdout
            try:
                return json.loads(out).get("state", "")
            except ValueError:
                return ""
        wait_for(lambda: state() == "queued", 30, "the task to be queued again")
        queued_at = time.time()
        m = re.search(r"\[(\d+-\d+-\d+ \d+:\d+:\d+)\.(\d+)\] \[info\] worker ws2: vacating",
                      read(wlog2.name))
        vacated_at = time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")) + \
            int(m.group(2)) / 1000
        vacate_ms = (queued_at - vacated_at) * 1000
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
    goal = 100.0
    poll = 20.0
    result = {
        "bench": "owner_freeze",
        "trials": len(seen),
        "mechanism": how,
        "input_to_frozen_p50_ms": round(percentile(seen, 50), 2),
        "input_to_frozen_p99_ms": round(percentile(seen, 99), 2),
        "input_to_frozen_max_ms": round(max(seen), 2),
        "worker_reported_p50_ms": round(percentile(reported, 50), 2) if reported else None,
        "worker_reported_p99_ms": round(percentile(reported, 99), 2) if reported else None,
        "vacate_to_queued_ms": round(vacate_ms, 1),
        "poll_interval_ms": poll,
        "p99_over_poll_interval": round(percentile(seen, 99) / poll, 2),
        "p99_over_goal": round(percentile(seen, 99) / goal, 3),
    }
    print(f"input -> frozen ({how}), {len(seen)} trials: p50 {result['input_to_frozen_p50_ms']} ms, "
          f"p99 {result['input_to_frozen_p99_ms']} ms (goal {goal} ms: "
          f"{result['p99_over_goal']}x; poll interval {poll} ms)")
    print(f"vacate -> queued (SIGTERM, the task's default vacate signal, ends a shell loop "
          f"at once): {result['vacate_to_queued_ms']} ms, polled with `drover status`")
    print(json.dumps(result))


def touch(path):
    open(path, "a").close()
    return path


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def proc_state(pid):
    for line in read(f"/proc/{pid}/status").splitlines():
        if line.startswith("State:"):
            return line.split()[1]
    return ""


def freezer_state(pid):
    """The freezer.state file of the task's cgroup (v1), or None."""
    for line in read(f"/proc/{pid}/cgroup").splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and "freezer" in parts[1].split(","):
            path = "/sys/fs/cgroup/freezer" + parts[2] + "/freezer.state"
            if os.path.exists(path) and parts[2] != "/":
                return path
    return None


def wait_for(pred, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return
        time.sleep(0.005)
    sys.exit(f"owner_freeze: timed out waiting for {what}")


if __name__ == "__main__":
    main()
