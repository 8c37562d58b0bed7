"""The data-plane chaos test's own checks (chaos_data.py), without Drover:
the verdict on made-up ledgers and attempt histories, and the file tasks'
commands run by sh in made-up task directories."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import unittest
from typing import Dict, List, Sequence

from chaos_data import FileTask, file_task_command, judge
from chaos_ledger import ApiTask, Attempt, Copy, FileRecord, Ledger

S = 1_000_000_000  # ns per second


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def copy(key: str, attempt: int, worker: str, start: float, end: float = None,
         read: Sequence[FileRecord] = (), wrote: Sequence[FileRecord] = ()) -> Copy:
    c = Copy(key, attempt, 100 + attempt, int(start * S), f"/w/{worker}/1/0.{attempt}", worker)
    c.end_ns = None if end is None else int(end * S)
    c.read, c.wrote = list(read), list(wrote)
    return c


def f(name: str, content: str) -> FileRecord:
    return FileRecord(name, len(content), sha(content))


def attempt(n: int, state: str, outputs: Sequence[FileRecord] = (), holders: Sequence[int] = (),
            reason: str = "") -> Attempt:
    return Attempt(n, state, holders[0] if holders else 1, reason, None, None, tuple(outputs),
                   tuple(holders))


# A producer p (task 1.0) and a consumer c (task 1.1) that reads its files.
PLAN = {"p": FileTask("p", (), (("a", 1), ("d/b", 1))), "c": FileTask("c", ("p",))}
API = {"p": ApiTask("1.0", "succeeded", 1, 1, ""), "c": ApiTask("1.1", "succeeded", 1, 2, "")}
OUT1 = [f("a", "x1"), f("d/b", "y1")]  # what attempt 1 of p wrote
OUT2 = [f("a", "x2"), f("d/b", "y2")]  # what attempt 2 of p wrote


def inputs(files: Sequence[FileRecord], task: str = "1.0") -> List[FileRecord]:
    """``files`` as a dependent of ``task`` reads them."""
    return [FileRecord(f"{task}/{x.name}", x.size, x.sha256) for x in files]


def clean() -> Dict[str, List[Copy]]:
    return {"p": [copy("p", 1, "w0", 1, 2, wrote=OUT1)],
            "c": [copy("c", 1, "w1", 3, 4, read=inputs(OUT1))]}


def history(p: Sequence[Attempt] = (), c: Sequence[Attempt] = ()) -> Dict[str, List[Attempt]]:
    return {"p": list(p) or [attempt(1, "succeeded", OUT1, [1])],
            "c": list(c) or [attempt(1, "succeeded")]}


class DataVerdictTest(unittest.TestCase):
    def test_a_clean_pipeline_passes_and_counts_what_moved(self) -> None:
        v = judge(PLAN, clean(), API, history())
        self.assertTrue(v.ok, v)
        self.assertEqual((v.files_written, v.bytes_written, v.files_read, v.bytes_read),
                         (2, 4, 2, 4))
        self.assertEqual(v.bytes_moved, 4)  # written on w0, read on w1
        local = clean()
        local["c"][0].worker = "w0"
        self.assertEqual(judge(PLAN, local, API, history()).bytes_moved, 0)

    def test_bytes_no_producer_wrote_are_a_corrupt_read(self) -> None:
        copies = clean()
        copies["c"][0].read[1] = FileRecord("1.0/d/b", 2, sha("zz"))
        v = judge(PLAN, copies, API, history())
        self.assertEqual(v.corrupt_reads, 1)
        self.assertFalse(v.ok)
        self.assertIn("corrupt_read", v.problems[0].kinds)
        # Even by a copy that never ran to its end.
        copies["c"][0].end_ns = None
        self.assertEqual(judge(PLAN, copies, API, history()).corrupt_reads, 1)

    def test_a_file_of_another_attempt_under_its_name_is_corrupt_too(self) -> None:
        copies = clean()
        copies["c"][0].read[0] = FileRecord("1.0/a", 2, sha("y1"))  # b's bytes under a's name
        self.assertEqual(judge(PLAN, copies, API, history()).corrupt_reads, 1)

    def test_a_read_from_a_task_it_does_not_depend_on_is_corrupt(self) -> None:
        copies = clean()
        copies["c"][0].read.append(FileRecord("7.3/a", 2, sha("x1")))
        self.assertEqual(judge(PLAN, copies, API, history()).corrupt_reads, 1)

    def test_a_complete_copy_reads_exactly_one_attempts_files(self) -> None:
        two = {"p": [copy("p", 1, "w0", 1, 2, wrote=OUT1), copy("p", 2, "w1", 5, 6, wrote=OUT2)]}
        missing = dict(two, c=[copy("c", 1, "w1", 7, 8, read=inputs(OUT2[:1]))])
        v = judge(PLAN, missing, API, history())
        self.assertEqual((v.input_mismatches, v.corrupt_reads), (1, 0))
        mixed = dict(two, c=[copy("c", 1, "w1", 7, 8, read=inputs([OUT1[0], OUT2[1]]))])
        self.assertEqual(judge(PLAN, mixed, API, history()).input_mismatches, 1)
        # A copy that did not end may have been killed while reading.
        cut = dict(two, c=[copy("c", 1, "w1", 7, None, read=inputs(OUT2[:1]))])
        v = judge(PLAN, cut, API, history(c=[attempt(1, "retried")]))
        self.assertTrue(v.ok, v)
        # Files of a producer copy that never ended are no outputs.
        unended = {"p": [copy("p", 1, "w0", 1, None, wrote=OUT1),
                         copy("p", 2, "w1", 5, 6, wrote=OUT2)],
                   "c": [copy("c", 1, "w1", 7, 8, read=inputs(OUT1))]}
        v = judge(PLAN, unended, API, history(p=[attempt(2, "succeeded", OUT2, [2])]))
        self.assertEqual((v.input_mismatches, v.corrupt_reads), (1, 0))

    def test_outputs_the_server_kept_must_be_what_the_copy_wrote(self) -> None:
        v = judge(PLAN, clean(), API, history(p=[attempt(1, "succeeded", OUT2, [1])]))
        self.assertEqual(v.output_mismatches, 1)
        self.assertIn("output_mismatch", v.problems[0].kinds)

    def test_vacated_attempts_are_counted_by_cause(self) -> None:
        attempts = history(c=[attempt(1, "preempted", reason="preempted by 3.1 (priority 90)"),
                              attempt(2, "preempted", reason="preempted: owner returned on w1"),
                              attempt(3, "succeeded")])
        copies = clean()
        copies["c"][0].attempt = 3
        v = judge(PLAN, copies, API, attempts)
        self.assertTrue(v.ok, v)
        self.assertEqual((v.vacated_priority, v.vacated_owner), (1, 1))
        self.assertEqual(v.counted_failures, 0)

    def test_attempts_that_used_a_retry_are_counted(self) -> None:
        attempts = history(c=[attempt(1, "retried", reason="killed by signal 15; retry 1 of 5 "
                                                           "in 200ms"),
                              attempt(2, "retried", reason="worker 2 re-attached without it"),
                              attempt(3, "succeeded")])
        copies = clean()
        copies["c"][0].attempt = 3
        v = judge(PLAN, copies, API, attempts)
        self.assertEqual(v.counted_failures, 1)
        self.assertTrue(v.ok, v)
        # Where nothing may fail (owners, no kills), it is a fault.
        v = judge(PLAN, copies, API, attempts, failures_are_faults=True)
        self.assertFalse(v.ok)
        self.assertEqual(v.problems[0].kinds, ["counted_failure"])


class FileTaskCommandTest(unittest.TestCase):
    """The commands under sh, in made-up task directories, read back
    through the ledger."""

    def setUp(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="chaos_data_test_")
        self.ledger_path = os.path.join(self.dir, "ledger")
        self.workdir = os.path.join(self.dir, "work-w0")

    def tearDown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def run_task(self, task: FileTask, task_dir: str, inputs_dir: str) -> None:
        out = os.path.join(task_dir, "output")
        os.makedirs(out)
        os.makedirs(inputs_dir, exist_ok=True)
        env = dict(os.environ, DROVER_ATTEMPT="1", DROVER_OUTPUT_DIR=out,
                   DROVER_INPUTS=inputs_dir)
        subprocess.run(file_task_command(self.ledger_path, task, 0, 0), cwd=task_dir, env=env,
                       check=True, timeout=30)

    def test_what_the_tasks_record_is_what_they_wrote_and_read(self) -> None:
        producer = FileTask("p", (), (("f0.bin", 3000), ("d1/f1.bin", 0)))
        consumer = FileTask("c", ("p",))
        p_dir = os.path.join(self.workdir, "1", "0.1")
        self.run_task(producer, p_dir, os.path.join(self.dir, "empty"))
        # The consumer finds the producer's outputs under its task id.
        c_dir = os.path.join(self.workdir, "1", "1.1")
        inputs_dir = os.path.join(c_dir, "inputs")
        shutil.copytree(os.path.join(p_dir, "output"), os.path.join(inputs_dir, "1.0"))
        with open(os.path.join(inputs_dir, "1.0.result"), "w") as r:
            r.write("a result, not an output\n")
        self.run_task(consumer, c_dir, inputs_dir)

        led = Ledger({"w0": self.workdir})
        with open(self.ledger_path) as lines:
            for line in lines:
                led.add(line.rstrip("\n"))
        self.assertEqual(led.bad_lines, [])
        (p,), (c,) = led.copies["p"], led.copies["c"]
        self.assertEqual((p.worker, p.attempt), ("w0", 1))
        self.assertIsNotNone(p.end_ns)
        with open(os.path.join(p_dir, "output", "f0.bin"), "rb") as data:
            digest = hashlib.sha256(data.read()).hexdigest()
        self.assertEqual(sorted(p.wrote, key=lambda x: x.name),
                         [FileRecord("d1/f1.bin", 0, sha("")),
                          FileRecord("f0.bin", 3000, digest)])
        self.assertEqual(sorted(c.read, key=lambda x: x.name),
                         [FileRecord("1.0/d1/f1.bin", 0, sha("")),
                          FileRecord("1.0/f0.bin", 3000, digest)])
        api = {"p": ApiTask("1.0", "succeeded", 1, 1, ""),
               "c": ApiTask("1.1", "succeeded", 1, 1, "")}
        attempts = {"p": [attempt(1, "succeeded", p.wrote, [1])], "c": [attempt(1, "succeeded")]}
        plan = {"p": producer, "c": consumer}
        self.assertTrue(judge(plan, led.copies, api, attempts).ok)


if __name__ == "__main__":
    unittest.main()
