"""Drover from Python: submit tasks and pipelines to a Drover cluster.

Standard library only (cloudpickle, where installed, for Python functions
as tasks: :mod:`drover.functions`). See :mod:`drover.client` for an overview; the
exceptions are in :mod:`drover.errors` and the typed views of the API in
:mod:`drover.models`.
"""

from .client import Client, Job, Task, TaskGroup, progress_line
from .errors import (
    AccessError,
    ApiError,
    AuthenticationError,
    ConnectionFailed,
    DroverError,
    DroverWarning,
    FailedPrecondition,
    FingerprintMismatch,
    InvalidRequest,
    NotFound,
    PermissionDenied,
    TaskCanceled,
    TaskFailed,
    Unavailable,
    WaitTimeout,
)
from .functions import Executor, Future, RemoteError, RemoteFunction, function
from .models import (
    TERMINAL,
    GpuGrant,
    JobInfo,
    Outcome,
    OutputFile,
    TaskEvent,
    TaskInfo,
    Utilization,
    WorkerGpu,
    WorkerInfo,
)

__version__ = "0.1.0"

__all__ = [
    "AccessError",
    "ApiError",
    "AuthenticationError",
    "Client",
    "ConnectionFailed",
    "DroverError",
    "DroverWarning",
    "Executor",
    "FailedPrecondition",
    "FingerprintMismatch",
    "Future",
    "GpuGrant",
    "InvalidRequest",
    "Job",
    "JobInfo",
    "NotFound",
    "Outcome",
    "OutputFile",
    "PermissionDenied",
    "RemoteError",
    "RemoteFunction",
    "TERMINAL",
    "Task",
    "TaskCanceled",
    "TaskEvent",
    "TaskFailed",
    "TaskGroup",
    "TaskInfo",
    "Unavailable",
    "Utilization",
    "WaitTimeout",
    "WorkerGpu",
    "WorkerInfo",
    "function",
    "progress_line",
]
