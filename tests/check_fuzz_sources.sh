#!/usr/bin/env bash
# The fuzz targets (fuzz/run.sh, built apart from CMake with clang and its
# sanitizers) parse bytes with the protocol module's code: every source of
# src/proto's libraries must be in run.sh's lists, or the targets stop
# linking, which only the long round (`make test-long`) would find.
# Prints each missing source and fails if there is one.
set -u
root=${1:?usage: check_fuzz_sources.sh REPO_ROOT}
bad=0
sources=$(sed -n '/drover_library(drover_\(wire\|proto\)/,/DEPS/p' "$root/src/proto/CMakeLists.txt" |
  grep -oE '[a-z_]+\.cc')
count=0
for src in $sources; do
  count=$((count + 1))
  if ! grep -q "src/proto/$src" "$root/fuzz/run.sh"; then
    echo "fuzz_sources: src/proto/$src is in a proto library but not in fuzz/run.sh" >&2
    bad=1
  fi
done
if [ "$count" -lt 5 ]; then
  echo "fuzz_sources: found only $count sources in src/proto/CMakeLists.txt: is the check stale?" >&2
  exit 1
fi
[ "$bad" = 0 ] && echo "fuzz_sources: all $count proto sources are in fuzz/run.sh"
exit "$bad"
