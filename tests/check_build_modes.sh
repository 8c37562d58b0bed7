#!/usr/bin/env bash
# The build promises of README.md and src/worker/README.md, checked on the
# generated build files (nothing is compiled):
#   - with DROVER_UNITY_BUILD=ON (the default) each target compiles in
#     unity batches of at most eight sources;
#   - with DROVER_UNITY_BUILD=OFF every source compiles on its own;
#   - the worker's four folders each make their own library and test binary;
#   - RelWithDebInfo compiles the libraries at -O2 with line tables only
#     (-g1) unless DROVER_FULL_DEBUG_INFO=ON asks for -g.
# The given build directory is checked as configured; a scratch directory
# is configured the other way and checked too. Fails naming what is wrong.
set -u
src=${1:?usage: check_build_modes.sh SOURCE_DIR BINARY_DIR}
bin=${2:?usage: check_build_modes.sh SOURCE_DIR BINARY_DIR}
fail() { echo "build modes: $*" >&2; exit 1; }

# check DIR ON|OFF
check() {
  local dir=$1 mode=$2 ninja=$1/build.ninja
  [ -f "$ninja" ] || fail "$ninja missing"
  local batches
  batches=$(find "$dir/src" -path '*/Unity/unity_*_cxx.cxx' 2>/dev/null | wc -l)
  if [ "$mode" = ON ]; then
    [ "$batches" -gt 0 ] || fail "$dir: DROVER_UNITY_BUILD=ON but no unity batches"
    grep -q 'drover_core.dir/Unity/unity_0_cxx.cxx.o:' "$ninja" ||
      fail "$dir: drover_core is not built in batches"
    local f n
    for f in $(find "$dir/src" -path '*/Unity/unity_*_cxx.cxx'); do
      n=$(grep -c '^#include' "$f")
      [ "$n" -le 8 ] || fail "$f: a batch of $n sources (at most 8 promised)"
    done
  else
    grep -q '/Unity/' "$ninja" && fail "$dir: DROVER_UNITY_BUILD=OFF but unity batches are built"
    grep -q 'drover_core.dir/scheduler.cc.o:' "$ninja" ||
      fail "$dir: scheduler.cc is not compiled on its own"
  fi
  local part lib test
  for part in resources:drover_worker_resources:worker_resources_test \
              exec:drover_worker_exec:worker_exec_test \
              state:drover_worker_state:worker_state_test \
              agent:drover_agent:agent_test; do
    IFS=: read -r folder lib test <<<"$part"
    grep -q "src/worker/$folder/lib$lib.a:" "$ninja" ||
      fail "$dir: src/worker/$folder does not make lib$lib.a"
    grep -q "src/worker/$folder/CMakeFiles/$test.dir/" "$ninja" ||
      fail "$dir: src/worker/$folder does not make $test"
  done
}

mode=$(sed -n 's/^DROVER_UNITY_BUILD:BOOL=//p' "$bin/CMakeCache.txt")
[ -n "$mode" ] || fail "$bin/CMakeCache.txt names no DROVER_UNITY_BUILD"
check "$bin" "$mode"
other=ON
[ "$mode" = ON ] && other=OFF
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cmake -S "$src" -B "$scratch" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDROVER_UNITY_BUILD=$other >"$scratch.log" 2>&1 || {
  tail -20 "$scratch.log" >&2
  rm -f "$scratch.log"
  fail "configuring with DROVER_UNITY_BUILD=$other failed"
}
rm -f "$scratch.log"
check "$scratch" "$other"
# The scratch directory is RelWithDebInfo without DROVER_FULL_DEBUG_INFO.
grep -q -- '-O2 -g1 -DNDEBUG' "$scratch/build.ninja" ||
  fail "RelWithDebInfo does not compile at -O2 -g1"
grep -q -- '-O2 -g -DNDEBUG' "$scratch/build.ninja" &&
  fail "RelWithDebInfo still compiles something at -O2 -g"
echo "build modes: $mode in $bin and $other in a scratch configure, as promised"
