"""Python functions as tasks (drover.Executor, @drover.function) against a
real local cluster (``drover up``, two workers), and the runner on its own.

Every wait is on a future (the task's terminal event); timeouts only bound a
failing test.
"""

from __future__ import annotations

import base64
import json
import concurrent.futures as cf
import os
import pickle
import subprocess
import sys
import tempfile
import threading
import unittest
import zlib
from typing import Any, List, Optional

import drover
from drover import _call

from cluster import ModuleCluster, another_user

WAIT = 120.0
cluster = ModuleCluster(workers=2)
setUpModule = cluster.start
tearDownModule = cluster.stop


# Module-level functions, so that ProcessPoolExecutor (which pickles by
# reference) can run them too.
def square(x: int) -> int:
    return x * x


def add(a: int, b: int = 0) -> int:
    return a + b


def square_where(x: int) -> tuple:
    """x squared, and the task that computed it."""
    return os.environ.get("DROVER_TASK_ID"), x * x


def length_where(s: str) -> tuple:
    """len(s), and the task that measured it."""
    return os.environ.get("DROVER_TASK_ID"), len(s)


def env_of(name: str) -> Optional[str]:
    return os.environ.get(name)


def fails_at_three(x: int) -> int:
    if x == 3:
        raise ValueError("three")
    return x


def fails(message: str) -> None:
    raise ValueError(message)


def where_am_i() -> str:
    return os.getcwd()


def produce_when_both_run(gate: str, name: str, size: int) -> bytes:
    """Marks `name` as running in `gate`, waits until both producers are
    (at most a minute), and returns `size` random bytes."""
    import time

    open(os.path.join(gate, name), "w").close()
    deadline = time.monotonic() + 60
    while len(os.listdir(gate)) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    return os.urandom(size)


def hog(mib: int) -> int:
    """Touches `mib` MiB of memory."""
    block = bytearray(mib << 20)
    for i in range(0, len(block), 4096):
        block[i] = 1
    return len(block)


def pid_and_place(i: int) -> tuple:
    print(f"call-{i}")
    return os.getpid(), os.getppid(), os.getcwd()


def killed_on_its_first_attempt() -> int:
    if os.environ["DROVER_ATTEMPT"] == "1":
        os.kill(os.getpid(), 9)  # the interpreter, in the middle of the call
    return os.getpid()


def imported(name: str) -> bool:
    return name in sys.modules


def leave_a_handler_and_a_child() -> int:
    import signal

    signal.signal(signal.SIGTERM, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ["SET_BY_A_CALL"] = "yes"
    os.environ["SHARED"] = "changed by the call"
    child = subprocess.Popen(["sleep", "1000"])
    print("started", child.pid)
    return child.pid


def what_a_call_sees() -> tuple:
    import signal

    return (os.getpid(), signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler, os.getcwd(),
            [os.environ.get(k) for k in ("ONLY_IN_THE_FIRST_CALL", "SET_BY_A_CALL", "SHARED")])


class CountedPickles:
    """A function whose pickling is counted (here, in the client)."""

    pickled = 0

    def __call__(self, x: int) -> int:
        return x + 1

    def __reduce__(self) -> tuple:
        CountedPickles.pickled += 1
        return (CountedPickles, ())


def kill_myself() -> None:
    os.kill(os.getpid(), 9)


class WarmRunner:
    """The runner in serve mode (python -c RUNNER with DROVER_WARM_SERVE=1),
    driven as the worker drives it (worker/exec/warm_interpreter.h)."""

    def __init__(self, **env: str) -> None:
        import socket

        self.dir = tempfile.mkdtemp(prefix="drover-warm-")
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen([sys.executable, "-c", _call.RUNNER], stdin=theirs,
                                     env=dict(os.environ, DROVER_WARM_SERVE="1", **env))
        theirs.close()

    def close(self) -> None:
        self.sock.close()
        self.proc.wait(timeout=60)
        import shutil
        shutil.rmtree(self.dir, ignore_errors=True)

    def call(self, fn: Any, *args: Any, **env: str) -> tuple:
        """(reply words, stdout, stderr, value or exception, task dir)."""
        import socket

        task = tempfile.mkdtemp(dir=self.dir)
        os.mkdir(os.path.join(task, "output"))
        data = pickle.dumps(({"python": _call.python_version(), "cloudpickle": False},
                             fn, args, {}))
        call_env = {"DROVER_CALL": base64.b64encode(data).decode(),
                    "DROVER_RESULT": os.path.join(task, "result"),
                    "DROVER_OUTPUT_DIR": os.path.join(task, "output"),
                    "PYTHONPATH": os.environ.get("PYTHONPATH", ""), **env}
        message = task.encode() + b"".join(b"\0" + f"{k}={v}".encode()
                                           for k, v in call_env.items())
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        socket.send_fds(self.sock, [message], [out_w, err_w])
        os.close(out_w)
        os.close(err_w)
        # A status line, then the result when the call asked for it so
        # (DROVER_REPLY_RESULT=1): self.inline says whether it came so.
        status, newline, inline = self.sock.recv(1 << 17).partition(b"\n")
        reply = status.decode().split()
        self.inline = bool(newline)
        with os.fdopen(out_r) as o, os.fdopen(err_r) as e:
            stdout, stderr = o.read(), e.read()
        value: Any = None
        path = os.path.join(task, "result")
        text = inline.decode() if newline else None
        if text is None and os.path.exists(path):
            with open(path) as f:
                text = f.read()
        if text is not None:
            kind, blob = _call.decode_result(text)
            value = pickle.loads(blob) if kind else text  # a call by name: its JSON
        return reply, stdout, stderr, value, task


def exercise(ex: cf.Executor) -> None:
    """What code written for ProcessPoolExecutor does with its executor;
    raises AssertionError when a result differs."""
    f = ex.submit(add, 2, b=3)
    assert f.result(timeout=WAIT) == 5, f.result()
    assert list(ex.map(square, range(6), timeout=WAIT)) == [0, 1, 4, 9, 16, 25]
    assert list(ex.map(add, [1, 2], [10, 20])) == [11, 22]
    assert list(ex.map(square, range(7), chunksize=3)) == [0, 1, 4, 9, 16, 25, 36]
    chunked = ex.map(fails_at_three, range(6), chunksize=2)
    assert [next(chunked), next(chunked)] == [0, 1]
    try:
        next(chunked)  # 3's chunk (2 and 3) failed
    except ValueError as e:
        assert str(e) == "three", str(e)
    else:
        raise AssertionError("the chunk's exception did not come back")
    try:
        ex.map(square, [1], chunksize=0)
    except ValueError:
        pass
    else:
        raise AssertionError("chunksize 0 was taken")
    futures = [ex.submit(square, i) for i in range(4)]
    assert sorted(f.result() for f in cf.as_completed(futures, timeout=WAIT)) == [0, 1, 4, 9]
    done, not_done = cf.wait(futures, timeout=WAIT, return_when=cf.ALL_COMPLETED)
    assert len(done) == 4 and not not_done
    called = threading.Event()
    seen: List[Any] = []
    last = ex.submit(square, 7)
    last.add_done_callback(lambda fut: (seen.append(fut.result()), called.set()))
    assert called.wait(WAIT) and seen == [49]
    bad = ex.submit(fails, "no good")
    try:
        bad.result(timeout=WAIT)
    except ValueError as e:
        assert str(e) == "no good", str(e)
    else:
        raise AssertionError("the exception did not come back")
    assert isinstance(bad.exception(timeout=WAIT), ValueError)


class ExecutorTest(unittest.TestCase):
    def setUp(self) -> None:
        self.client = drover.Client(access_file=cluster().access_file)
        self.addCleanup(self.client.close)

    def executor(self, **defaults: Any) -> drover.Executor:
        ex = drover.Executor(self.client, **defaults)
        self.addCleanup(ex.shutdown)
        return ex

    def test_code_written_for_process_pool_executor_runs_unchanged(self) -> None:
        with cf.ProcessPoolExecutor(max_workers=2) as pool:
            exercise(pool)  # the semantics it is written against
        with drover.Executor(self.client, max_workers=2) as ex:
            exercise(ex)
        with self.assertRaises(RuntimeError):
            ex.submit(square, 1)  # after shutdown

    def test_map_with_a_chunksize_runs_that_many_calls_per_task(self) -> None:
        got = list(self.executor().map(square_where, range(7), chunksize=3, timeout=WAIT))
        self.assertEqual([v for _, v in got], [i * i for i in range(7)])
        tasks = [t for t, _ in got]
        self.assertEqual(tasks, [tasks[0]] * 3 + [tasks[3]] * 3 + [tasks[6]])
        self.assertEqual(len(set(tasks)), 3)
        # The decorator's map too, with its resources.
        fn = drover.function(square_where, executor=self.executor(), retries=1)
        self.assertEqual([v for _, v in fn.map(range(4), chunksize=2, timeout=WAIT)],
                         [0, 1, 4, 9])

    def test_a_maps_calls_are_the_tasks_of_one_job(self) -> None:
        ex = self.executor()
        got = list(ex.map(square_where, range(7), timeout=WAIT))
        self.assertEqual([v for _, v in got], [i * i for i in range(7)])
        job = got[0][0].split(".")[0]
        self.assertEqual([t for t, _ in got], [f"{job}.{i}" for i in range(7)])
        info = self.client.job_info(int(job))
        self.assertEqual(info.name, "square_where")
        self.assertEqual(sorted(t.group for t in info.tasks),
                         sorted(f"square_where-{i}" for i in range(7)))
        # Past the most calls a job takes (500, as the guide says), the
        # next job; a call that waits for a future goes as a job of its own,
        # the others as before.
        self.assertEqual(drover.functions._MAP_JOB_TASKS, 500)
        saved = drover.functions._MAP_JOB_TASKS
        drover.functions._MAP_JOB_TASKS = 3
        self.addCleanup(setattr, drover.functions, "_MAP_JOB_TASKS", saved)
        first = ex.submit(square, 2)
        args = [3, first, 4, 5, 6, 7]
        got = list(ex.map(square_where, args, timeout=WAIT))
        self.assertEqual([v for _, v in got], [9, 16, 16, 25, 36, 49])
        jobs = [t.split(".")[0] for t, _ in got]
        self.assertEqual(jobs[0], jobs[2])
        self.assertEqual(jobs[0], jobs[3])
        self.assertNotIn(jobs[1], jobs[:1] + jobs[2:])
        self.assertEqual(jobs[4], jobs[5])
        self.assertNotEqual(jobs[3], jobs[4])
        # And past about the most bytes: calls of 20 KiB arguments, 4 MiB
        # in at most ~200 of them.
        drover.functions._MAP_JOB_TASKS = saved
        big = list(ex.map(length_where, ["x" * (20 << 10)] * 250, timeout=WAIT))
        self.assertEqual([n for _, n in big], [20 << 10] * 250)
        per_job: dict = {}
        for t, _ in big:
            per_job[t.split(".")[0]] = per_job.get(t.split(".")[0], 0) + 1
        self.assertGreaterEqual(len(per_job), 2, per_job)
        self.assertLessEqual(max(per_job.values()), 4 << 20 >> 15, per_job)

    def test_a_maps_calls_are_watched_as_their_job_and_their_values_come_with_their_ends(
            self) -> None:
        sent: List[str] = []
        real_send = drover._websocket.WebSocket.send_texts

        def send_texts(ws: Any, texts: List[str]) -> None:
            sent.extend(texts)
            real_send(ws, texts)

        asked: List[str] = []
        real_info = drover.client.Task.info

        def info(task: Any) -> Any:
            asked.append(task.id)
            return real_info(task)

        drover._websocket.WebSocket.send_texts = send_texts  # type: ignore[method-assign]
        drover.client.Task.info = info  # type: ignore[method-assign]
        self.addCleanup(setattr, drover._websocket.WebSocket, "send_texts", real_send)
        self.addCleanup(setattr, drover.client.Task, "info", real_info)
        ex = self.executor()
        got = list(ex.map(square_where, range(20), timeout=WAIT))
        self.assertEqual([v for _, v in got], [i * i for i in range(20)])
        job = got[0][0].split(".")[0]
        ex.shutdown()  # the collector has sent what it had to
        watches = [json.loads(t) for t in sent]
        self.assertIn({"watch": job}, watches)
        self.assertIn({"unwatch": job}, watches)
        self.assertEqual([w for w in watches if str(next(iter(w.values()))).startswith(job + ".")],
                         [], "no watch of each call")
        self.assertEqual(asked, [], "each value came with its end, not asked for")

    def test_calls_go_as_python_runner_once_the_server_says_it_runs_this_runner(self) -> None:
        ex = self.executor()
        self.assertEqual(ex.submit(square, 3).result(timeout=WAIT), 9)
        # The server's answer named the runner this client has: from then
        # on a call's command goes as `python_runner`, and the server runs
        # the same command.
        self.assertTrue(self.client._submitter.python_runner)
        job = drover.Job(self.client, "runner")
        job.task([sys.executable, "-c", _call.COMMAND_RUNNER])
        job.task([sys.executable, "-c", "print(1)"])
        tasks = job.spec()["task"]
        self.assertEqual(tasks[0].get("python_runner"), sys.executable)
        self.assertNotIn("command", tasks[0])
        self.assertEqual(tasks[1]["command"], [sys.executable, "-c", "print(1)"])
        got = list(ex.map(square_where, range(5), timeout=WAIT))
        self.assertEqual([v for _, v in got], [i * i for i in range(5)])
        seen = self.client._transport.json("GET", f"/api/v1/tasks/{got[0][0]}")
        self.assertEqual(seen["spec"]["command"][1:], ["-c", _call.COMMAND_RUNNER])

    def test_map_pickles_its_function_once_for_all_its_calls(self) -> None:
        ex = self.executor()
        CountedPickles.pickled = 0
        self.assertEqual(list(ex.map(CountedPickles(), range(5), timeout=WAIT)), [1, 2, 3, 4, 5])
        self.assertEqual(CountedPickles.pickled, 1)
        self.assertEqual(ex.submit(CountedPickles(), 9).result(timeout=WAIT), 10)
        self.assertEqual(CountedPickles.pickled, 2)

    def test_a_cached_call_with_the_same_arguments_is_reused(self) -> None:
        ex = self.executor(cache=True)
        first = ex.submit(square, 12)
        self.assertEqual(first.result(timeout=WAIT), 144)
        again = ex.submit(square, 12)
        self.assertEqual(again.result(timeout=WAIT), 144)
        assert first.task is not None and again.task is not None
        self.assertEqual(again.task.info().outcome.cached_from, first.task.id)
        other = ex.submit(square, 13)
        self.assertEqual(other.result(timeout=WAIT), 169)
        self.assertIsNone(other.task.info().outcome.cached_from)

    def test_each_call_is_a_task_in_its_own_directory(self) -> None:
        ex = self.executor()
        f = ex.submit(where_am_i)
        here = f.result(timeout=WAIT)
        assert f.task is not None
        info = f.task.info()
        self.assertEqual(info.state, "succeeded")
        # <workdir>/<job>/<index>.<attempt>
        self.assertTrue(here.endswith(f"/{info.job}/0.1"), here)
        self.assertNotEqual(here, os.getcwd())
        # Its value came back with the warm interpreter's reply: no file.
        self.assertFalse(os.path.exists(os.path.join(here, "result")))

    def test_lambdas_closures_and_futures_as_arguments_build_the_graph(self) -> None:
        ex = self.executor()
        offset = 10
        a = ex.submit(lambda: [1, 2, 3])
        b = ex.submit(lambda: 4)
        # Futures at any depth; the new task depends on both.
        c = ex.submit(lambda d, k=0: sum(d["xs"]) + d["y"] + k + offset, {"xs": a, "y": b}, k=b)
        self.assertEqual(c.result(timeout=WAIT), 1 + 2 + 3 + 4 + 4 + 10)
        assert c.task is not None and a.task is not None and b.task is not None
        # Its inputs were its dependencies' results.
        self.assertEqual(c.task.info().state, "succeeded")

    def test_a_value_over_the_result_limit_travels_as_an_output_file(self) -> None:
        ex = self.executor()
        big = ex.submit(lambda: os.urandom(200_000))
        size = ex.submit(len, big)
        self.assertEqual(size.result(timeout=WAIT), 200_000)
        self.assertEqual(len(big.result(timeout=WAIT)), 200_000)
        assert big.task is not None
        self.assertEqual([o.name for o in big.task.outputs], [_call.VALUE_FILE])
        # A large argument goes through the file store, not the job's body.
        blob = os.urandom(100_000)
        echoed = ex.submit(len, blob)
        self.assertEqual(echoed.result(timeout=WAIT), 100_000)
        assert echoed.task is not None
        spec_env = self.client._transport.json("GET", f"/api/v1/tasks/{echoed.task.id}")
        self.assertNotIn(_call.CALL_ENV, spec_env.get("spec", {}).get("env", {}))

    def test_futures_pass_values_between_the_two_workers_one_over_the_result_limit(self) -> None:
        ex = self.executor()
        # Each producer holds a whole core until both have started, so the
        # two run at once, one on each worker of one core each.
        gate = tempfile.mkdtemp(prefix="drover-gate-")
        big = ex.submit(produce_when_both_run, gate, "big", 200_000, drover_resources={"cpus": 1})
        small = ex.submit(produce_when_both_run, gate, "small", 10, drover_resources={"cpus": 1})
        total = ex.submit(lambda a, b: len(a) + len(b), big, small)
        self.assertEqual(total.result(timeout=WAIT), 200_010)
        assert big.task is not None and small.task is not None
        ran_on = {big.task.info().worker, small.task.info().worker}
        self.assertEqual(len(ran_on), 2, "the producers ran on one worker")
        # So the sum, wherever it ran, read one value from the other worker:
        # the big one as an output file, the small one inline.
        self.assertEqual([o.name for o in big.task.outputs], [_call.VALUE_FILE])
        self.assertEqual(small.task.outputs, [])

    def test_a_call_past_its_memory_limit_fails_and_the_next_call_runs(self) -> None:
        ex = self.executor()
        f = ex.submit(hog, 512, drover_resources={"mem": "64MiB"})
        try:
            f.result(timeout=WAIT)
        except drover.TaskFailed as e:
            # Killed by the kernel for its cgroup limit.
            self.assertIn("OOM-killed (limit 64 MiB", e.reason)
        except MemoryError:
            # A worker without a memory cgroup caps the address space
            # instead (isolation rlimit): the allocation fails in the call.
            pass
        else:
            self.fail("a call over its memory limit succeeded")
        self.assertEqual(ex.submit(square, 12).result(timeout=WAIT), 144)

    def test_a_remote_exception_comes_back_with_its_traceback(self) -> None:
        ex = self.executor()

        def deep() -> None:
            raise KeyError("missing-key")

        f = ex.submit(deep)
        with self.assertRaises(KeyError) as caught:
            f.result(timeout=WAIT)
        cause = caught.exception.__cause__
        self.assertIsInstance(cause, drover.functions.RemoteTraceback)
        self.assertIn("in deep", str(cause))
        self.assertIn("KeyError: 'missing-key'", str(cause))
        # The task failed (retries apply to it as to any task).
        assert f.task is not None
        self.assertEqual(f.task.info().state, "failed")

    def test_a_dependent_of_a_failed_call_fails_naming_it(self) -> None:
        ex = self.executor()
        a = ex.submit(fails, "first")
        b = ex.submit(add, a, 1)
        with self.assertRaises(drover.TaskFailed) as caught:
            b.result(timeout=WAIT)
        assert a.task is not None
        self.assertIn(a.task.id, caught.exception.reason)

    def test_a_call_past_its_timeout_fails_with_the_reason(self) -> None:
        ex = self.executor()
        import time

        f = ex.submit(time.sleep, 60, drover_resources={"timeout": "1s"})
        with self.assertRaises(drover.TaskFailed) as caught:
            f.result(timeout=WAIT)
        self.assertIn("timed out after 1s", caught.exception.reason)

    def test_what_cannot_be_pickled_is_refused_at_submit_naming_it(self) -> None:
        ex = self.executor()
        with self.assertRaises(TypeError) as caught:
            ex.submit(add, 1, threading.Lock())
        self.assertIn("argument 2 of add (lock) cannot be sent to a worker", str(caught.exception))
        with self.assertRaises(TypeError) as caught:
            ex.submit(add, 1, drover_resources={"gpu": 1})
        self.assertIn("unknown key(s) gpu", str(caught.exception))

    def test_cancel_cancels_the_task(self) -> None:
        ex = self.executor()
        import time

        f = ex.submit(time.sleep, 60)
        assert f.task is not None
        self.assertTrue(f.cancel())
        self.assertTrue(f.cancelled())
        self.assertEqual(f.task.wait(WAIT).state, "canceled")

    def test_shutdown_cancel_futures_cancels_what_has_not_ended(self) -> None:
        ex = drover.Executor(self.client)
        import time

        f = ex.submit(time.sleep, 60)
        ex.shutdown(wait=True, cancel_futures=True)
        self.assertTrue(f.cancelled())

    def test_the_decorator_keeps_a_local_call_and_submits_with_its_defaults(self) -> None:
        ex = self.executor()

        @drover.function(executor=ex, cpus=0.5, retries=1)
        def double(x: int) -> int:
            return 2 * x

        self.assertEqual(double(4), 8)  # here
        f = double.submit(5)
        self.assertEqual(f.result(timeout=WAIT), 10)
        self.assertEqual(list(double.map([1, 2, 3])), [2, 4, 6])
        assert f.task is not None
        spec = self.client._transport.json("GET", f"/api/v1/tasks/{f.task.id}")["spec"]
        self.assertEqual(spec["retries"], 1)
        self.assertEqual(spec["resources"]["cpus"], 0.5)

    def test_another_users_executor_may_not_read_the_value(self) -> None:
        other = another_user(self.client, cluster().port, f"fnuser{os.getpid()}")
        self.addCleanup(other.close)
        mine = self.executor().submit(lambda: "private value")
        self.assertEqual(mine.result(timeout=WAIT), "private value")
        assert mine.task is not None
        with self.assertRaises(drover.PermissionDenied):
            other.task(mine.task.id).result(timeout=WAIT)


def run_runner(call: bytes, env: Optional[dict] = None) -> subprocess.CompletedProcess:
    """The runner as a worker runs it, in a fresh directory."""
    folder = tempfile.mkdtemp()
    result = os.path.join(folder, "result")
    out = os.path.join(folder, "output")
    os.mkdir(out)
    full = dict(os.environ, DROVER_RESULT=result, DROVER_OUTPUT_DIR=out,
                DROVER_INPUTS=os.path.join(folder, "inputs"),
                **{_call.CALL_ENV: base64.b64encode(call).decode()})
    full.update(env or {})
    p = subprocess.run([sys.executable, "-c", _call.RUNNER], cwd=folder, env=full,
                       capture_output=True, text=True, timeout=60)
    with open(result) as f:
        p.stdout = f.read()  # the result text, in place of the (empty) stdout
    return p


class WarmInterpreterTest(unittest.TestCase):
    """Calls in warm interpreters (the default), on the cluster's two
    workers; the cgroup, cpuset, GPU and account checks are in the
    integration test warm_interpreter_test.cc (root, cgroup v1)."""

    def setUp(self) -> None:
        self.client = drover.Client(access_file=cluster().access_file)
        self.addCleanup(self.client.close)

    def run_calls(self, n: int, **defaults: Any) -> List[tuple]:
        with drover.Executor(self.client, **defaults) as ex:
            futures = []
            for i in range(n):
                # One after another: each waits for the one before.
                futures.append(ex.submit(pid_and_place, i))
                futures[-1].result(timeout=WAIT)
            for i, f in enumerate(futures):
                assert f.task is not None
                self.assertEqual(list(f.task.logs()), [f"call-{i}"])  # its own stdout
            return [f.result() for f in futures]

    def test_successive_calls_share_an_interpreter_each_in_its_own_task(self) -> None:
        calls = self.run_calls(6)
        pids = {pid for pid, _, _ in calls}
        self.assertLessEqual(len(pids), 2, calls)  # one per worker at most
        self.assertEqual(len({cwd for _, _, cwd in calls}), 6, calls)

    def test_warm_false_max_calls_and_fresh(self) -> None:
        cold = self.run_calls(3, warm=False)
        self.assertEqual(len({pid for pid, _, _ in cold}), 3, cold)
        replaced = self.run_calls(3, max_calls=1)
        self.assertEqual(len({pid for pid, _, _ in replaced}), 3, replaced)
        fresh = self.run_calls(4, fresh=True)
        # A child per call, forked from a warm interpreter (its parent).
        self.assertEqual(len({pid for pid, _, _ in fresh}), 4, fresh)
        self.assertLessEqual(len({ppid for _, ppid, _ in fresh}), 2, fresh)

    def test_preload_is_imported_before_the_first_call(self) -> None:
        with drover.Executor(self.client, preload=["colorsys"]) as ex:
            self.assertTrue(ex.submit(imported, "colorsys").result(timeout=WAIT))
        with drover.Executor(self.client) as ex:
            self.assertFalse(ex.submit(imported, "colorsys").result(timeout=WAIT))
        with self.assertRaises(TypeError):
            drover.Executor(self.client, preload="numpy").submit(square, 1)

    def test_an_interpreter_killed_mid_call_is_replaced_and_the_call_retried(self) -> None:
        with drover.Executor(self.client, retries=1, retry_backoff="0s") as ex:
            f = ex.submit(killed_on_its_first_attempt)
            pid = f.result(timeout=WAIT)
            assert f.task is not None
            raw = self.client._transport.json("GET", f"/api/v1/tasks/{f.task.id}")
            self.assertEqual(raw["attempt"], 2, raw)
            self.assertIn("killed by signal 9", raw["attempts"][0]["reason"], raw)
            self.assertGreater(pid, 0)
            self.assertEqual(ex.submit(square, 5).result(timeout=WAIT), 25)


class WarmRunnerTest(unittest.TestCase):
    """The runner's serve mode on its own, without a worker."""

    def runner(self, **env: str) -> WarmRunner:
        r = WarmRunner(**env)
        self.addCleanup(r.close)
        return r

    def test_successive_calls_each_get_their_own_directory_environment_and_output(self) -> None:
        r = self.runner()
        reply, out, err, child, first_dir = r.call(leave_a_handler_and_a_child,
                                                   ONLY_IN_THE_FIRST_CALL="yes", SHARED="same")
        self.assertEqual(reply[:2], ["exit", "0"], (reply, err))
        self.assertEqual(out, f"started {child}\n")
        # The child it left was killed and reaped when the call ended.
        with self.assertRaises(ProcessLookupError):
            os.kill(child, 0)
        reply, out, err, seen, second_dir = r.call(what_a_call_sees, SHARED="same")
        self.assertEqual(reply[:2], ["exit", "0"], (reply, err))
        self.assertEqual((out, err), ("", ""))
        pid, default_handler, cwd, leftover = seen
        self.assertEqual(pid, r.proc.pid)  # the same interpreter
        self.assertTrue(default_handler)  # the handlers the last call set are gone
        self.assertEqual(os.path.realpath(cwd), os.path.realpath(second_dir))
        self.assertNotEqual(first_dir, second_dir)
        # The environment is the call's, whole: neither what the last call
        # was given nor what it set or changed itself.
        self.assertEqual(leftover, [None, None, "same"])

    def test_the_result_comes_with_the_reply_when_the_worker_asks(self) -> None:
        r = self.runner()
        reply, _, err, value, task = r.call(env_of, "DROVER_REPLY_RESULT", DROVER_REPLY_RESULT="1")
        self.assertEqual(reply[:2], ["exit", "0"], err)
        self.assertTrue(r.inline)
        self.assertIsNone(value)  # the call does not see the request
        self.assertFalse(os.path.exists(os.path.join(task, "result")))
        # An exception's too; and without the request, the file as before.
        reply, _, _, exc, _ = r.call(fails, "inline", DROVER_REPLY_RESULT="1")
        self.assertEqual((reply[:2], r.inline, str(exc[0])), (["exit", "1"], True, "inline"))
        reply, _, _, value, task = r.call(square, 12)
        self.assertEqual((value, r.inline), (144, False))
        self.assertTrue(os.path.exists(os.path.join(task, "result")))

    def test_an_exception_exits_1_and_the_interpreter_serves_on(self) -> None:
        r = self.runner()
        reply, _, err, exc, _ = r.call(fails, "broken")
        self.assertEqual(reply[:2], ["exit", "1"])
        self.assertIn("ValueError: broken", err)
        self.assertEqual(str(exc[0]), "broken")
        self.assertEqual(r.call(square, 9)[3], 81)

    def test_a_call_by_name_finds_its_module_on_its_own_pythonpath(self) -> None:
        # The interpreter started with another call's PYTHONPATH (here the
        # test's); the call's directory comes first for its import.
        r = self.runner()
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "only_here.py"), "w") as f:
                f.write("import os\ndef where(tag):\n    return [tag, os.getpid()]\n")
            reply, _, err, value, _ = r.call(None, DROVER_FUNCTION="only_here:where",
                                             DROVER_ARGS='["t{index}"]', DROVER_KWARGS="{}",
                                             DROVER_TASK_INDEX="4", PYTHONPATH=d)
        self.assertEqual(reply[:2], ["exit", "0"], err)
        self.assertEqual(json.loads(value), ["t4", r.proc.pid])

    def test_preload_max_calls_and_fresh(self) -> None:
        r = self.runner(DROVER_PRELOAD="colorsys", DROVER_MAX_CALLS="2")
        reply, _, _, value, _ = r.call(imported, "colorsys")
        self.assertTrue(value)
        self.assertEqual(reply[-1], "0")
        reply, _, _, _, _ = r.call(square, 2)
        self.assertEqual(reply[-1], "1")  # the last call: it exits now
        self.assertEqual(r.proc.wait(timeout=60), 0)

        f = self.runner()
        reply, _, _, _, _ = f.call(kill_myself, DROVER_FRESH="1")
        self.assertEqual(reply[:2], ["signal", "9"])  # its child died, not the interpreter
        reply, _, _, value, _ = f.call(what_a_call_sees, DROVER_FRESH="1")
        self.assertEqual(reply[:2], ["exit", "0"])
        self.assertNotEqual(value[0], f.proc.pid)
        self.assertIsNone(f.proc.poll())


class RunnerTest(unittest.TestCase):
    def test_the_servers_copy_of_the_runner_is_this_one(self) -> None:
        # src/proto/function_runner.inc (a job file's `function`, `drover
        # call`) is written from RUNNER by scripts/gen-function-runner;
        # compared unpacked, as zlib's bytes may differ between versions.
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        with open(os.path.join(root, "src", "proto", "function_runner.inc")) as f:
            text = f.read()
        packed = text.split('R"drover(', 1)[1].split(')drover"', 1)[0]
        data = packed.split("b64decode('", 1)[1].split("'", 1)[0]
        self.assertEqual(zlib.decompress(base64.b64decode(data)).decode(), _call.RUNNER,
                         "run scripts/gen-function-runner")
        # Its digest, which the server names to clients (python_runner).
        digest = text.split('kFunctionRunnerSha256[] = "', 1)[1].split('"', 1)[0]
        self.assertEqual(digest, _call.RUNNER_SHA256, "run scripts/gen-function-runner")

    def test_a_function_by_name_gets_its_json_arguments_and_index(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "named_calls.py"), "w") as f:
                f.write("def scale(x, by=1):\n    return {'x': x, 'scaled': x * by}\n"
                        "def broken():\n    raise ValueError('no')\n")
            result = os.path.join(d, "result")
            env = dict(os.environ, DROVER_RESULT=result, DROVER_TASK_INDEX="7",
                       PYTHONPATH=d)

            def call(name: str, args: str, kwargs: str = "{}") -> subprocess.CompletedProcess:
                if os.path.exists(result):
                    os.remove(result)
                return subprocess.run(
                    [sys.executable, "-c", _call.COMMAND_RUNNER], capture_output=True, text=True,
                    cwd=d, env=dict(env, DROVER_FUNCTION=name, DROVER_ARGS=args,
                                    DROVER_KWARGS=kwargs))

            p = call("named_calls:scale", '["{index}"]', '{"by": 2}')
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(result) as f:
                self.assertEqual(f.read(), '{"x": "7", "scaled": "77"}')
            p = call("named_calls:broken", "[]")
            self.assertEqual(p.returncode, 1)
            self.assertIn("ValueError: no", p.stderr)
            p = call("named_calls:nothing", "[]")
            self.assertEqual(p.returncode, 2)
            with open(result) as f:
                self.assertEqual(f.read(), "function named_calls:nothing cannot be imported: "
                                 "AttributeError: module 'named_calls' has no attribute 'nothing'")
            p = call("named_calls:scale", "[1,")
            self.assertEqual(p.returncode, 2)
            self.assertIn("its arguments are not JSON", p.stderr)

    def test_a_python_version_mismatch_is_refused_with_a_clear_message(self) -> None:
        call = pickle.dumps(({"python": "2.7", "cloudpickle": True}, len, ("abc",), {}))
        p = run_runner(call)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("the client runs Python 2.7", p.stderr)
        self.assertIn("need the same minor version (name another interpreter with python=...)",
                      p.stderr)
        kind, data = _call.decode_result(p.stdout)
        self.assertEqual(kind, "error")
        exc, _tb = pickle.loads(data)
        self.assertIn("Python 2.7", str(exc))

    def test_a_call_that_cannot_be_read_says_why(self) -> None:
        p = run_runner(b"not a pickle")
        self.assertEqual(p.returncode, 2)
        self.assertIn("drover: cannot read the call:", p.stderr)

    def test_a_value_that_cannot_be_pickled_is_named(self) -> None:
        call = pickle.dumps(({"python": _call.python_version(), "cloudpickle": False},
                             threading.Lock, (), {}))
        p = run_runner(call)
        self.assertEqual(p.returncode, 2)
        self.assertIn("returned a value that cannot be pickled", p.stderr)

