#!/bin/sh
# The README's promise about `make test`: the long rounds (fuzzing, the
# randomized chaos tests) carry the ctest label "long", so `make test`
# (ctest -LE long) leaves them out and `make test-long` (ctest -L long)
# runs them; every other test runs in `make test`.
# Usage: check_long_label.sh BUILD_DIR
set -eu
build=$1
cd "$build"
long=$(ctest -N -L long | sed -n 's/^ *Test *#[0-9]*: //p' | sort)
short=$(ctest -N -LE long | sed -n 's/^ *Test *#[0-9]*: //p' | sort)
fail=0
for name in $long; do
  case $name in
    fuzz | chaos_memory | chaos_redis | chaos_files_*) ;;
    *) echo "long_label: $name is labelled long but is not a fuzz or chaos round"; fail=1 ;;
  esac
done
for name in $short; do
  case $name in
    fuzz | chaos_memory | chaos_redis | chaos_files_*)
      echo "long_label: $name runs in make test (it should be labelled long)"; fail=1 ;;
  esac
done
echo "$long" | grep -qx fuzz || { echo "long_label: no fuzz test labelled long"; fail=1; }
[ "$fail" -eq 0 ] && echo "long_label: $(echo "$long" | wc -w) long, $(echo "$short" | wc -w) in make test"
exit "$fail"
