#!/usr/bin/env python3
"""Randomized chaos test: a real `drover server` and three real `drover
worker`s, a few hundred short tasks that record each run in a ledger outside
Drover, and a seeded schedule of kill -9 and restart of the workers and the
server, and SIGSTOP/SIGCONT of workers (alive, not running: they cannot
fence, their reapers must), on the memory store or on Redis.

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

The harness (Schedule, Run, the command line) serves every chaos test: what
the tasks are and what more is judged of them is a workload's (SleepWorkload
here; chaos_files.py's for the data plane).
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
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import drover  # noqa: E402  (the project's client, python/drover)
from drover.errors import ConnectionFailed, DroverError  # noqa: E402
from drover.errors import DroverWarning  # noqa: E402

from chaos_cluster import Cluster, Proc, RedisServer  # noqa: E402
from chaos_ledger import (  # noqa: E402
    TERMINAL, ApiTask, Attempt, Copy, Fault, LedgerMonitor, Problem, analyze, task_command)

EXIT_FAILED, EXIT_HARNESS, EXIT_SKIP = 1, 2, 77
WORKERS = ("w0", "w1", "w2")


class HarnessError(Exception):
    """The test could not do its part (a process did not start); not a
    verdict on Drover's fault handling."""


# ---- the workload ------------------------------------------------------------


@dataclasses.dataclass
class Judgement:
    """What a workload finds beyond the ledger's common verdict: figures for
    the summary line, faulty tasks for the report, and whether it passed."""

    figures: Dict[str, Any] = dataclasses.field(default_factory=dict)
    problems: List[Problem] = dataclasses.field(default_factory=list)
    ok: bool = True


class Workload:
    """What a run's tasks are. Made with the options, the seed's generator
    (drawn from before the faults are) and the ledger's path, a workload
    names the tasks (``keys``, each its group's name in its job) and the
    jobs (``batches``: when each is submitted, and its body for ``POST
    /api/v1/jobs``); it may add flags to the processes and events to the
    schedule, and judges what the common verdict does not."""

    name = "chaos"  # the run directory's prefix
    keys: List[str]
    batches: List[Tuple[float, Dict[str, Any]]]

    @staticmethod
    def add_args(p: argparse.ArgumentParser) -> None:
        """Its own options."""

    @staticmethod
    def defaults(a: argparse.Namespace) -> Dict[str, Any]:
        """Its defaults for common options not given (retries, kills)."""
        return {}

    @staticmethod
    def check_args(p: argparse.ArgumentParser, a: argparse.Namespace) -> None:
        """Refuses (p.error) options that do not fit together."""

    @staticmethod
    def rerun_flags(a: argparse.Namespace) -> str:
        """Its options, for the command line that runs a seed again."""
        return ""

    def server_flags(self) -> List[str]:
        return []

    def worker_flags(self, name: str, directory: str) -> List[str]:
        """Flags of worker ``name`` alone; ``directory`` is the run's."""
        return []

    def schedule(self, run: "Run") -> None:
        """Adds the workload's own events to the run's schedule (run.at)."""

    def pick_worker(self, run: "Run", up: List[str], pick: float) -> str:
        """The worker a kill hits, among those ``up``; ``pick`` in [0, 1)
        is the seed's choice."""
        return up[int(pick * len(up))]

    def judge(self, copies: Dict[str, List[Copy]], view: Dict[str, ApiTask],
              attempts: Dict[str, List[Attempt]], workers: Dict[int, str],
              faults: Sequence[Fault]) -> Judgement:
        """Its verdict beyond chaos_ledger.analyze()'s, from the ledger's
        copies, the server's final view and attempts, the workers' names
        by id and the faults."""
        return Judgement()


class SleepWorkload(Workload):
    """Short tasks that only sleep: ``--tasks`` of them in ``--batches``
    jobs, a few of them long."""

    def __init__(self, a: argparse.Namespace, rng: random.Random, ledger: str) -> None:
        self.a = a
        # A few long tasks: their copies orphaned by a worker kill still run
        # when the task is placed again.
        self.durations = [
            round(rng.uniform(a.long_min, a.long_max) if rng.random() < a.long_fraction
                  else rng.uniform(a.min_duration, a.max_duration), 2)
            for _ in range(a.tasks)]
        self.keys = [f"t{i}" for i in range(a.tasks)]
        # Batch 0 goes in before the first fault; the others during them.
        cuts = sorted(rng.sample(range(1, a.tasks), a.batches - 1)) if a.batches > 1 else []
        bounds = [0] + cuts + [a.tasks]
        times = [0.0] + [rng.uniform(0.5, a.window * 0.6) for _ in range(1, a.batches)]
        self.batches: List[Tuple[float, Dict[str, Any]]] = []
        for b in range(a.batches):
            tasks = [{"id": self.keys[i],
                      "command": task_command(ledger, self.keys[i], self.durations[i]),
                      "retries": a.retries, "retry_backoff": "200ms"}
                     for i in range(bounds[b], bounds[b + 1])]
            self.batches.append((times[b], {"name": f"chaos-{b}", "task": tasks}))

    @staticmethod
    def add_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--tasks", type=int, default=150)
        p.add_argument("--batches", type=int, default=3, help="jobs the tasks are split into")

    @staticmethod
    def check_args(p: argparse.ArgumentParser, a: argparse.Namespace) -> None:
        if a.tasks < a.batches or a.batches < 1:
            p.error("--tasks must be at least --batches (>= 1)")

    @staticmethod
    def rerun_flags(a: argparse.Namespace) -> str:
        return f"--tasks {a.tasks} --batches {a.batches}"


# ---- the schedule ------------------------------------------------------------


class Schedule:
    """The faults the seed decides, drawn after the workload's plan (from the
    same generator), before the run starts."""

    def __init__(self, seed: int, a: argparse.Namespace, rng: random.Random) -> None:
        # Kills: (time, role, restart delay, a number that picks the worker
        # among those running then). A worker is sometimes down for longer
        # than the lease TTL, so the server gives up on it (--long-down);
        # mostly it comes back within a second or two, while its old tasks
        # may still run.
        self.kills: List[Tuple[float, str, float, float]] = []
        for _ in range(a.worker_kills):
            down = (rng.uniform(a.lease_ttl * a.long_down_min, a.lease_ttl * a.long_down_max)
                    if rng.random() < a.long_down_share else rng.uniform(0.05, 2.0))
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
    def __init__(self, seed: int, a: argparse.Namespace, root: str,
                 workload: Callable[..., Workload]) -> None:
        self.seed = seed
        self.a = a
        self.dir = root
        self.ledger_path = os.path.join(root, "ledger")
        rng = random.Random(seed)
        self.work = workload(a, rng, self.ledger_path)
        self.sched = Schedule(seed, a, rng)
        self.redis: Optional[RedisServer] = None
        server_flags = ["--heartbeat", a.heartbeat_s, "--lease-ttl", f"{a.lease_ttl:g}s",
                        "--restore-settle", a.restore_settle] + self.work.server_flags()
        # Loopback only, the file service too (other workers fetch outputs
        # from it).
        worker_flags = ["--isolation", a.isolation, "--files-bind", "127.0.0.1"]
        if os.geteuid() == 0:
            worker_flags.append("--run-as-root")
        self.cluster = Cluster(a.binary, root, server_flags, worker_flags,
                               {n: self.work.worker_flags(n, root) for n in WORKERS})
        self.faults: List[Fault] = []
        self.t0_ns = 0
        self.jobs: Dict[int, int] = {}  # batch -> job id
        self.kill_counts = {"worker": 0, "server": 0, "skipped": 0, "stop": 0}
        self.stopped: Dict[str, Any] = {}  # worker name -> the stopped Proc
        self.log: List[str] = []  # what the schedule did, with times
        self.down: Set[str] = set()  # killed by the test, restart pending
        self.crashes: List[str] = []  # processes that exited without being killed
        self._heap: List[Tuple[float, int, str, Callable[[], None]]] = []
        self._seq = 0

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

    def elapsed(self) -> float:
        """Seconds since the schedule started."""
        return (time.time_ns() - self.t0_ns) / 1e9

    def at(self, t: float, what: str, fn: Callable[[], None]) -> None:
        """Runs ``fn`` at ``t`` seconds into the schedule (while chaos() runs)."""
        heapq.heappush(self._heap, (t, self._seq, what, fn))
        self._seq += 1

    # -- submission

    def submit(self, batch: int) -> bool:
        """Submits batch ``batch``; False if the server could not be reached
        (try again later). A job whose POST broke may exist: it is looked up
        by name before submitting again."""
        spec = self.work.batches[batch][1]
        name = spec["name"]
        try:
            with self.client() as c:
                for j in c.jobs():
                    if j.name == name:
                        self.jobs[batch] = j.id
                        self.note(f"batch {batch} found as job {j.id} after a broken submit")
                        return True
                job = c.submit_spec(spec)
                self.jobs[batch] = job.id
                self.note(f"batch {batch}: job {job.id}, {len(spec['task'])} tasks")
                return True
        except (ConnectionFailed, drover.errors.ApiError) as e:
            self.note(f"batch {batch}: not submitted yet ({e})")
            return False

    # -- the fault schedule

    def chaos(self) -> None:
        """Runs the schedule: submissions, kills and restarts at their times
        (the times are the test's input, not synchronisation)."""
        at, elapsed = self.at, self.elapsed

        def submit_at(batch: int, t: float) -> None:
            def go() -> None:
                if not self.submit(batch):
                    if time.time_ns() - self.t0_ns > (self.a.window + 120) * 1e9:
                        raise HarnessError(f"batch {batch} could not be submitted")
                    at(elapsed() + 0.25, f"submit {batch}", go)
            at(t, f"submit {batch}", go)

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
                name = self.work.pick_worker(self, up, pick)
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

        for b, (t, _) in enumerate(self.work.batches):
            submit_at(b, t)
        for t, down, pick in self.sched.stops:
            at(t, "stop worker", lambda down=down, pick=pick: stop(down, pick))
        for t, role, down, pick in self.sched.kills:
            at(t, f"kill {role}", lambda role=role, down=down, pick=pick: kill(role, down, pick))
        self.work.schedule(self)
        while self._heap:
            t, _, _, fn = heapq.heappop(self._heap)
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
            if (len(view) == len(self.work.keys)
                    and all(t.state in TERMINAL for t in view.values())):
                return view, now - start
            if now - last_change > self.a.stall or now - start > self.a.deadline:
                return view, float("inf")
            time.sleep(0.25)  # polling a condition, with the deadlines above

    def history(self, view: Dict[str, ApiTask]) -> Tuple[Dict[str, List[Attempt]], Dict[int, str]]:
        """Every task's attempts as the server keeps them, and the workers'
        names by id. Raises HarnessError if the server does not answer."""
        for tries in range(5):
            try:
                attempts: Dict[str, List[Attempt]] = {}
                with self.client() as c:
                    # The client has no typed view of "attempts": the raw answer.
                    for key, t in view.items():
                        d = c._transport.json("GET", f"/api/v1/tasks/{t.id}")
                        attempts[key] = [Attempt.from_json(x) for x in d.get("attempts", [])]
                    workers = {w.id: w.name for w in c.workers()}
                return attempts, workers
            except DroverError as e:
                self.note(f"reading the attempts failed: {e}")
                time.sleep(1)  # the server is up (it answered the wait): a moment
        raise HarnessError("the server did not answer for the tasks' attempts")

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
            attempts, workers = self.history(view)
            verdict = analyze(self.work.keys, monitor.ledger.copies, view, self.faults,
                              attempts, workers)
            more = self.work.judge(monitor.ledger.copies, view, attempts, workers, self.faults)
            problems = merge_problems(verdict.problems + more.problems)
            # What the verdicts read, beside the ledger, to judge them again.
            with open(os.path.join(self.dir, "verdict_input.json"), "w") as f:
                json.dump({"faults": [dataclasses.asdict(x) for x in self.faults],
                           "api": {k: dataclasses.asdict(t) for k, t in view.items()},
                           "attempts": {k: [dataclasses.asdict(x) for x in v]
                                        for k, v in attempts.items()},
                           "workers": workers}, f)
            explain = {}
            for p in problems[: a.report_limit]:
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
            "seed": self.seed, "store": a.store, "tasks": len(self.work.keys),
            "kills": {"worker": self.kill_counts["worker"], "server": self.kill_counts["server"],
                      "worker_stops": self.kill_counts["stop"]},
            "duplicates": verdict.duplicates, "overlaps": verdict.overlaps,
            "stuck": verdict.stuck, "lost": verdict.lost,
            "false_successes": verdict.false_successes,
            "orphans_alive_at_end": verdict.orphans_alive_at_end,
            "orphan_completions": verdict.orphan_completions,
            "orphan_reruns": verdict.orphan_reruns,
            "copies": verdict.copies,
            "reruns": verdict.reruns, "unwarranted_reruns": verdict.unwarranted_reruns,
            "worker_lost_failures": verdict.worker_lost_failures,
            **more.figures,
            "recovery_s": None if recovery == float("inf") else round(recovery, 1),
            "faults_s": round(faults_end - wall, 1),
            "wall_s": round(time.monotonic() - wall, 1),
            "crashes": len(self.crashes),
            "ok": verdict.ok and more.ok and not self.crashes,
        }
        if monitor.ledger.bad_lines:
            summary["bad_ledger_lines"] = len(monitor.ledger.bad_lines)
        if not summary["ok"]:
            self.report(problems, view, monitor, explain)
        return summary

    def report(self, problems: List[Problem], view: Dict[str, ApiTask], monitor: LedgerMonitor,
               explain: Dict[str, str]) -> None:
        """Each faulty task: what went wrong, its copies, the server's view,
        the faults around it and the log lines that name it."""
        err = sys.stderr
        print(f"\n=== seed {self.seed} store {self.a.store}: {len(problems)} faulty tasks, "
              f"{len(self.crashes)} crashes (times from the schedule's start)\n"
              f"rerun: {self.rerun()}", file=err)
        for c in self.crashes:
            print(f"\n--- crash: {c}", file=err)
        for p in problems[: self.a.report_limit]:
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
        if len(problems) > self.a.report_limit:
            print(f"\n(and {len(problems) - self.a.report_limit} more faulty tasks)", file=err)
        print("\n--- schedule as run:", file=err)
        for line in self.log:
            print(f"    {line}", file=err)

    def rerun(self) -> str:
        a = self.a
        return (f"{a.command} --binary {a.binary} --store {a.store} --seeds {self.seed} "
                f"{self.work.rerun_flags(a)} --worker-kills {a.worker_kills} "
                f"--server-kills {a.server_kills} --worker-stops {a.worker_stops} "
                f"--window {a.window:g} --long-down {a.long_down} "
                f"--min-duration {a.min_duration:g} --max-duration {a.max_duration:g} "
                f"--long-fraction {a.long_fraction:g} --long-min {a.long_min:g} "
                f"--long-max {a.long_max:g} "
                f"--retries {a.retries} "
                f"--lease-ttl {a.lease_ttl:g} --heartbeat {a.heartbeat_s} "
                f"--restore-settle {a.restore_settle} --isolation {a.isolation} --keep always")


def merge_problems(problems: List[Problem]) -> List[Problem]:
    """One entry per task, its kinds and notes from every verdict."""
    by_key: Dict[str, Problem] = {}
    for p in problems:
        if p.key in by_key:
            q = by_key[p.key]
            q.kinds = sorted(set(q.kinds) | set(p.kinds))
            q.notes = q.notes + p.notes
        else:
            by_key[p.key] = Problem(p.key, list(p.kinds), list(p.notes))
    return list(by_key.values())


# ---- command line ------------------------------------------------------------


# Options whose default a workload may change (Workload.defaults).
COMMON_DEFAULTS: Dict[str, Any] = {
    "retries": 5, "worker_kills": 6, "server_kills": 1, "worker_stops": 3,
    "long_down": "0.25,0.6,1.5", "long_fraction": 0.05, "long_min": 3.0, "long_max": 6.0,
    "lease_ttl": 8.0}


def parse_args(argv: Optional[List[str]], workload: Any, description: str,
               command: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--binary", default=os.environ.get("DROVER_BINARY", "build/drover"),
                   help="the drover binary (default $DROVER_BINARY, then build/drover)")
    p.add_argument("--store", choices=("memory", "redis"), default="memory")
    p.add_argument("--seeds", default="1", help="comma-separated seeds, one run each")
    # Defaults of those without one here: the workload's, else COMMON_DEFAULTS.
    p.add_argument("--retries", type=int, help=f"default {COMMON_DEFAULTS['retries']}")
    p.add_argument("--min-duration", type=float, default=0.2, help="seconds")
    p.add_argument("--max-duration", type=float, default=1.5, help="seconds")
    p.add_argument("--worker-kills", type=int,
                   help=f"default {COMMON_DEFAULTS['worker_kills']}")
    p.add_argument("--server-kills", type=int,
                   help=f"default {COMMON_DEFAULTS['server_kills']}")
    p.add_argument("--worker-stops", type=int,
                   help="SIGSTOP of a worker, SIGCONT later (sometimes past the lease TTL); "
                        f"default {COMMON_DEFAULTS['worker_stops']}")
    p.add_argument("--window", type=float, default=20.0,
                   help="seconds from the first submission in which the faults happen")
    p.add_argument("--long-down",
                   help="SHARE,MIN,MAX: this share of the killed workers stay down MIN..MAX "
                        "lease TTLs, the others 0.05-2 s; default "
                        f"{COMMON_DEFAULTS['long_down']}")
    p.add_argument("--long-fraction", type=float,
                   help="share of tasks that run --long-min..--long-max seconds instead; "
                        f"default {COMMON_DEFAULTS['long_fraction']}")
    p.add_argument("--long-min", type=float,
                   help=f"seconds, default {COMMON_DEFAULTS['long_min']}")
    p.add_argument("--long-max", type=float,
                   help=f"seconds, default {COMMON_DEFAULTS['long_max']}")
    p.add_argument("--heartbeat", dest="heartbeat_s", default="1s")
    p.add_argument("--lease-ttl", type=float,
                   help=f"seconds, default {COMMON_DEFAULTS['lease_ttl']}")
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
    workload.add_args(p)
    a = p.parse_args(argv)
    a.command = command
    for k, v in {**COMMON_DEFAULTS, **workload.defaults(a)}.items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    if a.stall <= 0:
        a.stall = a.lease_ttl + 25
    try:
        a.long_down_share, a.long_down_min, a.long_down_max = (
            float(x) for x in a.long_down.split(","))
    except ValueError:
        p.error("--long-down: want SHARE,MIN,MAX (MIN and MAX in lease TTLs), e.g. 0.25,0.6,1.5")
    workload.check_args(p, a)
    return a


def main(argv: Optional[List[str]] = None, workload: Any = SleepWorkload,
         description: str = __doc__.split("\n\n")[0],
         command: str = "tests/chaos/chaos.py") -> int:
    a = parse_args(argv, workload, description, command)
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
        root = tempfile.mkdtemp(prefix=f"drover_{workload.name}_{a.store}_{seed}_")
        ok = False
        try:
            summary = Run(seed, a, root, workload).execute()
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
