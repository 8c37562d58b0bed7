#!/bin/sh
# Builds the libFuzzer targets with clang++ (ASan + UBSan) and runs each for a
# bounded time. Usage: fuzz/run.sh [seconds per target, default 20] [target...]
# Targets: messages, records, job_toml, http, events, api_requests, users (default:
# all). Needs the Debian packages `clang` and `libclang-rt-14-dev`
# (libFuzzer; scripts/install-deps.sh) and the libraries the server links
# (Boost, OpenSSL, spdlog, fmt). Artifacts (crashing inputs) land in
# build-fuzz/; the corpora grow in build-fuzz/corpus/. Exits non-zero when a
# target finds a crash.
set -eu
seconds=${1:-20}
[ $# -gt 0 ] && shift
targets=${*:-messages records job_toml http events api_requests users}
root=$(cd "$(dirname "$0")/.." && pwd)
out=${FUZZ_OUT:-$root/build-fuzz}
mkdir -p "$out"
cxx=${CXX_FUZZ:-clang++}
# The spdlog and fmt of Debian, as shared libraries (the CMake build links
# its own static copies).
defines="-DSPDLOG_COMPILED_LIB -DSPDLOG_FMT_EXTERNAL -DFMT_SHARED -DSPDLOG_SHARED_LIB"
# Asio and Beast compiled apart, in src/net/boost_src.cc, as in the CMake
# build (src/net/CMakeLists.txt).
defines="$defines -DBOOST_ASIO_SEPARATE_COMPILATION -DBOOST_BEAST_SEPARATE_COMPILATION"
# FUZZ_SANITIZE="" and FUZZ_OPT=-O0 make a much quicker build (libFuzzer
# alone still catches crashes and aborts, not memory errors).
sanitize=${FUZZ_SANITIZE-address,undefined}
flags="-std=c++20 ${FUZZ_OPT:--O1} -g -fsanitize=fuzzer${sanitize:+,$sanitize} $defines -I$root/src"
case $sanitize in *undefined*) flags="$flags -fno-sanitize-recover=undefined" ;; esac
proto_sources="
  src/common/status.cc src/common/ids.cc src/common/quantity.cc src/common/time.cc
  src/common/suggest.cc
  src/core/model.cc src/core/resources.cc src/core/dag.cc src/core/input_select.cc
  src/proto/json_util.cc src/proto/json_type_name.cc src/proto/core_json.cc
  src/proto/job_spec_json.cc src/proto/job_spec_isolation.cc src/proto/job_spec_function.cc src/proto/function_task.cc
  src/proto/job_toml.cc src/proto/messages.cc src/proto/messages_batch.cc
  src/proto/messages_isolation.cc src/proto/log_frame.cc src/proto/binary_io.cc
  src/proto/binary_fields.cc src/proto/messages_binary.cc"
net_sources="
  src/proto/api_json.cc
  src/net/boost_src.cc src/net/server.cc src/net/server_admission.cc src/net/server_listen.cc
  src/net/server_routing.cc src/net/http_session.cc src/net/upload_sink.cc src/net/file_send.cc
  src/net/http_types.cc src/net/event_loop.cc src/net/tls_identity.cc
  src/net/token.cc src/net/local_socket.cc src/net/private_file.cc src/net/json_text.cc
  src/net/accept_pause.cc src/net/fd_limit.cc src/net/ws_session_impl.cc src/net/read_pacer.cc
  src/net/sha256.cc"
# True when `obj` is missing or older than a file it was made from (as
# listed in its dependency file).
stale() {
  [ -f "$1" ] && [ -f "$1.d" ] || return 0
  for dep in $(sed -e 's/^[^:]*://' -e 's/\\$//' "$1.d"); do
    [ "$dep" -nt "$1" ] && return 0
  done
  return 1
}
# Compiles the stale objects of the given sources, $jobs at a time, and
# prints every object's path. Fails when a compilation fails.
jobs=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}
objects() {
  objs=""
  pids=""
  running=0
  for src in "$@"; do
    obj="$out/$(echo "$src" | tr / _).o"
    if stale "$obj"; then
      # shellcheck disable=SC2086
      $cxx $flags -fsanitize=fuzzer-no-link -MMD -MF "$obj.d" -c "$root/$src" -o "$obj" >&2 &
      pids="$pids $!"
      running=$((running + 1))
      if [ "$running" -ge "$jobs" ]; then
        for pid in $pids; do wait "$pid" || exit 1; done
        pids=""
        running=0
      fi
    fi
    objs="$objs $obj"
  done
  for pid in $pids; do wait "$pid" || exit 1; done
  echo "$objs"
}
# shellcheck disable=SC2086
proto_objs=$(objects $proto_sources)
net_objs=""
case " $targets " in
  *" http "*)
    # shellcheck disable=SC2086
    net_objs=$(objects $net_sources)
    ;;
esac
for target in $targets; do
  libs=""
  objs=$proto_objs
  if [ "$target" = http ]; then
    objs="$objs $net_objs"
    libs="-lspdlog -lfmt -lssl -lcrypto -lpthread"
  fi
  if [ "$target" = api_requests ]; then
    # shellcheck disable=SC2086
    objs="$objs $(objects src/proto/api_json.cc)"
  fi
  if [ "$target" = users ]; then
    # shellcheck disable=SC2086
    objs="$objs $(objects src/server/users_file.cc src/server/user_requests.cc \
      src/net/identity.cc src/net/sha256.cc src/net/http_types.cc src/net/json_text.cc)"
    libs="-lcrypto"
  fi
  if [ "$target" = records ]; then
    # shellcheck disable=SC2086
    objs="$objs $(objects src/proto/record_codec.cc src/proto/record_binary.cc \
      src/core/reasons.cc)"
  fi
  if [ "$target" = events ]; then
    # shellcheck disable=SC2086
    objs="$objs $(objects src/cli/job_watch.cc)"
  fi
  # shellcheck disable=SC2086
  $cxx $flags "$root/fuzz/${target}_fuzz.cc" $objs $libs -o "$out/${target}_fuzz"
  mkdir -p "$out/corpus/$target"
  cp -n "$root/fuzz/corpus/$target/"* "$out/corpus/$target/" 2>/dev/null || true
  (cd "$out" && "./${target}_fuzz" -max_total_time="$seconds" -max_len=65536 \
      -error_exitcode=1 -timeout_exitcode=1 \
      -print_final_stats=1 "$out/corpus/$target")
done
