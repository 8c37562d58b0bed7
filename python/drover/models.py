"""Typed views of the REST API's JSON (shapes in src/proto/api_json.h).

Times are timezone-aware UTC datetimes, read from the ``*_ms`` fields;
absent times are ``None``. Unknown fields are ignored, so a newer server
does not break an older client.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any, Dict, List, Mapping, Optional

# Task states, in lifecycle order (DESIGN.md section 3).
WAITING = "waiting"
QUEUED = "queued"
ASSIGNED = "assigned"
RUNNING = "running"
SUCCEEDED = "succeeded"
FAILED = "failed"
CANCELED = "canceled"
STATES = (WAITING, QUEUED, ASSIGNED, RUNNING, SUCCEEDED, FAILED, CANCELED)
TERMINAL = frozenset((SUCCEEDED, FAILED, CANCELED))


def _time(data: Mapping[str, Any], key: str) -> Optional[datetime.datetime]:
    ms = data.get(key + "_ms")
    if ms is None:
        return None
    return datetime.datetime.fromtimestamp(ms / 1000.0, tz=datetime.timezone.utc)


def _required_time(data: Mapping[str, Any], key: str) -> datetime.datetime:
    t = _time(data, key)
    return t if t is not None else datetime.datetime.fromtimestamp(0, tz=datetime.timezone.utc)


@dataclasses.dataclass(frozen=True)
class OutputFile:
    """A file a task left in ``$DROVER_OUTPUT_DIR`` (one of its outputs)."""

    name: str  # relative to that directory: "model/weights.bin"
    size: int
    sha256: str


@dataclasses.dataclass(frozen=True)
class Outcome:
    """How a finished attempt ended."""

    exit_code: int
    signal: int
    oom_killed: bool
    wall_ms: int
    cpu_ms: int
    peak_mem_bytes: int
    result: str  # what the task wrote to $DROVER_RESULT
    outputs: List[OutputFile] = dataclasses.field(default_factory=list)
    # Reused from the result cache (cache=True): the task that ran ("12.3");
    # None when this one ran.
    cached_from: Optional[str] = None
    # Bytes read from and written to disk, as the task's cgroup counted
    # them; None where not counted (cgroup v1 without disk I/O limits).
    io_read_bytes: Optional[int] = None
    io_write_bytes: Optional[int] = None
    # The digest ("sha256:...") of the container image the worker ran this
    # attempt in (TaskInfo.image names it); None for a task without one.
    image_digest: Optional[str] = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Outcome":
        return cls(
            exit_code=int(d.get("exit_code", 0)),
            signal=int(d.get("signal", 0)),
            oom_killed=bool(d.get("oom_killed", False)),
            wall_ms=int(d.get("wall_ms", 0)),
            cpu_ms=int(d.get("cpu_ms", 0)),
            peak_mem_bytes=int(d.get("peak_mem_bytes", 0)),
            result=str(d.get("result", "")),
            outputs=[OutputFile(str(f["name"]), int(f["size"]), str(f["sha256"]))
                     for f in d.get("outputs", [])],
            cached_from=str(d["cached_from"]) if d.get("cached_from") else None,
            io_read_bytes=int(d["io_read_bytes"]) if "io_read_bytes" in d else None,
            io_write_bytes=int(d["io_write_bytes"]) if "io_write_bytes" in d else None,
            image_digest=str(d["image_digest"]) if d.get("image_digest") else None,
        )


@dataclasses.dataclass(frozen=True)
class GpuGrant:
    """A GPU (or a share of one, in hundredths) given to a task."""

    index: int
    share: int
    mem_bytes: int


@dataclasses.dataclass(frozen=True)
class TaskInfo:
    """One task as the server knows it (``GET /api/v1/tasks/{id}``)."""

    id: str  # "12.3"
    job: int
    group: str
    array_index: int
    state: str
    attempt: int
    worker: Optional[int]
    reason: str
    submitted_at: datetime.datetime
    started_at: Optional[datetime.datetime]
    finished_at: Optional[datetime.datetime]
    retry_at: Optional[datetime.datetime]
    outcome: Optional[Outcome]
    cores: List[int]
    gpus: List[GpuGrant]
    explain: str = ""  # the scheduler's explanation (single-task queries only)
    # Another user's task: the server left out its result, outputs and
    # checkpoint files (a job's contents are its user's, admins' and
    # viewers'; docs/guide.md, "Users, roles and the audit log").
    contents_hidden: bool = False
    # The OCI image it runs in, as submitted (image=,
    # "docker.io/library/python:3.12"); None: on the worker's own system.
    # The digest an attempt ran is its outcome's image_digest.
    image: Optional[str] = None

    @property
    def done(self) -> bool:
        return self.state in TERMINAL

    @property
    def result(self) -> str:
        """The ``$DROVER_RESULT`` text of the last attempt ("" if none)."""
        return self.outcome.result if self.outcome else ""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "TaskInfo":
        outcome = d.get("outcome")
        return cls(
            id=str(d["id"]),
            job=int(d.get("job", str(d["id"]).split(".")[0])),
            group=str(d.get("group", "")),
            array_index=int(d.get("array_index", 0)),
            state=str(d["state"]),
            attempt=int(d.get("attempt", 0)),
            worker=None if d.get("worker") is None else int(d["worker"]),
            reason=str(d.get("reason", "")),
            submitted_at=_required_time(d, "submitted_at"),
            started_at=_time(d, "started_at"),
            finished_at=_time(d, "finished_at"),
            retry_at=_time(d, "retry_at"),
            outcome=Outcome.from_json(outcome) if outcome else None,
            cores=[int(c) for c in d.get("cores", [])],
            gpus=[GpuGrant(int(g["index"]), int(g["share"]), int(g["mem_bytes"]))
                  for g in d.get("gpus", [])],
            explain=str(d.get("explain", "")),
            contents_hidden=bool(d.get("contents_hidden", False)),
            image=_image(d),
        )


def _image(task: Mapping[str, Any]) -> Optional[str]:
    # Beside "network" and "disk" in the task's JSON; also taken from its
    # outcome, beside "image_digest", when only that has it.
    image = task.get("image") or (task.get("outcome") or {}).get("image")
    return str(image) if image else None


@dataclasses.dataclass(frozen=True)
class JobInfo:
    """A job: its counts per task state, and its tasks when asked for one."""

    id: int
    name: str
    user: str
    submitted_at: datetime.datetime
    task_count: int
    done: bool
    counts: Dict[str, int]
    tasks: List[TaskInfo] = dataclasses.field(default_factory=list)

    @property
    def succeeded(self) -> bool:
        return self.done and self.counts.get(SUCCEEDED, 0) == self.task_count

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "JobInfo":
        return cls(
            id=int(d["id"]),
            name=str(d.get("name", "")),
            user=str(d.get("user", "")),
            submitted_at=_required_time(d, "submitted_at"),
            task_count=int(d.get("task_count", 0)),
            done=bool(d.get("done", False)),
            counts={str(k): int(v) for k, v in d.get("counts", {}).items()},
            tasks=[TaskInfo.from_json(t) for t in d.get("tasks", [])],
        )


@dataclasses.dataclass(frozen=True)
class WorkerGpu:
    index: int
    uuid: str
    model: str
    memory_bytes: int
    free_share: int  # hundredths of the GPU not granted
    free_mem_bytes: int


@dataclasses.dataclass(frozen=True)
class GpuUse:
    index: int
    util_percent: int
    mem_used_bytes: int


@dataclasses.dataclass(frozen=True)
class Utilization:
    cpu_percent: int
    mem_used_bytes: int
    gpus: List[GpuUse]


@dataclasses.dataclass(frozen=True)
class WorkerInfo:
    """A worker: what it offers, what is free, what it runs."""

    id: int
    name: str
    cpu_cores: List[int]
    mem_bytes: int
    gpus: List[WorkerGpu]
    counters: Dict[str, int]
    labels: Dict[str, str]
    drained: bool
    lost: bool
    free_cores: List[int]
    free_mem_bytes: int
    free_counters: Dict[str, int]
    tasks: List[str]
    utilization: Utilization
    last_heartbeat: Optional[datetime.datetime]

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "WorkerInfo":
        u = d.get("utilization") or {}
        return cls(
            id=int(d["id"]),
            name=str(d.get("name", "")),
            cpu_cores=[int(c) for c in d.get("cpu_cores", [])],
            mem_bytes=int(d.get("mem_bytes", 0)),
            gpus=[WorkerGpu(int(g["index"]), str(g.get("uuid", "")), str(g.get("model", "")),
                            int(g.get("memory_bytes", 0)), int(g.get("free_share", 0)),
                            int(g.get("free_mem_bytes", 0)))
                  for g in d.get("gpus", [])],
            counters={str(k): int(v) for k, v in d.get("counters", {}).items()},
            labels={str(k): str(v) for k, v in d.get("labels", {}).items()},
            drained=bool(d.get("drained", False)),
            lost=bool(d.get("lost", False)),
            free_cores=[int(c) for c in d.get("free_cores", [])],
            free_mem_bytes=int(d.get("free_mem_bytes", 0)),
            free_counters={str(k): int(v) for k, v in d.get("free_counters", {}).items()},
            tasks=[str(t) for t in d.get("tasks", [])],
            utilization=Utilization(
                int(u.get("cpu_percent", 0)),
                int(u.get("mem_used_bytes", 0)),
                [GpuUse(int(g["index"]), int(g.get("util_percent", 0)),
                        int(g.get("mem_used_bytes", 0))) for g in u.get("gpus", [])],
            ),
            last_heartbeat=_time(d, "last_heartbeat"),
        )


@dataclasses.dataclass(frozen=True)
class TaskEvent:
    """One event-stream message: a task changed state (``from_state ==
    to_state`` in the snapshot sent when a stream opens)."""

    task: str
    from_state: str
    to_state: str
    attempt: int
    reason: str
    at: Optional[datetime.datetime]

    @property
    def job(self) -> int:
        return int(self.task.split(".")[0])

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "TaskEvent":
        return cls(
            task=str(d["task"]),
            from_state=str(d.get("from", "")),
            to_state=str(d["to"]),
            attempt=int(d.get("attempt", 0)),
            reason=str(d.get("reason", "")),
            at=_time(d, "at"),
        )
