"""The Drover client: submit tasks and pipelines, wait, read results and logs.

    import drover

    c = drover.Client()                     # finds the server like the CLI
    t = c.submit(["python", "train.py"], gpus=1, mem="16GiB", retries=2, timeout="2h")
    print(t.result())                       # waits; $DROVER_RESULT, or TaskFailed

    with c.job("sweep") as job:             # submitted when the block ends
        prep = job.task(["python", "prep.py"], cpus=2)
        trains = job.array(["python", "train.py", "--seed", "{index}"], range(8),
                           gpus=1, after=[prep])
        job.task(["python", "report.py"], after=trains)
    job.wait(progress=True)
    print(job.results())

Waiting follows the server's event stream (no polling). Every call raises a
:class:`~drover.errors.DroverError` subclass on failure.

``Client.submit`` returns at once: the job goes to the server from a
background thread, in submission order, batched with what else was
submitted meanwhile, so a loop of thousands of single submits is not held
up by the server's disk. The server's answer reaches the task when it is
first used (``id``, ``result()``, ``wait()``, ...): a refused spec raises
:class:`~drover.errors.InvalidRequest` there, and ``Client.flush()`` (also
run by ``close()``, the end of a ``with Client()`` block, and at the exit of
the interpreter) waits for every answer and raises a refusal that nothing
has looked at. The client's other calls see its own submissions: they wait
for the ones still in flight. ``Job.submit()`` waits for its answer.

Thread safety: a Client may be shared by threads (HTTP requests are
serialized on its connection); its waits share one event stream, read by a
background thread; each log follow opens its own WebSocket.
"""

from __future__ import annotations

import atexit
import hashlib
import http.client
import datetime
import glob
import json
import os
import sys
import threading
import time
import warnings
import weakref
from typing import (
    Any,
    Dict,
    Iterable,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Set,
    TextIO,
    Union,
)

from . import _call
from ._background import PendingJob, Submitter, Watcher, warning_text
from ._connection import Endpoint, Transport, error_from_body, resolve_endpoint
from ._events import EventStream
from ._websocket import OP_BINARY, OP_TEXT, Closed, WebSocket
from .errors import (
    ConnectionFailed,
    DroverError,
    DroverWarning,
    FailedPrecondition,
    PermissionDenied,
    TaskCanceled,
    TaskFailed,
    api_error,
    api_error_from_text,
)
from .models import (
    CANCELED,
    FAILED,
    RUNNING,
    SUCCEEDED,
    TERMINAL,
    JobInfo,
    OutputFile,
    TaskEvent,
    TaskInfo,
    WorkerInfo,
)

def _download_output(transport: Transport, f: Mapping[str, Any], to: str) -> str:
    """Fetches one listed output from a worker's file service (pinned TLS,
    the cluster token and the server's grant) into ``to``; returns its path."""
    name = str(f["name"])
    if name.startswith("/") or any(p in ("", ".", "..") for p in name.split("/")):
        raise api_error("invalid_argument", f"the server listed an unsafe output name {name!r}")
    dest = os.path.join(to, *name.split("/"))
    os.makedirs(os.path.dirname(dest) or ".", exist_ok=True)
    failures = []
    for src in f.get("sources", []):
        endpoint = Endpoint(host=str(src["host"]), port=int(src["port"]),
                            token=transport.endpoint.token,
                            fingerprint=str(src["fingerprint"]), tls=True)
        part = dest + ".drover-part"
        try:
            conn = Transport(endpoint, transport.timeout)._new_connection()
            try:
                conn.request("GET", f"/v1/files/{f['sha256']}", headers={
                    "Authorization": f"Bearer {endpoint.token}",
                    "X-Drover-Grant": str(f.get("grant", "")),
                    "X-Drover-Requester": "client",
                })
                resp = conn.getresponse()
                if resp.status != 200:
                    raise error_from_body(resp.status, resp.read())
                digest = hashlib.sha256()
                size = 0
                with open(part, "wb") as out:
                    while True:
                        chunk = resp.read(1 << 20)
                        if not chunk:
                            break
                        size += len(chunk)
                        digest.update(chunk)
                        out.write(chunk)
            finally:
                conn.close()
            if size != int(f["size"]) or digest.hexdigest() != f["sha256"]:
                raise api_error("data_loss", f"{name}: got {size} bytes with sha256 "
                                f"{digest.hexdigest()[:12]}..., want {f['size']} bytes, "
                                f"{str(f['sha256'])[:12]}...")
            os.replace(part, dest)
            return dest
        except (DroverError, OSError, http.client.HTTPException) as e:
            if os.path.exists(part):
                os.remove(part)
            failures.append(f"worker {src.get('worker')}: {e}")
    raise api_error("unavailable", f"{name}: " + ("; ".join(failures) or
                                               "no worker serves it now"))


Command = Union[Sequence[str], str]
"""argv (no shell), or a string run by ``sh -c``. ``{index}`` in it is
replaced by the array index."""

Duration = Union[str, int, float, datetime.timedelta]
"""``"2h"``, ``"90s"``, ``"250ms"``, a number of seconds, or a timedelta."""

After = Union["Task", "TaskGroup", "Job", int, str]
"""What must succeed first: a task, a group of this job (or of another), a
job, a job id (12) or a task id ("12.3")."""

# Tasks per GET of a job: the server's cap (src/server/paging.h); a job's
# tasks come in pages of this many.
_PAGE = 1000

# When a worker pulls a task's image= (image_pull=): when its store lacks
# it, every time, or never (only images it already has).
_IMAGE_PULL = ("missing", "always", "never")


def _deadline(timeout: Optional[float]) -> Optional[float]:
    return None if timeout is None else time.monotonic() + timeout


def _duration(value: Duration, what: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, datetime.timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise TypeError(f"{what}: expected a duration string, seconds or a timedelta, "
                        f"got {type(value).__name__}")
    if seconds < 0:
        raise ValueError(f"{what}: must not be negative")
    ms = round(seconds * 1000)
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def _array_range(indices: Union[str, range, Iterable[int]]) -> str:
    """``range(8)`` -> ``"0-7"``; evenly spaced indices -> ``"a-b:step"``."""
    if isinstance(indices, str):
        return indices
    values = sorted(set(int(i) for i in indices))
    if not values:
        raise ValueError("array: no indices given")
    if len(values) == 1:
        return str(values[0])
    step = values[1] - values[0]
    if any(b - a != step for a, b in zip(values, values[1:])):
        raise ValueError(
            "array: indices must be evenly spaced (like range(0, 100, 2)); "
            "split uneven ones into several arrays"
        )
    if values[0] < 0:
        raise ValueError("array: indices must not be negative")
    spec = f"{values[0]}-{values[-1]}"
    return spec if step == 1 else f"{spec}:{step}"


def _command(command: Command) -> Union[List[str], str]:
    if isinstance(command, str):
        return command
    argv = [str(a) for a in command]
    if not argv:
        raise ValueError("command is empty: the first element names the program")
    return argv


def _default_name(command: Command) -> str:
    """"prep" for ["python", "prep.py"], "echo" for ["echo", "hi"]."""
    if isinstance(command, str):
        return "sh"
    argv = list(command)
    prog = os.path.basename(str(argv[0])) if argv else "task"
    interpreters = ("python", "python3", "sh", "bash", "Rscript", "julia", "node", "perl")
    if prog in interpreters and len(argv) > 1 and not str(argv[1]).startswith("-"):
        return os.path.splitext(os.path.basename(str(argv[1])))[0] or prog
    return prog or "task"


def _resources(
    cpus: Optional[Union[int, float, str]],
    mem: Optional[Union[int, str]],
    gpus: Optional[Union[int, float, str]],
    gpu_mem: Optional[Union[int, str]],
    gpu_type: Optional[Union[str, Sequence[str]]],
    labels: Optional[Mapping[str, str]],
    counters: Optional[Mapping[str, int]],
) -> Dict[str, Any]:
    r: Dict[str, Any] = {}
    if cpus is not None:
        r["cpus"] = cpus
    if mem is not None:
        r["mem"] = mem
    if gpus is not None:
        r["gpus"] = gpus
    if gpu_mem is not None:
        r["gpu_mem"] = gpu_mem
    if gpu_type is not None:
        r["gpu_type"] = [gpu_type] if isinstance(gpu_type, str) else list(gpu_type)
    if labels:
        r["labels"] = dict(labels)
    if counters:
        r["counters"] = dict(counters)
    return r


def _task_spec(
    name: str,
    command: Command,
    array: Optional[str],
    depends_on: List[str],
    cpus: Optional[Union[int, float, str]],
    mem: Optional[Union[int, str]],
    gpus: Optional[Union[int, float, str]],
    gpu_mem: Optional[Union[int, str]],
    gpu_type: Optional[Union[str, Sequence[str]]],
    labels: Optional[Mapping[str, str]],
    counters: Optional[Mapping[str, int]],
    env: Optional[Mapping[str, str]],
    retries: Optional[int],
    retry_backoff: Optional[Duration],
    timeout: Optional[Duration],
    priority: Optional[int],
    max_output: Optional[Union[int, str]] = None,
    inputs: Optional[Sequence[str]] = None,
    input_files: Optional[Sequence[Union[str, "os.PathLike[str]"]]] = None,
    replicas: Optional[int] = None,
    cache: bool = False,
    code: Optional[Sequence[Union[str, "os.PathLike[str]"]]] = None,
    network: Optional[str] = None,
    image: Optional[str] = None,
    image_pull: Optional[str] = None,
    disk: Optional[Union[int, str]] = None,
    io_read_bps: Optional[Union[int, str]] = None,
    io_write_bps: Optional[Union[int, str]] = None,
    io_weight: Optional[int] = None,
) -> Dict[str, Any]:
    spec: Dict[str, Any] = {"id": name, "command": _command(command)}
    if array is not None:
        spec["array"] = array
    res = _resources(cpus, mem, gpus, gpu_mem, gpu_type, labels, counters)
    if res:
        spec["resources"] = res
    if depends_on:
        spec["depends_on"] = depends_on
    if env:
        spec["env"] = {str(k): str(v) for k, v in env.items()}
    if retries is not None:
        spec["retries"] = retries
    if retry_backoff is not None:
        spec["retry_backoff"] = _duration(retry_backoff, "retry_backoff")
    if timeout is not None:
        spec["timeout"] = _duration(timeout, "timeout")
    if priority is not None:
        spec["priority"] = priority
    if max_output is not None:
        spec["max_output"] = max_output
    if replicas is not None:
        spec["replicas"] = replicas
    if network is not None:
        spec["network"] = network
    if image is not None:
        spec["image"] = image
    if image_pull is not None:
        if image_pull not in _IMAGE_PULL:
            raise ValueError(
                f'image_pull: want "missing", "always" or "never", got {image_pull!r}'
            )
        spec["image_pull"] = image_pull
    if disk is not None:
        spec["disk"] = disk
    if io_read_bps is not None:
        spec["io_read_bps"] = io_read_bps
    if io_write_bps is not None:
        spec["io_write_bps"] = io_write_bps
    if io_weight is not None:
        spec["io_weight"] = io_weight
    if inputs is not None:
        if isinstance(inputs, str):
            raise TypeError('inputs: expected a list of selectors such as ["prep:a.csv"], got a str')
        spec["inputs"] = [str(s) for s in inputs]
    if input_files:
        if isinstance(input_files, (str, os.PathLike)):
            raise TypeError("input_files: expected a list of paths, got one path")
        # Uploaded when the job is submitted (_uploads.py).
        spec["input_files"] = [os.fspath(p) for p in input_files]
    if cache:
        spec["cache"] = True
    if code:
        if not cache:
            raise ValueError("code: only with cache=True (it is part of the cache key)")
        spec["code"] = _code_files(code)
    return spec


def _code_files(code: Sequence[Union[str, "os.PathLike[str]"]]) -> List[Dict[str, str]]:
    """The files the patterns match (glob, relative to the current
    directory), each with its SHA-256: the task's code, in its cache key.
    The files stay here."""
    if isinstance(code, (str, os.PathLike)):
        raise TypeError("code: expected a list of paths or patterns, got one")
    hashed: Dict[str, str] = {}
    for pattern in code:
        matched = [p for p in sorted(glob.glob(os.fspath(pattern), recursive=True))
                   if os.path.isfile(p)]
        if not matched:
            raise ValueError(f'code pattern "{os.fspath(pattern)}" matches no file')
        for path in matched:
            if path not in hashed:
                digest = hashlib.sha256()
                with open(path, "rb") as f:
                    for block in iter(lambda: f.read(1 << 20), b""):
                        digest.update(block)
                hashed[path] = digest.hexdigest()
    return [{"path": p, "sha256": h} for p, h in sorted(hashed.items())]


def _as_list(after: Optional[Union[After, Iterable[After]]]) -> List[After]:
    if after is None:
        return []
    if isinstance(after, (Task, TaskGroup, Job, int, str)):
        return [after]
    return list(after)


def _outside_ids(item: After) -> List[str]:
    """Job-level ``after`` entries for something outside the job at hand."""
    if isinstance(item, Task):
        return [item.id]
    if isinstance(item, TaskGroup):
        return [t.id for t in item.tasks]
    if isinstance(item, Job):
        return [str(item.id)]
    if isinstance(item, bool):
        raise TypeError("after: expected a task, group, job or id, got a bool")
    if isinstance(item, int):
        return [str(item)]
    if isinstance(item, str):
        return [item]
    raise TypeError(f"after: expected a task, group, job or id, got {type(item).__name__}")


class Client:
    """A connection to one Drover server.

    Args:
        address: ``"host:7210"``; without it the access file is read
            (``access_file``, then ``$DROVER_ACCESS``, then
            ``~/.local/state/drover/access.json``).
        token: the cluster token (required with an address; overrides the
            access file's).
        fingerprint: the server certificate's SHA-256, pinned (required with
            an address unless ``tls=False``).
        tls: False for a server started with ``--no-tls``.
        access_file: the access file to read.
        timeout: seconds for each HTTP request.

    Raises:
        AccessError: the server cannot be located (no access file, ...).
    """

    def __init__(
        self,
        address: Optional[str] = None,
        port: Optional[int] = None,
        *,
        token: Optional[str] = None,
        fingerprint: Optional[str] = None,
        tls: Optional[bool] = None,
        access_file: Optional[str] = None,
        timeout: float = 30.0,
    ) -> None:
        if port is not None:
            if not address:
                raise TypeError("Client(host, port): a port needs a host")
            if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
                raise TypeError(f"Client(host, port): port must be 1 to 65535, got {port!r}")
            address = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
        self.endpoint = resolve_endpoint(address, token, fingerprint, tls, access_file)
        self._submitter = Submitter(Transport(self.endpoint, timeout))
        self._transport = Transport(self.endpoint, timeout)
        # Reads see this client's submissions: they wait for those in flight.
        self._transport.before_request = self._submitter.wait_sent
        self._watcher_lock = threading.Lock()
        self._watcher_: Optional[Watcher] = None
        _LIVE.add(self._submitter)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def flush(self, timeout: Optional[float] = None) -> None:
        """Waits until the server has answered every submission, then raises
        the first refusal that no task or job of it has shown yet (and
        issues, as DroverWarning, the warnings none has shown).

        Raises:
            InvalidRequest: a submitted spec was refused (``field`` says
                where; the message counts any others).
            WaitTimeout: answers did not come within ``timeout`` seconds.
        """
        self._submitter.wait_sent(timeout)
        refused, unseen_warnings = self._submitter.take_unseen()
        for text in unseen_warnings:
            warnings.warn(text, DroverWarning, stacklevel=2)
        if refused:
            first = refused[0]
            if len(refused) > 1:
                first.args = (f"{first.args[0]} (and {len(refused) - 1} more submissions "
                              "were refused)",)
            raise first

    def close(self) -> None:
        """Sends what is still queued (``flush()``, whose refusal it raises),
        then closes the connections (a later call opens new ones)."""
        try:
            self.flush()
        finally:
            with self._watcher_lock:
                watcher, self._watcher_ = self._watcher_, None
            if watcher is not None:
                watcher.close()
            self._transport.close()

    @property
    def _watcher(self) -> Watcher:
        with self._watcher_lock:
            if self._watcher_ is None:
                self._watcher_ = Watcher(self._transport)
            return self._watcher_

    def __repr__(self) -> str:
        return f"drover.Client({self.endpoint.address!r}, tls={self.endpoint.tls})"

    # ---- submitting --------------------------------------------------------

    def submit(
        self,
        command: Command,
        *,
        name: Optional[str] = None,
        after: Optional[Union[After, Iterable[After]]] = None,
        cpus: Optional[Union[int, float, str]] = None,
        mem: Optional[Union[int, str]] = None,
        gpus: Optional[Union[int, float, str]] = None,
        gpu_mem: Optional[Union[int, str]] = None,
        gpu_type: Optional[Union[str, Sequence[str]]] = None,
        labels: Optional[Mapping[str, str]] = None,
        counters: Optional[Mapping[str, int]] = None,
        env: Optional[Mapping[str, str]] = None,
        retries: Optional[int] = None,
        retry_backoff: Optional[Duration] = None,
        timeout: Optional[Duration] = None,
        priority: Optional[int] = None,
        user: Optional[str] = None,
        max_output: Optional[Union[int, str]] = None,
        input_files: Optional[Sequence[Union[str, "os.PathLike[str]"]]] = None,
        replicas: Optional[int] = None,
        cache: bool = False,
        code: Optional[Sequence[Union[str, "os.PathLike[str]"]]] = None,
        network: Optional[str] = None,
        image: Optional[str] = None,
        image_pull: Optional[str] = None,
        disk: Optional[Union[int, str]] = None,
        io_read_bps: Optional[Union[int, str]] = None,
        io_write_bps: Optional[Union[int, str]] = None,
        io_weight: Optional[int] = None,
    ) -> "Task":
        """Submits one task as a job of its own and returns it at once, before
        the server has answered (see the module doc: the job is sent in the
        background, in order, batched with other submissions).

        ``mem``/``gpu_mem`` take ``"16GiB"`` or bytes; ``cpus``/``gpus`` take
        numbers (0.5) or strings; ``timeout`` is per attempt; ``retries`` are
        extra attempts after a failure; ``after`` holds tasks or jobs that
        must succeed first; ``max_output`` (``"2GiB"`` or bytes) is the most
        the task's outputs may add up to (default: the server's
        ``--max-output``); ``input_files`` are local files uploaded once
        (by SHA-256) and placed, read-only, in the task's directory under
        their last path part; ``replicas=2`` keeps a copy of its outputs on
        a second worker; ``cache=True`` reuses the result of an earlier task
        of yours with the same command, environment, inputs and ``code``
        files (paths or globs, hashed here) while its outputs are held: it
        then succeeds without running (``task.info().outcome.cached_from``);
        ``network="none"`` runs it in a network of its own with only
        loopback (only on workers that can make one);
        ``image="docker.io/library/python:3.12"`` runs it inside that OCI
        image (only on workers with a container runtime), its directory
        mounted at the same path, and ``image_pull`` says when the worker
        pulls it: ``"missing"`` (default: when its store lacks it),
        ``"always"`` or ``"never"`` (only an image it already has, for
        networks that cannot reach a registry; any other value raises
        ValueError here); ``disk="20GiB"`` is
        the most its directory may hold (placed only where that much is
        free, stopped and failed past it); ``io_read_bps`` and
        ``io_write_bps`` (``"10MiB"`` or bytes per second) and ``io_weight``
        (1 to 10000) limit its disk I/O.

        The task's first use (``id``, ``result()``, ``wait()``, ...) raises
        the server's refusal: InvalidRequest, whose ``field`` says which part
        (``task[0].resources.mem``); so does ``flush()`` when nothing used it.
        """
        job = Job(self, name or _default_name(command), after=after, user=user)
        job.task(command, name=name, cpus=cpus, mem=mem, gpus=gpus, gpu_mem=gpu_mem,
                 gpu_type=gpu_type, labels=labels, counters=counters, env=env, retries=retries,
                 retry_backoff=retry_backoff, timeout=timeout, priority=priority,
                 max_output=max_output, input_files=input_files, replicas=replicas, cache=cache,
                 code=code, network=network, image=image, image_pull=image_pull, disk=disk,
                 io_read_bps=io_read_bps, io_write_bps=io_write_bps, io_weight=io_weight)
        job._pending = self._submitter.submit(job.spec())
        return Task(self, job=job)

    def job(
        self,
        name: str,
        *,
        after: Optional[Union[After, Iterable[After]]] = None,
        user: Optional[str] = None,
    ) -> "Job":
        """A pipeline to fill with task() and array(); submitted when its
        ``with`` block ends (or by submit())."""
        return Job(self, name, after=after, user=user)

    def submit_spec(self, spec: Mapping[str, Any]) -> "Job":
        """Submits a job given as the API's JSON structure (the job-file
        structure: ``{"name": ..., "task": [...]}``)."""
        job = Job(self, str(spec.get("name", "")))
        job._pending = self._submitter.submit(dict(spec))
        job.id  # waits for the answer; raises a refusal
        return job

    # ---- reading -----------------------------------------------------------

    def task(self, task_id: str) -> "Task":
        """A handle on an existing task (``"12.3"``); checks it exists.

        Raises:
            NotFound: no such task.
        """
        t = Task(self, task_id)
        t.info()
        return t

    def get_job(self, job_id: int) -> "Job":
        """A handle on an existing, submitted job.

        Raises:
            NotFound: no such job.
        """
        info = self.job_info(job_id, tasks=False)
        job = Job(self, info.name)
        job._id = info.id
        job._task_count = info.task_count
        return job

    def job_info(self, job_id: int, tasks: bool = True) -> JobInfo:
        """The job, with all its tasks when ``tasks`` (fetched in pages)."""
        if not tasks:
            return JobInfo.from_json(
                self._transport.json("GET", f"/api/v1/jobs/{job_id}", query={"limit": 0})
            )
        offset = 0
        pages: List[Dict[str, Any]] = []
        while True:
            page = self._transport.json(
                "GET", f"/api/v1/jobs/{job_id}", query={"offset": offset, "limit": _PAGE}
            )
            pages.append(page)
            offset += len(page.get("tasks", []))
            if not page.get("tasks") or offset >= int(page.get("task_count", 0)):
                break
        first = dict(pages[-1])
        first["tasks"] = [t for p in pages for t in p.get("tasks", [])]
        return JobInfo.from_json(first)

    def jobs(self, state: Optional[str] = None) -> List[JobInfo]:
        """Jobs (without their tasks). ``state``: ``"active"``, ``"done"``,
        or a task state (jobs that have such tasks)."""
        data = self._transport.json("GET", "/api/v1/jobs", query={"state": state})
        return [JobInfo.from_json(j) for j in data.get("jobs", [])]

    def workers(self) -> List[WorkerInfo]:
        """The workers: what they offer, what is free, what they run."""
        data = self._transport.json("GET", "/api/v1/workers")
        return [WorkerInfo.from_json(w) for w in data.get("workers", [])]

    def drain(self, worker_id: int, drained: bool = True) -> None:
        """Stops (or, with ``drained=False``, resumes) placing tasks on a
        worker; running tasks finish."""
        action = "drain" if drained else "undrain"
        self._transport.json("POST", f"/api/v1/workers/{worker_id}/{action}")

    def cancel(self, target: Union[int, str, "Task", "Job"]) -> None:
        """Cancels a job (12, a Job) or a task ("12.3", a Task)."""
        if isinstance(target, (Task, Job)):
            target.cancel()
        elif isinstance(target, str) and "." in target:
            self._transport.json("POST", f"/api/v1/tasks/{target}/cancel")
        else:
            self._transport.json("POST", f"/api/v1/jobs/{int(target)}/cancel")

    def retry(self, job: Union[int, "Job"]) -> int:
        """Runs a job's failed and canceled tasks again (see Job.retry);
        returns how many."""
        job_id = job.id if isinstance(job, Job) else int(job)
        answer = self._transport.json("POST", f"/api/v1/jobs/{job_id}/retry")
        return int(answer["retried"])

    def status(self) -> Dict[str, Any]:
        """The server's ``/api/v1/status`` numbers, as a dict."""
        result: Dict[str, Any] = self._transport.json("GET", "/api/v1/status")
        return result

    def events(self, job: Optional[int] = None, reconnect_for: float = 60.0) -> EventStream:
        """Task state events of one job, or of every active job: first a
        snapshot (``from_state == to_state``), then each change."""
        return EventStream(self._transport, job, reconnect_for)

    # ---- internal ----------------------------------------------------------

    def _watch(
        self,
        job: int,
        tasks: Optional[Set[str]],
        task_count: int,
        deadline: Optional[float],
        on_change: Optional[Any] = None,
    ) -> Dict[str, TaskEvent]:
        """Follows ``job``'s events until every task of ``tasks`` (every task
        of the job when None) is terminal; returns the last event per task.
        ``on_change`` gets how many tasks are in each state after each
        change."""
        latest: Dict[str, TaskEvent] = {}
        # How many of ``latest`` are in each state and how many are
        # terminal, kept as events come: a pass over them per event would
        # cost a job of 100,000 tasks minutes.
        counts: Dict[str, int] = {}
        terminal = 0
        wanted = task_count if tasks is None else len(tasks)

        with self.events(job) as stream:
            while not (len(latest) >= wanted and terminal == len(latest)):
                e = stream.next(deadline)
                if tasks is not None and e.task not in tasks:
                    continue
                old = latest.get(e.task)
                if old is not None and (old.to_state, old.attempt) == (e.to_state, e.attempt):
                    continue  # a repeated snapshot entry after a reconnect
                terminal += e.to_state in TERMINAL
                counts[e.to_state] = counts.get(e.to_state, 0) + 1
                if old is not None:
                    terminal -= old.to_state in TERMINAL
                    counts[old.to_state] -= 1
                latest[e.task] = e
                if on_change is not None:
                    on_change(counts)
        return latest


class Task:
    """One task (``"12.3"``) on the server. Cheap: holds only its id (or,
    just after ``Client.submit``, its job until the server names it)."""

    def __init__(self, client: Client, task_id: Optional[str] = None, *,
                 job: Optional["Job"] = None, index: int = 0) -> None:
        self._client = client
        self._id: Optional[str] = None
        self._job_id = 0
        self._submitted = job  # the submitted job whose answer names it
        self._index = index  # its task's index in that job
        if task_id is None:
            if job is None:
                raise TypeError("Task needs a task id")
            return
        job_text, dot, index = task_id.partition(".")
        if not (dot and job_text.isdigit() and index.isdigit()):
            raise ValueError(f'task id: expected "JOB.TASK" such as "12.3", got {task_id!r}')
        self._id = task_id
        self._job_id = int(job_text)

    @property
    def id(self) -> str:
        """``"12.3"``; just after ``Client.submit``, waits for the server's
        answer and raises its refusal (InvalidRequest)."""
        if self._id is None:
            assert self._submitted is not None
            self._job_id = self._submitted.id
            self._id = f"{self._job_id}.{self._index}"
        return self._id

    @property
    def job(self) -> int:
        """The task's job id."""
        self.id
        return self._job_id

    def __repr__(self) -> str:
        if self._id is None and self._submitted is not None and not self._submitted._answered:
            return "drover.Task(submitting)"
        try:
            return f"drover.Task({self.id!r})"
        except DroverError as e:
            return f"drover.Task(refused: {e})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Task) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    def info(self) -> TaskInfo:
        """Everything the server knows about the task now, with the
        scheduler's explanation."""
        return TaskInfo.from_json(self._client._transport.json("GET", f"/api/v1/tasks/{self.id}"))

    @property
    def state(self) -> str:
        """The current state (asks the server): ``waiting``, ``queued``,
        ``assigned``, ``running``, ``succeeded``, ``failed`` or ``canceled``."""
        return self.info().state

    def wait(self, timeout: Optional[float] = None) -> TaskInfo:
        """Blocks until the task succeeded, failed or was canceled, and
        returns its final info (as it came with the task's end, without
        ``explain``: info() has it). Does not raise for a failed task.

        Raises:
            WaitTimeout: ``timeout`` seconds passed first.
            NotFound: there is no such task.
        """
        _, info = self._client._watcher.wait_terminal(self.id, _deadline(timeout))
        if info is not None:
            try:
                return TaskInfo.from_json(info)
            except (KeyError, TypeError, ValueError):
                pass  # asked for below
        return self.info()

    def result(self, timeout: Optional[float] = None) -> str:
        """Waits, then returns what the task left in ``$DROVER_RESULT``.

        Raises:
            TaskFailed: it failed (``reason``, ``exit_code``).
            TaskCanceled: it was canceled.
            PermissionDenied: it is another user's, whose results this
                client's user may not read.
            WaitTimeout: ``timeout`` seconds passed first.
        """
        return _result_of(self.wait(timeout))

    @property
    def outputs(self) -> List[OutputFile]:
        """The files the task left in ``$DROVER_OUTPUT_DIR`` when it
        succeeded (asks the server; empty before that)."""
        outcome = self.info().outcome
        return list(outcome.outputs) if outcome else []

    def download(self, to: str = ".", names: Optional[Sequence[str]] = None) -> List[str]:
        """Downloads the task's outputs (or only ``names``) into directory
        ``to`` from the worker that holds them, checking each against its
        SHA-256; returns the paths written. A file is renamed into place only
        once whole and checked.

        Raises:
            NotFound: the task has no output of a name in ``names``.
            Unavailable: no worker holding a file could deliver it whole.
        """
        listed = self._client._transport.json("GET", f"/api/v1/tasks/{self.id}/outputs")
        files = listed.get("outputs", [])
        wanted = set(names) if names is not None else None
        missing = (wanted or set()) - {str(f["name"]) for f in files}
        if missing:
            raise api_error("not_found", f"task {self.id} has no output named "
                            + ", ".join(sorted(missing)))
        written = []
        for f in files:
            if wanted is not None and f["name"] not in wanted:
                continue
            written.append(_download_output(self._client._transport, f, to))
        return written

    def cancel(self) -> None:
        """Cancels the task (a running one is stopped)."""
        self._client._transport.json("POST", f"/api/v1/tasks/{self.id}/cancel")

    def logs(
        self, follow: bool = False, stream: str = "stdout", timeout: Optional[float] = None
    ) -> Iterator[str]:
        """The task's output (``stream``: stdout or stderr), line by line,
        without line ends.

        With ``follow=False`` the log so far of its current (or last)
        attempt. With ``follow=True`` it waits for the task to start, then
        yields lines as the task prints them, until the attempt ends (a
        retry's output is not followed).

        Raises:
            FailedPrecondition: (follow=False) the task has not run yet.
            Unavailable: the worker holding the log is offline.
            WaitTimeout: (follow=True) the attempt did not end within
                ``timeout`` seconds of the call.
        """
        if stream not in ("stdout", "stderr"):
            raise ValueError(f'stream: want "stdout" or "stderr", got {stream!r}')
        if follow:
            return self._follow(stream, _deadline(timeout))
        data, _ = self._client._transport.request(
            "GET", f"/api/v1/tasks/{self.id}/logs", query={"stream": stream}
        )
        return iter(data.decode("utf-8", "replace").splitlines())

    def _follow(self, stream: str, deadline: Optional[float]) -> Iterator[str]:
        target = f"/api/v1/tasks/{self.id}/logs/follow?stream={stream}"
        transport = self._client._transport
        while True:
            connect_timeout = transport.timeout
            if deadline is not None:
                connect_timeout = max(0.001, min(connect_timeout, deadline - time.monotonic()))
            ws = WebSocket.connect(transport, target, connect_timeout)
            try:
                pending = b""
                while True:
                    try:
                        op, payload = ws.recv(deadline)
                    except Closed as c:
                        raise ConnectionFailed(
                            f"log stream of {self.id} ended without an end-of-log mark: "
                            f"{c.reason or c.code}"
                        ) from None
                    if op == OP_BINARY:
                        pending += payload
                        *lines, pending = pending.split(b"\n")
                        for line in lines:
                            yield line.decode("utf-8", "replace")
                        continue
                    if op != OP_TEXT:
                        continue
                    msg = json.loads(payload.decode("utf-8"))
                    if msg.get("type") == "eof":
                        if pending:
                            yield pending.decode("utf-8", "replace")
                        return
                    if msg.get("type") == "error":
                        raise api_error_from_text(str(msg.get("message", "log stream error")))
            except FailedPrecondition:
                # Not started yet: wait until it runs (or ends without running).
                pass
            finally:
                ws.close()
            if not self._wait_started(deadline):
                return

    def _wait_started(self, deadline: Optional[float]) -> bool:
        """Waits until the task runs or ends; False if it ended never having
        run (nothing to follow)."""
        with self._client.events(self.job) as events:
            while True:
                e = events.next(deadline)
                if e.task != self.id:
                    continue
                if e.to_state == RUNNING:
                    return True
                if e.to_state in TERMINAL:
                    return e.attempt > 0


def _result_of(info: TaskInfo) -> str:
    if info.contents_hidden:
        raise PermissionDenied(
            "permission_denied",
            f"the result of task {info.id} is private: a job's logs, results and files are "
            "for its user, admins and viewers")
    if info.state == SUCCEEDED:
        return info.result
    o = info.outcome
    cls = TaskCanceled if info.state == CANCELED else TaskFailed
    raise cls(
        info.id,
        info.state,
        info.reason,
        exit_code=o.exit_code if o and o.signal == 0 and info.attempt > 0 else None,
        signal=o.signal if o and o.signal else None,
        oom_killed=bool(o and o.oom_killed),
        result=o.result if o else "",
    )


class TaskGroup:
    """A ``[[task]]`` entry of a job: one task, or an array of them.

    Before the job is submitted it names a dependency (``after=[group]``);
    after, ``tasks`` lists its tasks in index order.
    """

    def __init__(self, job: "Job", name: str, indices: Optional[str]) -> None:
        self.job = job
        self.name = name
        self.array = indices  # "0-7", or None for a single task

    def __repr__(self) -> str:
        return f"drover.TaskGroup({self.name!r}, job={self.job.name!r})"

    @property
    def tasks(self) -> List[Task]:
        """The group's tasks, in index order (the job must be submitted)."""
        return self.job._tasks_by_group()[self.name]

    def __iter__(self) -> Iterator[Task]:
        return iter(self.tasks)

    def __len__(self) -> int:
        return len(self.tasks)

    def wait(self, timeout: Optional[float] = None) -> List[TaskInfo]:
        """Blocks until every task of the group ended; their final infos."""
        ids = {t.id for t in self.tasks}
        self.job._client._watch(self.job.id, ids, len(ids), _deadline(timeout))
        wanted = set(ids)
        return [t for t in self.job._client.job_info(self.job.id).tasks if t.id in wanted]

    def results(self, timeout: Optional[float] = None) -> List[str]:
        """The results in index order; TaskFailed for the first that failed."""
        return [_result_of(i) for i in self.wait(timeout)]

    def result(self, timeout: Optional[float] = None) -> str:
        """The result of a single-task group."""
        results = self.results(timeout)
        if len(results) != 1:
            raise DroverError(f"{self.name} has {len(results)} tasks; use results()")
        return results[0]


class Job:
    """A job: built with task() and array(), then submitted.

    Use ``with client.job("name") as job:`` to submit when the block ends
    (nothing is sent if the block raises), or call submit().
    """

    def __init__(
        self,
        client: Client,
        name: str,
        *,
        after: Optional[Union[After, Iterable[After]]] = None,
        user: Optional[str] = None,
    ) -> None:
        self._client = client
        self.name = name
        self.user = user
        self._after: List[str] = []
        for item in _as_list(after):
            self._after += _outside_ids(item)
        self._specs: List[Dict[str, Any]] = []
        self._groups: Dict[str, TaskGroup] = {}
        self._id: Optional[int] = None
        self._pending: Optional[PendingJob] = None  # sent, answer not read yet
        self._task_count = 0
        self._by_group: Optional[Dict[str, List[Task]]] = None
        #: What no attached worker could run, from the server's answer (the
        #: job is queued all the same); each is also issued as a
        #: ``DroverWarning``.
        self.warnings: List[str] = []

    def __repr__(self) -> str:
        if self._id is None and self._pending is not None:
            state = "submitting" if not self._pending.done else "answered"
        else:
            state = f"id={self._id}" if self._id is not None else "not submitted"
        return f"drover.Job({self.name!r}, {state})"

    def __enter__(self) -> "Job":
        return self

    def __exit__(self, exc_type: Optional[type], *rest: object) -> None:
        if exc_type is None and not self.submitted:
            self.submit()

    @property
    def id(self) -> int:
        """The job id (after submission; waits for the server's answer to a
        submission still in flight, and raises its refusal)."""
        if self._id is None:
            if self._pending is None:
                raise DroverError(f"job {self.name!r} is not submitted yet")
            self._id = self._pending.result()
            self.warnings = list(self._pending.warnings)
            for w in self.warnings:
                warnings.warn(warning_text(self._id, w), DroverWarning, stacklevel=3)
        return self._id

    @property
    def submitted(self) -> bool:
        return self._id is not None or self._pending is not None

    @property
    def _answered(self) -> bool:
        return self._id is not None or (self._pending is not None and self._pending.done)

    # ---- building ----------------------------------------------------------

    def task(
        self,
        command: Command,
        *,
        name: Optional[str] = None,
        after: Optional[Union[After, Iterable[After]]] = None,
        cpus: Optional[Union[int, float, str]] = None,
        mem: Optional[Union[int, str]] = None,
        gpus: Optional[Union[int, float, str]] = None,
        gpu_mem: Optional[Union[int, str]] = None,
        gpu_type: Optional[Union[str, Sequence[str]]] = None,
        labels: Optional[Mapping[str, str]] = None,
        counters: Optional[Mapping[str, int]] = None,
        env: Optional[Mapping[str, str]] = None,
        retries: Optional[int] = None,
        retry_backoff: Optional[Duration] = None,
        timeout: Optional[Duration] = None,
        priority: Optional[int] = None,
        max_output: Optional[Union[int, str]] = None,
        inputs: Optional[Sequence[str]] = None,
        input_files: Optional[Sequence[Union[str, "os.PathLike[str]"]]] = None,
        replicas: Optional[int] = None,
        cache: bool = False,
        code: Optional[Sequence[Union[str, "os.PathLike[str]"]]] = None,
        network: Optional[str] = None,
        image: Optional[str] = None,
        image_pull: Optional[str] = None,
        disk: Optional[Union[int, str]] = None,
        io_read_bps: Optional[Union[int, str]] = None,
        io_write_bps: Optional[Union[int, str]] = None,
        io_weight: Optional[int] = None,
    ) -> TaskGroup:
        """Adds one task; returns its group, for ``after=`` of later ones.

        ``after``: groups of this job (their tasks' results reach this task
        as files in ``$DROVER_INPUTS``); tasks or jobs outside it make the
        whole job wait for them.

        ``inputs``: which outputs of those groups it fetches, e.g.
        ``["prep:train.csv", "prep:*.json", "other"]`` (a group's name alone
        is all of its outputs; ``[]`` none; default all). A file named
        without a glob that a dependency did not write fails the task.
        ``max_output``: the most its outputs may add up to (``"2GiB"``).
        ``replicas``: copies of its outputs to keep, each on its own worker
        (1 to 4; with 2, losing one worker loses none of its work).
        ``image`` (the OCI image it runs in) and ``image_pull``: as in
        :meth:`Client.submit`.
        """
        return self._add(command, None, name, after, _task_spec_args(locals()))

    def array(
        self,
        command: Command,
        indices: Union[str, range, Iterable[int]],
        *,
        name: Optional[str] = None,
        after: Optional[Union[After, Iterable[After]]] = None,
        cpus: Optional[Union[int, float, str]] = None,
        mem: Optional[Union[int, str]] = None,
        gpus: Optional[Union[int, float, str]] = None,
        gpu_mem: Optional[Union[int, str]] = None,
        gpu_type: Optional[Union[str, Sequence[str]]] = None,
        labels: Optional[Mapping[str, str]] = None,
        counters: Optional[Mapping[str, int]] = None,
        env: Optional[Mapping[str, str]] = None,
        retries: Optional[int] = None,
        retry_backoff: Optional[Duration] = None,
        timeout: Optional[Duration] = None,
        priority: Optional[int] = None,
        max_output: Optional[Union[int, str]] = None,
        inputs: Optional[Sequence[str]] = None,
        input_files: Optional[Sequence[Union[str, "os.PathLike[str]"]]] = None,
        replicas: Optional[int] = None,
        cache: bool = False,
        code: Optional[Sequence[Union[str, "os.PathLike[str]"]]] = None,
        network: Optional[str] = None,
        image: Optional[str] = None,
        image_pull: Optional[str] = None,
        disk: Optional[Union[int, str]] = None,
        io_read_bps: Optional[Union[int, str]] = None,
        io_write_bps: Optional[Union[int, str]] = None,
        io_weight: Optional[int] = None,
    ) -> TaskGroup:
        """Adds one task per index (``range(8)``, ``"0-99:2"``); each sees
        ``$DROVER_TASK_INDEX`` and ``{index}`` in its command is replaced."""
        return self._add(command, _array_range(indices), name, after, _task_spec_args(locals()))

    def _add(
        self,
        command: Command,
        array: Optional[str],
        name: Optional[str],
        after: Optional[Union[After, Iterable[After]]],
        options: Dict[str, Any],
    ) -> TaskGroup:
        if self.submitted:
            raise DroverError(f"job {self.name!r} is already submitted")
        if name is None:
            base = _default_name(command)
            name, n = base, 2
            while name in self._groups:
                name, n = f"{base}-{n}", n + 1
        elif name in self._groups:
            raise ValueError(f"job {self.name!r} already has a task named {name!r}")
        depends_on: List[str] = []
        for item in _as_list(after):
            if isinstance(item, TaskGroup) and item.job is self:
                depends_on.append(item.name)
            elif isinstance(item, TaskGroup) and not item.job.submitted:
                raise ValueError(
                    f"after: {item!r} belongs to job {item.job.name!r}, which is not submitted"
                )
            else:
                self._after += _outside_ids(item)
        spec = _task_spec(name, command, array, depends_on, **options)
        python = _call.runner_python(spec["command"])
        if python is not None and self._client._submitter.python_runner:
            del spec["command"]  # the server's runner is this one (Submitter)
            spec["python_runner"] = python
        self._specs.append(spec)
        group = TaskGroup(self, name, array)
        self._groups[name] = group
        return group

    def spec(self) -> Dict[str, Any]:
        """The JSON body this job submits (the job-file structure)."""
        body: Dict[str, Any] = {"name": self.name, "task": list(self._specs)}
        if self.user:
            body["user"] = self.user
        if self._after:
            body["after"] = list(dict.fromkeys(self._after))
        return body

    def submit(self) -> "Job":
        """Sends the job; returns self.

        Raises:
            InvalidRequest: the spec was refused (``field`` says where).
        """
        if self.submitted:
            raise DroverError(f"job {self.name!r} is already submitted")
        if not self._specs:
            raise DroverError(f"job {self.name!r} has no tasks")
        # In order with the client's other submissions; waits for the answer.
        self._pending = self._client._submitter.submit(self.spec())
        self.id
        return self

    # ---- after submission --------------------------------------------------

    def _tasks_by_group(self) -> Dict[str, List[Task]]:
        if self._by_group is None:
            info = self._client.job_info(self.id)
            self._task_count = info.task_count
            by_group: Dict[str, List[Task]] = {}
            for t in sorted(info.tasks, key=lambda t: (t.group, t.array_index)):
                by_group.setdefault(t.group, []).append(Task(self._client, t.id))
            self._by_group = by_group
        return self._by_group

    @property
    def tasks(self) -> List[Task]:
        """Every task of the job, in the order of their ids."""
        all_tasks = [t for ts in self._tasks_by_group().values() for t in ts]
        return sorted(all_tasks, key=lambda t: int(t.id.split(".")[1]))

    def group(self, name: str) -> TaskGroup:
        """The group of this name (after submission also for jobs fetched
        with Client.get_job)."""
        if name not in self._groups:
            if self._id is None or name not in self._tasks_by_group():
                raise KeyError(f"job {self.name!r} has no task named {name!r}")
            self._groups[name] = TaskGroup(self, name, None)
        return self._groups[name]

    def info(self) -> JobInfo:
        """The job and all its tasks as the server knows them now."""
        return self._client.job_info(self.id)

    def cancel(self) -> None:
        """Cancels every task of the job that has not ended."""
        self._client._transport.json("POST", f"/api/v1/jobs/{self.id}/cancel")

    def retry(self) -> int:
        """Runs the job's failed and canceled tasks again, with their
        retries unused; returns how many. Tasks that depend on them wait
        for them again.

        Raises:
            FailedPrecondition: nothing to run again, a task still being
                canceled, or a job it was submitted after has failed (the
                message says which, and what to do first).
        """
        return self._client.retry(self.id)

    def wait(
        self, timeout: Optional[float] = None, progress: Union[bool, TextIO] = False
    ) -> JobInfo:
        """Blocks until every task ended; returns the job with its tasks.
        Does not raise for failed tasks (see results()).

        ``progress=True`` draws a progress bar on stderr when it is a
        terminal; a file object gets one line per change instead (a bar
        redrawn in place when the file is a terminal).

        Raises:
            WaitTimeout: ``timeout`` seconds passed first.
        """
        if not self._task_count:
            self._task_count = self._client.job_info(self.id, tasks=False).task_count
        out: Optional[TextIO] = None
        if progress is True:
            out = sys.stderr if sys.stderr.isatty() else None
        elif progress is not False:
            out = progress
        tty = bool(out is not None and out.isatty())
        total = self._task_count

        def draw(counts: Dict[str, int]) -> None:
            assert out is not None
            line = _progress_of_counts(counts, total)
            out.write(("\r\033[K" + line) if tty else (line + "\n"))
            out.flush()

        try:
            self._client._watch(self.id, None, total, _deadline(timeout),
                                 draw if out is not None else None)
        finally:
            if out is not None and tty:
                out.write("\n")
                out.flush()
        return self.info()

    def download(self, to: str = ".", timeout: Optional[float] = None) -> Dict[str, List[str]]:
        """Waits, then downloads every task's outputs into ``to/<task id>/``
        (see Task.download); maps each task id with outputs to the paths
        written."""
        info = self.wait(timeout)
        out: Dict[str, List[str]] = {}
        for t in sorted(info.tasks, key=lambda t: int(t.id.split(".")[1])):
            if t.outcome and t.outcome.outputs:
                out[t.id] = Task(self._client, t.id).download(os.path.join(to, t.id))
        return out

    def results(self, timeout: Optional[float] = None) -> Dict[str, str]:
        """Waits, then maps each task id to its ``$DROVER_RESULT`` text.

        Raises:
            TaskFailed / TaskCanceled: for the first task (by id) that did
                not succeed; its message counts the others.
        """
        info = self.wait(timeout)
        tasks = sorted(info.tasks, key=lambda t: int(t.id.split(".")[1]))
        bad = [t for t in tasks if t.state != SUCCEEDED]
        if bad:
            try:
                _result_of(bad[0])
            except TaskFailed as e:
                if len(bad) > 1:
                    e.args = (f"{e.args[0]} (and {len(bad) - 1} more did not succeed)",)
                raise
        return {t.id: t.result for t in tasks}


# Submitters whose queued jobs go out before the interpreter exits (a
# submitter's thread keeps it alive while it has work, even when its Client
# is gone).
_LIVE: "weakref.WeakSet[Submitter]" = weakref.WeakSet()


@atexit.register
def _flush_at_exit() -> None:
    # A script that submits and ends without close() still submits: its
    # jobs are sent here, and what failed and nothing looked at is said.
    for submitter in list(_LIVE):
        try:
            submitter.wait_sent(timeout=60)
        except DroverError as e:
            print(f"drover: submissions were not all sent: {e}", file=sys.stderr)
            continue
        failed, unseen_warnings = submitter.take_unseen()
        for text in unseen_warnings:
            print(f"drover: warning: {text}", file=sys.stderr)
        if failed:
            more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
            print(f"drover: a submission failed: {failed[0]}{more}", file=sys.stderr)


def _task_spec_args(scope: Dict[str, Any]) -> Dict[str, Any]:
    keys = ("cpus", "mem", "gpus", "gpu_mem", "gpu_type", "labels", "counters", "env",
            "retries", "retry_backoff", "timeout", "priority", "max_output", "inputs",
            "input_files", "replicas", "cache", "code", "network", "image", "image_pull", "disk",
            "io_read_bps", "io_write_bps", "io_weight")
    return {k: scope[k] for k in keys}


def progress_line(events: Iterable[TaskEvent], total: int, width: int = 24) -> str:
    """``"[########............] 5/9 done  2 running  1 queued  1 failed"``."""
    counts: Dict[str, int] = {}
    for e in events:
        counts[e.to_state] = counts.get(e.to_state, 0) + 1
    return _progress_of_counts(counts, total, width)


def _progress_of_counts(counts: Dict[str, int], total: int, width: int = 24) -> str:
    """progress_line from how many tasks are in each state."""
    finished = counts.get(SUCCEEDED, 0) + counts.get(FAILED, 0) + counts.get(CANCELED, 0)
    filled = finished * width // max(total, 1)
    line = f"[{'#' * filled}{'.' * (width - filled)}] {finished}/{total} done"
    for state in ("running", "assigned", "queued", "waiting", "failed", "canceled"):
        if counts.get(state):
            line += f"  {counts[state]} {state}"
    return line
