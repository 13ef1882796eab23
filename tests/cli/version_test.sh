#!/usr/bin/env bash
# Every binary's --version prints its name and the project version from CMake (project(VERSION)),
# exits 0 and needs no other argument.
# usage: version_test.sh VERSION AQUIFER AQUIFER_META AQUIFER_DATA AQUIFER_MOUNT
set -euo pipefail
want=$1
shift
for bin in "$@"; do
  name=$(basename "$bin")
  line=$(timeout 10 "$bin" --version | head -n 1) || { echo "FAIL: $name --version exited non-zero"; exit 1; }
  case "$line" in
    "$name $want" | "$name $want "*) echo "ok: $line" ;;
    *) echo "FAIL: $name --version printed '$line', want '$name $want'"; exit 1 ;;
  esac
done
echo "PASS"
