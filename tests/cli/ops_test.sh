#!/usr/bin/env bash
# The operator's commands for failures and scale-out on a real local cluster (7 data servers,
# repair delay 2 s, PG GC delay 2 s, 8 moves per destination), with a FUSE mount.
#   repair: write files, `cluster stop-server 3`, `repair wait` exits 0, status shows ds3 DOWN
#           with no PG positions, checksums match, fsck clean (ds3 holds nothing any more)
#   scale:  `cluster grow --data-servers 2`, `rebalance wait`, the new servers hold PG positions;
#           `server remove` of a non-empty server refused (exit 1, "drain it first");
#           `server drain`, `rebalance wait`, `server remove` succeeds; checksums match
#   fsck:   clean on a healthy cluster; a chunk planted through WriteChunk for an inode that
#           does not exist is reported (exit 1) and deleted by --repair; clean again
# usage: ops_test.sh BUILD_DIR repair|scale|fsck
set -euo pipefail
BUILD=$(cd "$1" && pwd)
MODE=${2:-repair}
AQ="$BUILD/src/cli/aquifer"
TOOL="$BUILD/tests/cli/write_chunk_tool"
ROOT=$(mktemp -d /tmp/aquifer-clitest-XXXXXX)
MNT="$ROOT/mnt"

json() { python3 -c "import json,sys; s=json.load(open('$ROOT/cluster.json')); print($1)"; }
cleanup() {
  local rc=$?
  "$AQ" cluster down --root "$ROOT" --grace-ms 3000 >/dev/null 2>&1 || true
  fusermount3 -uz "$MNT" 2>/dev/null || true
  if [ -f "$ROOT/cluster.json" ]; then
    for pid in $(json "' '.join(str(p) for p in [s['meta']['pid'], s['mount']['pid']] + [d['pid'] for d in s['data_servers']])" 2>/dev/null); do
      [ "$pid" -gt 0 ] && kill -9 "$pid" 2>/dev/null || true
    done
  fi
  if [ $rc -ne 0 ]; then
    echo "--- FAILED; daemon logs:"; tail -n 15 "$ROOT"/logs/*.log 2>/dev/null || true
  fi
  rm -rf "$ROOT"
  exit $rc
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
# server id (as the metadata server numbers them) of local data server dsI
server_id() {
  local addr; addr=$(json "s['data_servers'][$1-1]['address']")
  "$AQ" server list --root "$ROOT" | awk -v a="$addr" '$2 == a {print $1}'
}
verify() {
  for f in a b c; do cmp -s "$ROOT/src-$f" "$MNT/$f" || fail "$MNT/$f differs from what was written"; done
  cmp -s "$ROOT/src-small" "$MNT/small.txt" || fail "small.txt differs"
}

echo "== cluster up (7 data servers, repair delay 2 s)"
"$AQ" cluster up --root "$ROOT" --data-servers 7 --bin-dir "$BUILD" --timeout-ms 30000 \
  --meta-arg=--repair-delay-ms=2000 --meta-arg=--pg-gc-delay-ms=2000 \
  --meta-arg=--max-concurrent-moves=8 >/dev/null
json "s['meta']['extra_args']" | grep -q repair-delay-ms || fail "--meta-arg not recorded"
head -c 6000000 /dev/urandom > "$ROOT/src-a"
head -c 1500000 /dev/urandom > "$ROOT/src-b"
head -c 9000000 /dev/urandom > "$ROOT/src-c"
echo "small file" > "$ROOT/src-small"
for f in a b c; do cp "$ROOT/src-$f" "$MNT/$f"; done
cp "$ROOT/src-small" "$MNT/small.txt"
verify

case "$MODE" in
repair)
  "$AQ" cluster stop-server 3 --root "$ROOT"
  echo "== repair wait"
  timeout 110 "$AQ" repair wait --root "$ROOT" --timeout 90 --interval 2 | tee "$ROOT/wait.txt" \
    || fail "repair wait failed"
  grep -q "no repair move left" "$ROOT/wait.txt" || fail "repair wait did not say it finished"
  grep -q "moves [1-9][0-9]* done" "$ROOT/wait.txt" || fail "repair wait saw no repair move finish"
  st=0
  "$AQ" status --root "$ROOT" > "$ROOT/status.txt" || st=$?
  cat "$ROOT/status.txt"
  DS3=$(json "s['data_servers'][2]['address']")
  grep -E "^  [0-9]+ +$DS3 +ds3 +DOWN +in +0 " "$ROOT/status.txt" \
    || fail "status does not show ds3 DOWN holding 0 PG positions"
  # Repaired: nothing is missing, but ds3 is still a member and down (exit 4, degraded).
  [ $st = 4 ] || fail "status exit $st after repair with ds3 down, want 4"
  grep -q "^health    DEGRADED: 1 data server down holding no PG positions" "$ROOT/status.txt" ||
    fail "status does not say ds3 is down holding nothing after repair"
  grep -q "meta says healthy" "$ROOT/status.txt" || fail "repair left work behind"
  verify
  "$AQ" fsck --root "$ROOT" | tee "$ROOT/fsck.txt" || fail "fsck not clean after repair"
  ;;
scale)
  echo "== cluster grow --data-servers 2"
  # --wait follows the rebalance onto the new servers: progress lines (not a terminal) with
  # figures from the first one, then "no ... move left".
  timeout 150 "$AQ" cluster grow --root "$ROOT" --data-servers 2 --bin-dir "$BUILD" \
    --timeout-ms 30000 --wait --interval 1 | tee "$ROOT/grow.txt" || fail "cluster grow --wait"
  [ "$(json "len(s['data_servers'])")" = 9 ] || fail "cluster.json does not list 9 servers"
  grep -q "^rebalance wait .* s: chunks [0-9]*/~*[0-9]*, " "$ROOT/grow.txt" || fail "grow --wait printed no progress line"
  grep -q "aquifer: no rebalance or drain move left" "$ROOT/grow.txt" || fail "grow --wait did not finish"
  "$AQ" status --root "$ROOT" | tee "$ROOT/status.txt"
  for i in 8 9; do
    pgs=$("$AQ" server list --root "$ROOT" | awk -v d="ds$i" '$3 == d {print $6}')
    [ "${pgs:-0}" -gt 0 ] || fail "ds$i holds no PG positions after rebalance"
  done
  verify
  ID8=$(server_id 8); ID9=$(server_id 9)
  echo "== server remove $ID8 (not empty) is refused"
  if "$AQ" server remove "$ID8" --root "$ROOT" 2> "$ROOT/err.txt"; then fail "remove of a non-empty server succeeded"; fi
  cat "$ROOT/err.txt"
  grep -q "drain it first\|Drain it first" "$ROOT/err.txt" || fail "refusal does not say to drain"
  echo "== server drain ds9 (by name), undrain, drain again, rebalance wait, server remove $ID9"
  "$AQ" server drain ds9 --root "$ROOT"
  "$AQ" server list --root "$ROOT" | awk -v d=ds9 '$3 == d' | grep -q draining || fail "ds9 not draining"
  "$AQ" server undrain ds9 --root "$ROOT" | tee "$ROOT/undrain.txt"
  grep -q "is no longer draining" "$ROOT/undrain.txt" || fail "undrain said: $(cat "$ROOT/undrain.txt")"
  "$AQ" server list --root "$ROOT" | awk -v d=ds9 '$3 == d {print $5}' | grep -qx in || fail "ds9 still draining after undrain"
  timeout 110 "$AQ" server drain "$ID9" --root "$ROOT" --wait --timeout 90 --interval 1 | tee "$ROOT/drain.txt" || fail "server drain --wait"
  grep -q "aquifer: no rebalance or drain move left" "$ROOT/drain.txt" || fail "drain --wait did not finish"
  "$AQ" server list --root "$ROOT" | awk -v d=ds9 '$3 == d {print $6}' | grep -qx 0 || fail "ds9 holds PG positions after drain --wait"
  "$AQ" server remove "$ID9" --root "$ROOT" || fail "remove of a drained server failed"
  "$AQ" server list --all --root "$ROOT" | awk -v d=ds9 '$3 == d' | grep -q removed || fail "ds9 not removed"
  # Removed servers are hidden unless asked for.
  if "$AQ" server list --root "$ROOT" | awk '{print $3}' | grep -qx ds9; then fail "server list shows removed ds9"; fi
  [ "$(json "s['data_servers'][8].get('removed', False)")" = True ] || fail "ds9 not marked removed"
  verify
  "$AQ" fsck --root "$ROOT" || fail "fsck not clean after scale-out and drain"
  ;;
fsck)
  "$AQ" fsck --root "$ROOT" --interval 0.000001 | tee "$ROOT/fsck.txt" || fail "fsck not clean on a healthy cluster"
  grep -q "^fsck: walking the namespace: [0-9]*/~[0-9]* names" "$ROOT/fsck.txt" || fail "fsck printed no walk progress"
  grep -q "^fsck: listing chunks: [0-9]*/~[0-9]* versions" "$ROOT/fsck.txt" || fail "fsck printed no listing progress"
  grep -q "4 regular files" "$ROOT/fsck.txt" || fail "fsck did not walk the 4 files"
  ADDR=$(json "s['data_servers'][0]['address']")
  AQUIFER_KEY_FILE="$ROOT/cluster.key" "$TOOL" "$ADDR" 987654321 0 0 1 4096
  if "$AQ" fsck --root "$ROOT" > "$ROOT/fsck2.txt"; then cat "$ROOT/fsck2.txt"; fail "fsck clean with an orphan"; fi
  cat "$ROOT/fsck2.txt"
  grep -q "ORPHAN  inode 987654321 does not exist" "$ROOT/fsck2.txt" || fail "orphan not reported"
  "$AQ" fsck --root "$ROOT" --repair | tee "$ROOT/fsck3.txt" || fail "fsck --repair did not clean up"
  grep -q "deleted 1 chunk versions" "$ROOT/fsck3.txt" || fail "fsck --repair deleted nothing"
  "$AQ" fsck --root "$ROOT" | tail -1 | grep -q "fsck: clean" || fail "orphan still there after --repair"
  verify
  ;;
*) fail "unknown mode $MODE" ;;
esac
echo "PASS ($MODE)"
