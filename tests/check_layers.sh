#!/usr/bin/env bash
# Which module may include which (docs/design.md, "Layers"). Each module's
# non-test sources may include only the modules listed for it; the worker
# takes only the core's data types (core/model.h, core/resources.h,
# core/reasons.h) and the
# wire protocol (proto/messages.h, proto/messages_binary.h, proto/log_frame.h), never the scheduler
# (CMake: it links drover_model and drover_wire, not drover_core). Prints each offending line and fails if there is one.
set -u
src=${1:?usage: check_layers.sh SRC_DIR}
declare -A allowed=(
  [common]="common"
  [core]="common core"
  [proto]="common core proto"
  [sim]="common core proto sim"
  [net]="common net"
  [store]="common net store"
  [metrics]="common core metrics"
  [worker]="common net worker proto/messages.h proto/messages_binary.h proto/log_frame.h core/model.h core/resources.h core/reasons.h"
  [server]="common core metrics net proto server store"
)
bad=0
checked=0
for module in "${!allowed[@]}"; do
  files=$(find "$src/$module" \( -name '*.h' -o -name '*.cc' \) | grep -vE '_test\.cc$|_test_util\.h$|/testing/|test_helper\.cc$')
  for f in $files; do
    checked=$((checked + 1))
    while IFS= read -r line; do
      inc=${line#*\"}
      inc=${inc%%\"*}
      ok=0
      for a in ${allowed[$module]}; do
        case "$inc" in "$a"/* | "$a") ok=1 ;; esac
      done
      if [ "$ok" = 0 ]; then
        echo "layers: $f includes \"$inc\" (a $module file may include only: ${allowed[$module]})" >&2
        bad=1
      fi
    done < <(grep -E '^#include "[a-z_]+/' "$f")
  done
done
[ "$bad" = 0 ] || exit 1
echo "layers: $checked files clean"
