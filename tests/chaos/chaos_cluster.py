"""Real processes for the chaos test: a private redis-server, one
``drover server`` and ``drover worker``s, each restartable, in one directory.

Every process writes its output to a log file of its own per start
(``<name>.<n>.log``), which outlives it for the report; readiness is a line
in that file, polled with a deadline. Processes get SIGKILL if the test dies
(``setpriv --pdeathsig KILL`` where setpriv exists), so a crashed test leaves
no server or worker behind.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from typing import Dict, List, Optional

POLL = 0.02  # seconds between looks at a log file while waiting for a line


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Proc:
    """One start of a process, its output in ``log``."""

    def __init__(self, name: str, incarnation: int, argv: List[str], log: str,
                 env: Optional[Dict[str, str]] = None) -> None:
        self.name = name
        self.incarnation = incarnation
        self.argv = argv
        self.log = log
        prefix: List[str] = []
        setpriv = shutil.which("setpriv")
        if setpriv:
            prefix = [setpriv, "--pdeathsig", "KILL", "--"]
        self.start_ns = time.time_ns()
        with open(log, "ab") as out:
            self.popen = subprocess.Popen(
                prefix + argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=env, close_fds=True,
            )
        self.pid = self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def output(self) -> str:
        try:
            with open(self.log, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.output().splitlines()[-lines:])

    def wait_for_line(self, pattern: str, timeout: float) -> Optional[re.Match]:
        """The first match of ``pattern`` in the output, waiting up to
        ``timeout`` seconds for it; None if the process exits first."""
        rx = re.compile(pattern, re.M)
        deadline = time.monotonic() + timeout
        while True:
            m = rx.search(self.output())
            if m is not None:
                return m
            if not self.alive() or time.monotonic() >= deadline:
                m = rx.search(self.output())
                return m
            time.sleep(POLL)

    def kill9(self) -> int:
        """SIGKILL and reap; returns the kill's time (ns, CLOCK_REALTIME)."""
        t = time.time_ns()
        if self.alive():
            self.popen.send_signal(signal.SIGKILL)
        self.popen.wait()
        return t

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM, and SIGKILL if it has not exited within ``timeout``."""
        if self.alive():
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


class RedisServer:
    """A private redis-server on a free loopback port (tests/redis's way)."""

    def __init__(self, binary: str, directory: str) -> None:
        os.makedirs(directory, exist_ok=True)
        self.port = 0
        self.proc: Optional[Proc] = None
        last = ""
        for attempt in range(3):  # someone may take the port before redis binds it
            self.port = free_port()
            argv = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                    "--appendonly", "no", "--dir", directory, "--daemonize", "no",
                    "--logfile", ""]
            p = Proc("redis", attempt + 1, argv, os.path.join(directory, f"redis.{attempt + 1}.log"))
            if p.wait_for_line(r"Ready to accept connections", 20.0):
                self.proc = p
                return
            p.kill9()
            last = p.tail()
        raise RuntimeError(f"redis-server did not start:\n{last}")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill9()


class Cluster:
    """The server and the workers, restartable by name, in ``directory``."""

    def __init__(self, binary: str, directory: str, server_flags: List[str],
                 worker_flags: List[str],
                 flags_of: Optional[Dict[str, List[str]]] = None) -> None:
        self.binary = binary
        self.dir = directory
        self.server_flags = server_flags
        self.worker_flags = worker_flags  # every worker's
        self.flags_of = flags_of or {}  # one worker's own, by name
        self.access_file = os.path.join(directory, "access.json")
        self.port = 0
        self.server: Optional[Proc] = None
        self.workers: Dict[str, Proc] = {}
        self.starts: Dict[str, int] = {}
        self.history: List[Proc] = []  # every start, for the logs

    def workdir(self, name: str) -> str:
        return os.path.join(self.dir, "work-" + name)

    def _start(self, name: str, argv: List[str]) -> Proc:
        n = self.starts.get(name, 0) + 1
        self.starts[name] = n
        p = Proc(name, n, argv, os.path.join(self.dir, f"{name}.{n}.log"))
        self.history.append(p)
        return p

    def start_server(self) -> Proc:
        """Starts the server (on the port of its first start, after that)
        without waiting for it; wait_server() waits."""
        argv = [self.binary, "server", "--bind", "127.0.0.1", "--port", str(self.port),
                "--state-dir", os.path.join(self.dir, "state"),
                "--access-file", self.access_file] + self.server_flags
        self.server = self._start("server", argv)
        return self.server

    def wait_server(self, timeout: float) -> None:
        """Waits for the running server's readiness line (the first time,
        reads its port from it). Raises RuntimeError if it does not come."""
        assert self.server is not None
        m = self.server.wait_for_line(r"^drover: listening on 127\.0\.0\.1:(\d+) ", timeout)
        if m is None:
            raise RuntimeError(
                f"server (start {self.server.incarnation}) not listening after {timeout:.0f} s:\n"
                + self.server.tail())
        self.port = int(m.group(1))

    def start_worker(self, name: str) -> Proc:
        argv = [self.binary, "worker", "--access", self.access_file, "--name", name,
                "--workdir", self.workdir(name)] + self.worker_flags + self.flags_of.get(name, [])
        p = self._start(name, argv)
        self.workers[name] = p
        return p

    def wait_worker(self, name: str, timeout: float) -> None:
        """Waits until the running `name` has attached to a server once."""
        p = self.workers[name]
        if p.wait_for_line(r"attached as worker", timeout) is None:
            raise RuntimeError(
                f"worker {name} (start {p.incarnation}) did not attach within {timeout:.0f} s:\n"
                + p.tail())

    def stop(self) -> None:
        """Workers first (SIGTERM stops the tasks they run), then the server."""
        for p in self.workers.values():
            if p.alive():
                p.popen.send_signal(signal.SIGTERM)
        for p in self.workers.values():
            p.stop()
        if self.server is not None:
            self.server.stop()

    def grep(self, pattern: str, limit: int = 20) -> List[str]:
        """Lines of every process's logs matching ``pattern`` (a regex),
        each prefixed with its log's name; at most ``limit``, the last ones."""
        rx = re.compile(pattern)
        found: List[str] = []
        for p in self.history:
            for line in p.output().splitlines():
                if rx.search(line):
                    found.append(f"{p.name}.{p.incarnation}: {line}")
        return found[-limit:]
