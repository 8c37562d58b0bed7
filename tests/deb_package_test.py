#!/usr/bin/env python3
"""The Debian package (`make deb`, packaging/build-deb.sh) end to end.

Builds the .deb from the drover binary of BUILD_DIR; checks it with lintian
(no errors) where lintian is installed; then, as root on a machine without
a drover package, installs it with dpkg -i, checks what it put in place,
verifies the systemd units with systemd-analyze (where installed), starts
the server the way drover-server.service does (its user, its ExecStart,
its state directory) and asks it for its status, removes the package
(the config stays) and purges it (config, state and user go). A part this
machine cannot run prints why it was skipped.

Usage: deb_package_test.py SOURCE_DIR BUILD_DIR
"""
import os
import pwd
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile

src, build = sys.argv[1], sys.argv[2]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}", file=sys.stderr)


def run(*args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=300, **kw)


def skip(why):
    print(f"deb_package_test: skipped: {why}")


def finish():
    if failures:
        sys.exit(f"deb_package_test: {len(failures)} failed")
    print("deb_package_test: ok")
    sys.exit(0)


out = tempfile.mkdtemp(prefix="drover-deb-")
r = run(os.path.join(src, "packaging", "build-deb.sh"), build, out)
check(r.returncode == 0, f"build-deb.sh: {r.stderr}")
deb = r.stdout.strip()
contents = run("dpkg-deb", "--contents", deb).stdout
for path in ("./usr/bin/drover", "./lib/systemd/system/drover-server.service",
             "./lib/systemd/system/drover-worker.service", "./etc/drover/drover.toml",
             "./usr/lib/systemd/user/drover-desktop.service",
             "./usr/share/man/man1/drover.1.gz", "./usr/share/bash-completion/completions/drover",
             "./usr/share/zsh/vendor-completions/_drover",
             "./usr/lib/python3/dist-packages/drover/__init__.py",
             "./usr/lib/python3/dist-packages/drover/functions.py"):
    check(path in contents, f"the package holds {path}")
check(contents.splitlines()[0].startswith("drwxr-xr-x"), "the package's root is mode 755")

if shutil.which("lintian"):
    r = run("lintian", deb)
    errors = [l for l in r.stdout.splitlines() if l.startswith("E:")]
    check(not errors, f"lintian errors: {errors}")
else:
    skip("lintian is not installed (scripts/install-deps.sh installs it)")

if os.geteuid() != 0:
    skip("installing needs root")
    finish()
if run("dpkg-query", "-W", "drover").returncode == 0:
    skip("a drover package is already installed here; not touching it")
    finish()

try:
    r = run("dpkg", "-i", deb)
    check(r.returncode == 0, f"dpkg -i: {r.stdout} {r.stderr}")
    check(run("/usr/bin/drover", "--version").returncode == 0, "/usr/bin/drover runs")
    # The Python client comes with it, at the binary's version, for
    # Debian's python3 with no checkout on its path.
    r = run("/usr/bin/python3", "-I", "-c",
            "import drover, drover.functions; print(drover.__version__, drover.__file__)",
            cwd="/")
    binary_version = run("/usr/bin/drover", "--version").stdout.split()[-1]
    check(r.returncode == 0 and r.stdout.split()[:1] == [binary_version] and
          r.stdout.split()[1].startswith("/usr/lib/python3/dist-packages/drover/"),
          f"import drover from the package: {r.stdout} {r.stderr}")
    check(run("getent", "passwd", "drover").returncode == 0, "the drover user exists")
    r = run("bash", "-c", "source /usr/share/bash-completion/completions/drover; "
            "COMP_WORDS=(drover ser); COMP_CWORD=1; _drover; echo ${COMPREPLY[@]}; "
            "COMP_WORDS=(drover config che); COMP_CWORD=2; _drover; echo ${COMPREPLY[@]}")
    check(r.stdout.split("\n")[:2] == ["server", "check"], f"bash completion: {r.stdout!r}")
    r = run("gzip", "-dc", "/usr/share/man/man1/drover.1.gz")
    check(".SS drover server" in r.stdout and "\\-\\-config" in r.stdout,
          "the man page lists the commands and their flags")
    r = run("/usr/bin/drover", "config", "check", "/etc/drover/drover.toml")
    check(r.returncode == 0, f"the packaged config checks: {r.stdout} {r.stderr}")

    if shutil.which("systemd-analyze"):
        r = run("systemd-analyze", "verify", "/lib/systemd/system/drover-server.service",
                "/lib/systemd/system/drover-worker.service")
        check(r.returncode == 0, f"systemd-analyze verify: {r.stdout} {r.stderr}")
        # The desktop worker is a user unit: verified by a user manager's
        # rules (which need a runtime directory, absent for root here).
        xdg = tempfile.mkdtemp(prefix="drover-xdg-")
        r = run("systemd-analyze", "--user", "verify",
                "/usr/lib/systemd/user/drover-desktop.service",
                env=dict(os.environ, XDG_RUNTIME_DIR=xdg))
        check(r.returncode == 0 and "Unknown" not in r.stdout + r.stderr,
              f"systemd-analyze --user verify: {r.stdout} {r.stderr}")
        shutil.rmtree(xdg, ignore_errors=True)
    else:
        skip("systemd-analyze is not installed: the units were not verified")

    # The desktop unit's command line, its specifiers filled in for a
    # person's home, with the config file the unit's comment shows: the
    # worker accepts it (--check: flags, config and idle source; no server
    # is started here).
    unit = open("/usr/lib/systemd/user/drover-desktop.service").read()
    exec_start = next(l.split("=", 1)[1] for l in unit.splitlines()
                      if l.startswith("ExecStart="))
    home = tempfile.mkdtemp(prefix="drover-home-")
    os.makedirs(os.path.join(home, ".config", "drover"))
    with open(os.path.join(home, ".config", "drover", "desktop.toml"), "w") as f:
        f.write('[worker]\nidle_after = "15m"\nidle_source = "file:%s/owner"\n' % home)
    argv = [a.replace("%E", home + "/.config").replace("%S", home + "/.local/state")
            for a in shlex.split(exec_start)]
    if os.geteuid() == 0:
        # A user unit: it runs as the person lending the machine, never as
        # root (as root it would run each task as its job's user, whose
        # accounts could not pass this private home: refused, saying so).
        for d, _, files in os.walk(home):
            for path in [d] + [os.path.join(d, f) for f in files]:
                os.chown(path, 65534, 65534)
        argv = ["runuser", "-u", "nobody", "--"] + argv
    r = run(*argv, "--check")
    check(r.returncode == 0 and "owner input from file " in r.stdout,
          f"the desktop unit's command checks: {r.stdout} {r.stderr}")
    shutil.rmtree(home, ignore_errors=True)

    # The server as its unit starts it: user drover, the unit's ExecStart,
    # /var/lib/drover made as StateDirectory= makes it (port 0 and the
    # loopback address added: 7210 is not taken from anything on this
    # machine, and no beacon goes out to the LAN).
    unit = open("/lib/systemd/system/drover-server.service").read()
    exec_start = next(l.split("=", 1)[1] for l in unit.splitlines()
                      if l.startswith("ExecStart="))
    user = next(l.split("=", 1)[1] for l in unit.splitlines() if l.startswith("User="))
    os.makedirs("/var/lib/drover", mode=0o700, exist_ok=True)
    pw = pwd.getpwnam(user)
    os.chown("/var/lib/drover", pw.pw_uid, pw.pw_gid)
    server = subprocess.Popen(["runuser", "-u", user, "--", *shlex.split(exec_start),
                               "--port", "0", "--bind", "127.0.0.1"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in server.stdout:
        lines.append(line)
        if line.startswith("drover: listening on "):
            break
    check(any(l.startswith("drover: listening on ") for l in lines),
          f"the server started as its unit does: {''.join(lines)!r}")
    r = run("/usr/bin/drover", "status",
            env=dict(os.environ, DROVER_ACCESS="/var/lib/drover/access.json"))
    check(r.returncode == 0, f"drover status against it: {r.stdout} {r.stderr}")
    server.send_signal(signal.SIGTERM)
    server.communicate(timeout=30)
    owned = [os.stat(os.path.join("/var/lib/drover", n)).st_uid == pw.pw_uid
             for n in os.listdir("/var/lib/drover")]
    check(owned and all(owned), "the server's state belongs to its user")

    r = run("dpkg", "-r", "drover")
    check(r.returncode == 0, f"dpkg -r: {r.stdout} {r.stderr}")
    check(not os.path.exists("/usr/bin/drover"), "remove takes the binary")
    check(not os.path.exists("/usr/lib/python3/dist-packages/drover"),
          "remove takes the Python client, byte code and all")
    check(os.path.exists("/etc/drover/drover.toml"), "remove keeps the config")
    r = run("dpkg", "-P", "drover")
    check(r.returncode == 0, f"dpkg -P: {r.stdout} {r.stderr}")
    check(not os.path.exists("/etc/drover/drover.toml"), "purge takes the config")
    check(not os.path.exists("/var/lib/drover"), "purge takes the state")
    check(run("getent", "passwd", "drover").returncode != 0, "purge takes the user")
finally:
    if run("dpkg-query", "-W", "drover").returncode == 0:
        run("dpkg", "-P", "drover")
    shutil.rmtree(out, ignore_errors=True)
finish()
