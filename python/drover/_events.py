"""The event stream (WebSocket ``/api/v1/events?batch=true[&job=N]``) as an iterator.

The server sends a snapshot (one ``task_state`` event per task, ``from ==
to``) and then every change. When the connection drops (a server restart)
the stream reconnects with backoff for up to ``reconnect_for`` seconds; the
new snapshot fills in whatever happened meanwhile, so a consumer that keeps
the latest state per task misses nothing.
"""

from __future__ import annotations

import collections
import json
import random
import time
from typing import Iterator, List, Optional

from ._connection import Transport
from ._websocket import OP_TEXT, Closed, WebSocket
from .errors import (
    ApiError,
    ConnectionFailed,
    DroverError,
    FingerprintMismatch,
    NotFound,
    Unavailable,
    WaitTimeout,
    api_error,
)
from .models import TaskEvent


def retryable(e: Exception) -> bool:
    if isinstance(e, FingerprintMismatch):
        return False
    if isinstance(e, ApiError):
        return isinstance(e, Unavailable)
    return isinstance(e, ConnectionFailed)


def events_of(payload: bytes) -> List[TaskEvent]:
    """The task_state events of one message: one event, or a JSON array of
    them (``batch=true``). What is not a whole event (no task or state, a
    field of the wrong type, not JSON) is skipped: a stream from a newer or
    broken server must not end the iterator."""
    try:
        data = json.loads(payload.decode("utf-8"))
    except ValueError:
        return []
    events = []
    for item in data if isinstance(data, list) else [data]:
        if not isinstance(item, dict) or item.get("type") != "task_state":
            continue
        if not isinstance(item.get("task"), str) or not item["task"]:
            continue
        if not isinstance(item.get("to"), str) or not item["to"]:
            continue
        try:
            events.append(TaskEvent.from_json(item))
        except (KeyError, TypeError, ValueError):
            continue
    return events


class EventStream:
    """Task state events, in order, from one job or from all active jobs.

    Use as a context manager or call close(). Thread safety: one thread.
    """

    def __init__(
        self, transport: Transport, job: Optional[int] = None, reconnect_for: float = 60.0
    ) -> None:
        self._transport = transport
        # batch=true: each message holds a JSON array of events, so a busy
        # stream keeps up (the server writes one message per completion).
        self._target = "/api/v1/events?batch=true" + (f"&job={job}" if job is not None else "")
        self._ready: "collections.deque[TaskEvent]" = collections.deque()
        self._job = job
        self._reconnect_for = reconnect_for
        self._ws: Optional[WebSocket] = None
        self._offline_since: Optional[float] = None
        self._backoff = 0.2
        self._closed = False

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._closed = True
        if self._ws is not None:
            self._ws.close(1000, "done")
            self._ws = None

    def __iter__(self) -> Iterator[TaskEvent]:
        while True:
            yield self.next()

    def next(self, deadline: Optional[float] = None) -> TaskEvent:
        """The next event; ``deadline`` is a time.monotonic() value or None.

        Raises:
            WaitTimeout: the deadline passed.
            NotFound: the job does not exist.
            ConnectionFailed: the server stayed unreachable for
                ``reconnect_for`` seconds (or its fingerprint is wrong).
            AuthenticationError: the token is wrong.
        """
        if self._closed:
            raise DroverError("the event stream is closed")
        while True:
            if self._ready:
                return self._ready.popleft()
            if self._ws is None:
                self._connect(deadline)
                continue
            assert self._ws is not None
            try:
                op, payload = self._ws.recv(deadline)
            except Closed as c:
                self._ws = None
                self._check_close_reason(c)
                self._lost(ConnectionFailed(f"the event stream closed: {c.reason or c.code}"),
                           deadline)
                continue
            if op != OP_TEXT:
                continue
            self._ready.extend(events_of(payload))

    def _check_close_reason(self, c: Closed) -> None:
        # The server closes at once, with a reason, for a bad job filter.
        if c.reason.endswith("not found"):
            raise NotFound("not_found", c.reason)
        if c.reason.startswith("bad job filter"):
            raise api_error("invalid_argument", c.reason)

    def _connect(self, deadline: Optional[float]) -> None:
        timeout = self._transport.timeout
        if deadline is not None:
            timeout = max(0.001, min(timeout, deadline - time.monotonic()))
        try:
            self._ws = WebSocket.connect(self._transport, self._target, timeout)
        except WaitTimeout:
            if deadline is not None and time.monotonic() >= deadline:
                raise
            self._lost(ConnectionFailed("connecting the event stream timed out"), deadline)
            return
        except (ConnectionFailed, ApiError) as e:
            if not retryable(e):
                raise
            self._lost(e, deadline)
            return
        self._offline_since = None
        self._backoff = 0.2

    def _lost(self, why: DroverError, deadline: Optional[float]) -> None:
        """Waits before the next reconnect, or raises ``why`` when the stream
        has been down for too long."""
        now = time.monotonic()
        if self._offline_since is None:
            self._offline_since = now
        if now - self._offline_since >= self._reconnect_for:
            raise ConnectionFailed(
                f"event stream lost for {self._reconnect_for:.0f}s: {why}"
            ) from why
        pause = self._backoff * (0.5 + random.random() / 2)
        self._backoff = min(self._backoff * 2, 5.0)
        if deadline is not None and now + pause >= deadline:
            raise WaitTimeout("timed out while the event stream was down")
        # A reconnect backoff, not a stand-in for an event: the server is
        # gone and there is nothing to wait on.
        time.sleep(pause)
