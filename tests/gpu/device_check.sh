#!/usr/bin/env bash
# The GPU check for a machine with NVIDIA GPUs, one script, a few
# minutes: builds drover, then
#   1. detects the GPUs through NVML (the worker's offer) and through
#      nvidia-smi, and compares index, UUID, model and memory;
#   2. runs two tasks that share one GPU (--gpus 0.5 each) and checks what
#      each sees: CUDA_VISIBLE_DEVICES (NVML index) with
#      CUDA_DEVICE_ORDER=PCI_BUS_ID, naming the same GPU as nvidia-smi;
#   3. runs a task without a GPU and checks it cannot open /dev/nvidia0
#      (cgroup v1 devices controller; skipped where that is not in use);
#   4. runs a task that takes GPU memory (a CUDA program built with nvcc, or
#      python3 with torch) and reads the memory the worker saw in use.
# It prints one JSON line: {"ok": bool, "checks": {...}, "skipped": [...]}.
# Without a GPU it still builds, starts the cluster with the project's fake
# NVML library and runs what needs no GPU, listing what it skipped.
#
# Usage: tests/gpu/device_check.sh [BUILD_DIR]   (as root for the devices check)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
work=$(mktemp -d /tmp/drover_gpu_XXXXXX)
skipped=()
declare -A checks
fail=0
up_pid=""
cleanup() {
  [ -n "$up_pid" ] && kill "$up_pid" 2>/dev/null && wait "$up_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
note() { echo "device_check: $*" >&2; }
check() {  # name, result (pass|fail|text)
  checks[$1]=$2
  [ "$2" = fail ] && fail=1
  note "$1: $2"
}

if [ ! -x "$build/drover" ]; then
  (cd "$root" && cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null &&
    cmake --build "$build" --target drover fake_nvml_good >&2) || { echo '{"ok":false,"error":"build failed"}'; exit 1; }
fi
drover=$build/drover

real_gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then real_gpu=1; fi
env_extra=()
if [ $real_gpu = 0 ]; then
  skipped+=("no NVIDIA GPU here: the fake NVML library stands in; nvidia-smi comparison, device denial and GPU memory skipped")
  cmake --build "$build" --target fake_nvml_good >/dev/null 2>&1
  env_extra=(FAKE_NVML_DEVICES=2 LD_LIBRARY_PATH="$build/tests/fake_nvml/good")
fi

export DROVER_ACCESS=$work/access.json DROVER_LOCK_DIR=$work
env "${env_extra[@]}" "$drover" up --workers 1 --port 0 --state-dir "$work/state" \
  --access-file "$work/access.json" >"$work/up.log" 2>&1 &
up_pid=$!
for _ in $(seq 300); do grep -q "drover: listening on" "$work/up.log" && break; sleep 0.1; done
grep -q "drover: listening on" "$work/up.log" || { echo '{"ok":false,"error":"drover up did not start"}'; exit 1; }

# 1. NVML (the worker's offer) against nvidia-smi.
"$drover" workers --json >"$work/workers.json"
nvml=$(python3 -c '
import json,sys
w=json.load(open(sys.argv[1]))["workers"]
print("\n".join("%d,%s,%s,%d" % (g["index"], g["uuid"], g["model"], g["memory_bytes"] // 2**20)
                for x in w for g in x["gpus"]))' "$work/workers.json")
gpus=$(printf '%s\n' "$nvml" | grep -c . || true)
check nvml_gpus "$gpus"
[ "$gpus" -ge 1 ] || check nvml_detects_gpus fail
if [ $real_gpu = 1 ]; then
  smi=$(nvidia-smi --query-gpu=index,uuid,name,memory.total --format=csv,noheader,nounits |
        sed 's/, /,/g')
  if [ "$(printf '%s\n' "$nvml" | cut -d, -f1-3)" = "$(printf '%s\n' "$smi" | cut -d, -f1-3)" ]; then
    check nvml_matches_nvidia_smi pass
  else
    check nvml_matches_nvidia_smi fail
    note "NVML: $nvml"; note "nvidia-smi: $smi"
  fi
fi

# 2. Two tasks sharing one GPU.
show='echo "$CUDA_VISIBLE_DEVICES $CUDA_DEVICE_ORDER" > "$DROVER_RESULT"'
job=$("$drover" submit --array 0-1 --gpus 0.5 --wait -- sh -c "$show" | head -1)
seen=$(for i in 0 1; do "$drover" status --json "$job.$i" | python3 -c 'import json,sys; print(json.load(sys.stdin)["outcome"]["result"].strip())'; done)
if [ "$(printf '%s\n' "$seen" | sort -u | wc -l)" = 1 ] && printf '%s\n' "$seen" | grep -q " PCI_BUS_ID$"; then
  check shared_gpu_env pass
else
  check shared_gpu_env fail
  note "tasks saw: $seen"
fi
if [ $real_gpu = 1 ]; then
  idx=$(printf '%s\n' "$seen" | head -1 | cut -d' ' -f1)
  uuid_task=$("$drover" submit --gpus 0.5 --wait -- sh -c 'nvidia-smi --query-gpu=uuid --format=csv,noheader > "$DROVER_RESULT"' | head -1)
  got=$("$drover" status --json "$uuid_task.0" | python3 -c 'import json,sys; print(json.load(sys.stdin)["outcome"]["result"].strip())')
  want=$(printf '%s\n' "$nvml" | awk -F, -v i="$idx" '$1==i {print $2}')
  [ "$got" = "$want" ] && check cuda_index_is_the_assigned_gpu pass || check cuda_index_is_the_assigned_gpu fail
fi

# 3. A task without a GPU cannot open the device node.
if [ $real_gpu = 1 ] && [ -e /dev/nvidia0 ] && [ -d /sys/fs/cgroup/devices ]; then
  j=$("$drover" submit --wait -- sh -c 'if exec 3</dev/nvidia0; then echo opened; else echo denied; fi > "$DROVER_RESULT"' | head -1)
  r=$("$drover" status --json "$j.0" | python3 -c 'import json,sys; print(json.load(sys.stdin)["outcome"]["result"].strip())')
  [ "$r" = denied ] && check device_denied_without_gpu pass || check device_denied_without_gpu fail
else
  skipped+=("device denial: needs a GPU and the cgroup v1 devices controller")
fi

# 4. GPU memory a task used, as the worker reported it.
if [ $real_gpu = 1 ] && command -v nvcc >/dev/null 2>&1; then
  cat >"$work/hold.cu" <<'CU'
#include <cstdio>
#include <unistd.h>
int main() { void* p; if (cudaMalloc(&p, 1ull << 30) != cudaSuccess) return 1; sleep(8); return 0; }
CU
  if nvcc -o "$work/hold" "$work/hold.cu" 2>/dev/null; then
    j=$("$drover" submit --gpus 1 -- "$work/hold" | head -1)
    peak=0
    for _ in $(seq 60); do
      used=$("$drover" workers --json | python3 -c 'import json,sys; print(max([g["mem_used_bytes"] for w in json.load(sys.stdin)["workers"] for g in w.get("utilization",{}).get("gpus",[])] or [0]))')
      [ "$used" -gt "$peak" ] && peak=$used
      sleep 0.25
    done
    "$drover" wait -q "$j" >/dev/null
    check gpu_mem_seen_bytes "$peak"
    [ "$peak" -ge $((1 << 30)) ] || check gpu_mem_seen fail
  else
    skipped+=("GPU memory: nvcc could not build the CUDA program")
  fi
else
  skipped+=("GPU memory: needs a GPU and nvcc")
fi

python3 - "$fail" "${#skipped[@]}" "${skipped[@]}" <<PY
import json, sys
fail = sys.argv[1] == "1"
skipped = sys.argv[3:3 + int(sys.argv[2])]
checks = {$(for k in "${!checks[@]}"; do printf '"%s": "%s", ' "$k" "${checks[$k]}"; done)}
print(json.dumps({"ok": not fail, "real_gpu": $real_gpu == 1, "checks": checks, "skipped": skipped}))
PY
exit $fail
