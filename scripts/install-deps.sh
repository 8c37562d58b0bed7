#!/usr/bin/env bash
# Installs every Debian 12 package Drover needs to build and test.
# Idempotent: packages already present are left alone, and apt is only
# touched when something is missing. Runs as root (CI) or through sudo.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libboost1.81-dev libssl-dev libhiredis-dev
  libtomlplusplus-dev libcli11-dev nlohmann-json3-dev
  libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  redis-server iproute2 procps util-linux python3
  # Python functions as tasks (python/drover/functions.py): cloudpickle
  # carries lambdas and closures; workers unpickle them with it.
  python3-cloudpickle
  chromium
  # The Debian package's test (packaging/): lintian checks the .deb,
  # systemd-analyze the units.
  lintian systemd
  # The OCI image's test (tests/oci_image_test.py): buildah builds it,
  # rootful podman runs it (runc where crun cannot, netavark and
  # aardvark-dns for the test's private network, catatonit for --init).
  buildah podman runc netavark aardvark-dns iptables catatonit
  # Workers borrowed from Slurm (tests/slurm_alloc_test.py starts a
  # one-node Slurm of its own).
  slurm-wlm munge
  # fuzz/run.sh (the `fuzz` test): clang 14 and its libFuzzer runtime,
  # which the clang package only recommends.
  clang libclang-rt-14-dev
)
# The web dashboard is built with Node.js and npm (web/, docs/dashboard.md):
# Debian's, unless a node and npm are already on PATH.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
