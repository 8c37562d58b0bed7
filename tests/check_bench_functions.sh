#!/bin/sh
# bench/functions (W4) at a small size: it runs through a real local
# cluster and prints the fields bench/README.md documents (not a timing:
# the figures are not judged, only that they are there and sane). With
# --peers, Celery's and Dask's figures are numbers where this python3 has
# them (and redis-server is installed), null where it does not.
# Usage: check_bench_functions.sh SOURCE_DIR BUILD_DIR
set -eu
src=$1
build=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
cd "$src"
python3 bench/functions --tasks 20 --numpy-tasks 2 --runs 2 --peers --build "$build" >"$out"
python3 - "$out" <<'PY'
import importlib.util, json, shutil, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
if len(lines) != 1 or lines[0].get("bench") != "W4":
    sys.exit(f"check_bench_functions: expected one W4 line, got {lines!r}")
d = lines[0]
def has(*modules):
    return all(importlib.util.find_spec(m) is not None for m in modules)
optional = {
    "warm_cpu_ms_per_task": has("numpy"),
    "fresh_cpu_ms_per_task": has("numpy"),
    "cpu_ratio_fresh_vs_warm": has("numpy"),
    "celery_tasks_per_s": has("celery", "redis") and shutil.which("redis-server") is not None,
    "dask_tasks_per_s": has("distributed"),
}
optional["ratio_vs_celery"] = optional["celery_tasks_per_s"]
optional["ratio_vs_dask"] = optional["dask_tasks_per_s"]
need = ["tasks_per_s", "fork_floor_tasks_per_s", "ratio_vs_fork_floor", "fresh_tasks_per_s",
        "cold_tasks_per_s", "chunked_calls_per_s", "roundtrip_ms", "api_roundtrip_ms"]
bad = []
for k in need + list(optional):
    if k not in d:
        bad.append(f"{k} missing")
        continue
    v = d[k]
    if v is None and not optional.get(k, True):
        continue  # this python3 lacks what it needs: null says so
    if not isinstance(v, (int, float)) or v <= 0:
        bad.append(f"{k} = {v!r}")
if bad:
    sys.exit("check_bench_functions: " + "; ".join(bad))
print("check_bench_functions: W4 printed all its fields:", json.dumps(d))
PY
