#!/usr/bin/env python3
"""Randomized chaos test (issue 18): a real `drover server` and three real
`drover worker`s, a few hundred short tasks that record each run in a ledger
outside Drover, and a seeded schedule of kill -9 and restart of the workers
and the server, and SIGSTOP/SIGCONT of workers (alive, not running: they
cannot fence, their reapers must), on the memory store or on Redis.

After the faults stop it checks that every task succeeded, none is stuck,
none ran to its end twice unless its worker died while holding it, and no
two copies of one task ran at the same time (chaos_ledger.py says exactly
how). One JSON line per run on stdout:

    {"seed": 1, "store": "memory", "tasks": 150, "kills": {"worker": 6, ...},
     "duplicates": 0, "overlaps": 0, "stuck": 0, "lost": 0, ..., "ok": true}

and, for a failed run, each faulty task with its ledger lines, the server's
view, the faults around it and the log lines naming it (on stderr).

    tests/chaos/chaos.py --binary build/drover --store memory --seeds 1,2
    tests/chaos/chaos.py --binary build/drover --store redis --seeds 7 --tasks 300 \\
        --worker-kills 10 --server-kills 2 --keep always

The seed fixes the schedule (when each kill and restart happens, which
worker, the task durations, when each batch is submitted); what Drover does
in between is not fixed, so a failure may need a few runs of its seed to
come back. Exit status: 0 all runs passed, 1 a run failed, 2 the harness
could not run (a process did not start), 77 redis-server is missing (for
--store redis; ctest reports a skip).
"""

from __future__ import annotations

import argparse
import dataclasses
import heapq
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
import traceback
import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import drover  # noqa: E402  (the project's client, python/drover)
from drover.errors import ConnectionFailed, DroverError  # noqa: E402
from drover.errors import DroverWarning  # noqa: E402

from chaos_cluster import Cluster, Proc, RedisServer  # noqa: E402
from chaos_ledger import (  # noqa: E402
    TERMINAL, ApiTask, Fault, LedgerMonitor, analyze, task_command)

EXIT_FAILED, EXIT_HARNESS, EXIT_SKIP = 1, 2, 77
WORKERS = ("w0", "w1", "w2")


class HarnessError(Exception):
    """The test could not do its part (a process did not start); not a
    verdict on Drover's fault handling."""


# ---- the schedule ------------------------------------------------------------


class Schedule:
    """Everything the seed decides, made before the run starts."""

    def __init__(self, seed: int, a: argparse.Namespace) -> None:
        rng = random.Random(seed)
        # A few long tasks: their copies orphaned by a worker kill still run
        # when the task is placed again (issue 18 item 3).
        self.durations = [
            round(rng.uniform(a.long_min, a.long_max) if rng.random() < a.long_fraction
                  else rng.uniform(a.min_duration, a.max_duration), 2)
            for _ in range(a.tasks)]
        # Batch 0 goes in before the first fault; the others during them.
        cuts = sorted(rng.sample(range(1, a.tasks), a.batches - 1)) if a.batches > 1 else []
        bounds = [0] + cuts + [a.tasks]
        self.batches: List[Tuple[float, range]] = [(0.0, range(bounds[0], bounds[1]))]
        for b in range(1, a.batches):
            self.batches.append((rng.uniform(0.5, a.window * 0.6),
                                 range(bounds[b], bounds[b + 1])))
        # Kills: (time, role, restart delay, a number that picks the worker
        # among those running then). A worker is sometimes down for longer
        # than the lease TTL, so the server gives up on it; mostly it comes
        # back within a second or two, while its old tasks may still run.
        self.kills: List[Tuple[float, str, float, float]] = []
        for _ in range(a.worker_kills):
            down = (rng.uniform(a.lease_ttl * 0.6, a.lease_ttl * 1.5) if rng.random() < 0.25
                    else rng.uniform(0.05, 2.0))
            self.kills.append((rng.uniform(0.5, a.window), "worker", down, rng.random()))
        # Server kills in the first 60% of the window, so worker kills also
        # come after the last one (a server restart re-places what a worker
        # restart left behind, and would hide it).
        for _ in range(a.server_kills):
            self.kills.append((rng.uniform(1.0, a.window * 0.6), "server",
                               rng.uniform(0.1, 2.0), rng.random()))
        self.kills.sort()
        # Stops: SIGSTOP a worker, SIGCONT it `down` seconds later (time,
        # down, pick). A worker alive but not running cannot fence; its
        # reaper must end its tasks before their leases expire. Drawn from a
        # generator of their own, so a seed's kills stay what they were.
        stops_rng = random.Random(seed * 7919 + 1)
        self.stops: List[Tuple[float, float, float]] = []
        for _ in range(a.worker_stops):
            down = (stops_rng.uniform(a.lease_ttl * 0.6, a.lease_ttl * 1.5)
                    if stops_rng.random() < 0.5 else stops_rng.uniform(0.05, 2.0))
            self.stops.append((stops_rng.uniform(0.5, a.window), down, stops_rng.random()))
        self.stops.sort()


# ---- one run -----------------------------------------------------------------


class Run:
    def __init__(self, seed: int, a: argparse.Namespace, root: str) -> None:
        self.seed = seed
        self.a = a
        self.dir = root
        self.sched = Schedule(seed, a)
        self.ledger_path = os.path.join(root, "ledger")
        self.redis: Optional[RedisServer] = None
        server_flags = ["--heartbeat", a.heartbeat_s, "--lease-ttl", f"{a.lease_ttl:g}s",
                        "--restore-settle", a.restore_settle]
        worker_flags = ["--isolation", a.isolation]
        if os.geteuid() == 0:
            worker_flags.append("--run-as-root")
        self.cluster = Cluster(a.binary, root, server_flags, worker_flags)
        self.faults: List[Fault] = []
        self.t0_ns = 0
        self.jobs: Dict[int, int] = {}  # batch -> job id
        self.kill_counts = {"worker": 0, "server": 0, "skipped": 0, "stop": 0}
        self.stopped: Dict[str, Any] = {}  # worker name -> the stopped Proc
        self.log: List[str] = []  # what the schedule did, with times
        self.down: set = set()  # killed by the test, restart pending
        self.crashes: List[str] = []  # processes that exited without being killed

    # -- helpers

    def rel(self, t_ns: float) -> str:
        return f"+{(t_ns - self.t0_ns) / 1e9:.3f}s"

    def note(self, text: str) -> None:
        self.log.append(f"{self.rel(time.time_ns())} {text}")

    def client(self) -> drover.Client:
        return drover.Client(access_file=self.cluster.access_file, timeout=10.0)

    def record(self, kind: str, role: str, p: Proc, t_ns: int) -> None:
        self.faults.append(Fault(t_ns, kind, role, p.name, p.incarnation, p.pid))
        self.note(f"{kind} {p.name} (start {p.incarnation}, pid {p.pid})")

    def start_worker(self, name: str) -> None:
        p = self.cluster.start_worker(name)
        self.record("start", "worker", p, p.start_ns)

    def start_server(self) -> None:
        p = self.cluster.start_server()
        self.record("start", "server", p, p.start_ns)

    # -- submission

    def key(self, i: int) -> str:
        return f"t{i}"

    def submit(self, batch: int) -> bool:
        """Submits batch ``batch`` as job "chaos-<batch>"; False if the server
        could not be reached (try again later). A job whose POST broke may
        exist: it is looked up by name before submitting again."""
        name = f"chaos-{batch}"
        try:
            with self.client() as c:
                for j in c.jobs():
                    if j.name == name:
                        self.jobs[batch] = j.id
                        self.note(f"batch {batch} found as job {j.id} after a broken submit")
                        return True
                job = c.job(name)
                for i in self.sched.batches[batch][1]:
                    job.task(task_command(self.ledger_path, self.key(i), self.sched.durations[i]),
                             name=self.key(i), retries=self.a.retries, retry_backoff="200ms")
                job.submit()
                self.jobs[batch] = job.id
                self.note(f"batch {batch}: job {job.id}, {len(self.sched.batches[batch][1])} tasks")
                return True
        except (ConnectionFailed, drover.errors.ApiError) as e:
            self.note(f"batch {batch}: not submitted yet ({e})")
            return False

    # -- the fault schedule

    def chaos(self) -> None:
        """Runs the schedule: submissions, kills and restarts at their times
        (the times are the test's input, not synchronisation)."""
        heap: List[Tuple[float, int, str, Callable[[], None]]] = []
        seq = 0

        def at(t: float, what: str, fn: Callable[[], None]) -> None:
            nonlocal seq
            heapq.heappush(heap, (t, seq, what, fn))
            seq += 1

        def submit_at(batch: int, t: float) -> None:
            def go() -> None:
                if not self.submit(batch):
                    if time.time_ns() - self.t0_ns > (self.a.window + 120) * 1e9:
                        raise HarnessError(f"batch {batch} could not be submitted")
                    at(elapsed() + 0.25, f"submit {batch}", go)
            at(t, f"submit {batch}", go)

        def elapsed() -> float:
            return (time.time_ns() - self.t0_ns) / 1e9

        def restart(name: str) -> None:
            self.down.discard(name)
            if name == "server":
                self.start_server()
            else:
                self.start_worker(name)

        def kill(role: str, down: float, pick: float) -> None:
            if role == "server":
                p = self.cluster.server
                assert p is not None
                if "server" in self.down:
                    self.kill_counts["skipped"] += 1
                    self.note("server kill skipped: it is down")
                    return
                name = "server"
            else:
                up = [n for n in WORKERS if n not in self.down]
                if not up:
                    self.kill_counts["skipped"] += 1
                    self.note("worker kill skipped: none is up")
                    return
                name = up[int(pick * len(up))]
                p = self.cluster.workers[name]
            self.record("kill", role, p, p.kill9())
            self.kill_counts[role] += 1
            self.down.add(name)
            self.stopped.pop(name, None)  # killed while stopped: nothing to continue
            at(elapsed() + down, f"restart {name}", lambda: restart(name))

        def stop(down: float, pick: float) -> None:
            up = [n for n in WORKERS if n not in self.down and n not in self.stopped]
            if not up:
                self.kill_counts["skipped"] += 1
                self.note("worker stop skipped: none is up and running")
                return
            name = up[int(pick * len(up))]
            p = self.cluster.workers[name]
            t = time.time_ns()
            p.popen.send_signal(signal.SIGSTOP)
            self.record("stop", "worker", p, t)
            self.kill_counts["stop"] += 1
            self.stopped[name] = p
            at(elapsed() + down, f"continue {name}", lambda: cont(name, p))

        def cont(name: str, p: Any) -> None:
            if self.stopped.get(name) is not p:
                return  # killed (and maybe restarted) meanwhile
            del self.stopped[name]
            if p.alive():
                p.popen.send_signal(signal.SIGCONT)
                self.record("cont", "worker", p, time.time_ns())

        for b, (t, _) in enumerate(self.sched.batches):
            submit_at(b, t)
        for t, down, pick in self.sched.stops:
            at(t, "stop worker", lambda down=down, pick=pick: stop(down, pick))
        for t, role, down, pick in self.sched.kills:
            at(t, f"kill {role}", lambda role=role, down=down, pick=pick: kill(role, down, pick))
        while heap:
            t, _, _, fn = heapq.heappop(heap)
            wait = t - elapsed()
            if wait > 0:
                time.sleep(wait)  # the schedule's own timing: the fault is the input
            self.check_crashes()
            fn()
        self.check_crashes()

    def check_crashes(self) -> None:
        """A server or worker that exited without being killed by the test
        crashed: that is recorded (it fails the run) and it is started again,
        so the run goes on."""
        procs = [("server", self.cluster.server)] + [(n, self.cluster.workers[n]) for n in WORKERS]
        for name, p in procs:
            if p is None or name in self.down or p.alive():
                continue
            code = p.popen.returncode
            self.crashes.append(f"{name} (start {p.incarnation}, pid {p.pid}) exited on its own "
                                f"with status {code}; its last lines:\n{p.tail(15)}")
            self.record("crash", "server" if name == "server" else "worker", p, time.time_ns())
            if name == "server":
                self.start_server()
            else:
                self.start_worker(name)

    # -- after the faults

    def all_tasks(self) -> Dict[str, ApiTask]:
        """The server's view of every submitted task, by key."""
        out: Dict[str, ApiTask] = {}
        with self.client() as c:
            for job_id in self.jobs.values():
                for t in c.job_info(job_id).tasks:
                    out[t.group] = ApiTask(t.id, t.state, t.attempt, t.worker, t.reason)
        return out

    def wait_all_terminal(self) -> Tuple[Dict[str, ApiTask], float]:
        """Polls the tasks until all are terminal, or nothing has changed for
        --stall seconds (then the rest are stuck), or --deadline passed.
        Returns the last view and when it was all terminal (INF if never)."""
        start = time.monotonic()
        last_change = start
        last_sig: Any = None
        view: Dict[str, ApiTask] = {}
        while True:
            self.check_crashes()
            try:
                view = self.all_tasks()
            except DroverError as e:
                self.note(f"reading tasks failed: {e}")
            sig = sorted((k, t.state, t.attempt) for k, t in view.items())
            now = time.monotonic()
            if sig != last_sig:
                last_sig, last_change = sig, now
            if len(view) == self.a.tasks and all(t.state in TERMINAL for t in view.values()):
                return view, now - start
            if now - last_change > self.a.stall or now - start > self.a.deadline:
                return view, float("inf")
            time.sleep(0.25)  # polling a condition, with the deadlines above

    # -- the whole run

    def execute(self) -> Dict[str, Any]:
        a = self.a
        wall = time.monotonic()
        self.t0_ns = time.time_ns()
        if a.store == "redis":
            self.redis = RedisServer(a.redis_server, os.path.join(self.dir, "redis"))
            self.cluster.server_flags += ["--redis", self.redis.url]
        workdirs = {n: self.cluster.workdir(n) for n in WORKERS}
        monitor = LedgerMonitor(self.ledger_path, workdirs)
        try:
            self.start_server()
            self.cluster.wait_server(60)
            for n in WORKERS:
                self.start_worker(n)
            for n in WORKERS:
                self.cluster.wait_worker(n, 60)
            monitor.start()
            self.t0_ns = time.time_ns()
            self.chaos()
            faults_end = time.monotonic()
            self.note("faults over")
            self.check_crashes()
            # Everything is running again (restarts were scheduled): wait
            # until it is up before judging.
            self.cluster.wait_server(120)
            for n in WORKERS:
                self.cluster.wait_worker(n, 120)
            view, recovery = self.wait_all_terminal()
            self.note("all terminal" if recovery != float("inf") else "gave up waiting")
            monitor.finish()
            explain = {}
            verdict = analyze([self.key(i) for i in range(a.tasks)], monitor.ledger.copies,
                              view, self.faults)
            # What the verdict read, beside the ledger, to judge it again.
            with open(os.path.join(self.dir, "verdict_input.json"), "w") as f:
                json.dump({"faults": [dataclasses.asdict(x) for x in self.faults],
                           "api": {k: dataclasses.asdict(t) for k, t in view.items()}}, f)
            for p in verdict.problems[: a.report_limit]:
                t = view.get(p.key)
                if t is not None and t.state not in TERMINAL:
                    try:
                        with self.client() as c:
                            explain[p.key] = c.task(t.id).info().explain
                    except DroverError as e:
                        explain[p.key] = f"(cannot read: {e})"
        finally:
            if monitor.is_alive():
                monitor.finish()
            self.cluster.stop()
            if self.redis is not None:
                self.redis.stop()
        summary: Dict[str, Any] = {
            "seed": self.seed, "store": a.store, "tasks": a.tasks,
            "kills": {"worker": self.kill_counts["worker"], "server": self.kill_counts["server"],
                      "worker_stops": self.kill_counts["stop"]},
            "duplicates": verdict.duplicates, "overlaps": verdict.overlaps,
            "stuck": verdict.stuck, "lost": verdict.lost,
            "false_successes": verdict.false_successes,
            "orphans_alive_at_end": verdict.orphans_alive_at_end,
            "orphan_completions": verdict.orphan_completions,
            "orphan_reruns": verdict.orphan_reruns,
            "copies": verdict.copies,
            "recovery_s": None if recovery == float("inf") else round(recovery, 1),
            "faults_s": round(faults_end - wall, 1),
            "wall_s": round(time.monotonic() - wall, 1),
            "crashes": len(self.crashes),
            "ok": verdict.ok and not self.crashes,
        }
        if monitor.ledger.bad_lines:
            summary["bad_ledger_lines"] = len(monitor.ledger.bad_lines)
        if not summary["ok"]:
            self.report(verdict, view, monitor, explain)
        return summary

    def report(self, verdict: Any, view: Dict[str, ApiTask], monitor: LedgerMonitor,
               explain: Dict[str, str]) -> None:
        """Each faulty task: what went wrong, its copies, the server's view,
        the faults around it and the log lines that name it."""
        err = sys.stderr
        print(f"\n=== seed {self.seed} store {self.a.store}: {len(verdict.problems)} faulty tasks, "
              f"{len(self.crashes)} crashes (times from the schedule's start)\n"
              f"rerun: {self.rerun()}", file=err)
        for c in self.crashes:
            print(f"\n--- crash: {c}", file=err)
        for p in verdict.problems[: self.a.report_limit]:
            t = view.get(p.key)
            print(f"\n--- task {t.id if t else '?'} ({p.key}): {', '.join(p.kinds)}", file=err)
            for n in p.notes:
                print(f"    {n}", file=err)
            if t is not None:
                print(f"    server: state {t.state}, attempt {t.attempt}, worker {t.worker}, "
                      f"reason {t.reason!r}", file=err)
            if p.key in explain:
                print(f"    explain: {explain[p.key]}", file=err)
            copies = monitor.ledger.copies.get(p.key, [])
            lo, hi = float("inf"), 0.0
            for c in copies:
                if c.end_ns is not None:
                    stop = f"end {self.rel(c.end_ns)}"
                elif c.alive_at_end:
                    stop = "STILL RUNNING at the end (killed by the test)"
                elif c.death_ns is not None:
                    stop = f"no end line, process gone by {self.rel(c.death_ns)}"
                else:
                    stop = "no end line"
                print(f"    copy: attempt {c.attempt} on {c.worker} pid {c.pid}: start "
                      f"{self.rel(c.start_ns)}, {stop}  [{c.workdir}]", file=err)
                lo = min(lo, c.start_ns)
                hi = max(hi, c.stop_ns() if c.stop_ns() != float("inf") else time.time_ns())
            for c in copies:
                for line in c.lines:
                    print(f"    ledger: {line}", file=err)
            if copies:
                near = [f for f in self.faults if lo - 3e9 <= f.t_ns <= hi + 3e9]
                for f in near:
                    print(f"    fault: {self.rel(f.t_ns)} {f.kind} {f.name} (start {f.incarnation},"
                          f" pid {f.pid})", file=err)
            if t is not None:
                task_rx = r"(?<![\d.])" + t.id.replace(".", r"\.") + r"(?![\d])"
                for line in self.cluster.grep(task_rx, limit=self.a.log_lines):
                    print(f"    log: {line}", file=err)
        if len(verdict.problems) > self.a.report_limit:
            print(f"\n(and {len(verdict.problems) - self.a.report_limit} more faulty tasks)",
                  file=err)
        print("\n--- schedule as run:", file=err)
        for line in self.log:
            print(f"    {line}", file=err)

    def rerun(self) -> str:
        a = self.a
        return (f"tests/chaos/chaos.py --binary {a.binary} --store {a.store} --seeds {self.seed} "
                f"--tasks {a.tasks} --batches {a.batches} --worker-kills {a.worker_kills} "
                f"--server-kills {a.server_kills} --worker-stops {a.worker_stops} "
                f"--window {a.window:g} "
                f"--min-duration {a.min_duration:g} --max-duration {a.max_duration:g} "
                f"--long-fraction {a.long_fraction:g} --long-min {a.long_min:g} "
                f"--long-max {a.long_max:g} --retries {a.retries} "
                f"--lease-ttl {a.lease_ttl:g} --heartbeat {a.heartbeat_s} "
                f"--restore-settle {a.restore_settle} --isolation {a.isolation} --keep always")


# ---- command line ------------------------------------------------------------


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--binary", default=os.environ.get("DROVER_BINARY", "build/drover"),
                   help="the drover binary (default $DROVER_BINARY, then build/drover)")
    p.add_argument("--store", choices=("memory", "redis"), default="memory")
    p.add_argument("--seeds", default="1", help="comma-separated seeds, one run each")
    p.add_argument("--tasks", type=int, default=150)
    p.add_argument("--batches", type=int, default=3, help="jobs the tasks are split into")
    p.add_argument("--retries", type=int, default=5)
    p.add_argument("--min-duration", type=float, default=0.2, help="seconds")
    p.add_argument("--max-duration", type=float, default=1.5, help="seconds")
    p.add_argument("--long-fraction", type=float, default=0.05,
                   help="share of tasks that run --long-min..--long-max seconds instead")
    p.add_argument("--long-min", type=float, default=3.0)
    p.add_argument("--long-max", type=float, default=6.0)
    p.add_argument("--worker-kills", type=int, default=6)
    p.add_argument("--server-kills", type=int, default=1)
    p.add_argument("--worker-stops", type=int, default=3,
                   help="SIGSTOP of a worker, SIGCONT later (sometimes past the lease TTL)")
    p.add_argument("--window", type=float, default=20.0,
                   help="seconds from the first submission in which the faults happen")
    p.add_argument("--heartbeat", dest="heartbeat_s", default="1s")
    p.add_argument("--lease-ttl", type=float, default=8.0, help="seconds")
    p.add_argument("--restore-settle", default="4s")
    p.add_argument("--isolation", default="none", help="the workers' --isolation")
    p.add_argument("--stall", type=float, default=0.0,
                   help="seconds without any task changing state after which the tasks not yet "
                        "terminal count as stuck (default: lease TTL + 25)")
    p.add_argument("--deadline", type=float, default=600.0,
                   help="most seconds to wait for all tasks after the faults")
    p.add_argument("--redis-server", default=shutil.which("redis-server") or "")
    p.add_argument("--keep", choices=("never", "failed", "always"), default="failed",
                   help="keep the run's directory (logs, ledger, state)")
    p.add_argument("--report-limit", type=int, default=15, help="faulty tasks described per run")
    p.add_argument("--log-lines", type=int, default=12, help="log lines shown per faulty task")
    a = p.parse_args(argv)
    if a.stall <= 0:
        a.stall = a.lease_ttl + 25
    if a.tasks < a.batches or a.batches < 1:
        p.error("--tasks must be at least --batches (>= 1)")
    return a


def main(argv: Optional[List[str]] = None) -> int:
    a = parse_args(argv)
    # "queued until a worker that can run it joins": expected while all the
    # workers are down.
    warnings.simplefilter("ignore", DroverWarning)
    if not os.access(a.binary, os.X_OK):
        print(f"chaos: no drover binary at {a.binary} (--binary or $DROVER_BINARY)",
              file=sys.stderr)
        return EXIT_HARNESS
    a.binary = os.path.abspath(a.binary)
    if a.store == "redis" and not a.redis_server:
        print("chaos: redis-server is not installed; skipping the Redis store", file=sys.stderr)
        return EXIT_SKIP
    status = 0
    for seed in [int(s) for s in a.seeds.split(",") if s.strip()]:
        root = tempfile.mkdtemp(prefix=f"drover_chaos_{a.store}_{seed}_")
        ok = False
        try:
            summary = Run(seed, a, root).execute()
            ok = bool(summary["ok"])
            print(json.dumps(summary), flush=True)
            status = max(status, 0 if ok else EXIT_FAILED)
        except (HarnessError, RuntimeError) as e:
            print(json.dumps({"seed": seed, "store": a.store, "harness_error": str(e)[:2000],
                              "ok": False}), flush=True)
            traceback.print_exc()
            status = EXIT_HARNESS
        if a.keep == "always" or (a.keep == "failed" and not ok):
            print(f"chaos: seed {seed}: logs, ledger and state kept in {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
