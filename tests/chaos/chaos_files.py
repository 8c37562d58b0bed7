#!/usr/bin/env python3
"""Randomized chaos test of the data plane: chaos.py's server, three workers
and seeded kill -9s and restarts, running pipelines whose tasks move files.

Each job is a pipeline: producers write files of random bytes into
$DROVER_OUTPUT_DIR, middle tasks read theirs and write files of their own,
consumers read what they depend on; some producers keep a second copy of
their outputs (replicas = 2). Every task records in the ledger outside
Drover the size and SHA-256 of each file it read in $DROVER_INPUTS and of
each file it wrote (chaos_data.py). A worker kill picks one that holds
outputs a dependent still needs, and some stay down past the lease bound,
so some producers run again.

Beside chaos.py's verdict (none stuck, lost, run twice at once, run to its
end twice without a cause, run again while a holder of its outputs lived)
it checks that every file a task read was written by an attempt of its
producer, that a task that ran to its end read exactly one attempt's files
from each producer, and that the server recorded the files the task wrote.
One JSON line per run:

    {"seed": 1, "store": "memory", "tasks": 39, "kills": {...}, "reruns": 7,
     "jobs": 6, "files_read": 82, "bytes_moved": 12863654,
     "corrupt_reads": 0, "stuck": 0, ..., "ok": true}

With --owners the workers run in idle-desktop mode, each with an owner (a
file the test touches: --idle-source file:PATH) who comes and goes, so
tasks are frozen, resumed and vacated; the server preempts by priority and
some jobs are of high priority. Tasks then have no retries and the run no
kills unless asked: an attempt counted as a failure fails the run.

    tests/chaos/chaos_files.py --binary build/drover --store memory --seeds 1,2
    tests/chaos/chaos_files.py --binary build/drover --store redis --seeds 3 --jobs 12
    tests/chaos/chaos_files.py --binary build/drover --owners --seeds 4

Exit status as chaos.py's.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
import time
from typing import Any, Dict, List, Sequence, Set, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import chaos  # noqa: E402
import drover  # noqa: E402  (the project's client, python/drover; chaos put it on the path)
from drover.errors import DroverError  # noqa: E402
from chaos_data import FileTask, file_task_command, judge  # noqa: E402
from chaos_ledger import ApiTask, Attempt, Copy, Fault  # noqa: E402

# Idle-desktop settings of --owners: offering work 1 s after the owner's
# last input; a visit shorter than about SUSPEND_S - RESUME_S ends with the
# tasks resumed, a longer one with them vacated.
IDLE_AFTER, RESUME_S, SUSPEND_S = "1s", 0.5, 2.0
HIGH, LOW, PREEMPT_AT = 90, 0, 50  # job priorities, --preempt-priority
OWNER_TICK = 0.2  # seconds between an owner's inputs while at the machine


class FilesWorkload(chaos.Workload):
    """--jobs pipelines (see the module comment), each submitted as one job:
    the first before any fault, the others during them."""

    name = "chaos_files"

    def __init__(self, a: argparse.Namespace, rng: random.Random, ledger: str) -> None:
        self.a = a
        self.dir = os.path.dirname(ledger)
        self.plan: Dict[str, FileTask] = {}
        self.keys: List[str] = []
        self.batches: List[Tuple[float, Dict[str, Any]]] = []
        for j in range(a.jobs):
            tasks = self.pipeline(j, rng)
            priority = HIGH if a.owners and j > 0 and rng.random() < a.high_fraction else LOW
            specs = []
            for t in tasks:
                # A few long ones: their dependents wait, needing the files
                # of their other producers while workers are killed.
                total = (rng.uniform(a.long_min, a.long_max) if rng.random() < a.long_fraction
                         else rng.uniform(a.min_duration, a.max_duration))
                before = rng.uniform(0, total)
                spec: Dict[str, Any] = {
                    "id": t.key, "command": file_task_command(ledger, t, before, total - before),
                    "retries": a.retries, "retry_backoff": "200ms", "vacate_grace": "2s"}
                if t.deps:
                    spec["depends_on"] = list(t.deps)
                if t.replicas > 1:
                    spec["replicas"] = t.replicas
                if priority != LOW:
                    spec["priority"] = priority
                specs.append(spec)
                self.plan[t.key] = t
                self.keys.append(t.key)
            at = 0.0 if j == 0 else rng.uniform(0.5, a.window * 0.6)
            self.batches.append((at, {"name": f"files-{j}", "task": specs}))
        # The owners' visits: (time, worker, how long the owner stays).
        self.visits: List[Tuple[float, str, float]] = []
        for _ in range(a.owner_visits if a.owners else 0):
            stay = (rng.uniform(0.1, SUSPEND_S - RESUME_S - 0.5) if rng.random() < 0.5
                    else rng.uniform(SUSPEND_S + 0.5, SUSPEND_S + 3.0))
            self.visits.append((rng.uniform(0.5, a.window), rng.choice(chaos.WORKERS), stay))
        self.visits.sort()
        self.present_until: Dict[str, float] = {}  # owner at the machine until (elapsed s)
        if a.owners:
            for n in chaos.WORKERS:
                # Away for an hour: offering work as soon as it starts.
                open(self.owner_file(n), "w").close()
                past = time.time() - 3600
                os.utime(self.owner_file(n), (past, past))

    def pipeline(self, j: int, rng: random.Random) -> List[FileTask]:
        """Job j's tasks: producers, middle tasks that read some of them and
        write, consumers that read producers' or middle tasks' files."""
        roots = [FileTask(f"j{j}p{i}", (), self.files(rng), self.replicas(rng))
                 for i in range(rng.randint(2, 4))]
        mids = [FileTask(f"j{j}m{i}", self.pick(rng, roots, 2), self.files(rng),
                         self.replicas(rng))
                for i in range(rng.randint(1, 3))]
        sinks = [FileTask(f"j{j}c{i}", self.pick(rng, roots + mids, 3))
                 for i in range(rng.randint(1, 3))]
        return roots + mids + sinks

    @staticmethod
    def pick(rng: random.Random, tasks: Sequence[FileTask], most: int) -> Tuple[str, ...]:
        return tuple(t.key for t in rng.sample(list(tasks), rng.randint(1, min(most, len(tasks)))))

    def files(self, rng: random.Random) -> Tuple[Tuple[str, int], ...]:
        """1 to --max-files files, a few empty, the others 1 KiB to
        --max-file-size (log-uniform); one in five in a subdirectory."""
        out = []
        for i in range(rng.randint(1, self.a.max_files)):
            name = f"d{i}/f{i}.bin" if rng.random() < 0.2 else f"f{i}.bin"
            size = 0 if rng.random() < 0.05 else int(
                2 ** rng.uniform(10, math.log2(max(1024, self.a.max_file_size))))
            out.append((name, size))
        return tuple(out)

    def replicas(self, rng: random.Random) -> int:
        return 2 if rng.random() < self.a.replica_fraction else 1

    def owner_file(self, name: str) -> str:
        return os.path.join(self.dir, f"owner-{name}")

    # -- the processes

    def server_flags(self) -> List[str]:
        return ["--preempt-priority", str(PREEMPT_AT)] if self.a.owners else []

    def worker_flags(self, name: str, directory: str) -> List[str]:
        if not self.a.owners:
            return []
        # Only the owner file counts: the test's own load is no owner.
        return ["--desktop", "--idle-source", "file:" + self.owner_file(name),
                "--idle-after", IDLE_AFTER, "--resume-after", f"{RESUME_S * 1000:.0f}ms",
                "--suspend-for", f"{SUSPEND_S:g}s", "--max-outside-load", "1000"]

    # -- the kills

    def pick_worker(self, run: chaos.Run, up: List[str], pick: float) -> str:
        """Among those up, a worker that holds outputs a dependent still
        needs (one not started yet), when the server says there is one."""
        needed = self.needed_holders(run)
        among = [n for n in up if n in needed] or up
        if needed:
            run.note(f"holders of needed outputs: {sorted(needed)}")
        return among[int(pick * len(among))]

    def needed_holders(self, run: chaos.Run) -> Set[str]:
        """Names of the workers holding outputs of a succeeded task whose
        dependent has not started; empty if the server cannot say now."""
        try:
            with drover.Client(access_file=run.cluster.access_file, timeout=2.0) as c:
                names = {w.id: w.name for w in c.workers()}
                tasks: Dict[str, Dict[str, Any]] = {}
                for job_id in run.jobs.values():
                    # The client's typed view has no holders: the raw answer.
                    page = c._transport.json("GET", f"/api/v1/jobs/{job_id}",
                                             query={"limit": 1000})
                    tasks.update({t["group"]: t for t in page.get("tasks", [])})
        except DroverError:
            return set()
        out: Set[str] = set()
        for key, t in tasks.items():
            waiting = [d for d in self.plan if key in self.plan[d].deps
                       and tasks.get(d, {}).get("state") in ("waiting", "queued", "assigned")]
            if t.get("state") == "succeeded" and waiting:
                holders = Attempt.from_json({"attempt": 0, "state": "", **t}).holders
                out.update(names.get(w, "") for w in holders)
        return out

    # -- the owners

    def schedule(self, run: chaos.Run) -> None:
        for t, name, stay in self.visits:
            run.at(t, f"owner at {name}", lambda name=name, stay=stay: self.arrive(run, name, stay))

    def arrive(self, run: chaos.Run, name: str, stay: float) -> None:
        ticking = name in self.present_until
        self.present_until[name] = max(self.present_until.get(name, 0.0), run.elapsed() + stay)
        p = run.cluster.workers[name]
        run.record("owner", "worker", p, time.time_ns())
        if not ticking:
            self.touch(run, name)

    def touch(self, run: chaos.Run, name: str) -> None:
        """The owner's input, every OWNER_TICK while at the machine."""
        if run.elapsed() >= self.present_until[name]:
            del self.present_until[name]
            run.record("away", "worker", run.cluster.workers[name], time.time_ns())
            return
        os.utime(self.owner_file(name))
        run.at(run.elapsed() + OWNER_TICK, f"owner input {name}", lambda: self.touch(run, name))

    # -- the verdict

    def judge(self, copies: Dict[str, List[Copy]], view: Dict[str, ApiTask],
              attempts: Dict[str, List[Attempt]], workers: Dict[int, str],
              faults: Sequence[Fault]) -> chaos.Judgement:
        a = self.a
        # Without kills or stops nothing may cost a task a retry: a vacate
        # is no failure.
        v = judge(self.plan, copies, view, attempts, failures_are_faults=a.owners and not (
            a.worker_kills or a.server_kills or a.worker_stops))
        figures: Dict[str, Any] = {"jobs": len(self.batches)}
        figures.update(v.figures())
        figures["holder_kills"] = holder_kills(attempts, workers, faults)
        if a.owners:
            figures["owner_visits"] = sum(1 for f in faults if f.kind == "owner")
        return chaos.Judgement(figures, v.problems, v.ok)

    # -- the command line

    @staticmethod
    def add_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--jobs", type=int, default=6, help="pipelines, one job each")
        p.add_argument("--max-files", type=int, default=3, help="most files a task writes")
        p.add_argument("--max-file-size", type=int, default=2 << 20, help="bytes")
        p.add_argument("--replica-fraction", type=float, default=0.3,
                       help="share of the writing tasks with replicas = 2")
        p.add_argument("--owners", action="store_true",
                       help="workers in idle-desktop mode with owners who come and go, "
                            "preemption by priority on, some jobs of high priority")
        p.add_argument("--owner-visits", type=int, default=10, help="with --owners")
        p.add_argument("--high-fraction", type=float, default=0.35,
                       help="with --owners: share of the jobs (after the first) of priority "
                            f"{HIGH}; the others {LOW}")

    @staticmethod
    def defaults(a: argparse.Namespace) -> Dict[str, Any]:
        # Killed workers stay down past the lease bound more often, long
        # enough for the server to give their outputs up; long tasks keep
        # dependents waiting meanwhile.
        d: Dict[str, Any] = {"lease_ttl": 6.0, "long_down": "0.4,1.5,2.5",
                             "long_fraction": 0.15, "long_min": 4.0, "long_max": 12.0}
        if a.owners:
            # A vacate counted as a failure must fail its task, and no kill
            # may cost a retry.
            d.update(retries=0, worker_kills=0, server_kills=0, worker_stops=0)
        return d

    @staticmethod
    def check_args(p: argparse.ArgumentParser, a: argparse.Namespace) -> None:
        if a.jobs < 1 or a.max_files < 1:
            p.error("--jobs and --max-files must be at least 1")

    @staticmethod
    def rerun_flags(a: argparse.Namespace) -> str:
        return (f"--jobs {a.jobs} --max-files {a.max_files} --max-file-size {a.max_file_size} "
                f"--replica-fraction {a.replica_fraction:g}"
                + (f" --owners --owner-visits {a.owner_visits} --high-fraction "
                   f"{a.high_fraction:g}" if a.owners else ""))


def holder_kills(attempts: Dict[str, List[Attempt]], workers: Dict[int, str],
                 faults: Sequence[Fault]) -> int:
    """Worker kills that hit a worker holding outputs then: one named among
    the holders of a success that ended before the kill (a copy counts from
    that end too: close enough for a figure that judges nothing)."""
    held: Dict[str, int] = {}  # worker name -> earliest success it held outputs of
    for history in attempts.values():
        for a in history:
            if a.state in ("succeeded", "rerun") and a.finished_ns is not None:
                for w in a.holders:
                    n = workers.get(w, "")
                    held[n] = min(held.get(n, a.finished_ns), a.finished_ns)
    return sum(1 for f in faults if f.role == "worker" and f.kind == "kill"
               and f.name in held and held[f.name] < f.t_ns)


if __name__ == "__main__":
    sys.exit(chaos.main(workload=FilesWorkload, description=__doc__.split("\n\n")[0],
                        command="tests/chaos/chaos_files.py"))
