#!/bin/bash
# /metrics of every daemon, read with the reference parser (python3-prometheus-client): each of
# aquifer-meta, the six aquifer-data and aquifer-mount serves the text format, every aquifer_*
# family is in docs/metrics.md, and the counters move by what a known workload did:
# - 40 files of 64 KiB written and read through the mount: FUSE creates and writes, write and
#   read bytes, an ENOTEMPTY reply (counted by errno here and by code on the server); the metadata server's Create calls; chunk writes of the small
#   files' m + 1 copies on the data servers, with their bytes;
# - a 32 MiB file read through a second mount after one data server was killed: degraded reads
#   on that mount, counted by cause, and the metadata server reports the server down;
# - a data server and a metadata server given an HTTP port in use exit 1 before joining.
source "$(dirname "$0")/lib.sh"
PROBE=(/usr/bin/python3 "$(dirname "$0")/metrics_probe.py")
export DOCS
DOCS=$(cd "$(dirname "$0")/../.." && pwd)/docs/metrics.md
[ -f "$DOCS" ] || aq_fail "no $DOCS"
A=$AQ_SCRATCH/a
B=$AQ_SCRATCH/b
aq_start_cluster
aq_mount "$A" -o "http_listen=127.0.0.1:0,http_port_file=$AQ_SCRATCH/mount_a.http"
aq_wait_for 10 "the mount's port file" aq_read_port_file "$AQ_SCRATCH/mount_a.http"

snap_all() {  # snap_all TAG: snapshots of meta, data0..5 and mount A
  local tag=$1 i
  "${PROBE[@]}" snap "$(cat "$AQ_SCRATCH/meta.http")" "$AQ_SCRATCH/$tag.meta.json" >/dev/null ||
    aq_fail "scrape of aquifer-meta"
  for ((i = 0; i < AQ_DATA_SERVERS; i++)); do
    [ -n "${AQ_DATA_PIDS[$i]}" ] || continue
    "${PROBE[@]}" snap "$(cat "$AQ_SCRATCH/data$i.http")" "$AQ_SCRATCH/$tag.data$i.json" \
      >/dev/null || aq_fail "scrape of data$i"
  done
  "${PROBE[@]}" snap "$(cat "$AQ_SCRATCH/mount_a.http")" "$AQ_SCRATCH/$tag.mount.json" \
    >/dev/null || aq_fail "scrape of mount A"
}
delta() { "${PROBE[@]}" delta "$AQ_SCRATCH/before.$1.json" "$AQ_SCRATCH/after.$1.json" "${@:2}"; }
data_delta() {  # the sum over every data server
  local sum=0 i
  for ((i = 0; i < AQ_DATA_SERVERS; i++)); do sum=$((sum + $(delta "data$i" "$@"))); done
  echo "$sum"
}
expect_at_least() {  # expect_at_least WHAT GOT WANT
  aq_log "$1: $2 (want >= $3)"
  [ "$2" -ge "$3" ] || aq_fail "$1 moved by $2, wanted at least $3"
}

snap_all before
FILES=40
BYTES=$((64 * 1024))
mkdir "$A/small"
for ((i = 0; i < FILES; i++)); do
  head -c $BYTES /dev/urandom >"$AQ_SCRATCH/src$i"
  timeout "$T" cp "$AQ_SCRATCH/src$i" "$A/small/f$i" || aq_fail "write f$i"
done
timeout "$T" sync -f "$A/small"
for ((i = 0; i < FILES; i++)); do
  timeout "$T" cat "$A/small/f$i" >/dev/null || aq_fail "read f$i"
done
timeout "$T" rmdir "$A/small" 2>/dev/null && aq_fail "rmdir of a directory with files succeeded"
snap_all after

expect_at_least "mount: FUSE creates" "$(delta mount aquifer_fuse_requests_total op=create)" $FILES
expect_at_least "mount: FUSE writes" "$(delta mount aquifer_fuse_requests_total op=write)" $FILES
expect_at_least "mount: bytes written" "$(delta mount aquifer_fuse_bytes_total op=write)" \
  $((FILES * BYTES))
expect_at_least "mount: write latency observations" \
  "$(delta mount aquifer_fuse_request_seconds_count op=write)" $FILES
expect_at_least "mount: ENOTEMPTY replies" "$(delta mount aquifer_fuse_errors_total errno=ENOTEMPTY)" 1
expect_at_least "meta: Rmdir calls answered not_empty" \
  "$(delta meta aquifer_meta_rpc_requests_total method=Rmdir code=not_empty)" 1
expect_at_least "mount: metadata calls" "$(delta mount aquifer_client_meta_calls_total)" $FILES
expect_at_least "meta: Create calls answered ok" \
  "$(delta meta aquifer_meta_rpc_requests_total method=Create code=ok)" $FILES
expect_at_least "meta: Create latency observations" \
  "$(delta meta aquifer_meta_rpc_seconds_count method=Create)" $FILES
# A file under one stripe unit is stored as m + 1 copies.
expect_at_least "data: chunk writes answered ok" \
  "$(data_delta aquifer_data_chunk_requests_total op=write code=ok)" $((FILES * (AQ_M + 1)))
expect_at_least "data: chunk bytes written" "$(data_delta aquifer_data_chunk_bytes_total op=write)" \
  $((FILES * BYTES * (AQ_M + 1)))
expect_at_least "data: chunk write latency observations" \
  "$(data_delta aquifer_data_chunk_seconds_count op=write)" $((FILES * (AQ_M + 1)))
up=$("${PROBE[@]}" sum "$AQ_SCRATCH/after.meta.json" aquifer_meta_data_server_up)
[ "$up" = "$AQ_DATA_SERVERS" ] || aq_fail "meta reports $up data servers up, wanted $AQ_DATA_SERVERS"
sessions=$("${PROBE[@]}" sum "$AQ_SCRATCH/after.meta.json" aquifer_meta_sessions)
[ "$sessions" -ge 1 ] || aq_fail "meta reports $sessions sessions"
# Nothing may have failed: no error codes from the data servers, no EIO from the mount.
bad=$(data_delta aquifer_data_chunk_requests_total code=corruption)
[ "$bad" = 0 ] || aq_fail "data servers answered $bad chunk requests with corruption"
eio=$(delta mount aquifer_fuse_errors_total errno=EIO)
[ "$eio" = 0 ] || aq_fail "the mount answered EIO $eio times"

# Degraded reads: a large file read on a fresh mount (empty caches) with one data server dead.
aq_random_file "$AQ_SCRATCH/big" 32 7
timeout "$T" cp "$AQ_SCRATCH/big" "$A/big" || aq_fail "write big"
aq_mount "$B" -o "http_listen=127.0.0.1:0,http_port_file=$AQ_SCRATCH/mount_b.http"
aq_wait_for 10 "mount B's port file" aq_read_port_file "$AQ_SCRATCH/mount_b.http"
"${PROBE[@]}" snap "$(cat "$AQ_SCRATCH/mount_b.http")" "$AQ_SCRATCH/before.mount_b.json" >/dev/null
aq_kill_data 2
timeout "$T" cmp "$AQ_SCRATCH/big" "$B/big" || aq_fail "degraded read of big differs"
"${PROBE[@]}" snap "$(cat "$AQ_SCRATCH/mount_b.http")" "$AQ_SCRATCH/after.mount_b.json" >/dev/null
by_cause=""
for cause in unavailable checksum missing_chunk stale_version other; do
  by_cause+="$cause=$(delta mount_b aquifer_client_degraded_reads_total cause=$cause) "
done
aq_log "mount B: degraded reads by cause: $by_cause"
expect_at_least "mount B: degraded reads" "$(delta mount_b aquifer_client_degraded_reads_total)" 1
# Read at once after the kill -9: the first stripes find the server's connection refused.
expect_at_least "mount B: degraded reads because a server was unavailable" \
  "$(delta mount_b aquifer_client_degraded_reads_total cause=unavailable)" 1
expect_at_least "mount B: bytes read" "$(delta mount_b aquifer_fuse_bytes_total op=read)" \
  $((32 << 20))
meta_sees_down() {
  "${PROBE[@]}" snap "$(cat "$AQ_SCRATCH/meta.http")" "$AQ_SCRATCH/down.meta.json" >/dev/null &&
    [ "$("${PROBE[@]}" sum "$AQ_SCRATCH/down.meta.json" aquifer_meta_data_server_up)" = \
      $((AQ_DATA_SERVERS - 1)) ]
}
aq_wait_for 20 "aquifer-meta to report one data server down" meta_sees_down
# A daemon whose HTTP port cannot be bound stops before it joins the cluster (a data server that
# registered first stayed a member, down, holding PG positions), and exits 1, not abort().
servers_known() {
  "${PROBE[@]}" snap "$(cat "$AQ_SCRATCH/meta.http")" "$AQ_SCRATCH/known.meta.json" >/dev/null &&
    "${PROBE[@]}" count "$AQ_SCRATCH/known.meta.json" aquifer_meta_data_server_up
}
before_bad=$(servers_known)
mkdir -p "$AQ_SCRATCH/bad-data"
rc=0
timeout 30 "$AQ_DATA_BIN" --listen 127.0.0.1:0 --dir "$AQ_SCRATCH/bad-data" --meta "$AQ_META_ADDR" \
  --failure-domain bad --http-listen "$(cat "$AQ_SCRATCH/meta.http")" \
  >"$AQ_SCRATCH/bad-data.out" 2>&1 || rc=$?
[ "$rc" = 1 ] || aq_fail "aquifer-data with a port in use exited $rc, wanted 1"
grep -q "start http failed" "$AQ_SCRATCH/bad-data.out" || aq_fail "no clear error: $(cat "$AQ_SCRATCH/bad-data.out")"
grep -q "registered with meta" "$AQ_SCRATCH/bad-data.out" && aq_fail "it registered before failing"
[ "$(servers_known)" = "$before_bad" ] || aq_fail "the metadata server lists a new data server"
rc=0
timeout 30 "$AQ_META_BIN" --listen 127.0.0.1:0 --db "$AQ_SCRATCH/bad-meta-db" \
  --http-listen "$(cat "$AQ_SCRATCH/meta.http")" >"$AQ_SCRATCH/bad-meta.out" 2>&1 || rc=$?
[ "$rc" = 1 ] || aq_fail "aquifer-meta with an HTTP port in use exited $rc, wanted 1: $(tail -2 "$AQ_SCRATCH/bad-meta.out")"
aq_log "metrics: every daemon parsed and every counter moved as the workload did; a port in use stops a daemon before it joins"
