#!/usr/bin/env bash
# Sanitizer lanes (issue 22 item 5; docs/testing.md "Sanitizer lanes").
#
#   scripts/sanitize.sh asan [ctest args...]   AddressSanitizer + UndefinedBehaviorSanitizer (+ LSan)
#   scripts/sanitize.sh tsan [ctest args...]   ThreadSanitizer
#   scripts/sanitize.sh thread-safety          clang -Wthread-safety -Werror=thread-safety, build only
#
# asan/tsan configure their own build directory (build-asan, build-tsan; AQ_SANITIZE_BUILD_DIR
# overrides), build everything with ccache (the same CCACHE_* settings as scripts/build.sh, so a
# fresh clone in CI hits this machine's cache), then run ctest in it with the given arguments
# (default: -LE soak, every tier but the storm). Compiler: gcc (c++), or CXX/CC if set.
#
# Every sanitized process, including the daemons that cluster and mount tests start with their
# stderr in a log file that the test deletes, writes its reports to
# <build dir>/sanitizer-reports/<lane>.<program>.<pid> (log_path). After ctest the script prints
# every report and fails if there is one, even when each test passed. Reports stop the process
# (halt_on_error; UBSan is compiled with -fno-sanitize-recover) so the test that met it fails too.
#
# Known false positives and accepted leaks are suppressed in scripts/sanitizers/*.supp, each entry
# with its reason. LeakSanitizer runs only at a normal exit: daemons that tests stop with SIGKILL
# are not leak-checked (their memory is the process's to drop); those stopped with SIGTERM exit
# through main and are.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
lane=${1:-}
[ $# -gt 0 ] && shift

export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$repo}
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
jobs=${AQ_SANITIZE_JOBS:-$(nproc)}
supp="$repo/scripts/sanitizers"

case "$lane" in
  asan)
    dir=${AQ_SANITIZE_BUILD_DIR:-build-asan}
    # -O1: ASan's usual trade of speed against exact stacks. Asserts stay on (no NDEBUG).
    flags="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined"
    ;;
  tsan)
    dir=${AQ_SANITIZE_BUILD_DIR:-build-tsan}
    flags="-O1 -g -fno-omit-frame-pointer -fsanitize=thread"
    ;;
  thread-safety)
    dir=${AQ_SANITIZE_BUILD_DIR:-build-tsa}
    command -v clang++ >/dev/null || { echo "thread-safety needs clang++ (apt-get install clang)" >&2; exit 2; }
    # Only the analysis is wanted: compile (Debug, no link) the objects of the annotated modules
    # (src/metadata, src/client, src/client_fuse) with clang -Wthread-safety, and fail on any
    # such warning. The annotations (src/common/thread_annotations.h) are empty under gcc.
    CC=clang CXX=clang++ cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
      -DCMAKE_CXX_FLAGS="-Wthread-safety -Wno-unused-command-line-argument" >/dev/null
    targets=$(ninja -C "$dir" -t targets all |
              sed -n 's/^\(src\/\(metadata\|client\|client_fuse\)\/[^:]*\.o\): .*/\1/p')
    # shellcheck disable=SC2086
    ninja -C "$dir" -j"$jobs" $targets 2>&1 | tee "$dir/thread-safety.log"
    if grep -q -- '-Wthread-safety' "$dir/thread-safety.log"; then
      echo "thread-safety: warnings above (scripts/sanitize.sh thread-safety)" >&2
      exit 1
    fi
    echo "thread-safety: clean"
    exit 0
    ;;
  *)
    echo "usage: scripts/sanitize.sh asan|tsan [ctest args...] | thread-safety" >&2
    exit 2
    ;;
esac

start=$SECONDS
# The options apply to the build too: gtest_discover_tests runs each test binary once.
reports="$repo/$dir/sanitizer-reports"
rm -rf "$reports"
mkdir -p "$reports"
if [ "$lane" = asan ]; then
  export ASAN_OPTIONS="log_path=$reports/asan:log_exe_name=1:halt_on_error=1:detect_leaks=1"
  export UBSAN_OPTIONS="log_path=$reports/ubsan:log_exe_name=1:halt_on_error=1:print_stacktrace=1:suppressions=$supp/ubsan.supp"
  export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
else
  # halt_on_error=0: one run shows every race; the process still exits 66 when it met one.
  export TSAN_OPTIONS="log_path=$reports/tsan:log_exe_name=1:halt_on_error=0:second_deadlock_stack=1:suppressions=$supp/tsan.supp:print_suppressions=0"
fi
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="$flags" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" >/dev/null
# AQ_SANITIZE_TARGETS="erasure_test common_test ...": build only these (then pick their tests
# with ctest -R or -L); default: everything.
# shellcheck disable=SC2086
cmake --build "$dir" -j"$jobs" ${AQ_SANITIZE_TARGETS:+--target $AQ_SANITIZE_TARGETS}
echo "sanitize: $lane build done after $((SECONDS - start)) s"

# No clearing of leftover /tmp/aquifer-* mounts here (.ci/run does it before its first test):
# run beside other work, that unmounted their live test mounts.

test_start=$SECONDS
[ $# -eq 0 ] && set -- -LE soak
set +e
(cd "$dir" && ctest --output-on-failure --timeout 900 "$@")
rc=$?
set -e
echo "sanitize: $lane tests done in $((SECONDS - test_start)) s (build + tests $((SECONDS - start)) s), ctest rc=$rc"

shopt -s nullglob
found=("$reports"/*)
if [ ${#found[@]} -gt 0 ]; then
  for f in "${found[@]}"; do
    echo "==== sanitizer report $(basename "$f")"
    cat "$f"
  done
  echo "sanitize: ${#found[@]} sanitizer report(s) in $reports" >&2
  [ $rc -eq 0 ] && rc=1
fi
exit $rc
