#!/usr/bin/env bash
# No production source file over 700 lines (docs/design.md, "Layers"): a
# file a reader can hold in their head, split by concept when it grows past
# that. Tests and test helpers are exempt. Prints each offender and fails
# if there is one.
set -u
src=${1:?usage: check_file_lengths.sh SRC_DIR}
limit=700
bad=0
checked=0
while IFS= read -r f; do
  checked=$((checked + 1))
  n=$(wc -l < "$f")
  if [ "$n" -gt "$limit" ]; then
    echo "file length: $f has $n lines (at most $limit; split it by concept)" >&2
    bad=1
  fi
done < <(find "$src" \( -name '*.h' -o -name '*.cc' \) | grep -vE '_test\.cc$|_test_util\.h$|/testing/|test_helper\.cc$' | sort)
[ "$bad" = 0 ] || exit 1
echo "file length: $checked files, none over $limit lines"
