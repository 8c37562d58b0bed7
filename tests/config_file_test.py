#!/usr/bin/env python3
"""Config files end to end (docs/guide.md "Config files"), with the real
binary: `drover server --config` starts with the file's settings and the
command line wins; `drover up --config` takes the [server] table and the
quotas, and re-reads the quotas on SIGHUP; `drover worker --config ... --check` and `drover config
check` accept a good file and refuse bad ones naming the file and line.

Usage: config_file_test.py DROVER_BINARY. Waits on the server's own
"listening" line; nothing sleeps.
"""
import os
import signal
import socket
import subprocess
import sys
import tempfile

DROVER = sys.argv[1]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}", file=sys.stderr)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(*args):
    return subprocess.run([DROVER, *args], capture_output=True, text=True, timeout=60)


def serve(config, *extra):
    """Starts `drover server --config`, returns (its listening line, proc)."""
    proc = subprocess.Popen([DROVER, "server", "--config", config, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("drover: listening on "):
            break
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    return (lines[-1] if lines else ""), "".join(lines)


with tempfile.TemporaryDirectory(prefix="drover-config-") as tmp:
    port = free_port()
    good = os.path.join(tmp, "drover.toml")
    with open(good, "w") as f:
        f.write(f"""# the lab's Drover
[server]
bind = "127.0.0.1"
port = {port}
state_dir = "{tmp}/state"
access_file = "{tmp}/access.json"
no_tls = true
heartbeat = "1s"

[worker]
server = ["127.0.0.1:{port}"]
token = "{'ab' * 32}"
no_tls = true
label = ["site=lab", "rack=2"]
""")
    line, out = serve(good)
    check(f"listening on 127.0.0.1:{port} (plain tcp)" in line,
          f"the server listens where the file says: {out!r}")
    line, out = serve(good, "--port", "0")
    check("listening on 127.0.0.1:" in line and f":{port} " not in line,
          f"--port on the command line wins over the file: {out!r}")

    r = run("worker", "--config", good, "--check")
    check(r.returncode == 0 and "worker flags are valid; it would offer " in r.stdout
          and " cores" in r.stdout,
          f"worker --check: {r.returncode} {r.stdout!r} {r.stderr!r}")
    # A worker table with no server yet (the Debian package's) checks, and
    # says what it lacks, whether or not this machine has an access file.
    no_server = os.path.join(tmp, "no-server.toml")
    with open(no_server, "w") as f:
        f.write("[worker]\nuser = \"nobody\"\n")
    r = subprocess.run([DROVER, "worker", "--config", no_server, "--check"], capture_output=True,
                       text=True, timeout=60, env=dict(os.environ, HOME=tmp, XDG_STATE_HOME=tmp,
                                                       DROVER_ACCESS=""))
    check(r.returncode == 0 and "to start it needs a server: no --server given" in r.stdout,
          f"worker --check without a server: {r.returncode} {r.stdout!r} {r.stderr!r}")
    r = run("config", "check", good)
    check(r.returncode == 0 and r.stdout.strip().endswith(f"{good}: ok"),
          f"config check of a good file: {r.returncode} {r.stdout!r} {r.stderr!r}")

    bad = {
        "[server]\nprot = 7210\n":
            ":2:1: [server] prot: unknown key: drover server has no --prot flag",
        "[server]\nheartbeat = \"4x\"\n": ":2:1: --heartbeat: duration \"4x\" has unknown unit",
        "[server]\nport = \"seventy\"\n": ":2:1: Could not convert: --port = seventy",
        "[server]\nno_tls = \"yes\"\n": ":2:1: [server] no_tls: --no-tls is a switch",
        "[worker]\nmem = [\"1GiB\", \"2GiB\"]\n": ":2:1: [worker] mem: --mem takes one value",
        "[servers]\nport = 1\n": ":1: unknown table [servers]",
        # Checked against this machine, as the worker would when it starts.
        "[worker]\nserver = [\"127.0.0.1:1\"]\ntoken = \"t\"\nno_tls = true\n"
        "user = \"nobody\"\nmem = \"16G\"\n": ":6:1: --mem: ",
        "port = 1\n": ":1:1: \"port\" is outside a table",
        "[server\n": ":1:8: ",
    }
    for i, (text, want) in enumerate(bad.items()):
        path = os.path.join(tmp, f"bad{i}.toml")
        with open(path, "w") as f:
            f.write(text)
        r = run("config", "check", path)
        check(r.returncode == 2 and f"drover: {path}{want}" in r.stderr,
              f"config check {text!r}: {r.returncode} {r.stderr!r}")
    # The command reads the same way (here the server's own table).
    path = os.path.join(tmp, "bad0.toml")
    r = run("server", "--config", path)
    check(r.returncode == 2 and f"{path}:2:1: [server] prot: unknown key" in r.stderr,
          f"server --config with an unknown key: {r.returncode} {r.stderr!r}")
    r = run("server", "--config", os.path.join(tmp, "missing.toml"))
    check(r.returncode == 2 and "missing.toml: cannot be read" in r.stderr,
          f"server --config of a missing file: {r.stderr!r}")

# `drover up --config`: the [server] table sets its flags, the policy
# tables its quotas, and SIGHUP re-reads them.
with tempfile.TemporaryDirectory(prefix="drover-config-up-") as tmp:
    port = free_port()
    access = os.path.join(tmp, "access.json")
    conf = os.path.join(tmp, "up.toml")

    def write_up(cpus):
        with open(conf, "w") as f:
            f.write(f"""[server]
port = {port}
state_dir = "{tmp}/state"
access_file = "{access}"

[worker]
label = ["read-by-drover-worker-only"]

[quota.ana]
cpus = {cpus}
""")

    def quota_of_ana():
        r = subprocess.run([DROVER, "quota", "ana"], capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, DROVER_ACCESS=access))
        return r.stdout + r.stderr

    write_up(1)
    proc = subprocess.Popen([DROVER, "up", "--config", conf, "--workers", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("drover: listening on "):
                break
        check(f"listening on 127.0.0.1:{port} " in (lines[-1] if lines else ""),
              f"up listens where the file's [server] table says: {''.join(lines)!r}")
        got = quota_of_ana()
        check("cpus 0/1" in got, f"up takes the file's [quota.ana]: {got!r}")
        write_up(2)
        proc.send_signal(signal.SIGHUP)
        reloaded = ""
        for line in proc.stdout:
            if "quotas reloaded from" in line or "quotas not reloaded" in line:
                reloaded = line
                break
        check("quotas reloaded from " + conf in reloaded, f"up reloads on SIGHUP: {reloaded!r}")
        got = quota_of_ana()
        check("cpus 0/2" in got, f"the reloaded quota is in force: {got!r}")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    # A server-only key in [server] is refused naming drover up.
    bad = os.path.join(tmp, "bad.toml")
    with open(bad, "w") as f:
        f.write('[server]\nredis = "redis://127.0.0.1:1/0"\n')
    r = run("up", "--config", bad)
    check(r.returncode == 2 and f"{bad}:2:1: [server] redis: unknown key: drover up has no --redis flag"
          in r.stderr, f"up --config with a server-only key: {r.returncode} {r.stderr!r}")

# `drover debug decode`: a binary frame of the worker channel (a fuzz seed
# of the repository) as the JSON of its messages; other bytes refused.
seed = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz", "corpus",
                    "messages", "binary_server.bin")
r = run("debug", "decode", seed)
lines = r.stdout.splitlines()
check(r.returncode == 0 and len(lines) == 2 and '"type":"assign"' in lines[0]
      and '"type":"ack"' in lines[1] and '"user":"alice"' in lines[0],
      f"debug decode prints the frame's messages: {r.returncode} {r.stdout!r} {r.stderr!r}")
with tempfile.TemporaryDirectory() as tmp:
    garbage = os.path.join(tmp, "garbage.bin")
    with open(garbage, "wb") as f:
        f.write(b"\x02\x01\x05junk")
    r = run("debug", "decode", garbage)
    check(r.returncode != 0 and "not a readable binary frame" in r.stderr
          and garbage in r.stderr, f"debug decode refuses garbage: {r.returncode} {r.stderr!r}")

if failures:
    sys.exit(f"config_file_test: {len(failures)} failed")
print("config_file_test: ok")
