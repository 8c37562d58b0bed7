"""Exceptions raised by the Drover client.

Everything the client raises derives from :class:`DroverError`:

- :class:`ApiError` and its subclasses: the server answered with an error
  body ``{"error": {"code", "message", "field"}}``; the exception carries the
  server's ``code``, ``message`` and ``field`` (the job-spec path the error is
  about, such as ``task[0].resources.mem``, or ``None``).
- :class:`ConnectionFailed`: the server could not be reached or the
  connection broke; :class:`FingerprintMismatch` when its certificate is not
  the pinned one (nothing was sent to it).
- :class:`AccessError`: the client could not find out where the server is
  (no access file, a malformed one, missing token or fingerprint).
- :class:`TaskFailed` / :class:`TaskCanceled`: a task whose result was asked
  for did not succeed.
- :class:`WaitTimeout` (also a :class:`TimeoutError`): a wait ran out of time.
"""

from __future__ import annotations

import re
from typing import Dict, Optional, Type


class DroverError(Exception):
    """Base class of every error raised by the Drover client."""


class AccessError(DroverError):
    """Where or how to reach the server is unknown or malformed."""


class ConnectionFailed(DroverError):
    """The server could not be reached, or the connection broke."""


class FingerprintMismatch(ConnectionFailed):
    """The server's TLS certificate is not the pinned one.

    Raised right after the TLS handshake, before the token is sent.
    """

    def __init__(self, address: str, expected: str, actual: str) -> None:
        super().__init__(
            f"{address}: the server's certificate fingerprint is {actual}, "
            f"expected {expected} (a different server, or a new certificate)"
        )
        self.expected = expected
        self.actual = actual


class ApiError(DroverError):
    """The server answered a request with an error.

    Attributes:
        code: the server's error code, e.g. ``"invalid_argument"``.
        message: the server's message, for people.
        field: the field path the error is about (``"task[1].resources.mem"``),
            or ``None``.
        http_status: the HTTP status of the answer (0 for a WebSocket).
    """

    def __init__(
        self, code: str, message: str, field: Optional[str] = None, http_status: int = 0
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field
        self.http_status = http_status

    def __str__(self) -> str:
        return self.message


class InvalidRequest(ApiError, ValueError):
    """``invalid_argument``: a malformed job spec, id or parameter."""


class NotFound(ApiError, LookupError):
    """``not_found``: no such job, task or worker."""


class AuthenticationError(ApiError):
    """``unauthenticated``: the token was missing or wrong."""


class PermissionDenied(ApiError):
    """``permission_denied``."""


class FailedPrecondition(ApiError):
    """``failed_precondition``: e.g. the logs of a task that has not run yet."""


class Unavailable(ApiError):
    """``unavailable``: e.g. the worker holding a task's logs is offline."""


class TaskFailed(DroverError):
    """A task ended without succeeding.

    Attributes:
        task: the task id, ``"12.3"``.
        state: ``"failed"`` or ``"canceled"``.
        reason: the server's reason, e.g. ``"exit code 3"``,
            ``"timed out after 2h"``, ``"dependency 12.4 failed"``.
        exit_code: the process's exit code, or ``None`` when it never ran or
            ended by a signal.
        signal: the signal that killed it, or ``None``.
        oom_killed: whether it was killed for running out of memory.
        result: what the task left in ``$DROVER_RESULT`` (may be empty).
    """

    def __init__(
        self,
        task: str,
        state: str,
        reason: str,
        exit_code: Optional[int] = None,
        signal: Optional[int] = None,
        oom_killed: bool = False,
        result: str = "",
    ) -> None:
        super().__init__(f"task {task} {state}: {reason}" if reason else f"task {task} {state}")
        self.task = task
        self.state = state
        self.reason = reason
        self.exit_code = exit_code
        self.signal = signal
        self.oom_killed = oom_killed
        self.result = result


class TaskCanceled(TaskFailed):
    """A task was canceled before it succeeded."""


class WaitTimeout(DroverError, TimeoutError):
    """A wait for a task or job ran out of time; the work goes on."""


class DroverWarning(UserWarning):
    """Issued (``warnings.warn``) for a submitted job that no attached worker
    could run: it stays queued until a worker that can run it joins."""


_BY_CODE: Dict[str, Type[ApiError]] = {
    "invalid_argument": InvalidRequest,
    "not_found": NotFound,
    "unauthenticated": AuthenticationError,
    "permission_denied": PermissionDenied,
    "failed_precondition": FailedPrecondition,
    "unavailable": Unavailable,
}

# The server reports a bad job spec as "task[1].resources.mem: message"
# without a separate field; the path before the first ": " is the field.
_SEGMENT = r"[A-Za-z_][A-Za-z0-9_]*(?:\[\d+\])?"
_FIELD_PREFIX = re.compile(rf"^({_SEGMENT}(?:\.{_SEGMENT})*): ")

_CODE_NAMES = (
    "invalid_argument",
    "not_found",
    "already_exists",
    "failed_precondition",
    "resource_exhausted",
    "unavailable",
    "permission_denied",
    "unauthenticated",
    "deadline_exceeded",
    "aborted",
    "data_loss",
    "internal",
)


def api_error(
    code: str, message: str, field: Optional[str] = None, http_status: int = 0
) -> ApiError:
    """The exception for an error body's ``code``, ``message`` and ``field``.

    When the body names no field and the error is ``invalid_argument`` whose
    message starts with a field path (``task[0].resources.mem: ...``), that
    path becomes the field.
    """
    if field is None and code == "invalid_argument":
        m = _FIELD_PREFIX.match(message)
        if m:
            field = m.group(1)
    return _BY_CODE.get(code, ApiError)(code, message, field, http_status)


def api_error_from_text(text: str, http_status: int = 0) -> ApiError:
    """The exception for a ``"code: message"`` string (a Status in text form,
    as the server sends in WebSocket error messages)."""
    code, sep, rest = text.partition(": ")
    if sep and code in _CODE_NAMES:
        return api_error(code, rest, None, http_status)
    return ApiError("unknown", text, None, http_status)


_HTTP_CODES = {400: "invalid_argument", 401: "unauthenticated", 403: "permission_denied",
               404: "not_found", 409: "aborted", 412: "failed_precondition",
               429: "resource_exhausted", 503: "unavailable", 504: "deadline_exceeded"}


def code_for_http_status(status: int) -> str:
    """The error code for an HTTP status whose body had none."""
    return _HTTP_CODES.get(status, "internal")
