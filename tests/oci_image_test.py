#!/usr/bin/env python3
"""The OCI image (`make image`, packaging/build-image.sh) end to end.

Builds the image from scratch with buildah from the drover binary of
BUILD_DIR, checks what it holds (the binary, exactly the libraries ldd
names, the server's non-root user), then runs it with rootful podman: a
server container and a worker container on a private (internal) network of
their own, a job submitted from a client inside the server's container,
run by the worker and its log read back. A part this machine cannot run
prints why it was skipped; it never passes silently.

Usage: oci_image_test.py SOURCE_DIR BUILD_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

src, build = sys.argv[1], sys.argv[2]
failures = []
tag = f"drover-image-test-{os.getpid()}"
image = f"localhost/{tag}:test"


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}", file=sys.stderr)
    return cond


def run(*args, timeout=300, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kw)


def skip(why):
    print(f"oci_image_test: skipped: {why}")
    sys.exit(0)


def finish():
    if failures:
        sys.exit(f"oci_image_test: {len(failures)} failed")
    print("oci_image_test: ok")
    sys.exit(0)


def wait_for(what, cond, timeout=60):
    """Waits for cond() to hold, checking it on each turn; False on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.2)
    return check(False, f"timed out waiting for {what}")


if os.geteuid() != 0:
    skip("buildah and rootful podman need root")
for tool in ("buildah", "podman"):
    if not shutil.which(tool):
        skip(f"{tool} is not installed (scripts/install-deps.sh installs it)")

out = tempfile.mkdtemp(prefix="drover-image-")
state = os.path.join(out, "state")
os.makedirs(state)
os.chown(state, 7210, 7210)
os.chmod(state, 0o750)
# This machine's podman settings for the test only: no default ulimits
# (podman raises nproc and nofile, which a container without
# CAP_SYS_RESOURCE may not do). The runtime is chosen below.
conf = os.path.join(out, "containers.conf")
with open(conf, "w") as f:
    f.write("[containers]\ndefault_ulimits = []\n")
os.environ["CONTAINERS_CONF"] = conf
network = f"{tag}-net"
server, worker = f"{tag}-server", f"{tag}-worker"
podman = ["podman"]

try:
    r = run(os.path.join(src, "packaging", "build-image.sh"), build, out, image)
    if not check(r.returncode == 0, f"build-image.sh: {r.stdout} {r.stderr}"):
        finish()
    check(r.stdout.strip() == image, f"build-image.sh prints the image: {r.stdout!r}")
    version = run(os.path.join(build, "drover"), "--version").stdout.split()[-1]
    check(os.path.getsize(os.path.join(out, f"drover_{version}.oci.tar")) > 0,
          "the OCI archive was written")

    info = json.loads(run("podman", "image", "inspect", image).stdout)[0]
    config = info["Config"]
    check(config.get("User") == "drover", f"the image runs as drover: {config.get('User')}")
    check(config.get("Entrypoint") == ["/usr/bin/drover"], f"entrypoint: {config.get('Entrypoint')}")
    check(config.get("Cmd", [])[:1] == ["server"], f"the default role is the server: {config.get('Cmd')}")
    check("7210/tcp" in config.get("ExposedPorts", {}), "port 7210 is exposed")

    # Exactly the binary, the libraries it loads, the Python client and a
    # few files of /etc.
    ctr = run("buildah", "from", image).stdout.strip()
    try:
        root = run("buildah", "mount", ctr).stdout.strip()
        files = sorted("/" + os.path.relpath(os.path.join(d, n), root)
                       for d, _, names in os.walk(root) for n in names)
    finally:
        run("buildah", "rm", ctr)
    ldd = run("ldd", os.path.join(build, "drover")).stdout.split()
    libs = sorted(w for w in ldd if w.startswith("/"))
    client = sorted("/usr/lib/python3/dist-packages/drover/" + n
                    for n in os.listdir(os.path.join(src, "python", "drover"))
                    if n.endswith(".py") or n == "py.typed")
    expected = sorted(["/usr/bin/drover", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf"]
                      + libs + client)
    check(files == expected, f"the image holds exactly {expected}, not {files}")
    check("/usr/lib/python3/dist-packages/drover/__init__.py" in files,
          "the image holds the Python client")

    # Can rootful podman run a container here? Asked of a probe image (one
    # static program), so that a broken drover image fails rather than
    # skips. crun refuses hybrid cgroup hierarchies (v1 controllers with a
    # v2 mount), so runc is tried next.
    probe = os.path.join(out, "probe")
    with open(probe + ".c", "w") as f:
        f.write("int main(void) { return 0; }\n")
    r = run("cc", "-static", "-o", probe, probe + ".c")
    check(r.returncode == 0, f"cc -static: {r.stderr}")
    ctr = run("buildah", "from", "scratch").stdout.strip()
    run("buildah", "copy", ctr, probe, "/probe")
    run("buildah", "config", "--entrypoint", '["/probe"]', ctr)
    run("buildah", "commit", "--quiet", "--rm", ctr, f"{image}-probe")
    why = ""
    for runtime in ([], ["--runtime", "runc"]):
        r = run(*podman, *runtime, "run", "--rm", f"{image}-probe", timeout=120)
        if r.returncode == 0:
            podman += runtime
            break
        why += f"podman {' '.join(runtime) or '(default runtime)'}: {r.stderr.strip()}; "
    run("podman", "rmi", "-f", f"{image}-probe")
    if r.returncode != 0:
        print(f"oci_image_test: skipped the containers: rootful podman cannot run here: {why}")
        finish()
    r = run(*podman, "run", "--rm", image, "--version", timeout=120)
    check(version in r.stdout, f"the image's drover runs: {r.stdout!r}")

    r = run(*podman, "network", "create", "--internal", network)
    check(r.returncode == 0, f"podman network create: {r.stderr}")
    r = run(*podman, "run", "-d", "--name", server, "--network", network,
            "-v", f"{state}:/var/lib/drover", image)
    check(r.returncode == 0, f"the server container starts: {r.stderr}")
    access = os.path.join(state, "access.json")
    if wait_for("the server's access file", lambda: os.path.exists(access)):
        fingerprint = json.load(open(access))["fingerprint"]
        r = run(*podman, "run", "-d", "--init", "--name", worker, "--network", network,
                "--user", "root",
                "-v", f"{state}/token:/run/drover/token:ro", image,
                "worker", "--server", f"{server}:7210", "--token-file", "/run/drover/token",
                "--fingerprint", fingerprint, "--user", "nobody",
                "--workdir", "/var/lib/drover-worker", "--name", "in-a-container")
        check(r.returncode == 0, f"the worker container starts: {r.stderr}")

        def client(*args):
            return run(*podman, "exec", server, "drover", *args, timeout=120)

        if wait_for("the worker to attach",
                    lambda: "in-a-container" in client("workers").stdout):
            r = client("submit", "--wait", "--", "/usr/bin/drover", "--version")
            check(r.returncode == 0, f"a job runs through the containers: {r.stdout} {r.stderr}")
            job = re.match(r"(\d+)\n", r.stdout)
            check(job, f"submit names its job: {r.stdout!r}")
            task = f"{job.group(1) if job else 1}.0"
            r = client("logs", task)
            check(version in r.stdout, f"its log comes back: {r.stdout!r} {r.stderr}")
            r = client("status", task)
            ran_on = re.search(r"^worker +(\d+)$", r.stdout, re.M)
            listed = re.search(r"^(\d+) +in-a-container ", client("workers").stdout, re.M)
            check(ran_on and listed and ran_on.group(1) == listed.group(1),
                  f"it ran on the worker container: {r.stdout!r}")
            logs = run(*podman, "logs", worker)
            check("isolation rlimit" in logs.stdout + logs.stderr,
                  "an unprivileged worker container isolates tasks with rlimits")
    # The archive is the image: loaded back after the image is removed.
    run(*podman, "rm", "-f", "-t", "2", worker, server)
    run("podman", "rmi", "-f", image)
    r = run("podman", "load", "-i", os.path.join(out, f"drover_{version}.oci.tar"))
    check(r.returncode == 0 and run("podman", "image", "exists", image).returncode == 0,
          f"podman load -i brings the image back: {r.stdout} {r.stderr}")
finally:
    for name in (server, worker):
        if failures:
            logs = run(*podman, "logs", name)
            print(f"--- {name}:\n{logs.stdout}{logs.stderr}", file=sys.stderr)
    for name in (worker, server):
        run(*podman, "rm", "-f", "-t", "2", name)
    run(*podman, "network", "rm", "-f", network)
    run("podman", "rmi", "-f", image)
    shutil.rmtree(out, ignore_errors=True)
finish()
