"""Parts of the client that need no server: lookup of the access file,
spec building, error mapping, the progress line."""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import tempfile
import unittest
from typing import Any, Dict, List

import drover
from drover import _background, _connection, _events, client, errors
from drover.models import TaskEvent

FP = "ab" * 32


class AccessFileTest(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.saved = {k: os.environ.get(k) for k in ("DROVER_ACCESS", "XDG_STATE_HOME", "HOME")}
        self.addCleanup(self.restore)

    def restore(self) -> None:
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    def write(self, name: str, data: Dict[str, Any]) -> str:
        path = os.path.join(self.dir.name, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(data, f)
        return path

    def access(self, **over: Any) -> Dict[str, Any]:
        data: Dict[str, Any] = {"address": "127.0.0.1:7210", "token": "t" * 64,
                                "fingerprint": FP, "tls": True}
        data.update(over)
        return data

    def test_lookup_order_explicit_then_env_then_xdg(self) -> None:
        explicit = self.write("explicit.json", self.access(address="10.0.0.1:1"))
        env = self.write("env.json", self.access(address="10.0.0.2:2"))
        self.write("xdg/drover/access.json", self.access(address="10.0.0.3:3"))
        os.environ["XDG_STATE_HOME"] = os.path.join(self.dir.name, "xdg")
        os.environ["DROVER_ACCESS"] = env
        self.assertEqual(drover.Client(access_file=explicit).endpoint.port, 1)
        self.assertEqual(drover.Client().endpoint.port, 2)
        del os.environ["DROVER_ACCESS"]
        self.assertEqual(drover.Client().endpoint.port, 3)
        del os.environ["XDG_STATE_HOME"]
        os.environ["HOME"] = self.dir.name
        with self.assertRaises(drover.AccessError) as caught:
            drover.Client()
        self.assertIn(os.path.join(self.dir.name, ".local/state/drover/access.json"),
                      str(caught.exception))
        self.assertIn("drover up", str(caught.exception))

    def test_token_and_fingerprint_override_the_file(self) -> None:
        path = self.write("a.json", self.access())
        c = drover.Client(access_file=path, token="other", fingerprint="CD:" * 31 + "CD")
        self.assertEqual(c.endpoint.token, "other")
        self.assertEqual(c.endpoint.fingerprint, "cd" * 32)

    def test_malformed_files_name_the_file_and_field(self) -> None:
        cases = [
            (self.access(tls="yes"), 'field "tls" must be a bool'),
            ({"address": "x:1", "token": "t", "tls": True}, 'missing field "fingerprint"'),
            (self.access(token=""), 'field "token" is empty'),
            (self.access(address="nohost"), 'field "address"'),
            (self.access(fingerprint="abc"), 'field "fingerprint"'),
        ]
        for data, want in cases:
            path = self.write("bad.json", data)
            with self.assertRaises(drover.AccessError) as caught:
                drover.Client(access_file=path)
            self.assertIn(path, str(caught.exception))
            self.assertIn(want, str(caught.exception))

    def test_a_refused_connection_names_the_access_file_it_came_from(self) -> None:
        # A port nothing listens on: a server that stopped and left its file.
        import socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        path = self.write("stale.json", self.access(address=f"127.0.0.1:{port}", tls=False))
        with self.assertRaises(drover.ConnectionFailed) as caught:
            drover.Client(access_file=path).workers()
        self.assertIn(f"the address is from {path}: is its server still running?",
                      str(caught.exception))
        with self.assertRaises(drover.ConnectionFailed) as caught:
            drover.Client(f"127.0.0.1:{port}", token="t", tls=False).workers()
        self.assertNotIn("the address is from", str(caught.exception))

    def test_explicit_address_needs_token_and_fingerprint(self) -> None:
        with self.assertRaisesRegex(drover.AccessError, "needs token="):
            drover.Client("h:1")
        with self.assertRaisesRegex(drover.AccessError, "needs fingerprint="):
            drover.Client("h:1", token="t")
        self.assertFalse(drover.Client("h:1", token="t", tls=False).endpoint.tls)
        self.assertEqual(drover.Client("[::1]:7210", token="t", fingerprint=FP).endpoint.host,
                         "::1")
        with self.assertRaisesRegex(drover.AccessError, "invalid port"):
            drover.Client("h:99999", token="t", fingerprint=FP)


    def test_host_and_port_take_the_token_from_the_access_file_of_that_server(self) -> None:
        path = self.write("a.json", self.access())
        os.environ["DROVER_ACCESS"] = path
        c = drover.Client("localhost", 7210)
        self.assertEqual((c.endpoint.host, c.endpoint.port), ("127.0.0.1", 7210))
        self.assertEqual(c.endpoint.token, "t" * 64)
        self.assertEqual(c.endpoint.fingerprint, FP.replace(":", "").lower())
        self.assertEqual(drover.Client("localhost:7210").endpoint.token, "t" * 64)
        # Another server: the file's token is not sent there.
        with self.assertRaisesRegex(drover.AccessError, "needs token=.*127.0.0.1:7210"):
            drover.Client("localhost", 7311)
        with self.assertRaisesRegex(drover.AccessError, "needs token="):
            drover.Client("other-host", 7210)
        self.assertEqual(drover.Client("h", 1, token="t", tls=False).endpoint.address, "h:1")
        with self.assertRaisesRegex(TypeError, "port must be"):
            drover.Client("h", 0, token="t", tls=False)


class SpecTest(unittest.TestCase):
    def test_array_ranges(self) -> None:
        self.assertEqual(client._array_range(range(8)), "0-7")
        self.assertEqual(client._array_range(range(0, 100, 2)), "0-98:2")
        self.assertEqual(client._array_range([5]), "5")
        self.assertEqual(client._array_range("0-3"), "0-3")
        with self.assertRaisesRegex(ValueError, "evenly spaced"):
            client._array_range([1, 2, 4])
        with self.assertRaisesRegex(ValueError, "no indices"):
            client._array_range(range(0))

    def test_durations(self) -> None:
        self.assertEqual(client._duration("2h", "timeout"), "2h")
        self.assertEqual(client._duration(90, "timeout"), "90s")
        self.assertEqual(client._duration(1.5, "timeout"), "1500ms")
        self.assertEqual(client._duration(datetime.timedelta(minutes=2), "timeout"), "120s")
        with self.assertRaises(ValueError):
            client._duration(-1, "timeout")

    def test_default_names(self) -> None:
        self.assertEqual(client._default_name(["python", "train.py", "--seed", "1"]), "train")
        self.assertEqual(client._default_name(["/usr/bin/echo", "hi"]), "echo")
        self.assertEqual(client._default_name("echo hi"), "sh")

    def test_job_spec_with_groups_and_outside_dependencies(self) -> None:
        c = drover.Client("h:1", token="t", tls=False)
        job = c.job("sweep", user="ana")
        prep = job.task(["python", "prep.py"], cpus=2, mem="4GiB")
        trains = job.array(["python", "train.py", "{index}"], range(4), gpus=0.5,
                           gpu_type="A100", after=[prep], retries=2, timeout="2h")
        job.task(["python", "train.py"], after=[trains, drover.Task(c, "3.1"), 2])
        spec = job.spec()
        self.assertEqual(spec["user"], "ana")
        self.assertEqual(spec["after"], ["3.1", "2"])
        names = [t["id"] for t in spec["task"]]
        self.assertEqual(names, ["prep", "train", "train-2"])
        self.assertEqual(spec["task"][0]["resources"], {"cpus": 2, "mem": "4GiB"})
        self.assertEqual(spec["task"][1]["resources"], {"gpus": 0.5, "gpu_type": ["A100"]})
        self.assertEqual(spec["task"][1]["array"], "0-3")
        self.assertEqual(spec["task"][1]["depends_on"], ["prep"])
        self.assertEqual(spec["task"][2]["depends_on"], ["train"])
        with self.assertRaisesRegex(ValueError, "already has a task named"):
            job.task(["true"], name="prep")
        other = c.job("other")
        stranger = other.task(["true"])
        with self.assertRaisesRegex(ValueError, "not submitted"):
            job.task(["true"], after=stranger)
        with self.assertRaisesRegex(drover.DroverError, "not submitted"):
            _ = job.id

    def test_inputs_and_max_output(self) -> None:
        c = drover.Client("h:1", token="t", tls=False)
        job = c.job("files")
        prep = job.task(["true"], name="prep")
        job.task(["true"], name="use", after=[prep], inputs=["prep:a.txt", "prep:*.csv"],
                 max_output="2GiB")
        job.task(["true"], name="none", after=[prep], inputs=[])
        spec = job.spec()
        self.assertNotIn("inputs", spec["task"][0])
        self.assertNotIn("max_output", spec["task"][0])
        self.assertEqual(spec["task"][1]["inputs"], ["prep:a.txt", "prep:*.csv"])
        self.assertEqual(spec["task"][1]["max_output"], "2GiB")
        self.assertEqual(spec["task"][2]["inputs"], [])
        with self.assertRaisesRegex(TypeError, "inputs: expected a list"):
            job.task(["true"], after=[prep], inputs="prep:a.txt")

    def test_cache_and_code_files_hashed_here(self) -> None:
        c = drover.Client("h:1", token="t", tls=False)
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "train.py"), "w") as f:
                f.write("print(1)\n")
            job = c.job("cached")
            job.task(["true"], name="plain")
            job.task(["true"], name="kept", cache=True, code=[os.path.join(d, "*.py")])
            spec = job.spec()
            self.assertNotIn("cache", spec["task"][0])
            self.assertTrue(spec["task"][1]["cache"])
            self.assertEqual(spec["task"][1]["code"], [
                {"path": os.path.join(d, "train.py"),
                 "sha256": hashlib.sha256(b"print(1)\n").hexdigest()}])
            with self.assertRaisesRegex(ValueError, 'code pattern ".*/src/\\*.py" matches no file'):
                job.task(["true"], name="bad", cache=True, code=[os.path.join(d, "src/*.py")])
            with self.assertRaisesRegex(ValueError, "code: only with cache=True"):
                job.task(["true"], name="bad", code=[os.path.join(d, "train.py")])

    def test_replicas(self) -> None:
        c = drover.Client("h:1", token="t", tls=False)
        job = c.job("copies")
        job.task(["true"], name="plain")
        job.task(["true"], name="kept", replicas=2)
        job.array(["true"], range(2), name="many", replicas=3)
        spec = job.spec()
        self.assertNotIn("replicas", spec["task"][0])
        self.assertEqual(spec["task"][1]["replicas"], 2)
        self.assertEqual(spec["task"][2]["replicas"], 3)

    def test_an_outcome_says_what_it_read_and_wrote_where_counted(self) -> None:
        from drover.models import Outcome
        base = {"exit_code": 0, "signal": 0, "oom_killed": False, "wall_ms": 1, "cpu_ms": 0,
                "peak_mem_bytes": 0, "result": ""}
        self.assertIsNone(Outcome.from_json(base).io_write_bytes)
        counted = Outcome.from_json({**base, "io_read_bytes": 0, "io_write_bytes": 200 << 20})
        self.assertEqual(counted.io_read_bytes, 0)
        self.assertEqual(counted.io_write_bytes, 200 << 20)

    def test_network_and_disk_io_limits(self) -> None:
        c = drover.Client("h:1", token="t", tls=False)
        job = c.job("fenced")
        job.task(["true"], name="plain")
        job.task(["true"], name="offline", network="none", io_write_bps="10MiB", io_weight=200,
                 disk="20GiB")
        job.array(["true"], range(2), name="reader", io_read_bps=50 << 20)
        spec = job.spec()
        for key in ("network", "disk", "io_read_bps", "io_write_bps", "io_weight"):
            self.assertNotIn(key, spec["task"][0])
        self.assertEqual(spec["task"][1]["network"], "none")
        self.assertEqual(spec["task"][1]["io_write_bps"], "10MiB")
        self.assertEqual(spec["task"][1]["io_weight"], 200)
        self.assertEqual(spec["task"][1]["disk"], "20GiB")
        self.assertEqual(spec["task"][2]["io_read_bps"], 50 << 20)

    def test_container_image(self) -> None:
        c = drover.Client("h:1", token="t", tls=False)
        job = c.job("boxed")
        job.task(["true"], name="plain")
        job.task(["true"], name="boxed", image="docker.io/library/python:3.12")
        job.array(["true"], range(2), name="offline", image="localhost/tools:1",
                  image_pull="never")
        spec = job.spec()
        for key in ("image", "image_pull"):
            self.assertNotIn(key, spec["task"][0])
        self.assertEqual(spec["task"][1]["image"], "docker.io/library/python:3.12")
        self.assertNotIn("image_pull", spec["task"][1])  # the server's default: "missing"
        self.assertEqual(spec["task"][2]["image"], "localhost/tools:1")
        self.assertEqual(spec["task"][2]["image_pull"], "never")
        for pull in ("missing", "always"):
            job.task(["true"], name=pull, image="x", image_pull=pull)
            self.assertEqual(job.spec()["task"][-1]["image_pull"], pull)
        with self.assertRaisesRegex(ValueError, 'image_pull: want "missing", "always" or '
                                                '"never", got \'sometimes\''):
            job.task(["true"], name="bad", image="x", image_pull="sometimes")
        self.assertNotIn("bad", [t["id"] for t in job.spec()["task"]])

    def test_submit_passes_the_image_on(self) -> None:
        c = drover.Client("h:1", token="t", tls=False)
        sent: List[Dict[str, Any]] = []
        c._submitter.submit = lambda body: sent.append(body)  # type: ignore[method-assign]
        c.submit(["true"], name="boxed", image="docker.io/library/python:3.12",
                 image_pull="always")
        self.assertEqual(sent[0]["task"][0]["image"], "docker.io/library/python:3.12")
        self.assertEqual(sent[0]["task"][0]["image_pull"], "always")
        with self.assertRaisesRegex(ValueError, "image_pull"):
            c.submit(["true"], image="x", image_pull="Never")
        self.assertEqual(len(sent), 1)

    def test_functions_take_an_image(self) -> None:
        from drover import functions
        c = drover.Client("h:1", token="t", tls=False)
        ex = functions.Executor(c, image="docker.io/library/python:3.12", image_pull="never")
        self.assertEqual(ex._defaults["image"], "docker.io/library/python:3.12")
        self.assertEqual(ex._defaults["image_pull"], "never")
        ex.shutdown()
        drover.function(image="docker.io/library/python:3.12", image_pull="always")
        with self.assertRaisesRegex(TypeError, "unknown argument"):
            functions.Executor(c, image_puller="never")

    def test_a_task_says_which_image_it_ran_in(self) -> None:
        from drover.models import Outcome, TaskInfo
        base = {"exit_code": 0, "signal": 0, "oom_killed": False, "wall_ms": 1, "cpu_ms": 0,
                "peak_mem_bytes": 0, "result": ""}
        self.assertIsNone(Outcome.from_json(base).image_digest)
        digest = "sha256:" + "ab" * 32
        self.assertEqual(Outcome.from_json({**base, "image_digest": digest}).image_digest, digest)
        plain = TaskInfo.from_json({"id": "12.0", "state": "succeeded", "outcome": base})
        self.assertIsNone(plain.image)
        assert plain.outcome is not None
        self.assertIsNone(plain.outcome.image_digest)
        boxed = TaskInfo.from_json({"id": "12.1", "state": "succeeded",
                                    "image": "docker.io/library/python:3.12",
                                    "outcome": {**base, "image_digest": digest}})
        self.assertEqual(boxed.image, "docker.io/library/python:3.12")
        assert boxed.outcome is not None
        self.assertEqual(boxed.outcome.image_digest, digest)
        queued = TaskInfo.from_json({"id": "12.2", "state": "queued", "outcome": None,
                                     "image": "localhost/tools:1"})
        self.assertEqual(queued.image, "localhost/tools:1")
        self.assertIsNone(queued.outcome)


class ErrorMappingTest(unittest.TestCase):
    def test_error_bodies_become_typed_exceptions(self) -> None:
        body = b'{"error":{"code":"unauthenticated","message":"bad token"}}'
        e = _connection.error_from_body(401, body)
        self.assertIsInstance(e, drover.AuthenticationError)
        self.assertEqual((e.code, e.message, e.field, e.http_status),
                         ("unauthenticated", "bad token", None, 401))
        e = _connection.error_from_body(
            400, b'{"error":{"code":"invalid_argument","message":"m","field":"task[2].id"}}')
        self.assertIsInstance(e, drover.InvalidRequest)
        self.assertEqual(e.field, "task[2].id")
        e = _connection.error_from_body(404, b"no json here")
        self.assertIsInstance(e, drover.NotFound)
        self.assertEqual(e.message, "no json here")

    def test_field_from_the_message_when_the_body_has_none(self) -> None:
        e = errors.api_error("invalid_argument", "task[1].resources.mem: too much")
        self.assertEqual(e.field, "task[1].resources.mem")
        self.assertIsNone(errors.api_error("invalid_argument", "no field here").field)
        self.assertIsNone(errors.api_error("invalid_argument", "two words: no path").field)
        self.assertIsNone(errors.api_error("not_found", "task[1]: x").field)

    def test_status_text_from_the_websocket(self) -> None:
        e = errors.api_error_from_text("failed_precondition: task 3.0 has not run yet (queued)")
        self.assertIsInstance(e, drover.FailedPrecondition)
        self.assertEqual(e.message, "task 3.0 has not run yet (queued)")


class EventsOfTest(unittest.TestCase):
    """One event-stream message: an event, or a batch of them (batch=true)."""

    def test_one_event_or_a_batch_in_order(self) -> None:
        one = _events.events_of(b'{"type":"task_state","task":"1.0","from":"queued",'
                                b'"to":"running","attempt":1,"reason":""}')
        self.assertEqual([(e.task, e.to_state) for e in one], [("1.0", "running")])
        batch = _events.events_of(json.dumps([
            {"type": "task_state", "task": "1.0", "from": "running", "to": "succeeded"},
            {"type": "hello"},
            {"type": "task_state", "task": "1.1", "from": "running", "to": "failed",
             "attempt": 2, "reason": "exit code 3"},
        ]).encode())
        self.assertEqual([(e.task, e.to_state, e.attempt) for e in batch],
                         [("1.0", "succeeded", 0), ("1.1", "failed", 2)])

    def test_what_is_not_a_whole_event_is_skipped(self) -> None:
        # As the CLI's decoder (fuzz/events_fuzz.cc): an empty task would
        # count as one of the job's tasks.
        for bad in [b"not json", b"[1, 2]", b'{"type":"task_state","task":"","to":"failed"}',
                    b'{"type":"task_state","task":3,"to":"failed"}',
                    b'{"type":"task_state","task":"1.0"}',
                    b'{"type":"task_state","task":"1.0","to":"failed","attempt":"x"}']:
            self.assertEqual(_events.events_of(bad), [], bad)


class ProgressTest(unittest.TestCase):
    def test_progress_line(self) -> None:
        def ev(task: str, state: str) -> TaskEvent:
            return TaskEvent(task, state, state, 1, "", None)

        events = [ev("1.0", "succeeded"), ev("1.1", "running"), ev("1.2", "failed")]
        self.assertEqual(drover.progress_line(events, 4, width=8),
                         "[####....] 2/4 done  1 running  1 failed")


class WatchTest(unittest.TestCase):
    """Client._watch (Job.wait, TaskGroup.wait) over a scripted stream."""

    class Stream:
        def __init__(self, events: List[TaskEvent]) -> None:
            self.events = list(events)

        def __enter__(self) -> "WatchTest.Stream":
            return self

        def __exit__(self, *exc: Any) -> None:
            pass

        def next(self, deadline: Any) -> TaskEvent:
            return self.events.pop(0)

    def watch(self, events: List[TaskEvent], tasks: Any, count: int):
        stream = self.Stream(events)
        c = object.__new__(client.Client)
        c.events = lambda job: stream  # type: ignore[method-assign]
        seen: List[Dict[str, int]] = []
        latest = c._watch(5, tasks, count, None, lambda counts: seen.append(dict(counts)))
        return latest, seen, stream.events

    @staticmethod
    def ev(task: str, state: str, attempt: int = 1) -> TaskEvent:
        return TaskEvent(task, state, state, attempt, "", None)

    def test_it_ends_once_every_task_is_terminal_and_counts_each_state(self) -> None:
        ev = self.ev
        latest, seen, left = self.watch(
            [ev("5.0", "queued"), ev("5.1", "queued"), ev("5.0", "succeeded"),
             ev("5.0", "succeeded"),  # a repeated snapshot entry: no change
             ev("5.0", "queued", 2),  # retried: no longer terminal
             ev("5.1", "failed"), ev("5.0", "succeeded", 2), ev("5.9", "running")],
            None, 2)
        self.assertEqual([e.task for e in left], ["5.9"], "it stopped at the last task's end")
        self.assertEqual(latest["5.0"].attempt, 2)
        self.assertEqual(len(seen), 6)
        self.assertEqual(seen[2], {"queued": 1, "succeeded": 1})
        self.assertEqual(seen[3], {"queued": 2, "succeeded": 0})
        self.assertEqual(seen[-1], {"queued": 0, "succeeded": 1, "failed": 1})

    def test_a_group_waits_for_its_own_tasks_only(self) -> None:
        ev = self.ev
        latest, _, left = self.watch(
            [ev("5.0", "succeeded"), ev("5.1", "running"), ev("5.2", "failed"),
             ev("5.1", "succeeded")], {"5.0", "5.2"}, 2)
        self.assertEqual(sorted(latest), ["5.0", "5.2"])
        self.assertEqual(len(left), 1)


if __name__ == "__main__":
    unittest.main()


class WatcherTest(unittest.TestCase):
    """The shared stream's bookkeeping (_background.Watcher), fed what the
    server would send; nothing is read from a network."""

    def setUp(self) -> None:
        self.w = _background.Watcher(None)  # type: ignore[arg-type]
        self.addCleanup(self.w.close)

    def sent(self) -> List[Dict[str, str]]:
        out, self.w._outbox = self.w._outbox, []
        return [json.loads(t) for t in out]

    def feed(self, *items: Dict[str, Any]) -> None:
        self.w._dispatch(json.dumps(list(items)).encode())

    @staticmethod
    def end(task: str) -> Dict[str, Any]:
        return {"type": "task_state", "task": task, "from": "running", "to": "succeeded",
                "attempt": 1, "info": {"id": task}}

    def test_several_tasks_of_a_job_are_watched_as_the_job(self) -> None:
        tag = object()
        self.w.watch_many(["5.0", "5.1", "7.0"], tag)
        self.assertEqual(self.sent(), [{"watch": "5"}, {"watch": "7.0"}])
        # An end heard twice (the job's snapshot, then the end) counts once.
        self.feed(self.end("5.1"), self.end("5.1"), self.end("7.0"))
        got = self.w.wait_any(tag, 0.0)
        self.assertEqual(sorted(t for t, _, _, _ in got), ["5.1", "7.0"])
        self.assertEqual([info for _, _, info, _ in got], [{"id": "5.1"}, {"id": "7.0"}])
        self.assertEqual(self.sent(), [{"unwatch": "7.0"}], "the job stays for 5.0")
        self.feed(self.end("5.0"))
        self.assertEqual([t for t, _, _, _ in self.w.wait_any(tag, 0.0)], ["5.0"])
        self.assertEqual(self.sent(), [{"unwatch": "5"}])

    def test_a_watch_error_for_a_job_ends_the_wait_of_each_of_its_tasks(self) -> None:
        tag = object()
        self.w.watch_many(["5.0", "5.1"], tag)
        self.feed({"type": "watch_error", "watch": "5", "message": "job 5 expired"})
        got = self.w.wait_any(tag, 0.0)
        self.assertEqual(sorted((t, e) for t, _, _, e in got),
                         [("5.0", "job 5 expired"), ("5.1", "job 5 expired")])
