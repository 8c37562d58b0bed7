"""Python functions as Drover tasks: a ``concurrent.futures.Executor``.

    import drover

    with drover.Executor(cpus=1) as ex:             # drover.Client() by default
        squares = list(ex.map(lambda x: x * x, range(10)))
        a = ex.submit(prepare, "data.csv")
        b = ex.submit(train, a, lr=0.1, drover_resources={"gpus": 1})   # runs after a
        print(b.result())

    @drover.function(gpus=1, retries=2)
    def train(config): ...
    train.submit(config).result()                  # train(config) still runs here

Each call is one task: its own process tree, cgroup, cores, GPUs and Unix
account on whatever worker runs it, with the executor's (or the call's)
resources, retries and timeout. The function and its arguments are pickled
(by cloudpickle when it is installed, so lambdas and closures work; else by
reference, ``module:qualname``, for code every worker has), sent inline when
small and through the server's file store when large, and unpickled only
inside the task's process. A Drover future among the arguments, at any
depth, makes the call depend on its task and stands for its value there,
which travels worker to worker (inline in the result when small, an output
file through the data plane when large), never through the client.

``future.result()`` is the return value; an exception the function raised
is raised again here with its remote traceback as its ``__cause__`` (a
:class:`RemoteError` when its type cannot be unpickled here); a task that
failed otherwise (killed for memory, timed out, its worker lost, a
dependency failed) raises :class:`~drover.TaskFailed` with the reason the
CLI shows, after its retries.

Warm interpreters (default ``warm=True``): a worker keeps the interpreter
of a finished call and gives it the next call with the same key (account,
interpreter, ``preload`` list, GPU set, ``max_calls``), moved into that
task's cgroup and onto its cores for the call, with that task's directory,
environment, stdout and stderr. ``preload=["numpy", "mypkg.tasks"]`` is
imported when the interpreter starts; ``max_calls=N`` replaces it after N
calls; ``fresh=True`` runs each call in a child forked from the warm
interpreter (a clean process per call, slower); ``warm=False`` starts a new
interpreter per call. What stays between calls of one interpreter: imported
modules and their global state. See docs/design.md, "Python functions".
See _call.py for the wire format.
"""

from __future__ import annotations

import atexit
import base64
import concurrent.futures
import io
import itertools
import os
import pickle
import shutil
import tempfile
import threading
import time
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Set

from . import _call
from .client import Client, Job, Task, _result_of
from .errors import DroverError, TaskCanceled
from .models import CANCELED, SUCCEEDED, TaskInfo

try:  # Debian: python3-cloudpickle
    import cloudpickle as _cloudpickle
except ImportError:  # pragma: no cover - depends on the machine
    _cloudpickle = None

# What a call may ask for, per call (drover_resources=) or per executor.
_RESOURCE_KEYS = ("cpus", "mem", "gpus", "gpu_mem", "gpu_type", "labels", "counters",
                  "retries", "retry_backoff", "timeout", "priority", "max_output", "env",
                  "python", "name", "user", "warm", "preload", "max_calls", "fresh", "cache",
                  "code", "network", "image", "image_pull", "disk", "io_read_bps",
                  "io_write_bps", "io_weight")


class RemoteError(DroverError):
    """The function raised an exception whose type cannot be rebuilt here.

    Attributes:
        type_name: the remote exception's type.
        remote_traceback: its traceback, as the worker formatted it.
    """

    def __init__(self, type_name: str, message: str, remote_traceback: str) -> None:
        super().__init__(f"{type_name}: {message}\n\nRemote traceback:\n{remote_traceback}")
        self.type_name = type_name
        self.remote_traceback = remote_traceback


class RemoteTraceback(Exception):
    """The ``__cause__`` of an exception raised by a function on a worker:
    its traceback there (as concurrent.futures.process does)."""

    def __init__(self, tb: str) -> None:
        super().__init__(tb)
        self.tb = tb

    def __str__(self) -> str:
        return self.tb


class Future(concurrent.futures.Future):  # type: ignore[type-arg]
    """A call's future; ``task`` is its Drover task (``task.id`` once the
    server has it). ``cancel()`` cancels the task too, while it has not
    ended."""

    def __init__(self, executor: "Executor") -> None:
        super().__init__()
        self._executor = executor
        self.task: Optional[Task] = None

    def cancel(self) -> bool:
        if self.done():
            return False
        if not super().cancel():
            return False
        # As an executor does for a call it will not run: waiters (wait(),
        # as_completed()) count it done from now on.
        self.set_running_or_notify_cancel()
        if self.task is not None:
            try:
                self.task.cancel()
            except DroverError:
                pass  # it ended meanwhile: its event is ignored
        return True


_BasePickler: Any = _cloudpickle.CloudPickler if _cloudpickle is not None else pickle.Pickler


class _CallPickler(_BasePickler):  # type: ignore[misc, valid-type]
    """Pickles a call; a Drover future becomes a persistent id (its task's
    value on the worker) and is recorded as a dependency."""

    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.dependencies: Dict[str, Task] = {}

    def persistent_id(self, obj: Any) -> Optional[str]:
        if isinstance(obj, Future) and obj.task is not None:
            task_id = obj.task.id  # waits for the server's answer
            self.dependencies[task_id] = obj.task
            return _call.future_id(task_id)
        return None


class _Pickled:
    """A function pickled once for many calls (Executor.map): its bytes
    and the futures it holds. Pickling a function by value (cloudpickle)
    costs a no-op call several times its arguments."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.data: Optional[bytes] = None
        self.dependencies: Dict[str, Task] = {}

    def pickle(self) -> None:
        if self.data is not None:
            return
        buf = io.BytesIO()
        p = _CallPickler(buf)
        try:
            p.dump(self.fn)
        except Exception as e:
            raise TypeError(_what_cannot_be_pickled(self.fn, (), {}, e)) from e
        self.data, self.dependencies = buf.getvalue(), p.dependencies


class _Chunked:
    """Several calls of one function as one task (``map(...,
    chunksize=N)``): the task's one argument is the list of the calls'
    argument tuples, and its value the list of their values."""

    def __init__(self, pickled: _Pickled) -> None:
        self.pickled = pickled


def _pickle_call(fn: Callable[..., Any], args: tuple, kwargs: dict,
                 chunk: bool = False) -> tuple:
    """(bytes, dependencies): the call as the runner reads it. TypeError
    naming what cannot be pickled. ``fn`` may be a :class:`_Pickled`: its
    bytes travel in the function's place and the header says so. With
    ``chunk`` the runner calls ``fn`` on each tuple of ``args[0]``."""
    header: Dict[str, Any] = {"python": _call.python_version(),
                              "cloudpickle": _cloudpickle is not None}
    if chunk:
        header["chunk"] = True
    pickled = fn if isinstance(fn, _Pickled) else None
    if pickled is not None:
        pickled.pickle()
        header["function_pickled"] = True
        fn = pickled.fn
    buf = io.BytesIO()
    p = _CallPickler(buf)
    try:
        p.dump((header, pickled.data if pickled is not None else fn, args, kwargs))
    except Exception as e:
        raise TypeError(_what_cannot_be_pickled(fn, args, kwargs, e)) from e
    if pickled is not None:
        p.dependencies.update(pickled.dependencies)
    return buf.getvalue(), p.dependencies


def _what_cannot_be_pickled(fn: Callable[..., Any], args: tuple, kwargs: dict,
                            error: Exception) -> str:
    name = getattr(fn, "__qualname__", repr(fn))
    parts: List[tuple] = [("the function " + name, fn)]
    parts += [(f"argument {i + 1} of {name}", a) for i, a in enumerate(args)]
    parts += [(f"argument {k}= of {name}", v) for k, v in kwargs.items()]
    for what, value in parts:
        try:
            _CallPickler(io.BytesIO()).dump(value)
        except Exception as e:
            return (f"{what} ({type(value).__name__}) cannot be sent to a worker: "
                    f"{type(e).__name__}: {e}")
    return f"the call of {name} cannot be sent to a worker: {type(error).__name__}: {error}"


# The most calls of one map that go as the tasks of one job, and about the
# most bytes of their specs (each carries the runner, ~5 KiB, in its command,
# and a call of up to 32 KiB in its environment): a job's body is read on
# the server's loop in one go, so it stays as small as a batch of
# submissions.
_MAP_JOB_TASKS = 500
_MAP_JOB_BYTES = 4 << 20


class _Call:
    """One call as a task: its command, name, the task ids it waits for
    (futures among its arguments) and Job.task's other arguments."""

    def __init__(self, command: List[str], name: str, after: List[str],
                 options: Dict[str, Any]) -> None:
        self.command = command
        self.name = name
        self.after = after
        self.options = options


class Executor(concurrent.futures.Executor):
    """Runs calls as Drover tasks (see the module doc).

    ``client``: a :class:`~drover.Client` (default: ``drover.Client()``, from
    the access file); the other arguments are each call's defaults, which
    ``submit(..., drover_resources={...})`` overrides: ``cpus`` (1),
    ``mem``, ``gpus``, ``gpu_mem``, ``gpu_type``, ``labels``, ``counters``,
    ``retries``, ``retry_backoff``, ``timeout`` (per attempt), ``priority``,
    ``max_output``, ``env`` and ``python`` (the interpreter on the worker,
    default ``python3``), and how the worker runs calls: ``warm`` (True),
    ``preload`` (modules a warm interpreter imports first), ``max_calls``
    (calls before it is replaced; 0: no limit) and ``fresh`` (a forked
    child per call). ``max_workers`` is accepted for code written for
    ``ProcessPoolExecutor`` and ignored: the cluster decides how many run.

    Thread safety: submit, map and shutdown may be called from any thread.
    """

    def __init__(self, client: Optional[Client] = None, *, max_workers: Optional[int] = None,
                 **defaults: Any) -> None:
        del max_workers
        unknown = sorted(set(defaults) - set(_RESOURCE_KEYS))
        if unknown:
            raise TypeError(f"Executor: unknown argument(s) {', '.join(unknown)} "
                            f"(known: {', '.join(_RESOURCE_KEYS)})")
        self._own_client = client is None
        self._client = client if client is not None else Client()
        self._defaults: Dict[str, Any] = {"cpus": 1, "python": "python3"}
        self._defaults.update(defaults)
        self._lock = threading.Lock()
        self._pending: Dict[str, Future] = {}  # by task id, watched
        self._unregistered: List[Future] = []  # submitted, id not asked yet
        self._live: Set[Future] = set()  # every call not ended yet
        self._shutdown = False
        self._tag = object()
        self._collector: Optional[threading.Thread] = None
        self._tmp = tempfile.mkdtemp(prefix="drover-calls-")

    # ---- concurrent.futures.Executor -----------------------------------

    def submit(self, fn: Callable[..., Any], /, *args: Any,  # type: ignore[override]
               drover_resources: Optional[Mapping[str, Any]] = None,
               **kwargs: Any) -> Future:
        """Submits ``fn(*args, **kwargs)`` as a task; returns its future at
        once. TypeError naming an argument that cannot be pickled;
        RuntimeError after shutdown."""
        self._check_open()
        return self._submit_alone(self._prepare(fn, args, kwargs, drover_resources))

    def _submit_alone(self, call: "_Call") -> Future:
        """`call` as a job of its own; its future, watched."""
        future = Future(self)
        future.task = self._client.submit(call.command, name=call.name,
                                          after=call.after or None, **call.options)
        self._track([future])
        return future

    def _check_open(self) -> None:
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot schedule new futures after shutdown")

    def _prepare(self, fn: Callable[..., Any], args: tuple, kwargs: dict,
                 drover_resources: Optional[Mapping[str, Any]]) -> "_Call":
        """The task of one call (see submit)."""
        options = dict(self._defaults)
        if drover_resources:
            unknown = sorted(set(drover_resources) - set(_RESOURCE_KEYS))
            if unknown:
                raise TypeError(f"drover_resources: unknown key(s) {', '.join(unknown)} "
                                f"(known: {', '.join(_RESOURCE_KEYS)})")
            options.update(drover_resources)
        chunk = isinstance(fn, _Chunked)
        if chunk:
            fn = fn.pickled
        data, dependencies = _pickle_call(fn, args, kwargs, chunk=chunk)
        env = dict(options.pop("env", None) or {})
        input_files: List[str] = []
        if len(data) <= _call.INLINE_CALL_LIMIT:
            env[_call.CALL_ENV] = base64.b64encode(data).decode("ascii")
        else:
            # Through the file store (uploaded once by its SHA-256), never
            # in the job's body.
            folder = tempfile.mkdtemp(dir=self._tmp)
            path = os.path.join(folder, _call.CALL_FILE)
            with open(path, "wb") as f:
                f.write(data)
            input_files.append(path)
        env.update(_warm_env(options))
        python = str(options.pop("python"))
        name = options.pop("name", None) or _name_of(fn.fn if isinstance(fn, _Pickled) else fn)
        options["env"] = env
        if input_files:
            options["input_files"] = input_files
        return _Call([python, "-c", _call.COMMAND_RUNNER], name,
                     list(dependencies.values()), options)

    def _track(self, futures: List[Future]) -> None:
        """Has the collector watch `futures`, whose tasks were submitted."""
        # The collector learns their ids from the server's answer, which
        # comes batched with other submissions: this does not wait for it.
        with self._lock:
            self._live.update(futures)
            self._unregistered.extend(futures)
            if self._collector is None:
                self._collector = threading.Thread(target=self._collect,
                                                   name="drover-executor", daemon=True)
                self._collector.start()
            else:
                self._client._watcher.interrupt(self._tag)
        for future in futures:
            future.add_done_callback(self._ended)

    def _submit_many(self, calls: List[tuple],
                     resources: Optional[Mapping[str, Any]]) -> List[Future]:
        """map's calls, each (fn, args): the futures in order. Calls that do
        not wait for other calls' futures go as the tasks of one job (up to
        _MAP_JOB_TASKS or about _MAP_JOB_BYTES to a job): a map is a job in
        `drover status` and the dashboard, each call a task of it. The others
        go as submit's."""
        self._check_open()
        futures: List[Future] = []
        job: Optional[Job] = None
        batch: List[Future] = []
        size = 0

        def send() -> None:
            nonlocal job, batch, size
            if job is not None:
                job._pending = self._client._submitter.submit(job.spec())
                self._track(batch)
            job, batch, size = None, [], 0

        for fn, args in calls:
            call = self._prepare(fn, args, {}, resources)
            if call.after:
                futures.append(self._submit_alone(call))
                continue
            future = Future(self)
            user = call.options.pop("user", None)  # the same for every call of a map
            if job is None:
                job = Job(self._client, call.name, user=user)
            index = len(batch)
            job.task(call.command, name=f"{call.name}-{index}", **call.options)
            future.task = Task(self._client, job=job, index=index)
            batch.append(future)
            size += sum(map(len, call.command)) + sum(
                len(k) + len(v) for k, v in call.options["env"].items())
            if len(batch) == _MAP_JOB_TASKS or size >= _MAP_JOB_BYTES:
                send()
            futures.append(future)
        send()
        return futures

    def _ended(self, future: concurrent.futures.Future) -> None:  # type: ignore[type-arg]
        with self._lock:
            self._live.discard(future)  # type: ignore[arg-type]

    def map(self, fn: Callable[..., Any], *iterables: Iterable[Any],  # type: ignore[override]
            timeout: Optional[float] = None, chunksize: int = 1) -> Iterator[Any]:
        """As ``Executor.map``: results in order, ``timeout`` for them all.
        One task per call, or with ``chunksize=N`` per N calls (as
        ProcessPoolExecutor's: one call that raises fails its chunk, and
        the results iterator raises there)."""
        return self._map(fn, iterables, timeout, chunksize, None)

    def _map(self, fn: Callable[..., Any], iterables: tuple, timeout: Optional[float],
             chunksize: int, resources: Optional[Mapping[str, Any]]) -> Iterator[Any]:
        if chunksize < 1:
            raise ValueError("chunksize must be >= 1.")
        end = None if timeout is None else time.monotonic() + timeout
        # The function is pickled once for all the calls, at the first.
        pickled = _Pickled(fn)
        if chunksize == 1:
            fs = self._submit_many([(pickled, args) for args in zip(*iterables)], resources)
        else:
            calls = zip(*iterables)
            chunks = iter(lambda: list(itertools.islice(calls, chunksize)), [])
            fs = self._submit_many([(_Chunked(pickled), (chunk,)) for chunk in chunks],
                                   resources)

        def results() -> Iterator[Any]:
            try:
                fs.reverse()
                while fs:
                    f = fs.pop()
                    try:
                        value = f.result(None if end is None else end - time.monotonic())
                    finally:
                        f.cancel()  # nothing once ended; the rest, when this raised
                    if chunksize == 1:
                        yield value
                    else:
                        yield from value
            finally:
                for f in fs:
                    f.cancel()

        return results()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """No more submissions; with ``cancel_futures`` the calls not ended
        are canceled; with ``wait`` returns once every call has ended."""
        with self._lock:
            self._shutdown = True
            pending = list(self._live)
        if cancel_futures:
            for f in pending:
                f.cancel()
        if wait:
            concurrent.futures.wait(pending)
            self._stop()

    def _stop(self) -> None:
        with self._lock:
            collector, self._collector = self._collector, None
        if collector is not None:
            self._client._watcher.interrupt(self._tag)
            collector.join()
        shutil.rmtree(self._tmp, ignore_errors=True)
        if self._own_client:
            self._client.close()

    # ---- the collector: one thread, every pending call ------------------

    def _register(self) -> None:
        """Watches the calls submitted since the last look, by their ids."""
        with self._lock:
            fresh, self._unregistered = self._unregistered, []
        watcher = self._client._watcher
        ids: Dict[str, Future] = {}
        for future in fresh:
            assert future.task is not None
            try:
                ids[future.task.id] = future  # the server's answer, or its refusal
            except BaseException as e:
                _settle(future, exception=e)
        if not ids:
            return
        with self._lock:
            # A map's calls are one job: watched whole.
            watcher.watch_many(list(ids), self._tag)
            self._pending.update(ids)

    def _collect(self) -> None:
        watcher = self._client._watcher
        while True:
            self._register()
            with self._lock:
                if self._collector is None or (self._shutdown and not self._pending
                                               and not self._unregistered):
                    return
                if self._unregistered:
                    continue
            try:
                ended = watcher.wait_any(self._tag, None)
            except DroverError as e:
                with self._lock:
                    lost, self._pending = list(self._pending.values()), {}
                for f in lost:
                    _settle(f, exception=e)
                return
            for task_id, _event, info, error in ended:
                with self._lock:
                    future = self._pending.pop(task_id, None)
                if future is None:
                    continue
                if error:
                    _settle(future, exception=DroverError(f"task {task_id}: {error}"))
                    continue
                self._finish(future, info)

    def _finish(self, future: Future, info_json: Optional[Dict[str, Any]]) -> None:
        assert future.task is not None
        try:
            info = TaskInfo.from_json(info_json) if info_json else future.task.info()
            _settle(future, result=self._value_of(future.task, info))
        except BaseException as e:  # the call's exception, or why there is no value
            _settle(future, exception=e)

    def _value_of(self, task: Task, info: TaskInfo) -> Any:
        kind, data = _call.decode_result(info.outcome.result if info.outcome else "")
        if info.state == SUCCEEDED:
            if kind == "value":
                return pickle.loads(data)
            if kind == "file":
                return pickle.loads(self._download_value(task))
            raise DroverError(f"task {info.id} succeeded without the value of a function call")
        if kind == "error":
            raise _remote_exception(data)
        if info.state == CANCELED:
            raise TaskCanceled(info.id, info.state, info.reason)
        return _result_of(info)  # raises TaskFailed with the reason

    def _download_value(self, task: Task) -> bytes:
        folder = tempfile.mkdtemp(dir=self._tmp)
        try:
            [path] = task.download(folder, names=[_call.VALUE_FILE])
            with open(path, "rb") as f:
                return f.read()
        finally:
            shutil.rmtree(folder, ignore_errors=True)


def _warm_env(options: Dict[str, Any]) -> Dict[str, str]:
    """The environment that asks the worker for a warm interpreter (its
    warm_interpreter.h); pops the options that say how."""
    warm = options.pop("warm", True)
    preload = options.pop("preload", None) or ()
    max_calls = options.pop("max_calls", None) or 0
    fresh = options.pop("fresh", False)
    if isinstance(preload, str) or not all(isinstance(m, str) and m and "," not in m
                                           for m in preload):
        raise TypeError(f"preload: a list of module names, not {preload!r}")
    if not isinstance(max_calls, int) or max_calls < 0:
        raise TypeError(f"max_calls: a count of calls (0: no limit), not {max_calls!r}")
    if not warm:
        return {}
    env = {"DROVER_WARM": "1"}
    if preload:
        env["DROVER_PRELOAD"] = ",".join(preload)
    if max_calls:
        env["DROVER_MAX_CALLS"] = str(max_calls)
    if fresh:
        env["DROVER_FRESH"] = "1"
    return env


def _settle(future: Future, result: Any = None, exception: Optional[BaseException] = None) -> None:
    if future.done():  # canceled here meanwhile
        return
    try:
        if exception is not None:
            future.set_exception(exception)
        else:
            future.set_result(result)
    except concurrent.futures.InvalidStateError:
        pass


def _remote_exception(data: bytes) -> BaseException:
    try:
        exc, tb = pickle.loads(data)
    except Exception as e:  # its type is not importable here
        return RemoteError("exception", f"cannot be rebuilt here ({type(e).__name__}: {e})", "")
    if not isinstance(exc, BaseException):
        return RemoteError(type(exc).__name__, repr(exc), str(tb))
    exc.__cause__ = RemoteTraceback(f'\n"""\n{tb}"""') if tb else None
    return exc


def _name_of(fn: Callable[..., Any]) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or "call"
    # A job name is free text; keep it short and printable.
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)[:64] or "call"


# ---- @drover.function --------------------------------------------------

_default_executor: Optional[Executor] = None
_default_lock = threading.Lock()


def _shared_executor() -> Executor:
    global _default_executor
    with _default_lock:
        if _default_executor is None:
            _default_executor = Executor()
            atexit.register(_default_executor.shutdown)
        return _default_executor


class RemoteFunction:
    """A function with Drover defaults (see :func:`function`): calling it
    runs it here; ``.submit(...)`` and ``.map(...)`` run it as tasks."""

    def __init__(self, fn: Callable[..., Any], executor: Optional[Executor],
                 defaults: Dict[str, Any]) -> None:
        self.fn = fn
        self._executor = executor
        self._defaults = defaults
        self.__doc__ = fn.__doc__
        self.__name__ = getattr(fn, "__name__", "function")
        self.__qualname__ = getattr(fn, "__qualname__", self.__name__)
        self.__module__ = getattr(fn, "__module__", __name__)
        self.__wrapped__ = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __reduce__(self) -> Any:
        # Inside a task it is the plain function (an executor does not travel).
        return (_plain, (self.fn,))

    def submit(self, *args: Any, **kwargs: Any) -> Future:
        ex = self._executor or _shared_executor()
        return ex.submit(self.fn, *args, drover_resources=self._defaults, **kwargs)

    def map(self, *iterables: Iterable[Any], timeout: Optional[float] = None,
            chunksize: int = 1) -> Iterator[Any]:
        ex = self._executor or _shared_executor()
        return ex._map(self.fn, iterables, timeout, chunksize, self._defaults)


def _plain(fn: Callable[..., Any]) -> Callable[..., Any]:
    return fn


def function(fn: Optional[Callable[..., Any]] = None, *, executor: Optional[Executor] = None,
             **defaults: Any) -> Any:
    """``@drover.function`` or ``@drover.function(gpus=1, retries=2)``: the
    function's ``.submit(...)`` and ``.map(...)`` run it as tasks with these
    defaults (the Executor's arguments), on ``executor`` or one shared
    executor of ``drover.Client()``."""
    unknown = sorted(set(defaults) - set(_RESOURCE_KEYS))
    if unknown:
        raise TypeError(f"drover.function: unknown argument(s) {', '.join(unknown)}")

    def wrap(f: Callable[..., Any]) -> RemoteFunction:
        return RemoteFunction(f, executor, dict(defaults))

    return wrap(fn) if fn is not None else wrap


__all__ = ["Executor", "Future", "RemoteError", "RemoteFunction", "RemoteTraceback", "function"]

