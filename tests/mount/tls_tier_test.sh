#!/bin/bash
# TLS on every port (docs/design.md "TLS"), as users run it: mount tests that prove correctness
# run again with AQ_TLS=1 (tests/mount/lib.sh makes a CA and a server certificate with the
# openssl command, starts every daemon with --tls and its files, and every mount finds the CA
# through $AQUIFER_TLS_CA): the POSIX checks, close-to-open between two mounts over both wires,
# degraded reads with two data servers killed (repair traffic between data servers over TLS),
# blocking locks, and client credentials (their mounts use gRPC only, so gRPC's TLS carries every
# call). A daemon that did not take --tls, or a mount that could not reach it over TLS, fails the
# script, so a pass is a pass over TLS.
here=$(cd "$(dirname "$0")" && pwd)
set -euo pipefail
for t in posix_semantics:120 two_mounts:90 data_server_failure:180 locks:150 clients:240; do
  name=${t%%:*}
  secs=${t##*:}
  start=$SECONDS
  AQ_TLS=1 timeout --kill-after=10 "$secs" bash "$here/${name}_test.sh" \
    >"/tmp/aquifer-tls-$name.log" 2>&1 ||
    { tail -n 40 "/tmp/aquifer-tls-$name.log" >&2; echo "FAIL: ${name} with TLS" >&2; exit 1; }
  rm -f "/tmp/aquifer-tls-$name.log"
  echo "[tls] ${name}: passed in $((SECONDS - start)) s" >&2
done
echo "tls_tier: 5 mount tests over TLS passed" >&2
