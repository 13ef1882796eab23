#!/usr/bin/env bash
# Builds the wire parsers' libFuzzer targets with clang into build-fuzz/ (ASan + UBSan) and runs
# each for SECONDS (default 60) on the seed corpus of tests/fuzz/corpus/, keeping what it finds
# in build-fuzz/tests/fuzz/corpus/. A crash leaves crash-* (the input) in build-fuzz/ and ends
# with a non-zero exit. usage: scripts/fuzz.sh [SECONDS] [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
dir=${2:-build-fuzz}
command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ is not installed (apt-get install clang)" >&2; exit 2; }
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
CC=clang CXX=clang++ cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DAQUIFER_FUZZERS=ON >/dev/null
cmake --build "$dir" --target fuzzers -j"$(nproc)"
src=$(pwd)
rm -f "$dir"/crash-* "$dir"/leak-* "$dir"/timeout-* "$dir"/oom-*
for name in chunk_hello chunk_request chunk_reply meta_call handshake; do
  mkdir -p "$dir/tests/fuzz/corpus/$name"
  echo "== $name: ${seconds}s"
  (cd "$dir" && "tests/fuzz/${name}_fuzzer" -max_total_time="$seconds" -max_len=256 \
    -print_final_stats=1 "tests/fuzz/corpus/$name" "$src/tests/fuzz/corpus/$name" 2>&1 |
    grep -E "^#[0-9]+ *DONE|stat::number_of_executed_units|ERROR|SUMMARY|fuzz check failed" || true)
  (cd "$dir" && ls crash-* leak-* timeout-* oom-* 2>/dev/null) && { echo "fuzz.sh: $name found a crash" >&2; exit 1; }
done
echo "fuzz.sh: no crash in ${seconds}s per target"
