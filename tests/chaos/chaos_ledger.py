"""The chaos tests' record of task runs, kept outside Drover, and its verdict.

Each task runs ``sh -c SCRIPT`` (task_command) that appends two lines to one
ledger file, each a single small ``write`` with O_APPEND (atomic):

    start KEY ATTEMPT PID NS PWD     when the task's shell begins
    end KEY ATTEMPT PID NS           after its sleep, just before it exits 0

NS is ``date +%s%N`` (CLOCK_REALTIME, the clock the test stamps its faults
with); PID is the shell's; PWD is the task directory, which names the worker
(``<workdir>/<job>/<index>.<attempt>``). One such start is a *copy* of the
task. The data-plane test's tasks (chaos_data.py) also write, between the
two, a line per file they read or wrote:

    read KEY ATTEMPT PID PATH SIZE SHA256    an input, PATH relative to $DROVER_INPUTS
    wrote KEY ATTEMPT PID NAME SIZE SHA256   an output, NAME relative to $DROVER_OUTPUT_DIR

which the ledger keeps with the copy that wrote them.

LedgerMonitor follows the file while the test runs and holds a pidfd per
copy that has started and not ended, so a copy killed without its end line
(by its worker, by fencing, or never, as an orphan) gets the moment its
process was seen gone. analyze() is pure: it takes the copies, the fault
events and the server's final view of each task, and counts what must never
happen:

- stuck: a task not terminal when the wait after the faults ended;
- lost: a task that did not succeed (failed, canceled, or unknown to the
  server), unless the server failed it because it lost the task's worker
  N times ("worker lost (N attempts)") and each time the test had
  killed or stopped that worker while it held the attempt, or canceled it
  because a dependency failed so (counted apart, as a worker-lost failure:
  the server's rule, not a fault of its own);
- false success: a task the server calls succeeded with no copy that ran to
  its end;
- duplicate: two copies ran to their end, and the earlier one's outcome
  could not have been lost to a worker kill (the start of the worker that
  ran it was not killed before the next copy's start), nor set aside by the
  server because its output files were lost (a "rerun" attempt);
- overlap: two copies of one task ran at the same time (a copy without an
  end line runs until its process was seen gone, or to the end of the test
  when it still runs then);
- unwarranted rerun: the server set a success aside ("rerun" in its
  attempts: its output files were lost) although some worker that held
  them (``outputs_on`` and ``replicas``) was not killed between the end of
  that attempt's copy (when the files were whole) and the start of the
  next attempt's.
"""

from __future__ import annotations

import dataclasses
import os
import re
import select
import shlex
import signal
import threading
import time
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

INF = float("inf")


def task_command(ledger: str, key: str, seconds: float) -> List[str]:
    """The argv of a task that records its run in ``ledger`` and sleeps."""
    path = shlex.quote(ledger)
    script = (
        f'printf "start {key} %s %s %s %s\\n" "$DROVER_ATTEMPT" $$ "$(date +%s%N)" "$PWD"'
        f" >> {path}; sleep {seconds:.2f}; "
        f'printf "end {key} %s %s %s\\n" "$DROVER_ATTEMPT" $$ "$(date +%s%N)" >> {path}'
    )
    return ["sh", "-c", script]


@dataclasses.dataclass(frozen=True)
class FileRecord:
    """A file a copy read or wrote, as its own ``sha256sum`` saw it."""

    name: str  # an output's name; for an input, "<producer task id>/<name>"
    size: int
    sha256: str


@dataclasses.dataclass
class Copy:
    """One run of a task's command: from its start line to its end line, or
    to the moment its process was seen gone (``death_ns``), or still running
    when the test ended (``alive_at_end``). A copy that died without an end
    line was last seen alive at ``alive_ns`` (the monitor's last look before
    it saw it gone): it surely ran until then, and maybe until death_ns."""

    key: str
    attempt: int
    pid: int
    start_ns: int
    workdir: str  # the task directory ($PWD)
    worker: str = ""  # the worker's name, from workdir
    end_ns: Optional[int] = None
    death_ns: Optional[int] = None
    alive_ns: Optional[int] = None
    alive_at_end: bool = False
    lines: List[str] = dataclasses.field(default_factory=list)
    read: List[FileRecord] = dataclasses.field(default_factory=list)  # its inputs
    wrote: List[FileRecord] = dataclasses.field(default_factory=list)  # its outputs

    def stop_ns(self) -> float:
        """When this copy stopped running (INF while it still runs): for one
        seen gone, the latest it may have run until."""
        if self.end_ns is not None:
            return self.end_ns
        if self.death_ns is not None:
            return self.death_ns
        return INF

    def surely_ran_until_ns(self) -> float:
        """Until when this copy surely ran: its end line, or the last time it
        was seen alive (its start line at least) for one seen gone; INF while
        it still runs. Two copies ran at once only if one started before
        the other surely stopped: a death is seen up to a tick late (and
        later on a loaded machine), while its worker may have started the
        next attempt at once after the exit it saw."""
        if self.end_ns is not None:
            return self.end_ns
        if self.death_ns is not None:
            return max(self.start_ns, self.alive_ns or self.start_ns)
        return INF


@dataclasses.dataclass(frozen=True)
class Fault:
    """Something that happened to a process: ``kind`` is ``kill``, ``start``,
    ``stop`` and ``cont`` (SIGSTOP, SIGCONT) or ``crash`` (it exited without
    being killed); ``role`` is ``worker`` or ``server``; ``incarnation`` counts
    the starts of that process (1 = the first)."""

    t_ns: int
    kind: str
    role: str
    name: str
    incarnation: int
    pid: int


@dataclasses.dataclass(frozen=True)
class ApiTask:
    """The server's final view of one task."""

    id: str
    state: str
    attempt: int
    worker: Optional[int]
    reason: str


@dataclasses.dataclass(frozen=True)
class Attempt:
    """One attempt of a task as the server's history has it (``attempts``
    of ``GET /api/v1/tasks/{id}``): ``state`` is ``retried``, ``preempted``,
    ``rerun`` (a success whose output files were lost) or, for the latest,
    the task's state. ``holders`` are the workers that held its outputs
    (``outputs_on``, then ``replicas``)."""

    attempt: int
    state: str
    worker: Optional[int]
    reason: str
    started_ns: Optional[int] = None
    finished_ns: Optional[int] = None
    outputs: Tuple[FileRecord, ...] = ()
    holders: Tuple[int, ...] = ()

    @classmethod
    def from_json(cls, d: Dict) -> "Attempt":
        outcome = d.get("outcome") or {}
        holders = ([int(outcome["outputs_on"])] if outcome.get("outputs_on") else []) + [
            int(w) for w in outcome.get("replicas", [])]

        def ns(key: str) -> Optional[int]:
            ms = d.get(key + "_ms")
            return None if ms is None else int(ms) * 1_000_000

        return cls(int(d["attempt"]), str(d["state"]),
                   None if d.get("worker") is None else int(d["worker"]), str(d.get("reason", "")),
                   ns("started_at"), ns("finished_at"),
                   tuple(FileRecord(str(f["name"]), int(f["size"]), str(f["sha256"]))
                         for f in outcome.get("outputs", [])),
                   tuple(holders))


TERMINAL = ("succeeded", "failed", "canceled")


def worker_of(workdir: str, workdirs: Dict[str, str]) -> str:
    """The worker whose work directory holds the task directory ``workdir``."""
    for name, root in workdirs.items():
        if workdir.startswith(root.rstrip("/") + "/"):
            return name
    return "?"


def parse_line(line: str) -> Optional[Tuple[str, str, int, int, int, str]]:
    """(kind, key, attempt, pid, ns, pwd) of a start or end line; None if
    torn or of another kind."""
    parts = line.split(" ", 5)
    try:
        if parts[0] == "start" and len(parts) == 6:
            return "start", parts[1], int(parts[2]), int(parts[3]), int(parts[4]), parts[5]
        if parts[0] == "end" and len(parts) == 5:
            return "end", parts[1], int(parts[2]), int(parts[3]), int(parts[4]), ""
    except ValueError:
        return None
    return None


def parse_file_line(line: str) -> Optional[Tuple[str, str, int, int, FileRecord]]:
    """(kind, key, attempt, pid, file) of a read or wrote line; None if torn
    or of another kind."""
    parts = line.split(" ")
    if len(parts) != 7 or parts[0] not in ("read", "wrote") or len(parts[6]) != 64:
        return None
    try:
        return parts[0], parts[1], int(parts[2]), int(parts[3]), FileRecord(
            parts[4], int(parts[5]), parts[6])
    except ValueError:
        return None


class Ledger:
    """Copies by task key, built from ledger lines in file order."""

    def __init__(self, workdirs: Dict[str, str]) -> None:
        self.workdirs = workdirs
        self.copies: Dict[str, List[Copy]] = {}
        self.bad_lines: List[str] = []

    def add(self, line: str) -> Optional[Copy]:
        """Adds one line; returns the copy a start line made."""
        parsed = parse_line(line)
        if parsed is None:
            self._add_file(line)
            return None
        kind, key, attempt, pid, ns, pwd = parsed
        if kind == "start":
            c = Copy(key, attempt, pid, ns, pwd, worker_of(pwd, self.workdirs), lines=[line])
            self.copies.setdefault(key, []).append(c)
            return c
        for c in reversed(self.copies.get(key, [])):
            if c.pid == pid and c.attempt == attempt and c.end_ns is None:
                c.end_ns = ns
                c.lines.append(line)
                return None
        self.bad_lines.append(line + "   <- an end with no start")
        return None

    def _add_file(self, line: str) -> None:
        parsed = parse_file_line(line)
        if parsed is None:
            self.bad_lines.append(line)
            return
        kind, key, attempt, pid, record = parsed
        for c in reversed(self.copies.get(key, [])):
            if c.pid == pid and c.attempt == attempt:
                (c.read if kind == "read" else c.wrote).append(record)
                c.lines.append(line)
                return
        self.bad_lines.append(line + "   <- a file of no started copy")


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def _pgrp(pid: int) -> int:
    """The process group of ``pid`` (0 if unknown)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return int(stat[stat.rindex(b")") + 2 :].split()[2])
    except (OSError, ValueError, IndexError):
        return 0


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3] in (b"Z", b"X")
    except (OSError, ValueError):
        return True


class LedgerMonitor(threading.Thread):
    """Follows the ledger file and watches each running copy's process.

    One thread: it waits on the open copies' pidfds for at most ``tick``
    seconds, then reads what was appended to the ledger, then marks the
    copies whose process ended without an end line (the end line is written
    before the exit, so reading first never takes a normal end for a death).
    A death is stamped when seen: at most a tick late.
    """

    def __init__(self, path: str, workdirs: Dict[str, str], tick: float = 0.02) -> None:
        super().__init__(name="ledger-monitor", daemon=True)
        self.path = path
        self.ledger = Ledger(workdirs)
        self.tick = tick
        self.lock = threading.Lock()
        self._stop_event = threading.Event()
        self._offset = 0
        self._partial = b""
        self._poller = select.poll()
        self._open: Dict[int, Copy] = {}  # pidfd -> copy
        self.error: Optional[BaseException] = None
        open(path, "ab").close()

    def run(self) -> None:
        try:
            while not self._stop_event.is_set():
                ready = self._poller.poll(self.tick * 1000)
                looked = time.time_ns()
                self._read()
                now = time.time_ns()
                gone = {fd for fd, _ in ready}
                with self.lock:
                    # Not readable when poll returned: alive then.
                    for fd, copy in self._open.items():
                        if fd not in gone:
                            copy.alive_ns = looked
                for fd in gone:
                    self._close(fd, now)
            self._read()
        except BaseException as e:  # reported by finish()
            self.error = e

    def _close(self, fd: int, now: int) -> None:
        copy = self._open.pop(fd, None)
        if copy is None:
            return
        self._poller.unregister(fd)
        os.close(fd)
        with self.lock:
            if copy.end_ns is None:
                copy.death_ns = now

    def _read(self) -> None:
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            data = f.read()
        if not data:
            return
        self._offset += len(data)
        data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()
        started: List[Copy] = []
        with self.lock:
            for raw in lines:
                c = self.ledger.add(raw.decode("utf-8", "replace"))
                if c is not None:
                    started.append(c)
        now = time.time_ns()
        for c in started:
            if c.end_ns is not None:
                continue
            try:
                fd = os.pidfd_open(c.pid)
            except OSError:
                fd = -1
            # The pid may already belong to another process: the copy is
            # ours only if its command line names the copy's task.
            if fd >= 0 and f" {c.key} ".encode() in _cmdline(c.pid) and not _is_zombie(c.pid):
                with self.lock:
                    c.alive_ns = time.time_ns()
                self._open[fd] = c
                self._poller.register(fd, select.POLLIN)
                continue
            if fd >= 0:
                os.close(fd)
            with self.lock:
                if c.end_ns is None:
                    c.death_ns = now

    def finish(self) -> None:
        """Stops following; copies still running are marked alive_at_end and
        then killed (through their pidfd, so never another process)."""
        self._stop_event.set()
        self.join()
        if self.error is not None:
            raise RuntimeError(f"ledger monitor failed: {self.error!r}") from self.error
        # Its stop_ns() stays INF: it ran to the end of the test.
        for fd, copy in list(self._open.items()):
            with self.lock:
                if copy.end_ns is None:
                    copy.alive_at_end = True
            # The task's shell leads its process group (the worker starts
            # each task in a session of its own): the group goes, its sleep
            # included. A group id stays taken while any member lives, so
            # killpg cannot reach another process group.
            try:
                if _pgrp(copy.pid) == copy.pid:
                    os.killpg(copy.pid, signal.SIGKILL)
                else:
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
            except OSError:
                pass
            self._poller.unregister(fd)
            os.close(fd)
        self._open.clear()


# ---- the verdict -------------------------------------------------------------


@dataclasses.dataclass
class Problem:
    key: str
    kinds: List[str]
    notes: List[str]


@dataclasses.dataclass
class Verdict:
    stuck: int = 0
    lost: int = 0
    false_successes: int = 0
    duplicates: int = 0
    overlaps: int = 0
    orphans_alive_at_end: int = 0
    orphan_completions: int = 0  # copies that ran to their end after their worker was killed
    orphan_reruns: int = 0  # tasks with such a copy and another copy that ran to its end
    copies: int = 0
    reruns: int = 0  # successes the server set aside, their output files lost
    # Failed: its worker killed under it N times (or canceled for
    # a dependency that failed so).
    worker_lost_failures: int = 0
    unwarranted_reruns: int = 0
    problems: List[Problem] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.stuck or self.lost or self.false_successes or self.duplicates
                    or self.overlaps or self.orphans_alive_at_end or self.unwarranted_reruns)


def incarnation_kill(faults: Sequence[Fault], worker: str, at_ns: int) -> Optional[int]:
    """When the incarnation of ``worker`` alive at ``at_ns`` was killed by
    the test (None if it was not, or no incarnation was alive)."""
    current = None
    for f in faults:
        if f.role != "worker" or f.name != worker:
            continue
        if f.kind == "start" and f.t_ns <= at_ns:
            current = f.incarnation
    if current is None:
        return None
    for f in faults:
        if (f.role == "worker" and f.name == worker and f.kind in ("kill", "crash")
                and f.incarnation == current):
            return f.t_ns
    return None


def stopped_between(faults: Sequence[Fault], worker: str, lo_ns: int, hi_ns: int) -> bool:
    """Whether ``worker`` was SIGSTOPped at some time in [lo_ns, hi_ns]: a
    copy that ended while its worker was stopped could not be reported, so
    its lease expired and the task may rightly run again. The stop may come
    before ``lo_ns`` (the copy's start line) when the worker spawned the
    task just before it was stopped: it counts while no cont followed it."""
    stopped = False  # a stop before lo_ns that nothing has ended yet
    for f in sorted((f for f in faults if f.role == "worker" and f.name == worker),
                    key=lambda f: f.t_ns):
        if f.t_ns > hi_ns:
            break
        if f.kind == "stop":
            if f.t_ns >= lo_ns:
                return True
            stopped = True
        elif f.kind in ("cont", "kill", "crash", "start"):
            if f.t_ns >= lo_ns:
                return stopped  # a stop held from lo_ns to here
            stopped = False
    return stopped


def killed_between(faults: Sequence[Fault], worker: str, lo: float, hi: float) -> bool:
    """Whether the test killed ``worker`` (or saw it crash) in [lo, hi]."""
    return any(f.role == "worker" and f.name == worker and f.kind in ("kill", "crash")
               and lo <= f.t_ns <= hi for f in faults)


def unwarranted_rerun(runs: Sequence[Copy], a: Attempt, workers: Dict[int, str],
                      faults: Sequence[Fault]) -> Optional[str]:
    """Why setting aside the success ``a`` (a "rerun" attempt) was not
    called for, or None if it was: every worker holding its outputs must
    have been killed after the attempt's copy wrote them (its end) and
    before the next attempt started (the server decided in between)."""
    lo = max((c.end_ns for c in runs if c.attempt == a.attempt and c.end_ns is not None),
             default=-INF)
    hi = min((c.start_ns for c in runs if c.attempt > a.attempt), default=INF)
    names = [workers.get(w, f"worker {w}") for w in a.holders]
    alive = [n for n in names if not killed_between(faults, n, lo, hi)]
    if a.holders and not alive:
        return None
    return (f"attempt {a.attempt} was set aside ({a.reason!r}), its outputs held by {names}, of "
            f"which {alive or 'none'} not killed between its end and the next attempt's start")


def down_between(faults: Sequence[Fault], worker: str, lo: float, hi: float) -> bool:
    """Whether ``worker`` went down in [lo, hi] (killed, crashed, or
    stopped: a stopped worker's leases expire like a dead one's), or was
    down at ``lo`` (not started or continued since)."""
    events = [f for f in faults if f.role == "worker" and f.name == worker
              and f.kind in ("start", "kill", "crash", "stop", "cont")]
    if any(lo <= f.t_ns <= hi and f.kind in ("kill", "crash", "stop") for f in events):
        return True
    before = [f for f in events if f.t_ns <= lo]
    return bool(before) and max(before, key=lambda f: f.t_ns).kind not in ("start", "cont")


def lost_with_killed_workers(history: Sequence[Attempt], workers: Dict[int, str],
                             faults: Sequence[Fault]) -> bool:
    """Whether the task failed because the server lost its worker N times
    ("worker lost (N attempts)", its rule: over all the task's attempts,
    not counting those withdrawn or preempted), each time a worker the test
    had killed or stopped while that attempt was out (from the end of the
    attempt before it to its own end; a worker the server placed it on
    before it noticed counts too): at least N attempts, the last among
    them, had their worker go down so."""
    m = re.fullmatch(r"worker lost \((\d+) attempts\)", history[-1].reason) if history else None
    if m is None or history[-1].state != "failed" or len(history) < int(m.group(1)):
        return False
    n = int(m.group(1))
    downed = []
    since: Optional[float] = None
    for a in history:
        name = workers.get(a.worker) if a.worker is not None else None
        downed.append(name is not None and a.finished_ns is not None and down_between(
            faults, name, -INF if since is None else since, a.finished_ns))
        since = a.finished_ns
    return downed[-1] and sum(downed) >= n


def worker_lost_failures(keys: Sequence[str], api: Dict[str, ApiTask],
                         attempts: Dict[str, List[Attempt]], workers: Dict[int, str],
                         faults: Sequence[Fault]) -> Set[str]:
    """The tasks that failed for losing killed workers (see
    lost_with_killed_workers), and those canceled because a dependency of
    theirs failed so ("dependency 12.4 failed"), and so on down ("dependency
    12.5 canceled")."""
    out = {k for k in keys if k in api and api[k].state == "failed"
           and lost_with_killed_workers(attempts.get(k, []), workers, faults)}
    key_of = {t.id: k for k, t in api.items()}
    while True:
        more = set()
        for k in keys:
            t = api.get(k)
            m = re.fullmatch(r"dependency (\S+) (?:failed|canceled)", t.reason) if t else None
            if m and t.state == "canceled" and key_of.get(m.group(1)) in out and k not in out:
                more.add(k)
        if not more:
            return out
        out |= more


def analyze(
    keys: Iterable[str],
    copies: Dict[str, List[Copy]],
    api: Dict[str, ApiTask],
    faults: Sequence[Fault],
    attempts: Optional[Dict[str, List[Attempt]]] = None,
    workers: Optional[Dict[int, str]] = None,
) -> Verdict:
    """The verdict over every task ``keys`` names (see the module comment).
    ``attempts``: by key, the server's history; a success it set aside
    because its output files were lost (a "rerun" attempt) must have had
    every worker holding them killed (``workers`` names them by id), and a
    copy of it that ran to its end is no duplicate of the copy after it."""
    v = Verdict()
    attempts = attempts or {}
    workers = workers or {}
    keys = list(keys)
    excused = worker_lost_failures(keys, api, attempts, workers, faults)
    for key in keys:
        runs = sorted(copies.get(key, []), key=lambda c: c.start_ns)
        v.copies += len(runs)
        kinds: List[str] = []
        notes: List[str] = []
        t = api.get(key)
        if t is None:
            kinds.append("lost")
            notes.append("the server does not know this task")
        elif t.state not in TERMINAL:
            kinds.append("stuck")
            notes.append(f"still {t.state} (attempt {t.attempt}, worker {t.worker})")
        elif key in excused:
            v.worker_lost_failures += 1
        elif t.state != "succeeded":
            kinds.append("lost")
            notes.append(f"ended {t.state} (attempt {t.attempt}): {t.reason}")
        completed = [c for c in runs if c.end_ns is not None]
        if t is not None and t.state == "succeeded" and not completed:
            kinds.append("false_success")
            notes.append("succeeded, yet no copy of it ran to its end")

        # A completed copy's outcome may be lost to its worker's death: the
        # worker held it in memory until the server acknowledged it. So it
        # may run again if the start of the worker that ran it was killed
        # before the next copy started. (That start is the one alive at the
        # copy's start line; the kill may even come before that line, when
        # the worker spawned the task just before it was killed.)
        counted: List[Copy] = []
        orphaned = 0
        # The success each rerun set aside: its attempt's last complete copy.
        last = {c.attempt: i for i, c in enumerate(runs) if c.end_ns is not None}
        reruns = [a for a in attempts.get(key, []) if a.state == "rerun"]
        set_aside = {last[a.attempt] for a in reruns if a.attempt in last}
        v.reruns += len(reruns)
        for a in reruns:
            why = unwarranted_rerun(runs, a, workers, faults)
            if why is not None:
                kinds.append("unwarranted_rerun")
                notes.append(why)
        for i, c in enumerate(runs):
            killed = incarnation_kill(faults, c.worker, c.start_ns)
            if c.end_ns is not None and killed is not None and killed <= c.end_ns:
                orphaned += 1
            if c.end_ns is None or i in set_aside:
                continue
            # (Only a copy with a later one can have been re-run for that.)
            if i + 1 < len(runs) and killed is not None and killed <= runs[i + 1].start_ns:
                continue
            if i + 1 < len(runs) and stopped_between(faults, c.worker, c.start_ns,
                                                     runs[i + 1].start_ns):
                continue
            counted.append(c)
        v.orphan_completions += orphaned
        if orphaned and len(completed) >= 2:
            v.orphan_reruns += 1
        if len(counted) >= 2:
            kinds.append("duplicate")
            notes.append(
                f"{len(counted)} copies ran to their end with no worker kill to lose the "
                f"earlier outcome: attempts {[c.attempt for c in counted]}"
            )

        for i, a in enumerate(runs):
            for b in runs[i + 1 :]:
                if b.start_ns < a.surely_ran_until_ns():
                    end = "still running at the end" if a.stop_ns() == INF else (
                        f"{(a.surely_ran_until_ns() - b.start_ns) / 1e6:.0f} ms")
                    kinds.append("overlap")
                    notes.append(
                        f"attempt {a.attempt} (pid {a.pid} on {a.worker}) was still running when "
                        f"attempt {b.attempt} (pid {b.pid} on {b.worker}) started: {end}"
                    )
        alive = [c for c in runs if c.alive_at_end]
        if alive:
            kinds.append("orphan_alive")
            notes.append(
                "still running when the test ended: "
                + ", ".join(f"attempt {c.attempt} pid {c.pid} on {c.worker}" for c in alive)
            )

        v.stuck += "stuck" in kinds
        v.lost += "lost" in kinds
        v.false_successes += "false_success" in kinds
        v.duplicates += "duplicate" in kinds
        v.overlaps += "overlap" in kinds
        v.orphans_alive_at_end += "orphan_alive" in kinds
        v.unwarranted_reruns += kinds.count("unwarranted_rerun")
        if kinds:
            v.problems.append(Problem(key, sorted(set(kinds)), notes))
    return v
