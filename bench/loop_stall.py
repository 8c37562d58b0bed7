#!/usr/bin/env python3
"""Loop stall under a big job.

Starts `drover server` (no workers) in a temporary state directory, submits
one array job of --tasks tasks (it stays queued), and while a prober thread
sends `GET /api/v1/status` over the server's local socket back to back,
runs each of: GET the job (a default page and a full 10,000-task page), GET
its report, the event stream snapshot of the job (WebSocket, read to the
end), and POST its cancel. The server has one event loop, so a probe that
waits is the loop being held: for each operation the longest probe latency
while it ran is its stall. Also reads the server's resident memory after the
submit and after the cancel (every task then has a journal record).

Prints one JSON line: {"tasks", "submit_s", "ops": {name: {"took_s",
"max_stall_ms", "probes"}}, "max_stall_ms", "probe_idle_p50_ms",
"rss_start_mb", "rss_submitted_mb", "rss_canceled_mb",
"bytes_per_task_queued", "bytes_per_task_canceled"}.

With --follower, every job's events are followed meanwhile as the dashboard
follows them (`e2e_client events --coalesce`: batched, coalesced, no
snapshot), from before the submission: the cancel's million changes then go
to a subscriber too.

    bench/loop_stall.py [--build build] [--tasks 1000000] [--follower]
"""
import argparse
import base64
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=600):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.path)
        self.sock = s


class Api:
    def __init__(self, sock_path, token):
        self.sock_path = sock_path
        self.token = token
        self.conn = UnixHTTPConnection(sock_path)

    def call(self, method, target, body=None):
        headers = {"Authorization": "Bearer " + self.token}
        if body is not None:
            body = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        self.conn.request(method, target, body=body, headers=headers)
        r = self.conn.getresponse()
        data = r.read()
        return r.status, data


def ws_read_snapshot(sock_path, token, target, want):
    """Opens the WebSocket `target` and reads `want` text messages."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(600)
    s.connect(sock_path)
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall((f"GET {target} HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"
               f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
               f"Sec-WebSocket-Version: 13\r\nAuthorization: Bearer {token}\r\n\r\n").encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            raise RuntimeError("closed during the upgrade")
        buf += chunk
    head, buf = buf.split(b"\r\n\r\n", 1)
    if b" 101 " not in head.split(b"\r\n")[0]:
        raise RuntimeError("upgrade refused: " + head.decode(errors="replace"))
    got = 0
    pos = 0  # parse position in buf (slicing per frame would be quadratic)
    while got < want:
        while True:  # parse whole frames from buf[pos:]
            if len(buf) - pos < 2:
                break
            n = buf[pos + 1] & 0x7F
            off = 2
            if n == 126:
                if len(buf) - pos < 4:
                    break
                n = int.from_bytes(buf[pos + 2:pos + 4], "big")
                off = 4
            elif n == 127:
                if len(buf) - pos < 10:
                    break
                n = int.from_bytes(buf[pos + 2:pos + 10], "big")
                off = 10
            if len(buf) - pos < off + n:
                break
            opcode = buf[pos] & 0x0F
            pos += off + n
            if opcode == 1:
                got += 1
            elif opcode == 8:
                raise RuntimeError(f"closed after {got} of {want} messages")
        if got >= want:
            break
        chunk = s.recv(1 << 20)
        if not chunk:
            raise RuntimeError(f"connection ended after {got} of {want} messages")
        buf = buf[pos:] + chunk
        pos = 0
    s.close()
    return got


class Prober(threading.Thread):
    def __init__(self, sock_path, token):
        super().__init__(daemon=True)
        self.api = Api(sock_path, token)
        self.samples = []  # (start, latency)
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            t0 = time.monotonic()
            status, _ = self.api.call("GET", "/api/v1/status")
            t1 = time.monotonic()
            if status != 200:
                raise RuntimeError(f"status answered {status}")
            self.samples.append((t0, t1 - t0))
            time.sleep(0.002)

    def worst(self, start, end):
        # Probes that overlapped [start, end].
        lat = [l for (t, l) in self.samples if t + l >= start and t <= end]
        return (max(lat) if lat else 0.0), len(lat)


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--tasks", type=int, default=1_000_000)
    ap.add_argument("--skip", default="", help="comma-separated ops to skip")
    ap.add_argument("--follower", action="store_true",
                    help="follow every job's events meanwhile, as the dashboard does "
                         "(e2e_client events --coalesce, from before the submission)")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    drover = os.path.join(args.build, "drover")
    tmp = tempfile.mkdtemp(prefix="drover-stall-")
    state = os.path.join(tmp, "state")
    log = open(os.path.join(tmp, "server.log"), "w")
    server = subprocess.Popen(
        [drover, "server", "--state-dir", state, "--bind", "127.0.0.1", "--port", "0",
         "--no-tls", "--access-file", os.path.join(tmp, "access.json")],
        stdout=log, stderr=subprocess.STDOUT)
    follower = None
    try:
        sock = os.path.join(state, "api.sock")
        deadline = time.monotonic() + 60
        token = None
        while time.monotonic() < deadline:
            if server.poll() is not None:
                raise RuntimeError("the server exited; see " + log.name)
            try:
                token = open(os.path.join(state, "token")).read().strip()
                if Api(sock, token).call("GET", "/healthz")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.05)
        else:
            raise RuntimeError("the server did not come up")
        api = Api(sock, token)
        if args.follower:
            follower = subprocess.Popen(
                [os.path.join(args.build, "bench", "e2e_client"), "events",
                 os.path.join(tmp, "access.json"), "--socket", sock, "--coalesce"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            line = follower.stderr.readline()
            if "subscribed" not in line:
                raise RuntimeError("the event stream did not open: " + line.strip())
        rss_start = rss_mb(server.pid)
        spec = {"name": "big", "task": [{"id": "t", "command": ["true"],
                                         "array": f"0-{args.tasks - 1}"}]}
        prober = Prober(sock, token)
        prober.start()
        time.sleep(0.2)
        idle = [l for (_, l) in prober.samples]
        ops = {}

        def op(name, fn):
            if name in skip:
                return None
            t0 = time.monotonic()
            error = None
            try:
                result = fn()
            except (RuntimeError, OSError) as e:
                result, error = None, str(e)
            t1 = time.monotonic()
            time.sleep(0.05)  # let a probe that waited come back
            worst, n = prober.worst(t0, t1)
            ops[name] = {"took_s": round(t1 - t0, 4), "max_stall_ms": round(worst * 1000, 1),
                         "probes": n}
            if error:
                ops[name]["error"] = error[:200]
            return result

        status, body = op("submit", lambda: api.call("POST", "/api/v1/jobs", spec)) or (0, b"")
        if status != 200:
            raise RuntimeError(f"submit answered {status}: {body[:300]!r}")
        job = json.loads(body)["id"]
        rss_submitted = rss_mb(server.pid)

        def get(target, want=200):
            status, body = api.call("GET", target)
            if status != want:
                raise RuntimeError(f"{target} answered {status}: {body[:300]!r}")
            return body

        op("get_job", lambda: get(f"/api/v1/jobs/{job}"))
        op("get_job_page_1000",
           lambda: get(f"/api/v1/jobs/{job}?offset={args.tasks // 2}&limit=1000"))
        op("report", lambda: get(f"/api/v1/jobs/{job}/report"))
        op("metrics", lambda: get("/metrics"))
        op("events_snapshot",
           lambda: ws_read_snapshot(sock, token, f"/api/v1/events?job={job}", args.tasks))
        op("cancel", lambda: api.call("POST", f"/api/v1/jobs/{job}/cancel"))
        # The cancel's answer may come before every task is canceled (an
        # older server answers at once): wait for the count, still probing.
        t0 = time.monotonic()
        while True:
            info = json.loads(get(f"/api/v1/jobs/{job}?limit=0"))
            if info["counts"]["canceled"] == args.tasks:
                break
            time.sleep(0.05)
        if "cancel" in ops:
            worst, n = prober.worst(t0, time.monotonic())
            ops["cancel"]["max_stall_ms"] = max(ops["cancel"]["max_stall_ms"],
                                                round(worst * 1000, 1))
        op("report_after_cancel", lambda: get(f"/api/v1/jobs/{job}/report"))
        rss_canceled = rss_mb(server.pid)
        prober.stop.set()
        prober.join(timeout=60)
        out = {
            "tasks": args.tasks,
            "ops": ops,
            "max_stall_ms": max(o["max_stall_ms"] for o in ops.values() if o),
            "probe_idle_p50_ms": round(statistics.median(idle) * 1000, 2) if idle else None,
            "rss_start_mb": round(rss_start, 1),
            "rss_submitted_mb": round(rss_submitted, 1),
            "rss_canceled_mb": round(rss_canceled, 1),
            "bytes_per_task_queued": round((rss_submitted - rss_start) * 1048576 / args.tasks),
            "bytes_per_task_canceled": round((rss_canceled - rss_start) * 1048576 / args.tasks),
        }
        print(json.dumps(out))
    finally:
        if follower is not None:
            follower.kill()
            follower.wait()
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    sys.exit(main())
