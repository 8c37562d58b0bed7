"""The client against a real local cluster (``drover up``, two workers, TLS).

Every wait is on an event: a line of the server's output, the API's event
stream, a FIFO the task reads. Timeouts only bound a failing test.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import time
import unittest
from typing import List, Optional

import drover

from cluster import LocalCluster, ModuleCluster, another_user

WAIT = 120.0  # bounds a failing wait; a passing one returns on its event
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

cluster = ModuleCluster(workers=2)
setUpModule = cluster.start
tearDownModule = cluster.stop


class ClusterTest(unittest.TestCase):
    def setUp(self) -> None:
        self.client = drover.Client(access_file=cluster().access_file)
        self.addCleanup(self.client.close)
        self.tmp = os.path.join(cluster().dir, self.id().rsplit(".", 1)[-1])
        os.makedirs(self.tmp, exist_ok=True)


class OneTaskTest(ClusterTest):
    def test_submit_returns_a_task_whose_result_is_its_drover_result(self) -> None:
        t = self.client.submit(
            ["sh", "-c", 'echo working; printf "%s" "answer $((6 * 7))" > "$DROVER_RESULT"'],
            cpus=0.5, mem="64MiB", retries=2, timeout="2m",
        )
        self.assertRegex(t.id, r"^\d+\.0$")
        self.assertEqual(t.result(timeout=WAIT), "answer 42")
        self.assertEqual(t.state, "succeeded")
        info = t.info()
        self.assertIsInstance(info, drover.TaskInfo)
        self.assertEqual(info.group, "sh")
        self.assertIsNotNone(info.outcome)
        assert info.outcome is not None
        self.assertEqual(info.outcome.exit_code, 0)
        self.assertIsNotNone(info.finished_at)
        self.assertEqual(list(t.logs()), ["working"])

    def test_failing_task_raises_task_failed_with_the_exit_code(self) -> None:
        t = self.client.submit(["sh", "-c", "echo oops >&2; exit 3"], name="fails")
        with self.assertRaises(drover.TaskFailed) as caught:
            t.result(timeout=WAIT)
        e = caught.exception
        self.assertNotIsInstance(e, drover.TaskCanceled)
        self.assertEqual(e.task, t.id)
        self.assertEqual(e.state, "failed")
        self.assertEqual(e.exit_code, 3)
        self.assertEqual(e.reason, "exit code 3")
        self.assertIn("exit code 3", str(e))
        self.assertEqual(list(t.logs(stream="stderr")), ["oops"])
        # wait() reports without raising.
        self.assertEqual(t.wait(timeout=WAIT).state, "failed")

    def test_environment_and_a_string_command(self) -> None:
        t = self.client.submit('printf "%s" "$GREETING" > "$DROVER_RESULT"',
                               env={"GREETING": "hi there"})
        self.assertEqual(t.result(timeout=WAIT), "hi there")

    def test_a_wait_that_runs_out_of_time_raises_wait_timeout(self) -> None:
        fifo = os.path.join(self.tmp, "fifo")
        os.mkfifo(fifo)
        t = self.client.submit(["sh", "-c", f'read x < "{fifo}"'])
        with self.assertRaises(drover.WaitTimeout):
            t.wait(timeout=0.2)
        with open(fifo, "w") as f:
            f.write("go\n")
        self.assertEqual(t.wait(timeout=WAIT).state, "succeeded")


class PipelineTest(ClusterTest):
    def test_array_and_fan_in_that_combines_the_results(self) -> None:
        with self.client.job("squares") as job:
            prep = job.task(["sh", "-c", 'printf 10 > "$DROVER_RESULT"'], name="prep", cpus=0.5)
            squares = job.array(
                ["sh", "-c", 'echo $(( {index} * {index} + $(cat "$DROVER_INPUTS"/*) )) '
                             '> "$DROVER_RESULT"'],
                range(5), after=[prep], cpus=0.5,
            )
            total = job.task(
                ["sh", "-c", 'cat "$DROVER_INPUTS"/* | awk \'{ s += $1 } END { printf "%d", s }\' '
                             '> "$DROVER_RESULT"'],
                name="total", after=squares,
            )
        self.assertTrue(job.submitted)
        self.assertEqual(len(job.tasks), 7)
        self.assertEqual(job.spec()["task"][1]["array"], "0-4")
        self.assertEqual(job.spec()["task"][2]["depends_on"], ["sh"])

        progress = io.StringIO()
        info = job.wait(timeout=WAIT, progress=progress)
        self.assertTrue(info.done)
        self.assertTrue(info.succeeded, info)
        self.assertIn("7/7 done", progress.getvalue().splitlines()[-1])

        self.assertEqual(squares.results(), [str(i * i + 10) + "\n" for i in range(5)])
        self.assertEqual(total.result(), str(sum(i * i + 10 for i in range(5))))
        results = job.results()
        self.assertEqual(list(results), [t.id for t in job.tasks])
        self.assertEqual(results[total.tasks[0].id], "80")

    def test_outputs_reach_a_dependent_and_download_checked(self) -> None:
        with self.client.job("files") as job:
            prep = job.task(["sh", "-c", 'mkdir -p "$DROVER_OUTPUT_DIR/d" && '
                                         'printf data > "$DROVER_OUTPUT_DIR/d/x.txt" && '
                                         'printf more > "$DROVER_OUTPUT_DIR/y.txt"'],
                            name="prep", cpus=0.5)
            use = job.task(["sh", "-c", 'cat "$DROVER_INPUTS"/*/d/x.txt > "$DROVER_RESULT"'],
                           name="use", after=[prep], cpus=0.5)
        self.assertEqual(use.result(timeout=WAIT), "data")
        t = drover.Task(self.client, prep.tasks[0].id)
        names = [(f.name, f.size) for f in t.outputs]
        self.assertEqual(names, [("d/x.txt", 4), ("y.txt", 4)])
        self.assertIsInstance(t.outputs[0], drover.OutputFile)
        got = t.download(os.path.join(self.tmp, "one"), names=["y.txt"])
        self.assertEqual(got, [os.path.join(self.tmp, "one", "y.txt")])
        with open(got[0]) as f:
            self.assertEqual(f.read(), "more")
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "one", "d")))
        with self.assertRaises(drover.NotFound):
            t.download(self.tmp, names=["nope"])
        everything = job.download(os.path.join(self.tmp, "all"), timeout=WAIT)
        self.assertEqual(list(everything), [t.id])
        with open(os.path.join(self.tmp, "all", t.id, "d", "x.txt")) as f:
            self.assertEqual(f.read(), "data")

    def test_input_files_are_uploaded_once_and_placed_in_the_tasks_directory(self) -> None:
        path = os.path.join(self.tmp, "params.txt")
        with open(path, "w") as f:
            f.write("lr=0.1")
        first = self.client.submit(["sh", "-c", 'cat params.txt > "$DROVER_RESULT"'],
                                   cpus=0.5, input_files=[path])
        self.assertEqual(first.result(timeout=WAIT), "lr=0.1")
        with self.client.job("again") as job:
            t = job.task(["sh", "-c", 'test -z "$(find params.txt -perm /222)" && '
                                      'cat params.txt > "$DROVER_RESULT"'],
                         cpus=0.5, input_files=[path])
        self.assertEqual(t.result(timeout=WAIT), "lr=0.1")
        with self.assertRaises(drover.InvalidRequest):
            self.client.submit(["true"], input_files=[os.path.join(self.tmp, "absent")])
        with self.assertRaises(TypeError):
            self.client.submit(["true"], input_files=path)

    def test_a_cached_task_is_reused_without_running(self) -> None:
        ledger = os.path.join(self.tmp, "cache-ledger")
        command = ["sh", "-c", f'echo ran >> {ledger}; echo 42 > "$DROVER_RESULT"']
        first = self.client.submit(command, cpus=0.5, cache=True)
        self.assertEqual(first.result(timeout=WAIT), "42\n")
        again = self.client.submit(command, cpus=0.5, cache=True)
        self.assertEqual(again.result(timeout=WAIT), "42\n")
        info = again.info()
        self.assertEqual(info.outcome.cached_from, first.id)
        self.assertEqual(info.attempt, 0)
        with open(ledger) as f:
            self.assertEqual(f.read(), "ran\n")

    def test_a_dependent_fetches_only_the_outputs_its_inputs_select(self) -> None:
        with self.client.job("select") as job:
            prep = job.task(["sh", "-c", 'printf a > "$DROVER_OUTPUT_DIR/a.txt" && '
                                         'printf b > "$DROVER_OUTPUT_DIR/b.txt"'],
                            name="prep", cpus=0.5)
            use = job.task(["sh", "-c", 'cd "$DROVER_INPUTS" && find . -type f | sort | '
                                        'tr "\\n" " " > "$DROVER_RESULT"'],
                           name="use", after=[prep], cpus=0.5, inputs=["prep:a.txt"])
            missing = job.task(["true"], name="missing", after=[prep], cpus=0.5,
                               inputs=["prep:c.txt"], retries=3)
        prep_id = prep.tasks[0].id
        self.assertEqual(use.result(timeout=WAIT), f"./{prep_id}/a.txt ")
        with self.assertRaises(drover.TaskFailed) as caught:
            missing.result(timeout=WAIT)
        self.assertEqual(
            caught.exception.reason,
            f'input "prep:c.txt": prep ({prep_id}) wrote no such output (it wrote: a.txt, b.txt)')
        self.assertEqual(missing.tasks[0].info().attempt, 0)

    def test_outputs_over_the_tasks_max_output_fail_it_naming_the_limit(self) -> None:
        t = self.client.submit(["sh", "-c", 'head -c 3000 /dev/zero > "$DROVER_OUTPUT_DIR/z"'],
                               cpus=0.5, max_output="2KiB")
        with self.assertRaises(drover.TaskFailed) as caught:
            t.result(timeout=WAIT)
        self.assertIn("more than max_output 2 KiB (the task's)", caught.exception.reason)

    def test_a_failed_dependency_fails_the_fan_in_and_results_raise(self) -> None:
        with self.client.job("broken") as job:
            parts = job.array(["sh", "-c", "exit {index}"], range(2), name="part")
            job.task(["true"], name="after", after=parts)
        job.wait(timeout=WAIT)
        with self.assertRaises(drover.TaskFailed) as caught:
            job.results()
        self.assertEqual(caught.exception.task, parts.tasks[1].id)
        self.assertEqual(caught.exception.exit_code, 1)
        self.assertIn("1 more", str(caught.exception))

    def test_after_another_job(self) -> None:
        first = self.client.submit(["sh", "-c", 'printf one > "$DROVER_RESULT"'])
        second = self.client.submit(["sh", "-c", 'printf two > "$DROVER_RESULT"'], after=first)
        self.assertEqual(second.result(timeout=WAIT), "two")
        self.assertEqual(first.state, "succeeded")

    def test_nothing_is_submitted_when_the_block_raises(self) -> None:
        before = len(self.client.jobs())
        with self.assertRaises(RuntimeError):
            with self.client.job("never") as job:
                job.task(["true"])
                raise RuntimeError("changed my mind")
        self.assertFalse(job.submitted)
        self.assertEqual(len(self.client.jobs()), before)

    def test_example_pipeline_estimates_pi(self) -> None:
        env = dict(os.environ, DROVER_ACCESS=cluster().access_file,
                   PYTHONPATH=os.path.join(REPO, "python"))
        run = subprocess.run(
            [sys.executable, os.path.join(REPO, "examples", "pipeline.py")],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300,
        )
        out = run.stdout.decode()
        self.assertEqual(run.returncode, 0, out)
        self.assertRegex(out, r"pi ~ 3\.1\d+ from 8000000 samples in 8 tasks")


class LogsAndCancelTest(ClusterTest):
    def test_logs_follow_while_the_task_prints(self) -> None:
        fifo = os.path.join(self.tmp, "fifo")
        os.mkfifo(fifo)
        # The task prints, then blocks until the test has seen that line.
        t = self.client.submit(
            ["sh", "-c", f'echo first; read x < "{fifo}"; echo "second $x"; printf tail'])
        lines = t.logs(follow=True, timeout=WAIT)
        self.assertEqual(next(lines), "first")
        self.assertEqual(t.state, "running")  # the line came while it ran
        with open(fifo, "w") as f:
            f.write("go\n")
        self.assertEqual(list(lines), ["second go", "tail"])
        self.assertEqual(t.wait(timeout=WAIT).state, "succeeded")

    def test_logs_follow_of_a_finished_task_gives_it_all(self) -> None:
        t = self.client.submit(["sh", "-c", "echo a; echo b"])
        t.wait(timeout=WAIT)
        self.assertEqual(list(t.logs(follow=True, timeout=WAIT)), ["a", "b"])

    def test_cancel_a_running_task(self) -> None:
        fifo = os.path.join(self.tmp, "fifo")
        os.mkfifo(fifo)
        t = self.client.submit(["sh", "-c", f'echo started; read x < "{fifo}"'])
        lines = t.logs(follow=True, timeout=WAIT)
        self.assertEqual(next(lines), "started")
        t.cancel()
        with self.assertRaises(drover.TaskCanceled) as caught:
            t.result(timeout=WAIT)
        self.assertEqual(caught.exception.state, "canceled")
        self.assertEqual(t.state, "canceled")
        self.assertEqual(list(lines), [])  # the follow ends with the attempt

    def test_cancel_a_job_that_waits(self) -> None:
        fifo = os.path.join(self.tmp, "fifo")
        os.mkfifo(fifo)
        blocker = self.client.submit(["sh", "-c", f'read x < "{fifo}"'])
        with self.client.job("later", after=blocker) as job:
            job.array(["true"], range(3))
        self.assertEqual(job.info().counts.get("waiting"), 3)
        job.cancel()
        info = job.wait(timeout=WAIT)
        self.assertEqual(info.counts.get("canceled"), 3)
        with self.assertRaises(drover.TaskCanceled):
            job.results()
        self.client.cancel(blocker.id)
        self.assertEqual(blocker.wait(timeout=WAIT).state, "canceled")


class RetryTest(ClusterTest):
    def test_a_failed_job_runs_again_when_retried(self) -> None:
        fixed = os.path.join(self.tmp, "fixed")
        with self.client.job("flaky") as job:
            check = job.task(["test", "-e", fixed], name="check")
            job.task(["true"], name="after", after=check)
        info = job.wait(timeout=WAIT)
        self.assertEqual(info.counts.get("failed"), 1)
        self.assertEqual(info.counts.get("canceled"), 1)
        open(fixed, "w").close()
        self.assertEqual(job.retry(), 2)
        info = job.wait(timeout=WAIT)
        self.assertEqual(info.counts.get("succeeded"), 2)
        with self.assertRaises(drover.FailedPrecondition) as caught:
            self.client.retry(job.id)
        self.assertIn("has no failed or canceled tasks", str(caught.exception))


class UnrunnableTest(ClusterTest):
    def test_a_job_no_worker_could_run_is_queued_with_a_warning(self) -> None:
        t = self.client.submit(["true"], name="huge", cpus=100000)
        with self.assertWarns(drover.DroverWarning) as caught:
            t.id  # the first use of the task reads the server's answer
        self.assertIn("no worker is large enough for cpus=100000", str(caught.warning))
        self.assertEqual(t.state, "queued")
        self.client.cancel(t.id)
        self.assertEqual(t.wait(timeout=WAIT).state, "canceled")


class ClusterViewsTest(ClusterTest):
    def test_workers_and_jobs_are_typed(self) -> None:
        t = self.client.submit(["true"], name="probe")
        info = t.wait(timeout=WAIT)
        workers = self.client.workers()
        self.assertTrue(all(isinstance(w, drover.WorkerInfo) for w in workers))
        ran_on = [w for w in workers if w.id == info.worker]
        self.assertEqual(len(ran_on), 1)
        self.assertGreater(ran_on[0].mem_bytes, 0)
        self.assertTrue(ran_on[0].cpu_cores)
        self.assertFalse(ran_on[0].lost)

        done = self.client.jobs(state="done")
        self.assertIn(t.job, [j.id for j in done])
        self.assertTrue(all(isinstance(j, drover.JobInfo) and j.done for j in done))
        self.assertNotIn(t.job, [j.id for j in self.client.jobs(state="active")])
        self.assertEqual(self.client.get_job(t.job).name, "probe")

    def test_event_stream_starts_with_a_snapshot(self) -> None:
        t = self.client.submit(["true"])
        t.wait(timeout=WAIT)
        with self.client.events(job=t.job) as events:
            e = events.next()
        self.assertEqual((e.task, e.from_state, e.to_state), (t.id, "succeeded", "succeeded"))


class SubmitInBackgroundTest(ClusterTest):
    def test_single_submits_keep_their_order_and_their_results(self) -> None:
        tasks = [self.client.submit(["sh", "-c", f'printf {i} > "$DROVER_RESULT"'],
                                    name=f"order-{i}") for i in range(60)]
        jobs = [t.job for t in tasks]
        self.assertEqual(jobs, sorted(jobs), "job ids follow the submit calls")
        self.assertEqual(len(set(jobs)), 60)
        self.assertEqual([t.result(timeout=WAIT) for t in tasks], [str(i) for i in range(60)])

    def test_flush_issues_the_warnings_no_task_showed(self) -> None:
        self.client.submit(["true"], name="huge-unseen", cpus=100000)
        with self.assertWarns(drover.DroverWarning) as caught:
            self.client.flush()
        self.assertIn("no worker is large enough for cpus=100000", str(caught.warning))
        for job in self.client.jobs(state="active"):
            if job.name == "huge-unseen":
                self.client.cancel(job.id)

    def test_a_read_sees_the_clients_own_submissions(self) -> None:
        name = f"seen-{os.getpid()}"
        self.client.submit(["true"], name=name)
        self.assertIn(name, [j.name for j in self.client.jobs()])

    def test_a_script_that_ends_without_close_still_submits(self) -> None:
        name = f"atexit-{os.getpid()}"
        script = ("import drover, sys\n"
                  "c = drover.Client(access_file=sys.argv[1])\n"
                  f"for i in range(25): c.submit(['true'], name='{name}')\n"
                  "c.submit(['true'], cpus=-1)\n"
                  f"c.submit(['true'], name='{name}-huge', cpus=100000)\n")
        out = subprocess.run([sys.executable, "-c", script, cluster().access_file],
                             capture_output=True, text=True, timeout=WAIT,
                             env=dict(os.environ, PYTHONPATH=os.path.join(REPO, "python")))
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("drover: a submission failed: task[0].resources.cpus", out.stderr)
        self.assertIn("no worker is large enough for cpus=100000", out.stderr)
        for job in self.client.jobs(state="active"):
            if job.name == f"{name}-huge":
                self.client.cancel(job.id)
        self.assertEqual([j.name for j in self.client.jobs()].count(name), 25)

    def test_threads_wait_over_one_stream(self) -> None:
        fifos = [os.path.join(self.tmp, f"fifo{i}") for i in range(4)]
        for f in fifos:
            os.mkfifo(f)
        tasks = [self.client.submit(["sh", "-c", f'read x < "{f}"; printf {i} > "$DROVER_RESULT"'])
                 for i, f in enumerate(fifos)]
        results: List[Optional[str]] = [None] * 4
        errors: List[BaseException] = []

        def wait(i: int) -> None:
            try:
                results[i] = tasks[i].result(timeout=WAIT)
            except BaseException as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=wait, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        # Released out of order (two at a time run on the two slots): each
        # waiter's end comes while others still wait, and the thread that
        # reads the stream changes.
        for f in (fifos[1], fifos[0], fifos[3], fifos[2]):
            with open(f, "w") as w:
                w.write("go\n")
        for t in threads:
            t.join(timeout=WAIT)
        self.assertEqual(errors, [])
        self.assertEqual(results, ["0", "1", "2", "3"])

    def test_a_wait_for_a_task_that_does_not_exist_raises_not_found(self) -> None:
        with self.assertRaises(drover.NotFound):
            drover.Task(self.client, "999999.0").wait(timeout=WAIT)


class ServerRestartTest(unittest.TestCase):
    def test_a_wait_goes_on_across_a_server_restart(self) -> None:
        own = LocalCluster(workers=1)
        self.addCleanup(own.stop)
        client = drover.Client(access_file=own.access_file)
        self.addCleanup(client.close)
        fifo = os.path.join(own.dir, "fifo")
        os.mkfifo(fifo)
        t = client.submit(["sh", "-c", f'read x < "{fifo}"'], retries=3)
        done = client.submit(["true"])
        self.assertEqual(done.wait(timeout=WAIT).state, "succeeded")  # the stream is open
        waited: List[drover.TaskInfo] = []
        errors: List[BaseException] = []

        def wait() -> None:
            try:
                waited.append(t.wait(timeout=WAIT))
            except BaseException as e:  # reported below
                errors.append(e)

        waiter = threading.Thread(target=wait)
        waiter.start()
        # The restart comes once the stream has carried the task's watch: a
        # watch sent after it on the same stream, of a task that has ended,
        # is answered (woken by the stream's reader, not by time).
        watcher = client._watcher
        tag = object()
        watcher.watch(t.id, tag)
        watcher.watch(done.id, tag)
        ended = watcher.wait_any(tag, time.monotonic() + WAIT)
        self.assertEqual([e[0] for e in ended], [done.id])
        with watcher._cv:
            stream_before = watcher._ws
        own.restart()
        # The task runs again after the restart (or was adopted); let it end.
        with open(fifo, "w") as f:
            f.write("go\n")
        waiter.join(timeout=WAIT)
        self.assertFalse(waiter.is_alive())
        self.assertEqual(errors, [])
        self.assertEqual(len(waited), 1)
        self.assertIn(waited[0].state, drover.TERMINAL)
        self.assertEqual(waited[0].state, t.info().state)
        self.assertIsNotNone(stream_before)
        self.assertIsNot(watcher._ws, stream_before, "the wait went on over a new stream")


class ErrorsTest(ClusterTest):
    def test_wrong_token_raises_an_authentication_error(self) -> None:
        ep = self.client.endpoint
        bad = drover.Client(ep.address, token="0" * 64, fingerprint=ep.fingerprint)
        self.addCleanup(bad.close)
        with self.assertRaises(drover.AuthenticationError) as caught:
            bad.jobs()
        self.assertEqual(caught.exception.code, "unauthenticated")
        self.assertEqual(caught.exception.http_status, 401)
        with self.assertRaises(drover.AuthenticationError):  # the WebSocket path too
            drover.Task(bad, "1.0").wait(timeout=WAIT)

    def test_wrong_fingerprint_is_refused_before_the_token_is_sent(self) -> None:
        ep = self.client.endpoint
        bad = drover.Client(ep.address, token=ep.token, fingerprint="ab" * 32)
        self.addCleanup(bad.close)
        with self.assertRaises(drover.FingerprintMismatch) as caught:
            bad.workers()
        self.assertEqual(caught.exception.actual, ep.fingerprint)

    def test_bad_spec_raises_invalid_request_naming_the_field(self) -> None:
        t = self.client.submit(["true"], mem="4G")
        with self.assertRaises(drover.InvalidRequest) as caught:
            t.result(timeout=WAIT)
        self.assertEqual(caught.exception.field, "task[0].resources.mem")
        self.assertIn("ambiguous", caught.exception.message)
        with self.assertRaises(drover.InvalidRequest):
            t.id  # every use says so

        # A refusal nothing looked at is raised by flush(), once.
        self.client.submit(["true"], cpus=-1)
        ok = self.client.submit(["true"])
        with self.assertRaises(drover.InvalidRequest) as caught:
            self.client.flush()
        self.assertEqual(caught.exception.field, "task[0].resources.cpus")
        self.client.flush()
        self.assertEqual(ok.wait(timeout=WAIT).state, "succeeded")

        with self.assertRaises(drover.InvalidRequest) as caught:
            with self.client.job("typo") as job:
                job.task(["true"], name="a")
                job.task(["true"], name="b", cpus=-1)
        self.assertEqual(caught.exception.field, "task[1].resources.cpus")

    def test_unknown_task_raises_not_found(self) -> None:
        with self.assertRaises(drover.NotFound):
            self.client.task("999999.0")

    def test_logs_of_a_task_that_has_not_run(self) -> None:
        fifo = os.path.join(self.tmp, "fifo")
        os.mkfifo(fifo)
        blocker = self.client.submit(["sh", "-c", f'read x < "{fifo}"'])
        waiting = self.client.submit(["echo", "late"], after=blocker)
        with self.assertRaises(drover.FailedPrecondition):
            list(waiting.logs())
        # A follow begun before the task runs waits for it to start.
        followed: List[str] = []
        follower = threading.Thread(
            target=lambda: followed.extend(waiting.logs(follow=True, timeout=WAIT)))
        follower.start()
        with open(fifo, "w") as f:
            f.write("go\n")
        follower.join()
        self.assertEqual(followed, ["late"])


class ContentsTest(ClusterTest):
    def test_another_users_result_outputs_and_logs_are_private(self) -> None:
        # A second user, as `drover user add` makes one.
        other = another_user(self.client, cluster().port, f"pyuser{os.getpid()}")
        self.addCleanup(other.close)
        task = self.client.submit(
            ["sh", "-c", 'echo py-secret-log; echo py-secret > "$DROVER_RESULT"; '
             'echo x > "$DROVER_OUTPUT_DIR/py-secret.txt"'])
        self.assertEqual(task.result(timeout=WAIT), "py-secret\n")
        theirs = other.task(task.id)
        info = theirs.wait(timeout=WAIT)
        self.assertEqual(info.state, "succeeded")  # the queue is everyone's
        self.assertTrue(info.contents_hidden)
        self.assertEqual(info.result, "")
        self.assertEqual(info.outcome.outputs if info.outcome else [], [])
        with self.assertRaises(drover.PermissionDenied) as caught:
            theirs.result(timeout=WAIT)
        self.assertIn("private", str(caught.exception))
        with self.assertRaises(drover.PermissionDenied):
            list(theirs.logs())
        self.assertEqual(theirs.outputs, [])
        with self.assertRaises(drover.PermissionDenied):
            theirs.download(self.tmp)
        self.assertFalse(task.info().contents_hidden)


class AccessTest(ClusterTest):
    def test_client_reads_drover_access_like_the_cli(self) -> None:
        old = os.environ.get("DROVER_ACCESS")
        os.environ["DROVER_ACCESS"] = cluster().access_file
        try:
            c = drover.Client()
        finally:
            if old is None:
                del os.environ["DROVER_ACCESS"]
            else:
                os.environ["DROVER_ACCESS"] = old
        self.addCleanup(c.close)
        self.assertEqual(c.endpoint.port, cluster().port)
        self.assertIsInstance(c.status()["uptime_s"], int)

    def test_explicit_address_token_and_colon_fingerprint(self) -> None:
        ep = self.client.endpoint
        colons = ":".join(ep.fingerprint[i:i + 2] for i in range(0, 64, 2)).upper()
        c = drover.Client(f"127.0.0.1:{cluster().port}", token=ep.token, fingerprint=colons)
        self.addCleanup(c.close)
        self.assertIsInstance(c.workers(), list)


class PlainTcpTest(unittest.TestCase):
    """A --no-tls cluster: plain HTTP and WebSocket."""

    def test_submit_and_wait_without_tls(self) -> None:
        plain = LocalCluster(workers=1, tls=False)
        self.addCleanup(plain.stop)
        c = drover.Client(access_file=plain.access_file)
        self.addCleanup(c.close)
        self.assertFalse(c.endpoint.tls)
        t = c.submit(["sh", "-c", 'printf plain > "$DROVER_RESULT"'])
        self.assertEqual(t.result(timeout=WAIT), "plain")
        with self.assertRaises(drover.AccessError):
            drover.Client(f"127.0.0.1:{plain.port}", token=c.endpoint.token)  # no fingerprint
        c2 = drover.Client(f"127.0.0.1:{plain.port}", token=c.endpoint.token, tls=False)
        self.addCleanup(c2.close)
        self.assertEqual(c2.task(t.id).info().result, "plain")


if __name__ == "__main__":
    unittest.main()
