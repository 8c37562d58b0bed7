#!/bin/sh
# Builds the libFuzzer targets with clang++ (ASan + UBSan) and runs each for a
# bounded time. Usage: fuzz/run.sh [seconds per target, default 20]
# Needs the Debian package `clang` (clang 14 ships libFuzzer). Artifacts
# (crashing inputs) land in build-fuzz/; the corpora grow in build-fuzz/corpus/.
set -eu
seconds=${1:-20}
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/build-fuzz"
mkdir -p "$out"
cxx=${CXX_FUZZ:-clang++}
flags="-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I$root/src"
lib_sources="
  src/common/status.cc src/common/ids.cc src/common/quantity.cc src/common/time.cc
  src/core/model.cc src/core/resources.cc src/core/dag.cc
  src/proto/json_util.cc src/proto/core_json.cc src/proto/job_spec_json.cc
  src/proto/job_toml.cc src/proto/messages.cc"
objs=""
for src in $lib_sources; do
  obj="$out/$(echo "$src" | tr / _).o"
  if [ ! -f "$obj" ] || [ "$root/$src" -nt "$obj" ]; then
    $cxx $flags -fsanitize=fuzzer-no-link -c "$root/$src" -o "$obj"
  fi
  objs="$objs $obj"
done
for target in messages job_toml; do
  # shellcheck disable=SC2086
  $cxx $flags "$root/fuzz/${target}_fuzz.cc" $objs -o "$out/${target}_fuzz"
  mkdir -p "$out/corpus/$target"
  cp -n "$root/fuzz/corpus/$target/"* "$out/corpus/$target/" 2>/dev/null || true
  (cd "$out" && "./${target}_fuzz" -max_total_time="$seconds" -max_len=65536 \
      "$out/corpus/$target")
done
