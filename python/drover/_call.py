"""What runs a Python function as a task: the runner on the worker, and the
encoding of calls and values that it and the client share.

A call travels as one pickle, ``(header, fn, args, kwargs)``: the header
names the client's Python version and whether cloudpickle made it, and
with ``function_pickled`` ``fn`` is the function's own pickle (made once for
the many calls of a map), and with ``chunk`` the task is several calls:
``args[0]`` is the list of their argument tuples and the value the list of
their values. Drover
futures among the arguments, at any depth, are pickled as persistent ids
(:func:`future_id`); the task depends on their tasks (``after``), whose
results arrive in ``$DROVER_INPUTS``, and the runner's unpickler puts each
value in its place. The call
comes inline in the environment (``DROVER_CALL``, base64) when small, else
as an uploaded input file (``drover-call.pkl``) through the data plane.

The value (or the exception, with its remote traceback) goes back the same
way: ``$DROVER_RESULT`` holds ``drover-call:v1:value:<base64>`` (or
``...:error:<base64>``) when it fits in the result limit, else
``drover-call:v1:file`` and the pickle is the task's output
``drover-value.pkl``, which a dependent on any worker receives through the
data plane and the client downloads. A function that raised makes its task
fail (exit code 1), so retries apply as to any task.

Unpickling runs code: a call is unpickled only inside its task's process, as
the job's user, and a value only in the client that submitted it (or in a
dependent task of the same user).

The runner (:data:`RUNNER`) is standard-library Python (cloudpickle only
when the call was made with it) passed to ``python -c``, packed
(:data:`COMMAND_RUNNER`: zlib and base64, a third of its size), so a worker
needs no Drover package of its own.
"""

import base64
import hashlib
import sys
import zlib
from typing import List, Optional, Tuple

PREFIX = "drover-call:v1:"
CALL_ENV = "DROVER_CALL"
CALL_FILE = "drover-call.pkl"
VALUE_FILE = "drover-value.pkl"
# The most of a call the environment carries; above it, an input file.
INLINE_CALL_LIMIT = 32 * 1024


def future_id(task: str) -> str:
    """The pickle persistent id that stands for task ``task``'s value among
    a call's arguments (the runner reads it from ``$DROVER_INPUTS``)."""
    return "drover-future:" + task


def decode_result(text: str) -> Tuple[str, bytes]:
    """(kind, pickle) of a result text: kind "value" or "error" with the
    pickle inline, "file" (the pickle is the output VALUE_FILE), or "" when
    the text is not a function call's."""
    if not text.startswith(PREFIX):
        return "", b""
    rest = text[len(PREFIX):].strip()
    kind, _, data = rest.partition(":")
    if kind == "file":
        return "file", b""
    if kind not in ("value", "error"):
        return "", b""
    return kind, base64.b64decode(data)


# The runner, run as `python -c RUNNER` in the task's directory. It reads the
# call, fills in the values of the futures it was given, calls the function
# and writes what came of it (see the module doc). Exit codes: 0 the function
# returned, 1 it raised, 2 the call could not be read or run (its message on
# stderr and in the result).
RUNNER = r'''
import base64, io, os, pickle, sys, traceback
def dumps(value):
    # Plain pickle first: importing cloudpickle costs each call ~20 ms.
    try:
        return pickle.dumps(value)
    except Exception:
        try:
            import cloudpickle
        except ImportError:
            raise
        return cloudpickle.dumps(value)
PREFIX = "drover-call:v1:"
LIMIT = 48 * 1024  # the server keeps 64 KiB of $DROVER_RESULT; base64 adds 1/3
# A warm interpreter's call whose worker asked for it (DROVER_REPLY_RESULT):
# the result goes back with the reply, not through $DROVER_RESULT.
REPLY = None
def put_result(text):
    data = text.encode("utf-8")
    if REPLY is not None and len(data) <= 64 * 1024:
        REPLY[:] = [data]
        return
    path = os.environ.get("DROVER_RESULT")
    if path:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            while data:
                data = data[os.write(fd, data):]
        finally:
            os.close(fd)
def emit(kind, data):
    if len(data) <= LIMIT:
        text = PREFIX + kind + ":" + base64.b64encode(data).decode("ascii")
    else:
        out = os.environ["DROVER_OUTPUT_DIR"]
        with open(os.path.join(out, "drover-value.pkl"), "wb") as f:
            f.write(data)
        text = PREFIX + "file"
    put_result(text)
def fail(message):
    sys.stderr.write("drover: " + message + "\n")
    emit("error", pickle.dumps((RuntimeError(message), "")))
    sys.exit(2)
def value_of(task):
    inputs = os.environ.get("DROVER_INPUTS", "")
    here = os.path.join(inputs, task)
    text = None
    for path in (here + ".result", here):
        if os.path.isfile(path):
            with open(path) as f:
                text = f.read()
            break
    if text is None or not text.startswith(PREFIX):
        fail("the value of task " + task + " did not arrive in $DROVER_INPUTS")
    kind, _, data = text[len(PREFIX):].strip().partition(":")
    if kind == "file":
        with open(os.path.join(here, "drover-value.pkl"), "rb") as f:
            return pickle.load(f)
    if kind != "value":
        fail("task " + task + " left no value")
    return pickle.loads(base64.b64decode(data))
class Call(pickle.Unpickler):
    # A future among the arguments: its task's value (persistent_id on the
    # client's side), read once.
    memo = {}
    def persistent_load(self, pid):
        if not isinstance(pid, str) or not pid.startswith("drover-future:"):
            raise pickle.UnpicklingError("unknown persistent id " + repr(pid))
        task = pid[len("drover-future:"):]
        if task not in Call.memo:
            Call.memo[task] = value_of(task)
        return Call.memo[task]
def by_name(name):
    # A function named by reference (a job file's `function`, `drover
    # call`): JSON arguments in DROVER_ARGS and DROVER_KWARGS ({index} is
    # the array index, as in a command), the JSON of its value in the
    # result; exit 2 when it does not import, 1 when it raised.
    import importlib, json
    index = os.environ.get("DROVER_TASK_INDEX", "{index}")
    try:
        args = json.loads((os.environ.get("DROVER_ARGS") or "[]").replace("{index}", index))
        kwargs = json.loads((os.environ.get("DROVER_KWARGS") or "{}").replace("{index}", index))
    except ValueError as e:
        args, kwargs, bad = None, None, e
    result = put_result
    if args is None:
        message = "function %s: its arguments are not JSON: %s" % (name, bad)
        sys.stderr.write("drover: " + message + "\n")
        result(message)
        sys.exit(2)
    # A warm interpreter started with another call's PYTHONPATH: this
    # call's comes first.
    for entry in reversed(os.environ.get("PYTHONPATH", "").split(os.pathsep)):
        if entry and entry not in sys.path:
            sys.path.insert(0, entry)
    importlib.invalidate_caches()
    module, _, qualname = name.partition(":")
    try:
        target = importlib.import_module(module)
        for part in qualname.split("."):
            target = getattr(target, part)
    except Exception as e:
        message = "function %s cannot be imported: %s: %s" % (name, type(e).__name__, e)
        sys.stderr.write("drover: " + message + "\n")
        result(message)
        sys.exit(2)
    try:
        value = target(*args, **kwargs)
    except BaseException:
        sys.stderr.write(traceback.format_exc())
        sys.exit(1)
    if value is not None:
        result(json.dumps(value))
def main():
    name = os.environ.get("DROVER_FUNCTION")
    if name:
        return by_name(name)
    inline = os.environ.get("DROVER_CALL")
    try:
        if inline:
            data = base64.b64decode(inline)
        else:
            with open("drover-call.pkl", "rb") as f:
                data = f.read()
        header, fn, args, kwargs = Call(io.BytesIO(data)).load()
        if header.get("function_pickled"):  # pickled once for many calls
            fn = Call(io.BytesIO(fn)).load()
    except ModuleNotFoundError as e:
        fail("cannot read the call: " + str(e) + " (install it on the worker; a function "
             "submitted with cloudpickle needs python3-cloudpickle there)")
    except Exception as e:
        fail("cannot read the call: " + type(e).__name__ + ": " + str(e))
    mine = "%d.%d" % sys.version_info[:2]
    if header.get("cloudpickle") and header.get("python") != mine:
        fail("the client runs Python " + str(header.get("python")) + " and this worker's "
             + sys.executable + " is Python " + mine + ": functions pickled by cloudpickle "
             "need the same minor version (name another interpreter with python=...)")
    try:
        if header.get("chunk"):  # several calls as one task: their values
            value = [fn(*a) for a in args[0]]
        else:
            value = fn(*args, **kwargs)
    except BaseException as e:
        tb = traceback.format_exc()
        try:
            data = pickle.dumps((e, tb))
            pickle.loads(data)
        except Exception:
            data = pickle.dumps((RuntimeError(type(e).__name__ + ": " + str(e)), tb))
        emit("error", data)
        sys.stderr.write(tb)
        sys.exit(1)
    try:
        data = dumps(value)
    except Exception as e:
        fail("the function returned a value that cannot be pickled: " + type(e).__name__ + ": "
             + str(e))
    emit("value", data)
def one(cwd, env, fds, null):
    # One call in this interpreter: the task's stdout and stderr, directory
    # and environment, then the call; its exit code.
    code = 2
    try:
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
        for fd in fds:
            os.close(fd)
        os.chdir(cwd)
        environ_to(env)
        Call.memo = {}
        try:
            main()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os.dup2(null, 1)
        os.dup2(null, 2)
        leftovers()
    return code
def environ_to(env):
    # The call's environment (bytes to bytes) in place of the last one's:
    # only what differs is unset or set. os.environ.clear() and update()
    # cost a no-op call four times its own run.
    environ = os.environb
    now = getattr(os.environ, "_data", None)  # CPython's bytes to bytes dict
    if not isinstance(now, dict):
        now = dict(environ)
    for k in [k for k in now if k not in env]:
        del environ[k]
    for k, v in env.items():
        if now.get(k) != v:
            environ[k] = v
def leftovers():
    # What the call started and left: killed and reaped (with cgroups the
    # worker also kills what is left in the task's cage).
    import signal
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        tids = []
    for tid in tids:
        try:
            fd = os.open("/proc/self/task/%s/children" % tid, os.O_RDONLY)
            try:
                kids = [int(k) for k in os.read(fd, 1 << 16).split()]
            finally:
                os.close(fd)
        except (OSError, ValueError):
            continue
        for kid in kids:
            try:
                os.kill(kid, signal.SIGKILL)
                os.waitpid(kid, 0)
            except OSError:
                pass
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM,
                signal.SIGCONT, signal.SIGINT):
        handler = signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL
        if signal.getsignal(sig) is not handler:
            signal.signal(sig, handler)
    signal.alarm(0)
def usage():
    import resource
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime
    return cpu, max(s.ru_maxrss, c.ru_maxrss)
def serve():
    # A warm interpreter (the worker's warm_interpreter.h): calls arrive on
    # stdin, a socket, one message each (directory, environment, and the
    # call's stdout and stderr), and each gets its reply: a status line, and
    # the call's result after a newline when the call's message asked
    # (DROVER_REPLY_RESULT=1, which the call does not see).
    global REPLY
    import socket
    sock = socket.socket(fileno=os.dup(0))
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    for name in os.environ.get("DROVER_PRELOAD", "").split(","):
        if name.strip():
            try:
                __import__(name.strip())
            except BaseException as e:
                sys.stderr.write("drover: cannot preload %s: %s: %s\n"
                                 % (name.strip(), type(e).__name__, e))
    try:
        import cloudpickle  # noqa: F401 (once here, not in each call or fresh child)
    except ImportError:
        pass
    limit = int(os.environ.get("DROVER_MAX_CALLS") or 0)
    calls = 0
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 1 << 20, 2)
        except OSError:
            break
        if not msg or len(fds) != 2:
            break
        parts = msg.split(b"\0")
        env = {}
        for kv in parts[1:]:
            k, _, v = kv.partition(b"=")
            if k:
                env[k] = v
        reply_result = env.pop(b"DROVER_REPLY_RESULT", None) == b"1"
        cpu0, _ = usage()
        if env.get(b"DROVER_FRESH") == b"1":
            # A clean process per call: a child forked from this one.
            pid = os.fork()
            if pid == 0:
                code = 2
                try:
                    sock.close()
                    code = one(parts[0], env, fds, null)
                finally:
                    os._exit(code)
            for fd in fds:
                os.close(fd)
            _, status = os.waitpid(pid, 0)
            if os.WIFSIGNALED(status):
                how = "signal %d" % os.WTERMSIG(status)
            else:
                how = "exit %d" % os.WEXITSTATUS(status)
        else:
            REPLY = [] if reply_result else None
            how = "exit %d" % one(parts[0], env, fds, null)
        result, REPLY = REPLY, None
        cpu1, rss = usage()
        calls += 1
        last = limit > 0 and calls >= limit
        reply = ("%s %d %d %d" % (how, (cpu1 - cpu0) * 1e6, rss, last)).encode()
        if result:  # the status line, then the result
            reply += b"\n" + result[0]
        sock.send(reply)
        if last:
            break
if os.environ.get("DROVER_WARM_SERVE") == "1":
    serve()
else:
    main()
'''


def _packed(source: str) -> str:
    """`source` as a short program that unpacks and runs it: a job carries
    its command through the server's JSON several times, and base64 of
    zlib is a third of the size with nothing to escape."""
    data = base64.b64encode(zlib.compress(source.encode(), 9)).decode("ascii")
    return f"import base64,zlib;exec(zlib.decompress(base64.b64decode('{data}')))"


# What a task's command runs: `python -c COMMAND_RUNNER`.
COMMAND_RUNNER = _packed(RUNNER)
# RUNNER's SHA-256: a server whose runner is this one (it says so in its
# answer to a batch of jobs) takes a task's command as `python_runner`.
RUNNER_SHA256 = hashlib.sha256(RUNNER.encode()).hexdigest()


def runner_python(command: List[str]) -> Optional[str]:
    """The interpreter of `command` when it is ``[python, "-c",
    COMMAND_RUNNER]``; None when not."""
    if len(command) == 3 and command[1] == "-c" and command[2] == COMMAND_RUNNER:
        return command[0]
    return None


def python_version() -> str:
    return "%d.%d" % sys.version_info[:2]
