#!/usr/bin/env bash
# The scheduling core does no I/O, reads no clock and starts no thread
# (DESIGN.md section 1). CMake already stops it linking anything but
# drover_common; this check stops it including or calling what would break
# the rule. Prints each offending line and fails if there is one.
set -u
dir=${1:?usage: check_core_purity.sh SRC_CORE_DIR}
pattern='#include <(thread|mutex|atomic|future|condition_variable|fstream|iostream|cstdio|filesystem|stop_token)>|#include <(sys|boost|asio|hiredis|unistd|fcntl|spdlog)|system_clock::now|steady_clock::now|high_resolution_clock|random_device|sleep_for|getenv|std::cout|std::cerr|printf\('
files=$(find "$dir" -name '*.h' -o -name '*.cc' | grep -v '_test\.cc$' | grep -v '/testing/')
if [ -z "$files" ]; then
  echo "core_purity: no sources found under $dir" >&2
  exit 1
fi
hits=$(grep -nE "$pattern" $files)
if [ -n "$hits" ]; then
  echo "core_purity: the core must not do I/O, read clocks or start threads:" >&2
  echo "$hits" >&2
  exit 1
fi
echo "core_purity: $(echo "$files" | wc -l) files clean"
