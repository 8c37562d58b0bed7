"""The chaos tests' own checks (chaos_ledger.py), without Drover: the verdict
on made-up ledgers, and the monitor on real task commands run by sh."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest
from typing import Callable, Dict, List

from chaos_ledger import (ApiTask, Attempt, Copy, Fault, FileRecord, Ledger, LedgerMonitor,
                          analyze, task_command, worker_of)

S = 1_000_000_000  # ns per second


def copy(key: str, attempt: int, worker: str, start: float, end: float = None,
         death: float = None, alive: bool = False, pid: int = 100,
         seen_alive: float = None) -> Copy:
    """A copy; one that died (``death``) was last seen alive at
    ``seen_alive``, by default just at its death."""
    c = Copy(key, attempt, pid + attempt, int(start * S), f"/w/{worker}/1/0.{attempt}", worker)
    c.end_ns = None if end is None else int(end * S)
    c.death_ns = None if death is None else int(death * S)
    if death is not None:
        c.alive_ns = int((death if seen_alive is None else seen_alive) * S)
    c.alive_at_end = alive
    return c


def done(key: str = "t0", state: str = "succeeded", attempt: int = 1) -> Dict[str, ApiTask]:
    return {key: ApiTask("1.0", state, attempt, 1, "")}


def worker_start(t: float, name: str = "w0", n: int = 1) -> Fault:
    return Fault(int(t * S), "start", "worker", name, n, 10 + n)


def worker_kill(t: float, name: str = "w0", n: int = 1) -> Fault:
    return Fault(int(t * S), "kill", "worker", name, n, 10 + n)


WORKER_IDS = {1: "w0", 2: "w1", 3: "w2"}


def rerun(attempt: int, holders: List[int]) -> Attempt:
    """A success the server set aside, its outputs lost with ``holders``."""
    return Attempt(attempt, "rerun", holders[0] if holders else 1,
                   "rerun: outputs lost with workers", holders=tuple(holders))


class VerdictTest(unittest.TestCase):
    def test_one_clean_run_passes(self) -> None:
        v = analyze(["t0"], {"t0": [copy("t0", 1, "w0", 1, 2)]}, done(), [worker_start(0)])
        self.assertTrue(v.ok, v)
        self.assertEqual(v.copies, 1)

    def test_two_complete_runs_without_a_kill_are_a_duplicate(self) -> None:
        runs = [copy("t0", 1, "w0", 1, 2), copy("t0", 2, "w1", 5, 6)]
        v = analyze(["t0"], {"t0": runs}, done(attempt=2),
                    [worker_start(0), worker_start(0, "w1")])
        self.assertEqual(v.duplicates, 1)
        self.assertFalse(v.ok)
        self.assertIn("duplicate", v.problems[0].kinds)

    def test_a_worker_killed_while_holding_the_run_excuses_the_rerun(self) -> None:
        # Killed after the first copy ended, before the second started: its
        # outcome may not have reached the server.
        runs = [copy("t0", 1, "w0", 1, 2), copy("t0", 2, "w1", 5, 6)]
        faults = [worker_start(0), worker_start(0, "w1"), worker_kill(2.5), worker_start(3, n=2)]
        v = analyze(["t0"], {"t0": runs}, done(attempt=2), faults)
        self.assertTrue(v.ok, v)

    def test_a_run_spawned_just_before_its_worker_was_killed_is_excused(self) -> None:
        # The shell wrote its start line 13 ms after the kill: the worker
        # had spawned it just before (seed 11, memory, 300 tasks).
        runs = [copy("t0", 1, "w0", 9.786, 10.749), copy("t0", 2, "w0", 30.2, 31.1)]
        faults = [worker_start(9.571), worker_kill(9.773), worker_start(10.147, n=2)]
        v = analyze(["t0"], {"t0": runs}, done(attempt=2), faults)
        self.assertTrue(v.ok, v)
        self.assertEqual(v.orphan_completions, 1)

    def test_a_worker_stopped_while_holding_the_run_excuses_the_rerun(self) -> None:
        # Ended while its worker was stopped: never reported, the lease
        # expired, and the task ran again elsewhere.
        runs = [copy("t0", 1, "w0", 1, 2), copy("t0", 2, "w1", 12, 13)]
        faults = [worker_start(0), worker_start(0, "w1"),
                  Fault(int(1.5 * S), "stop", "worker", "w0", 1, 11)]
        v = analyze(["t0"], {"t0": runs}, done(attempt=2), faults)
        self.assertTrue(v.ok, v)
        # A stop after the rerun started excuses nothing; a stopped worker's
        # copy still running when the rerun started is an overlap.
        late = [worker_start(0), worker_start(0, "w1"),
                Fault(int(12.5 * S), "stop", "worker", "w0", 1, 11)]
        self.assertEqual(analyze(["t0"], {"t0": runs}, done(attempt=2), late).duplicates, 1)
        overlap = [copy("t0", 1, "w0", 1, death=12.5), copy("t0", 2, "w1", 12, 13)]
        v = analyze(["t0"], {"t0": overlap}, done(attempt=2), faults)
        self.assertEqual(v.overlaps, 1)

    def test_a_death_seen_late_is_no_overlap_with_a_start_after_it_was_last_seen_alive(
            self) -> None:
        # Attempt 1 was vacated: last seen alive at 1.0 s, seen gone at
        # 1.02 s; its worker started attempt 2 at 1.01 s, after the exit it
        # saw. Only a start before 1.0 s proves they ran at once.
        runs = [copy("t0", 1, "w0", 0.5, death=1.02, seen_alive=1.0),
                copy("t0", 2, "w0", 1.01, 2)]
        self.assertEqual(analyze(["t0"], {"t0": runs}, done(attempt=2), []).overlaps, 0)
        runs[1] = copy("t0", 2, "w0", 0.9, 2)
        self.assertEqual(analyze(["t0"], {"t0": runs}, done(attempt=2), []).overlaps, 1)

    def test_a_run_spawned_just_before_its_worker_was_stopped_is_excused(self) -> None:
        # The shell wrote its start line 6 ms after the SIGSTOP: the worker
        # had spawned it just before, and stayed stopped 7.45 s with an 8 s
        # lease (seed 1, redis, 150 tasks; CI of c053b5b).
        runs = [copy("t0", 1, "w1", 17.928, 18.986), copy("t0", 2, "w2", 37.475, 38.528)]
        stop = Fault(int(17.922 * S), "stop", "worker", "w1", 3, 11)
        cont = Fault(int(25.376 * S), "cont", "worker", "w1", 3, 11)
        faults = [worker_start(11.819, "w1", n=3), worker_start(17.691, "w2", n=3), stop, cont]
        v = analyze(["t0"], {"t0": runs}, done(attempt=2), faults)
        self.assertTrue(v.ok, v)
        # Continued before the copy's start line: the stop excuses nothing.
        early = [worker_start(11.819, "w1", n=3), worker_start(17.691, "w2", n=3),
                 Fault(int(16.0 * S), "stop", "worker", "w1", 3, 11),
                 Fault(int(17.0 * S), "cont", "worker", "w1", 3, 11)]
        self.assertEqual(analyze(["t0"], {"t0": runs}, done(attempt=2), early).duplicates, 1)

    def test_a_rerun_needs_every_holder_killed_between_the_two_attempts(self) -> None:
        # Attempt 1 succeeded on w0 with a copy of its outputs on w1; both
        # were lost, and the server ran the task again ("rerun"): no
        # duplicate, if both were killed after attempt 1 ended and before
        # attempt 2 started.
        runs = [copy("t0", 1, "w0", 1, 2), copy("t0", 2, "w2", 20, 21)]
        history = {"t0": [rerun(1, [1, 2]), Attempt(2, "succeeded", 3, "")]}
        starts = [worker_start(0), worker_start(0, "w1"), worker_start(0, "w2")]
        both = starts + [worker_kill(3), worker_kill(4, "w1")]
        v = analyze(["t0"], {"t0": runs}, done(attempt=2), both, history, WORKER_IDS)
        self.assertTrue(v.ok, v)
        self.assertEqual((v.reruns, v.unwarranted_reruns, v.duplicates), (1, 0, 0))
        # The copy on w1 lived: its files were not lost.
        v = analyze(["t0"], {"t0": runs}, done(attempt=2), both[:-1], history, WORKER_IDS)
        self.assertEqual(v.unwarranted_reruns, 1)
        self.assertIn("['w1']", " ".join(v.problems[0].notes))
        # A kill before the attempt's copy ended (its files were not whole
        # yet), or after the next attempt started, is no cause.
        early = starts + [worker_kill(1.5), worker_kill(4, "w1")]
        self.assertEqual(analyze(["t0"], {"t0": runs}, done(attempt=2), early, history,
                                 WORKER_IDS).unwarranted_reruns, 1)
        late = starts + [worker_kill(3), worker_kill(20.5, "w1")]
        self.assertEqual(analyze(["t0"], {"t0": runs}, done(attempt=2), late, history,
                                 WORKER_IDS).unwarranted_reruns, 1)
        # A crash loses them as well as a kill.
        crash = starts + [worker_kill(3), Fault(int(4 * S), "crash", "worker", "w1", 1, 11)]
        self.assertTrue(analyze(["t0"], {"t0": runs}, done(attempt=2), crash, history,
                                WORKER_IDS).ok)
        # A task without outputs has nothing to lose.
        bare = {"t0": [rerun(1, []), Attempt(2, "succeeded", 3, "")]}
        self.assertEqual(analyze(["t0"], {"t0": runs}, done(attempt=2), both, bare,
                                 WORKER_IDS).unwarranted_reruns, 1)

    def test_only_the_success_a_rerun_set_aside_is_excused(self) -> None:
        runs = [copy("t0", 1, "w0", 1, 2), copy("t0", 2, "w2", 20, 21),
                copy("t0", 3, "w2", 30, 31)]
        history = {"t0": [rerun(1, [1]), Attempt(2, "retried", 3, ""),
                          Attempt(3, "succeeded", 3, "")]}
        faults = [worker_start(0), worker_start(0, "w2"), worker_kill(3)]
        v = analyze(["t0"], {"t0": runs}, done(attempt=3), faults, history, WORKER_IDS)
        self.assertEqual(v.duplicates, 1)

    def test_a_kill_of_a_later_start_of_the_worker_excuses_nothing(self) -> None:
        runs = [copy("t0", 1, "w0", 1, 2), copy("t0", 2, "w0", 5, 6)]
        faults = [worker_start(0), worker_kill(0.5), worker_start(0.8, n=2),
                  worker_kill(7, n=2)]
        v = analyze(["t0"], {"t0": runs}, done(attempt=2), faults)
        self.assertEqual(v.duplicates, 1)

    def test_an_orphan_that_ends_after_the_retry_started_is_an_overlap(self) -> None:
        # The killed worker's copy runs on while the retry runs.
        runs = [copy("t0", 1, "w0", 1, 3), copy("t0", 2, "w1", 2, 4)]
        faults = [worker_start(0), worker_start(0, "w1"), worker_kill(1.5)]
        v = analyze(["t0"], {"t0": runs}, done(attempt=2), faults)
        self.assertEqual(v.overlaps, 1)
        self.assertEqual(v.duplicates, 0)
        self.assertEqual((v.orphan_completions, v.orphan_reruns), (1, 1))

    def test_a_copy_killed_before_the_next_started_does_not_overlap(self) -> None:
        runs = [copy("t0", 1, "w0", 1, death=2.0), copy("t0", 2, "w1", 2.5, 3)]
        v = analyze(["t0"], {"t0": runs}, done(attempt=2), [worker_start(0)])
        self.assertTrue(v.ok, v)

    def test_a_copy_still_running_at_the_end_overlaps_every_later_copy(self) -> None:
        runs = [copy("t0", 1, "w0", 1, alive=True), copy("t0", 2, "w1", 20, 21)]
        v = analyze(["t0"], {"t0": runs}, done(attempt=2), [worker_start(0)])
        self.assertEqual(v.overlaps, 1)
        self.assertEqual(v.orphans_alive_at_end, 1)

    def test_not_terminal_is_stuck_and_failed_is_lost(self) -> None:
        v = analyze(["t0", "t1", "t2"], {"t0": [copy("t0", 1, "w0", 1)]},
                    {"t0": ApiTask("1.0", "running", 1, 2, ""),
                     "t1": ApiTask("1.1", "failed", 6, 2, "exit code 1")}, [])
        self.assertEqual((v.stuck, v.lost), (1, 2))  # t2 is unknown to the server

    def test_a_task_failed_for_losing_workers_the_test_killed_is_not_lost(self) -> None:
        # The server's rule: a task whose worker is lost 3 times fails.
        # Each of those workers was killed while it held the attempt.
        history = [Attempt(1, "retried", 1, "worker 1 re-attached without it", None, 2 * S),
                   Attempt(2, "retried", 2, "worker 2 re-attached without it", None, 5 * S),
                   Attempt(3, "retried", 2, "worker 2 re-attached without it", None, 8 * S),
                   Attempt(4, "failed", 2, "worker lost (3 attempts)", None, 11 * S)]
        api = {"t0": ApiTask("1.0", "failed", 4, 2, "worker lost (3 attempts)")}
        kills = [worker_kill(4, "w1"), worker_kill(7, "w1", 2), worker_kill(10, "w1", 3)]
        v = analyze(["t0"], {}, api, kills, {"t0": history}, WORKER_IDS)
        self.assertTrue(v.ok, v)
        self.assertEqual((v.lost, v.worker_lost_failures), (0, 1))
        # One of them was not killed in its attempt's time: lost.
        v = analyze(["t0"], {}, api, kills[1:], {"t0": history}, WORKER_IDS)
        self.assertEqual((v.lost, v.worker_lost_failures), (1, 0))
        # Placed on a worker already killed (the server had not noticed yet)
        # and still down: lost with it all the same.
        down = [worker_kill(1.5, "w1"), worker_start(7.5, "w1", 2), worker_kill(7.7, "w1", 2),
                worker_start(8.5, "w1", 3), worker_kill(10, "w1", 3)]
        v = analyze(["t0"], {}, api, down, {"t0": history}, WORKER_IDS)
        self.assertEqual((v.lost, v.worker_lost_failures), (0, 1))
        # Stopped past its lease instead of killed: lost all the same.
        stopped = [Fault(int(3 * S), "stop", "worker", "w1", 1, 11)] + kills[1:]
        v = analyze(["t0"], {}, api, stopped, {"t0": history}, WORKER_IDS)
        self.assertEqual((v.lost, v.worker_lost_failures), (0, 1))
        # So are the tasks canceled because they depended on it.
        api["t1"] = ApiTask("1.1", "canceled", 0, None, "dependency 1.0 failed")
        api["t2"] = ApiTask("1.2", "canceled", 0, None, "dependency 1.1 canceled")
        v = analyze(["t0", "t1", "t2"], {}, api, kills, {"t0": history}, WORKER_IDS)
        self.assertEqual((v.lost, v.worker_lost_failures), (0, 3))
        # The rule counts lost attempts over the task's life: an attempt
        # withdrawn in between (its worker up) neither counts nor resets it.
        withdrawn = [history[1], Attempt(3, "retried", 1, "room freed first on worker 2", None,
                                          6 * S), history[2], history[3]]
        v = analyze(["t0"], {}, {"t0": api["t0"]}, kills, {"t0": withdrawn}, WORKER_IDS)
        self.assertEqual((v.lost, v.worker_lost_failures), (0, 1))
        # Failed otherwise: lost, kills or not, and its dependents with it.
        other = history[:3] + [Attempt(4, "failed", 2, "exit code 1", None, 11 * S)]
        v = analyze(["t0", "t1", "t2"], {}, api, kills, {"t0": other}, WORKER_IDS)
        self.assertEqual(v.lost, 3)

    def test_success_without_a_complete_run_is_false(self) -> None:
        v = analyze(["t0"], {"t0": [copy("t0", 1, "w0", 1, death=2)]}, done(), [])
        self.assertEqual(v.false_successes, 1)


class LedgerTest(unittest.TestCase):
    def test_lines_pair_by_pid_and_attempt(self) -> None:
        led = Ledger({"w0": "/d/work-w0", "w1": "/d/work-w1"})
        led.add("start t3 1 50 1000 /d/work-w1/4/3.1")
        led.add("start t3 2 60 2000 /d/work-w0/4/3.2")
        led.add("end t3 1 50 3000")
        led.add("end t3 2")  # torn
        (a, b) = led.copies["t3"]
        self.assertEqual((a.worker, a.end_ns), ("w1", 3000))
        self.assertEqual((b.worker, b.end_ns), ("w0", None))
        self.assertEqual(led.bad_lines, ["end t3 2"])

    def test_file_lines_go_with_their_copy(self) -> None:
        led = Ledger({"w0": "/d/work-w0"})
        h = "ab" * 32
        led.add("start p1 2 50 1000 /d/work-w0/4/1.2")
        led.add(f"read p1 2 50 4.0/d/f0.bin 10 {h}")
        led.add(f"wrote p1 2 50 f1.bin 0 {h}")
        led.add(f"wrote p1 2 51 f1.bin 0 {h}")  # no such copy
        led.add("wrote p1 2 50 f1.bin 0 abc")  # torn
        (c,) = led.copies["p1"]
        self.assertEqual(c.read, [FileRecord("4.0/d/f0.bin", 10, h)])
        self.assertEqual(c.wrote, [FileRecord("f1.bin", 0, h)])
        self.assertEqual(len(led.bad_lines), 2)

    def test_worker_of_needs_the_whole_directory_name(self) -> None:
        dirs = {"w1": "/d/work-w1", "w10": "/d/work-w10"}
        self.assertEqual(worker_of("/d/work-w10/1/0.1", dirs), "w10")


class MonitorTest(unittest.TestCase):
    """Real task commands under sh (what the workers run)."""

    def setUp(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="chaos_ledger_test_")
        self.ledger = os.path.join(self.dir, "ledger")
        self.taskdir = os.path.join(self.dir, "work-w0", "1", "0.1")
        os.makedirs(self.taskdir)
        self.monitor = LedgerMonitor(self.ledger, {"w0": os.path.join(self.dir, "work-w0")},
                                     tick=0.01)
        self.monitor.start()
        self.procs: List[subprocess.Popen] = []

    def tearDown(self) -> None:
        if self.monitor.is_alive():
            self.monitor.finish()
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)  # its sleep too
            except ProcessLookupError:
                pass
            p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def run_task(self, key: str, seconds: float) -> subprocess.Popen:
        env = dict(os.environ, DROVER_ATTEMPT="1")
        p = subprocess.Popen(task_command(self.ledger, key, seconds),
                             cwd=self.taskdir, env=env,
                             start_new_session=True)
        self.procs.append(p)
        return p

    def until(self, what: str, pred: Callable[[], bool], timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.monitor.lock:
                if pred():
                    return
            time.sleep(0.01)
        self.fail(f"not within {timeout} s: {what}")

    def copies(self, key: str) -> List[Copy]:
        return self.monitor.ledger.copies.get(key, [])

    def test_end_death_and_still_running(self) -> None:
        ends = self.run_task("t0", 0.1)
        killed = self.run_task("t1", 30)
        orphan = self.run_task("t2", 30)
        self.until("t0 ends", lambda: bool(self.copies("t0")) and
                   self.copies("t0")[0].end_ns is not None)
        ends.wait()
        self.until("t1 and t2 start", lambda: bool(self.copies("t1")) and bool(self.copies("t2")))
        os.killpg(killed.pid, signal.SIGKILL)
        killed.wait()
        self.until("t1 seen gone", lambda: self.copies("t1")[0].death_ns is not None)
        self.monitor.finish()
        self.assertEqual(orphan.wait(timeout=10), -signal.SIGKILL)  # finish() killed it
        (t0,), (t1,), (t2,) = self.copies("t0"), self.copies("t1"), self.copies("t2")
        self.assertEqual((t0.worker, t0.attempt, t0.pid), ("w0", 1, ends.pid))
        self.assertIsNone(t0.death_ns)
        self.assertIsNone(t1.end_ns)
        self.assertGreater(t1.death_ns, t1.start_ns)
        self.assertTrue(t2.alive_at_end)
        self.assertFalse(t1.alive_at_end)
        self.assertEqual(self.monitor.ledger.bad_lines, [])


if __name__ == "__main__":
    unittest.main()
