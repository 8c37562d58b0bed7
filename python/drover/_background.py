"""Two helpers a Client runs in background threads.

``Submitter``: ``Client.submit`` returns at once; its job goes to the server
from a thread of its own, together with whatever else was submitted while
the previous request was in flight (``POST /api/v1/jobs/batch``: one durable
flush for the lot, in submission order). A loop of single submits so costs
about one server flush per batch instead of one per call.

``Watcher``: one WebSocket (``/api/v1/events?watch=true&batch=true&ends=true``)
for every wait of the client. A wait names its task (``{"watch":"12.3"}``),
the server answers with the task's end (at once when it has ended; a
server that does not know ``ends`` sends every change before it, which
the reader skips), and the reader thread hands it to the waiting thread.
No connection per wait, and no gap between a submission and its wait: an
end that came before the watch is sent when the watch arrives. After a reconnect every watch
is sent again, so a change made while the stream was down is not missed.
"""

from __future__ import annotations

import collections
import json
import os
import random
import select
import threading
import time
from typing import Any, Callable, Deque, Dict, List, Optional, Set, Tuple, TypeVar

from . import _call
from ._uploads import upload_input_files
from ._connection import Transport
from ._events import retryable
from ._websocket import OP_TEXT, Closed, WebSocket
from .errors import ApiError, ConnectionFailed, DroverError, NotFound, WaitTimeout, api_error
from .models import TERMINAL, TaskEvent

_T = TypeVar("_T")

# Jobs per batch request; the server takes up to 10,000 (and 16 MiB).
_MAX_BATCH = 1000
_MAX_BATCH_BYTES = 4 << 20


def warning_text(job: int, warning: str) -> str:
    """A submitted job's warning, as the client says it."""
    return f"job {job}: {warning} (queued until a worker that can run it joins)"


class PendingJob:
    """A job handed to the Submitter: its id once the server answered, or
    the error it answered with."""

    def __init__(self, body: Dict[str, Any], submitter: "Submitter") -> None:
        self.body = body
        self._submitter = submitter
        self.queued = True  # not taken into a batch yet
        self._done = threading.Event()
        self._job: Optional[int] = None
        self._error: Optional[DroverError] = None
        self.warnings: List[str] = []
        # Whether a caller has seen the outcome (its error, its warnings).
        self.observed = False

    def _resolve(self, job: Optional[int], error: Optional[DroverError],
                 warnings: List[str]) -> None:
        self._job, self._error, self.warnings = job, error, warnings
        self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def result(self, timeout: Optional[float] = None) -> int:
        """The job id; raises the server's refusal (InvalidRequest, ...).

        Raises:
            WaitTimeout: no answer within ``timeout`` seconds.
        """
        if not self._done.is_set():
            self._submitter.send_now(self)
        if not self._done.wait(timeout):
            raise WaitTimeout("the submission was not answered in time")
        self.observed = True
        if self._error is not None:
            raise self._error
        assert self._job is not None
        return self._job


def _answer_error(item: Any) -> DroverError:
    try:
        err = item["error"]
        field = err.get("field")
        return api_error(str(err["code"]), str(err["message"]), str(field) if field else None,
                         400)
    except (KeyError, TypeError, AttributeError):
        return ConnectionFailed(f"the server's batch answer holds a malformed entry: {item!r}")


class Submitter:
    """Sends submitted jobs in order, batched, over a connection of its own.

    Thread safety: submit() and flush() may be called from any thread.
    """

    def __init__(self, transport: Transport) -> None:
        self._transport = transport
        self._cv = threading.Condition()
        self._queue: Deque[PendingJob] = collections.deque()
        self._in_flight = 0
        self._thread: Optional[threading.Thread] = None
        self._closed = False
        # Answered jobs nobody has looked at yet, for flush() to report.
        self._unobserved: List[PendingJob] = []
        # The server runs this client's function runner for a task given as
        # `python_runner` (its answer to a batch said so): Job sends the
        # runner's command that way, 5 KiB less a call.
        self.python_runner = False

    def submit(self, body: Dict[str, Any]) -> PendingJob:
        # Local files first, on the caller's thread: a file that cannot be
        # read or sent is the caller's error, raised here.
        upload_input_files(self._transport, body)
        pending = PendingJob(body, self)
        with self._cv:
            if self._closed:
                raise DroverError("the client is closed")
            self._queue.append(pending)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="drover-submit",
                                                daemon=True)
                self._thread.start()
            self._cv.notify_all()
        return pending

    @property
    def busy(self) -> bool:
        return bool(self._queue) or self._in_flight > 0

    def wait_sent(self, timeout: Optional[float] = None) -> None:
        """Blocks until every job submitted so far has been answered."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            while self._queue or self._in_flight:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise WaitTimeout("submissions were not answered in time")
                self._cv.wait(left)

    def take_unseen(self) -> Tuple[List[DroverError], List[str]]:
        """What no caller has seen of the answered jobs (then forgotten
        here): their refusals, and their warnings ("job 12: ...")."""
        with self._cv:
            answered = [p for p in self._unobserved if not p.observed]
            self._unobserved = []
        refusals: List[DroverError] = []
        warnings: List[str] = []
        for pending in answered:
            try:
                job = pending.result(0)
            except DroverError as e:
                refusals.append(e)
                continue
            warnings += [warning_text(job, w) for w in pending.warnings]
        return refusals, warnings

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify_all()

    def send_now(self, pending: PendingJob) -> None:
        """Sends the batch holding ``pending`` from the calling thread when
        it is still queued and nothing is in flight: a caller that waits
        for its answer at once (``submit(...).result()``) then does not
        wait for the submitting thread to wake."""
        with self._cv:
            if not pending.queued or self._in_flight:
                return
            batch = self._take()
        self._send_and_finish(batch)

    def _take(self) -> List[PendingJob]:
        """The next batch, in order, marked in flight (one at a time, so
        that batches reach the server in submission order). Holds _cv."""
        batch: List[PendingJob] = []
        size = 0
        while self._queue and len(batch) < _MAX_BATCH and size < _MAX_BATCH_BYTES:
            batch.append(self._queue.popleft())
            batch[-1].queued = False
            size += len(json.dumps(batch[-1].body))
        self._in_flight = len(batch)
        return batch

    def _send_and_finish(self, batch: List[PendingJob]) -> None:
        try:
            self._send(batch)
        finally:
            with self._cv:
                self._in_flight = 0
                self._unobserved += batch
                self._cv.notify_all()

    def _run(self) -> None:
        while True:
            with self._cv:
                while self._in_flight or not self._queue:
                    if not self._in_flight and self._closed:
                        return
                    self._cv.wait()
                batch = self._take()
            self._send_and_finish(batch)

    def _send(self, batch: List[PendingJob]) -> None:
        try:
            answer = self._transport.json("POST", "/api/v1/jobs/batch",
                                          {"jobs": [p.body for p in batch]})
            items = answer["jobs"]
            if not isinstance(items, list) or len(items) != len(batch):
                raise ConnectionFailed("the server's batch answer does not match the batch")
        except DroverError as e:
            # Not sent again: the server may have accepted the batch before
            # the connection dropped, and a second send would run it twice.
            for p in batch:
                p._resolve(None, e, [])
            return
        except (KeyError, TypeError) as e:
            for p in batch:
                p._resolve(None, ConnectionFailed(f"malformed batch answer: {e}"), [])
            return
        if answer.get("python_runner") == _call.RUNNER_SHA256:
            self.python_runner = True
        for p, item in zip(batch, items):
            if isinstance(item, dict) and isinstance(item.get("id"), int):
                p._resolve(item["id"], None, [str(w) for w in item.get("warnings", [])])
            else:
                p._resolve(None, _answer_error(item), [])


class _Watch:
    def __init__(self) -> None:
        self.waiters = 0
        self.latest: Optional[TaskEvent] = None
        # The task as the API shows it, carried by its terminal event.
        self.info: Optional[Dict[str, Any]] = None
        self.error: Optional[str] = None
        # wait_any's tags watching it (an Executor's collector).
        self.tags: List[object] = []
        # The job whose watch brings its end (watch_many), or None when the
        # task is watched on its own.
        self.via_job: Optional[str] = None

    def ended(self) -> bool:
        return self.error is not None or (self.latest is not None
                                          and self.latest.to_state in TERMINAL)


class Watcher:
    """Waits for tasks over one shared event stream (see the module doc).

    There is no thread of its own: one waiting thread at a time (the
    reader) does the stream's I/O, sends what others asked to watch and
    hands each event to its waiter; when its own task has ended it passes
    the role on. A single-threaded caller is always the reader, so a wait
    costs no switch between threads.

    Thread safety: wait_terminal() may be called from any thread.
    """

    def __init__(self, transport: Transport, reconnect_for: float = 60.0) -> None:
        self._transport = transport
        self._reconnect_for = reconnect_for
        self._cv = threading.Condition()
        self._watches: Dict[str, _Watch] = {}
        # Jobs watched whole for watch_many, with how many of their tasks'
        # watches rely on that.
        self._job_watches: Dict[str, int] = {}
        self._outbox: List[str] = []
        self._reading = False  # a thread holds the reader role
        self._ws: Optional[WebSocket] = None
        self._offline_since: Optional[float] = None
        self._backoff = 0.2
        # Wakes the reader from select() when another thread has something
        # to send (made with the first wait).
        self._wake_r = self._wake_w = -1
        self._closed = False
        # wait_any's watches by tag, and the tags whose wait was interrupted.
        self._tagged: Dict[object, Dict[str, _Watch]] = {}
        self._interrupted: Set[object] = set()
        # The tagged tasks that ended since wait_any last looked, by tag: it
        # looks at these, not at every watch (thousands for a big map).
        self._ended: Dict[object, List[str]] = {}

    def close(self) -> None:
        with self._cv:
            if self._closed:
                return
            self._closed = True
            self._cv.notify_all()
            if self._reading:
                self._wake()
                return  # the reader closes the stream and the pipe
            self._release()

    def _release(self) -> None:
        if self._ws is not None:
            self._ws.close(1000, "done")
            self._ws = None
        for fd in (self._wake_r, self._wake_w):
            if fd >= 0:
                os.close(fd)
        self._wake_r = self._wake_w = -1

    def wait_terminal(self, task: str,
                      deadline: Optional[float]) -> Tuple[TaskEvent, Optional[Dict[str, Any]]]:
        """The task's terminal event (its state when it already ended), and
        the task's info that came with it (None from an older server).

        Raises:
            WaitTimeout: ``deadline`` (a time.monotonic() value) passed.
            NotFound: no such task.
            ConnectionFailed, AuthenticationError: no stream to be had.
        """
        with self._cv:
            w = self._add_watch(task)
        try:
            def ended() -> Optional[Tuple[TaskEvent, Optional[Dict[str, Any]]]]:
                if w.latest is not None and w.latest.to_state in TERMINAL:
                    return w.latest, w.info
                if w.error is not None:
                    raise NotFound("not_found", f"task {task}: {w.error}")
                return None

            return self._wait_until(ended, deadline, f"task {task} did not end in time")
        finally:
            with self._cv:
                self._drop_watch(task, w)

    def watch(self, task: str, tag: object) -> None:
        """Watches ``task`` for a caller of :meth:`wait_any` with ``tag`` (an
        Executor's collector), until wait_any has returned it."""
        with self._cv:
            self._add_tagged_watch(task, tag)

    def watch_many(self, tasks: List[str], tag: object) -> None:
        """:meth:`watch` for each of ``tasks``; where two or more of one job
        are new, the job is watched whole instead of each task (a map's
        calls are one job): one message each way instead of two per task.
        With ``?ends=true`` the server sends each end of a watched job's
        tasks with its info, and the job's snapshot brings those that had
        already ended."""
        by_job: Dict[str, List[str]] = {}
        for task in tasks:
            by_job.setdefault(task.partition(".")[0], []).append(task)
        with self._cv:
            for job, group in by_job.items():
                new = [t for t in group if t not in self._watches]
                whole = len(new) >= 2 and job not in self._job_watches and not self._closed
                if whole:
                    for t in new:
                        w = self._watches[t] = _Watch()
                        w.via_job = job
                    self._job_watches[job] = len(new)
                    self._outbox.append(json.dumps({"watch": job}))
                for task in group:
                    self._add_tagged_watch(task, tag)
            self._wake()

    def wait_any(self, tag: object,
                 deadline: Optional[float]) -> List[Tuple[str, Optional[TaskEvent],
                                                          Optional[Dict[str, Any]], str]]:
        """Waits until some tasks watched with ``tag`` have ended (or are not
        there), or :meth:`interrupt` was called for ``tag``; returns them as
        (task, terminal event or None, info, error: "" or why it is not
        there) and stops watching them. [] when interrupted.

        Raises:
            WaitTimeout: ``deadline`` passed first.
            ConnectionFailed, AuthenticationError: no stream to be had.
        """
        def ended() -> Optional[List[Tuple[str, Optional[TaskEvent],
                                           Optional[Dict[str, Any]], str]]]:
            if tag in self._interrupted:
                self._interrupted.discard(tag)
                return []
            mine = self._tagged.get(tag, {})
            done = [(t, mine[t]) for t in self._ended.pop(tag, []) if t in mine]
            if not done:
                return None
            out = []
            for t, w in done:
                del mine[t]
                w.tags.remove(tag)
                out.append((t, w.latest if w.error is None else None, w.info, w.error or ""))
                self._drop_watch(t, w)
            return out

        return self._wait_until(ended, deadline, "no watched task ended in time")

    def interrupt(self, tag: object) -> None:
        """Makes the current (or next) :meth:`wait_any` of ``tag`` return []."""
        with self._cv:
            self._interrupted.add(tag)
            self._cv.notify_all()
            self._wake()

    def _add_watch(self, task: str) -> "_Watch":
        """(Lock held.) The task's watch, asked of the server when new."""
        if self._closed:
            raise DroverError("the client is closed")
        if self._wake_r < 0:
            self._wake_r, self._wake_w = os.pipe()
        w = self._watches.get(task)
        if w is None:
            w = self._watches[task] = _Watch()
            self._outbox.append(json.dumps({"watch": task}))
            self._wake()
        w.waiters += 1
        return w

    def _add_tagged_watch(self, task: str, tag: object) -> None:
        """(Lock held.) The task's watch, for wait_any's ``tag``."""
        w = self._add_watch(task)
        self._tagged.setdefault(tag, {})[task] = w
        w.tags.append(tag)
        if w.ended():
            self._ended.setdefault(tag, []).append(task)

    def _drop_watch(self, task: str, w: "_Watch") -> None:
        """(Lock held.) One waiter fewer; unwatched when none is left."""
        w.waiters -= 1
        if w.waiters == 0 and self._watches.get(task) is w:
            del self._watches[task]
            if w.via_job is None:
                if not self._closed:
                    self._outbox.append(json.dumps({"unwatch": task}))
                return
            left = self._job_watches[w.via_job] - 1
            if left > 0:
                self._job_watches[w.via_job] = left
                return
            del self._job_watches[w.via_job]
            if not self._closed:
                self._outbox.append(json.dumps({"unwatch": w.via_job}))

    def _wait_until(self, check: Callable[[], Optional[_T]], deadline: Optional[float],
                    timed_out: str) -> _T:
        """Until ``check()`` (called with the lock held) returns something:
        waits for the reader, or is the reader itself."""
        while True:
            with self._cv:
                found = check()
                if found is not None:
                    return found
                if self._closed:
                    raise DroverError("the client is closed")
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise WaitTimeout(timed_out)
                if self._reading:
                    self._cv.wait(left)
                    continue
                self._reading = True
            try:
                self._read_once(deadline)
            finally:
                with self._cv:
                    self._reading = False
                    if self._closed:
                        self._release()
                    # Another waiter may take the role (or has its event).
                    self._cv.notify_all()

    def _wake(self) -> None:
        if self._reading and self._wake_w >= 0:
            os.write(self._wake_w, b"x")

    # ---- the reader's work (one thread at a time) --------------------------

    def _read_once(self, deadline: Optional[float]) -> None:
        """Connects if need be, sends the outbox, then reads: returns after
        handling what arrived (or when woken, or at the deadline)."""
        if self._ws is None:
            self._connect(deadline)
            return
        ws = self._ws
        try:
            with self._cv:
                out, self._outbox = self._outbox, []
            ws.send_texts(out)
            if self._drain(ws):
                return
            if not ws.buffered_by_tls():
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                ready, _, _ = select.select([ws.fileno(), self._wake_r], [], [], left)
                if self._wake_r in ready:
                    os.read(self._wake_r, 4096)
                if ws.fileno() not in ready:
                    return
            ws.feed()
            self._drain(ws)
        except (Closed, OSError):
            ws.close(1000, "done")
            self._ws = None

    def _drain(self, ws: WebSocket) -> bool:
        """Handles the whole messages already read; whether there were any."""
        any_message = False
        while True:
            try:
                op, payload = ws.recv(deadline=0.0)  # what is buffered only
            except WaitTimeout:
                return any_message
            any_message = True
            if op == OP_TEXT:
                self._dispatch(payload)

    def _connect(self, deadline: Optional[float]) -> None:
        timeout = self._transport.timeout
        if deadline is not None:
            timeout = max(0.001, min(timeout, deadline - time.monotonic()))
        try:
            ws = WebSocket.connect(self._transport,
                                   "/api/v1/events?watch=true&batch=true&ends=true", timeout)
        except (ConnectionFailed, ApiError, WaitTimeout) as e:
            self._lost(e, deadline)
            return
        self._offline_since, self._backoff = None, 0.2
        with self._cv:
            # Every watch again: each brings its task's current state, so a
            # change made while the stream was down is not missed.
            self._outbox = [json.dumps({"watch": j}) for j in self._job_watches]
            self._outbox += [json.dumps({"watch": t}) for t, w in self._watches.items()
                             if w.via_job is None]
            self._ws = ws

    def _lost(self, why: Exception, deadline: Optional[float]) -> None:
        """Waits before the next connect, or raises when the stream cannot
        be had (a wrong token) or has been down for too long."""
        if not retryable(why):
            raise why
        now = time.monotonic()
        if self._offline_since is None:
            self._offline_since = now
        if now - self._offline_since >= self._reconnect_for:
            raise ConnectionFailed(f"event stream lost for {self._reconnect_for:.0f}s: {why}")
        pause = self._backoff * (0.5 + random.random() / 2)
        self._backoff = min(self._backoff * 2, 5.0)
        if deadline is not None and now + pause >= deadline:
            raise WaitTimeout("timed out while the event stream was down")
        # A reconnect backoff, not a stand-in for an event: the server is
        # gone; close() ends it early.
        with self._cv:
            self._cv.wait_for(lambda: self._closed, pause)

    def _dispatch(self, payload: bytes) -> None:
        try:
            data = json.loads(payload.decode("utf-8"))
        except ValueError:
            return
        items = data if isinstance(data, list) else [data]
        with self._cv:
            for item in items:
                if not isinstance(item, dict):
                    continue
                if item.get("type") == "watch_error":
                    name = str(item.get("watch"))
                    why = str(item.get("message", "not found"))
                    # A task's, or a job's watched whole: each of its tasks.
                    errored = [(name, self._watches[name])] if name in self._watches else []
                    if name in self._job_watches:
                        errored += [(t, w) for t, w in self._watches.items()
                                    if w.via_job == name and not w.ended()]
                    for task, w in errored:
                        w.error = why
                        self._note_ended(task, w)
                    continue
                w = self._watches.get(item.get("task")) if isinstance(item.get("task"), str) \
                    else None
                if w is None or item.get("type") != "task_state":
                    continue
                if w.ended():
                    continue  # its end again (a job's snapshot and the end itself)
                try:
                    w.latest = TaskEvent.from_json(item)
                except (KeyError, TypeError, ValueError):
                    continue
                info = item.get("info")
                w.info = info if isinstance(info, dict) else None
                if w.ended():
                    self._note_ended(item["task"], w)
            self._cv.notify_all()

    def _note_ended(self, task: str, w: _Watch) -> None:
        """(Lock held.) Tells each tag watching ``task`` that it ended."""
        for tag in w.tags:
            self._ended.setdefault(tag, []).append(task)


__all__: Tuple[str, ...] = ("PendingJob", "Submitter", "Watcher")
