#!/bin/bash
# A name recall reaches the kernel before the other host's change returns, also while requests
# of this mount hold the directory's kernel lock (issue 22: the 30-minute storm read a file
# replaced by rename on mount A through mount B's old dentry: 9,000,000 bytes of the old file
# after a 5,000,000-byte rename-over). On mount B a fail point makes lookups of names starting
# "failpoint-slow-lookup" take 3 s, and a loop of them in the directory keeps its kernel lock
# (shared) taken, so B's invalidation of the renamed name waits for it. The rename on A must return only once B's
# kernel dropped the old dentry: B then reads the new file at once, while B still has the old
# one open (so its inode lives on and the stale dentry would open it).
# Before: B acknowledged after 50 ms whatever the kernel had done, and read the old bytes.
# Second part: a change of B (a mkdir a fail point makes 3 s long) holds directory e, and A
# creates a name there, so B's notification of it waits for e's lock (it is acknowledged after
# 50 ms: B's change may be waiting for A). A's rename-over in another directory, f, must still
# reach B's kernel before A's rename returns. Before: B sent names on one thread in order, the
# name in f waited behind the one in e and was acknowledged unsent after 50 ms, and B read the
# old file (the 3-minute storm's "read 5,000,000 bytes, closed 9,000,000" on writer/ro while
# the metadata storm changed shared directories from both mounts).
source "$(dirname "$0")/lib.sh"
A=$AQ_SCRATCH/a
B=$AQ_SCRATCH/b
OPTS=cache_leases=1,entry_timeout=30,attr_timeout=30
aq_start_cluster
aq_mount "$A" -o "$OPTS"
export AQ_FAILPOINT=fuse.lookup.slow_name:delay=3000,fuse.mkdir.slow_name:delay=3000
AQ_MOUNT_LOG_LEVEL=${AQ_B_LOG_LEVEL:-info} aq_mount "$B" -o "$OPTS"
unset AQ_FAILPOINT
mkdir "$A/d"
timeout "$T" ls "$B/d" >/dev/null

LOOKERS=()
stop_lookers() {
  local p
  for p in "${LOOKERS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${LOOKERS[@]}"; do wait "$p" 2>/dev/null || true; done
  LOOKERS=()
}
trap 'rc=$?; stop_lookers; (exit $rc); aq_teardown' EXIT

ROUNDS=8
for i in $(seq 1 $ROUNDS); do
  echo "old$i" >"$A/d/ckpt"
  # B looks the name up once no recall is in flight (a lookup that crosses one is given to the
  # kernel with timeout 0), so its kernel caches the dentry for the 30 s entry_timeout.
  sleep 0.3
  [ "$(timeout "$T" cat "$B/d/ckpt")" = "old$i" ] || aq_fail "B did not read old$i"
  exec 7<"$B/d/ckpt"  # B keeps the old file open
  t0=$(date +%s%N)
  timeout "$T" stat "$B/d/ckpt" >/dev/null
  aq_log "round $i: stat on B took $((($(date +%s%N) - t0) / 1000000)) ms"
  # Slow lookups of names that do not exist, back to back: B's kernel lock of d is taken.
  (n=0; while :; do n=$((n + 1)); stat "$B/d/failpoint-slow-lookup-$i-$n" >/dev/null 2>&1; done) &
  LOOKERS+=($!)
  sleep 0.2
  echo "new$i new$i" >"$A/d/ckpt.tmp"
  t_mv=$(date +%s%N); mv "$A/d/ckpt.tmp" "$A/d/ckpt"; aq_log "round $i: mv took $((($(date +%s%N) - t_mv) / 1000000)) ms"
  got=$(timeout "$T" cat "$B/d/ckpt" 2>&1) || aq_fail "B: open of the replaced name: $got"
  stop_lookers
  exec 7<&-
  [ "$got" = "new$i new$i" ] || aq_fail "B read '$got' after rename-over $i with its directory locked (wanted new$i new$i)"
done
aq_log "rename-over with B's directory lock taken: $ROUNDS of $ROUNDS seen at once on B"

mkdir "$A/e" "$A/f"
timeout "$T" ls "$B/e" "$B/f" >/dev/null  # B caches e's and f's names
for i in $(seq 1 $ROUNDS); do
  echo "old$i" >"$A/f/ckpt"
  sleep 0.3
  [ "$(timeout "$T" cat "$B/f/ckpt")" = "old$i" ] || aq_fail "B did not read old$i in f"
  exec 7<"$B/f/ckpt"
  # B's own change holds e's kernel lock for 3 s.
  timeout "$T" mkdir "$B/e/failpoint-slow-mkdir-$i" &
  MKDIR_PID=$!
  sleep 0.2
  touch "$A/e/x$i"  # B's notification of this name waits for e's lock
  echo "new$i new$i" >"$A/f/ckpt.tmp"
  t_mv=$(date +%s%N); mv "$A/f/ckpt.tmp" "$A/f/ckpt"; aq_log "round $i (e held by B's mkdir): mv took $((($(date +%s%N) - t_mv) / 1000000)) ms"
  got=$(timeout "$T" cat "$B/f/ckpt" 2>&1) || aq_fail "B: open of the replaced name in f: $got"
  wait "$MKDIR_PID" || aq_fail "B: the slow mkdir $i failed"
  exec 7<&-
  [ "$got" = "new$i new$i" ] || aq_fail "B read '$got' after rename-over $i in f while its own change held e (wanted new$i new$i)"
done
aq_log "rename-over with a change of B holding another directory: $ROUNDS of $ROUNDS seen at once on B"
grep -q "lease broken" "$AQ_SCRATCH/meta.log" && aq_fail "a cache lease was broken (a recall waited past --cache-lease-ms)"
aq_log "PASS"
