"""A real local Drover cluster for the tests: ``drover up`` in a temporary
directory, on a free port, with its own access file.

The drover binary comes from ``$DROVER_BINARY`` (ctest passes the one it
built). Readiness is the line ``drover: listening on HOST:PORT`` on the
process's output; nothing here sleeps.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
from typing import Any, List, Optional

START_TIMEOUT = 60.0


def drover_binary() -> str:
    path = os.environ.get("DROVER_BINARY", "")
    if not path or not os.access(path, os.X_OK):
        raise RuntimeError(
            "set DROVER_BINARY to the drover binary to test against "
            f"(got {path!r}); ctest sets it"
        )
    return path


class LocalCluster:
    """``drover up --workers N`` with a temporary state dir and access file."""

    def __init__(self, workers: int = 2, tls: bool = True) -> None:
        self.dir = tempfile.mkdtemp(prefix="drover_py_")
        self.access_file = os.path.join(self.dir, "access.json")
        self.port = 0
        self._workers = workers
        self._tls = tls
        self._start()

    def _start(self) -> None:
        self._lines: List[str] = []
        self._cv = threading.Condition()
        self._eof = False
        argv = [
            drover_binary(), "up",
            "--workers", str(self._workers),
            "--port", str(self.port),
            "--state-dir", os.path.join(self.dir, "state"),
            "--access-file", self.access_file,
        ]
        if not self._tls:
            argv.append("--no-tls")
        env = dict(os.environ, DROVER_ACCESS=self.access_file)
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
            stdin=subprocess.DEVNULL,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        line = self.wait_for_line(r"^drover: listening on 127\.0\.0\.1:(\d+) ", START_TIMEOUT)
        if line is None:
            self.stop()
            raise RuntimeError("drover up did not start:\n" + self.output())
        m = re.search(r"127\.0\.0\.1:(\d+)", line)
        assert m is not None
        self.port = int(m.group(1))

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            with self._cv:
                self._lines.append(raw.decode("utf-8", "replace").rstrip("\n"))
                self._cv.notify_all()
        with self._cv:
            self._eof = True
            self._cv.notify_all()

    def wait_for_line(self, pattern: str, timeout: float) -> Optional[str]:
        """The first output line matching ``pattern``, waiting for it to be
        printed; None if the process ended or ``timeout`` passed first."""
        rx = re.compile(pattern)
        seen = 0
        found: List[str] = []

        def ready() -> bool:
            nonlocal seen
            while seen < len(self._lines):
                if rx.search(self._lines[seen]):
                    found.append(self._lines[seen])
                    return True
                seen += 1
            return self._eof

        with self._cv:
            self._cv.wait_for(ready, timeout)
        return found[0] if found else None

    def output(self) -> str:
        with self._cv:
            return "\n".join(self._lines)

    def restart(self) -> None:
        """Stops the cluster and starts it again on the same state and port."""
        self._stop_process()
        self._start()

    def stop(self) -> None:
        """SIGTERM, wait for the exit (SIGKILL if it hangs), remove the dir."""
        self._stop_process()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _stop_process(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


class ModuleCluster:
    """One LocalCluster for a test module: ``setUpModule = c.start``,
    ``tearDownModule = c.stop``, and ``c()`` the running cluster."""

    def __init__(self, workers: int = 2) -> None:
        self._workers = workers
        self._cluster: Optional[LocalCluster] = None

    def start(self) -> None:
        self._cluster = LocalCluster(workers=self._workers)

    def stop(self) -> None:
        if self._cluster is not None:
            self._cluster.stop()

    def __call__(self) -> LocalCluster:
        assert self._cluster is not None
        return self._cluster


def another_user(admin: Any, port: int, name: str) -> Any:
    """A drover.Client of a new user ``name`` (role user), added by the
    admin's client ``admin`` as ``drover user add`` does."""
    import drover  # the client under test, on PYTHONPATH

    added = admin._transport.json("POST", "/api/v1/users", {"name": name, "role": "user"})
    return drover.Client(f"127.0.0.1:{port}", token=added["token"],
                         fingerprint=admin.endpoint.fingerprint)
