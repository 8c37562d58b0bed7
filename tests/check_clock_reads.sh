#!/usr/bin/env bash
# Time is read through a Clock (common/time.h): the core is handed `now`,
# and every shell reads the Clock it was given, so a test can run any of
# them on a SimulatedClock. Only common/time.cc reads the system clocks
# (RealClock, Stopwatch, Deadline); no other non-test source names
# std::chrono's clocks' now(), clock_gettime or RealClock, except a line
# that says why it must ("// reads the system clock: ...": a child after
# fork, a comparison with a file's mtime). Prints each offending line and
# fails if there is one.
set -u
src=${1:?usage: check_clock_reads.sh SRC_DIR}
pattern='(steady_clock|system_clock|high_resolution_clock|Steady)::now|\bRealClock\b|\b(gettimeofday|clock_gettime)\('
bad=0
checked=0
while IFS= read -r f; do
  checked=$((checked + 1))
  case "$f" in */common/time.h | */common/time.cc) continue ;; esac
  # Comments may name them.
  if hits=$(grep -nE "$pattern" "$f" | grep -vE '^[0-9]+:\s*//|// reads the system clock: '); then
    while IFS= read -r hit; do
      echo "clock reads: $f:$hit (read the Clock you were given: common/time.h)" >&2
    done <<< "$hits"
    bad=1
  fi
done < <(find "$src" \( -name '*.h' -o -name '*.cc' \) | grep -vE '_test\.cc$|_test_util\.h$|/testing/|test_helper\.cc$' | sort)
[ "$bad" = 0 ] || exit 1
echo "clock reads: $checked files read time only through a Clock"
