"""The data-plane chaos test's tasks and its verdict on the files they moved.

A task of that test (file_task_command) is ``sh -c`` that records, in the
same ledger as every chaos task (chaos_ledger.py), its start, then each file
it finds in ``$DROVER_INPUTS/<producer task id>/`` with its size and SHA-256
(``read`` lines), sleeps, writes files of random bytes into
``$DROVER_OUTPUT_DIR`` and records each one's size and SHA-256 as read back
from the disk (``wrote`` lines), sleeps again, and records its end. Every
attempt writes fresh random bytes, so a hash names the attempt that wrote
it.

judge() is pure: from the plan (which task reads whose outputs), the copies
in the ledger and the server's attempt history it counts what must never
happen:

- corrupt read: a copy read a file (name and SHA-256) that no copy of that
  producer wrote, or from a task it does not depend on;
- input mismatch: a copy that ran to its end did not read, from one of its
  producers, exactly the files one complete copy of that producer wrote
  (some missing, more, or mixed from two attempts);
- output mismatch: the outputs the server recorded for a success (or for
  a success it later set aside, its files lost) are not the files its copy
  wrote.

(Whether a producer ran again only when every worker holding its outputs
was killed is the common verdict's, chaos_ledger.analyze().)

It also counts what moved: files and bytes written and read, the bytes read
on another worker than the one that wrote them, the bytes copied to keep
replicas, reruns of tasks with replicas, the attempts vacated for a
workstation's owner or a task of higher priority, and the attempts the
server counted as failures.
"""

from __future__ import annotations

import dataclasses
import shlex
from typing import Dict, List, Sequence, Set, Tuple

from chaos_ledger import ApiTask, Attempt, Copy, FileRecord, Problem

# A file of an attempt, as the verdict compares them: (name, sha256).
Named = Tuple[str, str]


@dataclasses.dataclass(frozen=True)
class FileTask:
    """One task of the plan: the producers whose outputs it reads (keys of
    its own job), and the files each attempt writes (name, size)."""

    key: str
    deps: Tuple[str, ...] = ()
    writes: Tuple[Tuple[str, int], ...] = ()
    replicas: int = 1


def file_task_command(ledger: str, task: FileTask, before: float, after: float) -> List[str]:
    """The argv of ``task``: it records its inputs, sleeps ``before``
    seconds, writes its outputs, sleeps ``after`` seconds (see the module
    comment). Each ledger line is one small O_APPEND write."""
    path = shlex.quote(ledger)
    key = task.key
    # $$ is the task's shell in the loop's subshell too.
    ids = '"$DROVER_ATTEMPT" $$'
    lines = [
        f'printf "start {key} %s %s %s %s\\n" {ids} "$(date +%s%N)" "$PWD" >> {path}',
        'find -L "$DROVER_INPUTS" -mindepth 2 -type f | while IFS= read -r f; do '
        f'printf "read {key} %s %s %s %s %s\\n" {ids} "${{f#"$DROVER_INPUTS"/}}" '
        f'"$(stat -c %s "$f")" "$(sha256sum < "$f" | cut -c1-64)" >> {path}; done',
        f"sleep {before:.2f}",
    ]
    for name, size in task.writes:
        out = f'"$DROVER_OUTPUT_DIR"/{shlex.quote(name)}'
        if "/" in name:
            lines.append(f'mkdir -p "$(dirname {out})"')
        lines.append(f"head -c {size} /dev/urandom > {out}")
        lines.append(f'printf "wrote {key} %s %s {name} %s %s\\n" {ids} "$(stat -c %s {out})" '
                     f'"$(sha256sum < {out} | cut -c1-64)" >> {path}')
    lines.append(f"sleep {after:.2f}")
    lines.append(f'printf "end {key} %s %s %s\\n" {ids} "$(date +%s%N)" >> {path}')
    return ["sh", "-c", "; ".join(lines)]


@dataclasses.dataclass
class DataVerdict:
    files_written: int = 0
    bytes_written: int = 0
    files_read: int = 0
    bytes_read: int = 0
    bytes_moved: int = 0  # read on another worker than the one that wrote them
    bytes_replicated: int = 0  # outputs of successes times the copies kept of them
    replicated_reruns: int = 0  # "rerun" attempts of tasks with replicas > 1
    corrupt_reads: int = 0
    input_mismatches: int = 0
    output_mismatches: int = 0
    vacated_owner: int = 0  # attempts vacated for a workstation's owner
    vacated_priority: int = 0  # attempts preempted by a task of higher priority
    # Attempts the server counted as failures of their task: one that used
    # a retry ("...; retry 1 of 5 in 200ms") or ended it failed.
    counted_failures: int = 0
    failures_are_faults: bool = False  # then counted_failures fails the run
    problems: List[Problem] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.corrupt_reads or self.input_mismatches or self.output_mismatches
                    or (self.failures_are_faults and self.counted_failures))

    def figures(self) -> Dict[str, int]:
        return {k: v for k, v in dataclasses.asdict(self).items()
                if k not in ("problems", "failures_are_faults")}


def _named(files: Sequence[FileRecord], prefix: str = "") -> Set[Named]:
    """The files whose name starts with ``prefix``, without it."""
    return {(f.name[len(prefix):], f.sha256) for f in files if f.name.startswith(prefix)}


def judge(plan: Dict[str, FileTask], copies: Dict[str, List[Copy]], api: Dict[str, ApiTask],
          attempts: Dict[str, List[Attempt]], failures_are_faults: bool = False) -> DataVerdict:
    """The data verdict over every task of ``plan`` (see the module comment).
    ``api`` maps keys to the server's tasks (their ids name the input
    directories). ``failures_are_faults``: where nothing may fail (no
    kills, only vacates), an attempt counted as a failure is one."""
    v = DataVerdict(failures_are_faults=failures_are_faults)
    key_of = {t.id: k for k, t in api.items()}
    # Every file any copy wrote, by its hash: who wrote it (for bytes moved).
    writer: Dict[str, Copy] = {}
    written: Dict[str, Set[Named]] = {}  # by key, from all its copies
    for key, runs in copies.items():
        for c in runs:
            written.setdefault(key, set()).update(_named(c.wrote))
            for f in c.wrote:
                writer.setdefault(f.sha256, c)
                v.files_written += 1
                v.bytes_written += f.size

    for key, task in plan.items():
        kinds: List[str] = []
        notes: List[str] = []
        runs = sorted(copies.get(key, []), key=lambda c: c.start_ns)

        # What it read: each file from a dependency some copy of it wrote;
        # a complete copy read, from each, one complete copy's files.
        for c in runs:
            for f in c.read:
                v.files_read += 1
                v.bytes_read += f.size
                w = writer.get(f.sha256)
                if w is not None and w.worker != c.worker:
                    v.bytes_moved += f.size
                dep_id, _, name = f.name.partition("/")
                dep = key_of.get(dep_id)
                if dep not in task.deps:
                    kinds.append("corrupt_read")
                    notes.append(f"attempt {c.attempt} on {c.worker} read {f.name}, not an "
                                 f"output of a task it depends on")
                elif (name, f.sha256) not in written.get(dep, set()):
                    kinds.append("corrupt_read")
                    notes.append(f"attempt {c.attempt} on {c.worker} read {f.name} ({f.size} "
                                 f"bytes, sha256 {f.sha256[:16]}...), which no copy of {dep} "
                                 f"wrote")
            if c.end_ns is None:
                continue
            for dep in task.deps:
                if dep not in api:
                    continue  # lost or never submitted: the common verdict says so
                got = _named(c.read, api[dep].id + "/")
                made = [_named(p.wrote) for p in copies.get(dep, []) if p.end_ns is not None]
                want_none = not plan[dep].writes
                if (want_none and got) or (not want_none and got not in made):
                    kinds.append("input_mismatch")
                    notes.append(
                        f"attempt {c.attempt} on {c.worker} read from {dep} ({api[dep].id}) "
                        f"{sorted(n for n, _ in got)}, not the files of one complete copy of "
                        f"it (those wrote: {[sorted(n for n, _ in m) for m in made]})")

        # What the server kept of its successes: the files its copy wrote.
        by_attempt: Dict[int, List[Set[Named]]] = {}
        for c in runs:
            if c.end_ns is not None:
                by_attempt.setdefault(c.attempt, []).append(_named(c.wrote))
        history = attempts.get(key, [])
        for a in history:
            if a.state == "failed" or (a.state == "retried" and "; retry " in a.reason):
                v.counted_failures += 1
                if failures_are_faults:
                    kinds.append("counted_failure")
                    notes.append(f"attempt {a.attempt} counted as a failure: {a.reason}")
            if a.state not in ("succeeded", "rerun"):
                if a.state == "preempted":
                    if a.reason.startswith("preempted by "):
                        v.vacated_priority += 1
                    else:
                        v.vacated_owner += 1
                continue
            v.bytes_replicated += sum(x.size for x in a.outputs) * max(0, len(a.holders) - 1)
            recorded = _named(a.outputs)
            if recorded not in by_attempt.get(a.attempt, []):
                kinds.append("output_mismatch")
                notes.append(f"the server kept outputs {sorted(n for n, _ in recorded)} for "
                             f"attempt {a.attempt}, which no complete copy of it wrote as such")
            v.replicated_reruns += a.state == "rerun" and task.replicas > 1

        v.corrupt_reads += kinds.count("corrupt_read")
        v.input_mismatches += kinds.count("input_mismatch")
        v.output_mismatches += kinds.count("output_mismatch")
        if kinds:
            v.problems.append(Problem(key, sorted(set(kinds)), notes))
    return v

