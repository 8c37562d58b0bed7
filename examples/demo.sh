#!/usr/bin/env bash
# `make demo`: a local cluster (`drover up`) in a temporary directory runs
# examples/pipeline.toml, prints the combined result and stops.
# Usage: examples/demo.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
drover="$build/drover"
[ -x "$drover" ] || { echo "demo: $drover not built (make build)" >&2; exit 1; }

tmp="$(mktemp -d /tmp/drover-demo.XXXXXX)"
# Clients and the server agree on this access file, so a cluster you may
# already run (with the default access file) is left alone.
export DROVER_ACCESS="$tmp/access.json"
workers=2
if [ "$(nproc)" -lt 2 ]; then workers=1; fi

# up's output comes through a FIFO: this script reads it up to the readiness
# line, then a background cat copies the rest to up.log until up exits.
mkfifo "$tmp/up.pipe"
"$drover" up --workers "$workers" --port 0 --state-dir "$tmp/state" >"$tmp/up.pipe" 2>&1 &
up_pid=$!
cat_pid=""
cleanup() {
  kill -TERM "$up_pid" 2>/dev/null || true
  wait "$up_pid" 2>/dev/null || true
  if [ -n "$cat_pid" ]; then wait "$cat_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

exec 3<"$tmp/up.pipe"
ready=0
# Ends at the readiness line, at EOF (up exited) or after 60 s of silence.
while IFS= read -r -t 60 line <&3; do
  printf '%s\n' "$line" >>"$tmp/up.log"
  case "$line" in "drover: listening on"*) ready=1; break ;; esac
done
if [ "$ready" -ne 1 ]; then
  echo "demo: drover up did not start:" >&2
  cat "$tmp/up.log" >&2
  exit 1
fi
cat <&3 >>"$tmp/up.log" &
cat_pid=$!
exec 3<&-
grep "^drover: " "$tmp/up.log" | grep -v "to add a machine" || true
echo

status=0
"$drover" run examples/pipeline.toml | tee "$tmp/run.log" || status=$?
job="$(sed -n 's/^job \([0-9]*\) .*/\1/p' "$tmp/run.log" | head -n 1)"
if [ -n "$job" ]; then
  echo
  echo "== the combine task ($job.8) =="
  "$drover" status "$job.8" || status=1
fi
if [ "$status" -ne 0 ]; then
  echo "demo: the pipeline failed (exit $status); server log:" >&2
  tail -n 40 "$tmp/up.log" >&2
fi
exit "$status"
