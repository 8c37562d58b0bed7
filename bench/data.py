#!/usr/bin/env python3
"""B7 (../shared/BENCH.md): moving files between workers.

Workers in network namespaces of their own (b7w0, b7w1, ... on a bridge,
10.214.0.0/24; the server in the root namespace at 10.214.0.1), as
tests/multihost makes them.

a) Throughput: a 1 GiB output of a task on w0, read by a dependent on w1.
   Measured: the fetching worker's own figure (its log line "fetched ... in
   S s": request to the file whole, hashed and in its cache). Baseline in
   the same run: `curl` over HTTPS between the same two namespaces, the same
   file, from `openssl s_server -WWW` (TLS 1.3), written to disk on w1.
   Goal: >= 0.9x curl's throughput.
b) A cached input's cost per task: 100 tasks on w1 that each get a 4 MiB
   input already in w1's cache, against 100 tasks with no input; (difference
   of the two jobs' makespans) / 100. Goal: < 1 ms.
c) Fan-out: a 256 MiB output on w0 read by one dependent on each of 8
   workers, against 8 sequential copies from the producer (8 x the one-copy
   time measured in a)). Goal: faster than the sequential copies.

Usage: bench/data.py [--build build] [--fanout 8]. Root (netns). The last
line is JSON.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

BRIDGE = "b7br"
NET = "10.214.0"


def sh(*args, check=True, **kw):
    return subprocess.run(list(args), check=check, capture_output=True, text=True, **kw)


def ns_name(i):
    return f"b7w{i}"


def setup_lan(n):
    teardown_lan(n)
    sh("ip", "link", "add", BRIDGE, "type", "bridge")
    sh("ip", "addr", "add", f"{NET}.1/24", "dev", BRIDGE)
    sh("ip", "link", "set", BRIDGE, "up")
    for i in range(n):
        ns = ns_name(i)
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", f"b7v{i}", "type", "veth", "peer", "name", "eth0", "netns", ns)
        sh("ip", "link", "set", f"b7v{i}", "master", BRIDGE, "up")
        sh("ip", "-n", ns, "addr", "add", f"{NET}.{10 + i}/24", "dev", "eth0")
        sh("ip", "-n", ns, "link", "set", "eth0", "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")


def teardown_lan(n):
    for i in range(n):
        sh("ip", "netns", "del", ns_name(i), check=False)
        sh("ip", "link", "del", f"b7v{i}", check=False)
    sh("ip", "link", "del", BRIDGE, check=False)


class Cluster:
    def __init__(self, drover, root, workers):
        self.drover = drover
        self.root = root
        self.procs = []
        self.logs = {}
        state = os.path.join(root, "state")
        log = open(os.path.join(root, "server.log"), "w")
        self.server = subprocess.Popen(
            [drover, "server", "--state-dir", state, "--bind", f"{NET}.1", "--port", "0",
             "--access-file", os.path.join(root, "access.json")],
            stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(self.server)
        self.access = os.path.join(root, "access.json")
        self.wait_for(os.path.join(root, "server.log"), r"listening on", 30)
        self.wait_for_file(self.access, 30)
        for i in range(workers):
            path = os.path.join(root, f"w{i}.log")
            out = open(path, "w")
            p = subprocess.Popen(
                ["ip", "netns", "exec", ns_name(i), drover, "worker", "--access", self.access,
                 "--name", f"w{i}", "--workdir", os.path.join(root, f"work{i}"),
                 "--label", f"node=w{i}", "--isolation", "none", "--run-as-root",
                 "--cpus", "0-1"],
                stdout=out, stderr=subprocess.STDOUT)
            self.procs.append(p)
            self.logs[i] = path
            self.wait_for(path, r"attached as worker", 30)

    @staticmethod
    def wait_for(path, pattern, timeout):
        end = time.time() + timeout
        while time.time() < end:
            with open(path) as f:
                m = re.search(pattern, f.read())
            if m:
                return m
            time.sleep(0.05)
        raise RuntimeError(f"{path}: no /{pattern}/ within {timeout} s")

    @staticmethod
    def wait_for_file(path, timeout):
        end = time.time() + timeout
        while not os.path.exists(path):
            if time.time() > end:
                raise RuntimeError(f"no {path}")
            time.sleep(0.05)

    def run(self, spec):
        path = os.path.join(self.root, "job.toml")
        with open(path, "w") as f:
            f.write(to_toml(spec))
        env = dict(os.environ, DROVER_ACCESS=self.access)
        out = subprocess.run([self.drover, "run", "--plain", path], env=env,
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError("drover run failed:\n" + out.stdout + out.stderr)
        m = re.search(r"job (\d+)", out.stdout)
        return int(m.group(1))

    def task(self, job, index):
        env = dict(os.environ, DROVER_ACCESS=self.access)
        out = subprocess.run([self.drover, "status", "--json", f"{job}.{index}"], env=env,
                             capture_output=True, text=True, check=True)
        return json.loads(out.stdout)

    def fetch_seconds(self, worker, count=1):
        """The last `count` fetch times a worker logged."""
        with open(self.logs[worker]) as f:
            times = [float(x) for x in re.findall(r"fetched .* in ([0-9.]+) s", f.read())]
        return times[-count:]

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


def to_toml(spec):
    """The job file for `spec` ({"name", "task": [...]} as task() makes)."""
    q = json.dumps  # a JSON string is a TOML basic string
    lines = [f"name = {q(spec['name'])}"]
    for t in spec["task"]:
        lines += ["", "[[task]]", f"id = {q(t['id'])}", f"command = {q(t['command'])}"]
        if "depends_on" in t:
            lines.append("depends_on = [" + ", ".join(q(d) for d in t["depends_on"]) + "]")
        if "array" in t:
            lines.append(f"array = {q(t['array'])}")
        r = t["resources"]
        lines.append(f"resources = {{ cpus = {r['cpus']}, labels = {{ node = "
                     f"{q(r['labels']['node'])} }} }}")
    return "\n".join(lines) + "\n"


def task(id_, node, command, deps=(), array=None):
    t = {"id": id_, "command": command, "resources": {"labels": {"node": node}, "cpus": 0.5}}
    if deps:
        t["depends_on"] = list(deps)
    if array:
        t["array"] = array
    return t


def curl_baseline(root, size_mib):
    """Seconds for curl on w1 to fetch a file of size_mib from openssl s_server on w0."""
    d = os.path.join(root, "curl")
    os.makedirs(d, exist_ok=True)
    sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
       "-nodes", "-keyout", f"{d}/k.pem", "-out", f"{d}/c.pem", "-days", "1", "-subj", "/CN=b7")
    with open(f"{d}/file", "wb") as f:
        subprocess.run(["head", "-c", f"{size_mib}M", "/dev/zero"], stdout=f, check=True)
    srv = subprocess.Popen(
        ["ip", "netns", "exec", ns_name(0), "openssl", "s_server", "-WWW", "-tls1_3",
         "-accept", "9443", "-cert", f"{d}/c.pem", "-key", f"{d}/k.pem", "-quiet"],
        cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            r = sh("ip", "netns", "exec", ns_name(1), "curl", "-sk", "-o", "/dev/null",
                   f"https://{NET}.10:9443/c.pem", check=False)
            if r.returncode == 0:
                break
            time.sleep(0.05)
        best = None
        for _ in range(2):
            out = f"{d}/got"
            t0 = time.monotonic()
            sh("ip", "netns", "exec", ns_name(1), "curl", "-sk", "-o", out,
               f"https://{NET}.10:9443/file")
            secs = time.monotonic() - t0
            if os.path.getsize(out) != size_mib << 20:
                raise RuntimeError("curl got a short file")
            os.remove(out)
            best = secs if best is None else min(best, secs)
        return best
    finally:
        srv.kill()
        srv.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--fanout", type=int, default=8)
    ap.add_argument("--size-mib", type=int, default=1024)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/data.py needs root (network namespaces)")
    drover = os.path.abspath(os.path.join(args.build, "drover"))
    n = max(2, args.fanout + 1)
    root = tempfile.mkdtemp(prefix="drover-b7-")
    setup_lan(n)
    c = None
    result = {}
    try:
        c = Cluster(drover, root, n)
        size = args.size_mib
        # a) 1 GiB w0 -> w1, then the curl baseline.
        c.run({"name": "b7a", "task": [
            task("prep", "w0", f"head -c {size}M /dev/zero > $DROVER_OUTPUT_DIR/big.bin"),
            task("use", "w1", "true", deps=["prep"])]})
        drover_s = c.fetch_seconds(1)[0]
        curl_s = curl_baseline(root, size)
        result["a_drover_mib_s"] = round(size / drover_s, 1)
        result["a_curl_mib_s"] = round(size / curl_s, 1)
        result["a_ratio_vs_curl"] = round(curl_s / drover_s, 3)
        print(f"B7a {size} MiB w0->w1: drover {size / drover_s:.0f} MiB/s, curl "
              f"{size / curl_s:.0f} MiB/s: {curl_s / drover_s:.2f}x curl (goal >= 0.9x)")

        # b) 100 tasks with a cached 4 MiB input against 100 without.
        def makespan(spec, group_index):
            job = c.run(spec)
            tasks = [c.task(job, i) for i in range(group_index, group_index + 100)]
            start = min(t["started_at_ms"] for t in tasks)
            end = max(t["finished_at_ms"] for t in tasks)
            return (end - start) / 1000.0
        warm = {"name": "b7b-warm", "task": [
            task("prep", "w0", "head -c 4M /dev/urandom > $DROVER_OUTPUT_DIR/in.bin"),
            task("use", "w1", "true", deps=["prep"], array="0-99")]}
        with_input = makespan(warm, 1)  # the first fetch, then 99 cached: warm-up
        with_input = makespan(warm, 1)
        without = makespan({"name": "b7b-none", "task": [
            task("prep", "w0", "true"),
            task("use", "w1", "true", deps=["prep"], array="0-99")]}, 1)
        per_task_ms = (with_input - without) / 100 * 1000
        result["b_cached_input_ms_per_task"] = round(per_task_ms, 3)
        print(f"B7b 100 tasks: with a cached input {with_input:.3f} s, without {without:.3f} s: "
              f"{per_task_ms:+.3f} ms per task (goal < 1 ms)")

        # c) Fan-out of 256 MiB to `fanout` workers against sequential copies.
        if args.fanout > 0:
            fan = 256
            spec = {"name": "b7c", "task": [
                task("prep", "w0", f"head -c {fan}M /dev/zero > $DROVER_OUTPUT_DIR/fan.bin")]}
            for i in range(args.fanout):
                spec["task"].append(task(f"use{i}", f"w{i + 1}", "true", deps=["prep"]))
            job = c.run(spec)
            prep = c.task(job, 0)
            users = [c.task(job, i + 1) for i in range(args.fanout)]
            fan_s = (max(u["started_at_ms"] for u in users) - prep["finished_at_ms"]) / 1000.0
            one = fan / (size / drover_s)
            sequential = args.fanout * one
            result["c_fanout_s"] = round(fan_s, 3)
            result["c_sequential_s"] = round(sequential, 3)
            result["c_ratio"] = round(fan_s / sequential, 3)
            print(f"B7c {fan} MiB to {args.fanout} workers: {fan_s:.2f} s (prep's end to the "
                  f"last start) against {sequential:.2f} s for {args.fanout} sequential copies: "
                  f"{fan_s / sequential:.2f}x (goal < 1)")
    finally:
        if c is not None:
            c.stop()
        teardown_lan(n)
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
