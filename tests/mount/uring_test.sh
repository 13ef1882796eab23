#!/bin/bash
# FUSE over io_uring (src/client_fuse/fuse_uring.h, docs/design.md "FUSE over io_uring"): how
# aquifer-mount chooses its transport, then the mount tests that prove correctness run again with
# every mount on the rings: the POSIX checks, close-to-open between two mounts, degraded reads
# with two data servers killed, O_DIRECT and mmap (fio_verify, apps), blocking locks and cache
# leases. Needs root and a kernel with CONFIG_FUSE_IO_URING: it sets the fuse module's
# enable_uring parameter and puts back what was there when it exits, also on failure.
here=$(cd "$(dirname "$0")" && pwd)
param=/sys/module/fuse/parameters/enable_uring
if [ ! -w "$param" ]; then
  echo "FAIL: $param is missing or not writable (needs root and CONFIG_FUSE_IO_URING)" >&2
  exit 1
fi
saved=$(cat "$param")
trap 'echo "$saved" >"$param"' EXIT
set -euo pipefail

# Parts 1-4 in a subshell with a cluster of its own (lib.sh's EXIT trap tears it down when the
# subshell ends).
(
source "$here/lib.sh"
set_param() { echo "$1" >"$param" || aq_fail "cannot set $param to $1"; }

aq_start_cluster
M=$AQ_SCRATCH/mnt
mkdir -p "$M"

# 1. Forced, on a kernel that does not offer it now: the mount refuses to start and says how to
#    turn it on; nothing is mounted.
set_param N
if timeout 20 "$AQ_MOUNT_BIN" "$AQ_META_ADDR" "$M" -f -o transport=uring \
  >"$AQ_SCRATCH/forced.out" 2>&1; then
  fusermount3 -uz "$M" 2>/dev/null || true
  aq_fail "-o transport=uring started with enable_uring=N"
fi
grep -q "enable_uring" "$AQ_SCRATCH/forced.out" ||
  aq_fail "the refusal does not say how to turn it on: $(cat "$AQ_SCRATCH/forced.out")"
aq_not_mounted "$M" || aq_fail "a refused transport=uring left a mount"
aq_log "transport=uring refused with enable_uring=N: $(head -c 120 "$AQ_SCRATCH/forced.out")"

# A file (named after $2) written and read back whole through the mount at $1: FUSE creates,
# writes, reads, lookups, getattrs and a readdir at least.
io_round() {
  local dir=$1
  aq_random_file "$AQ_SCRATCH/src.bin" 3 "$2"
  timeout "$T" cp "$AQ_SCRATCH/src.bin" "$dir/f-$2" || aq_fail "cp to $dir"
  echo 3 >/proc/sys/vm/drop_caches
  aq_same "$AQ_SCRATCH/src.bin" "$dir/f-$2"
  timeout "$T" ls -l "$dir" >/dev/null || aq_fail "ls $dir"
}

# 2. auto with enable_uring=N: /dev/fuse, said in the log.
aq_mount "$M"
io_round "$M" auto-dev
grep -q "fuse transport=dev: the kernel does not offer" "$AQ_SCRATCH/mount0.log" ||
  aq_fail "auto with enable_uring=N did not log transport=dev"
aq_umount "$M"
grep -q "answered on the rings" "$AQ_SCRATCH/mount0.log" &&
  aq_fail "a /dev/fuse mount counted ring requests"

# 3. auto with enable_uring=Y: the rings, and requests answered on them.
set_param Y
aq_mount "$M"
io_round "$M" auto-uring
aq_umount "$M"
grep -q "fuse transport=uring: .* queues x .* entries" "$AQ_SCRATCH/mount1.log" ||
  aq_fail "auto with enable_uring=Y did not take the rings"
n=$(sed -n 's/.*fuse transport=uring: \([0-9]*\) requests answered on the rings.*/\1/p' \
  "$AQ_SCRATCH/mount1.log")
[ -n "$n" ] && [ "$n" -ge 10 ] || aq_fail "ring requests: '${n}'"
aq_log "auto with enable_uring=Y: transport=uring, $n requests answered on the rings"

# 3b. Parked requests do not strand others. A blocking lock's request is answered later from
#     another thread, and its ring entry stays with the kernel meanwhile; the queue must go on
#     serving without giving a busy thread a second entry, or a request the kernel puts in that
#     entry waits for whatever the thread is doing. Here: 3 rounds of 12 processes queueing for
#     one flock (36 parked requests), then a lookup a fail point makes 3 s long, and during it
#     60 stats of names the kernel has not seen, one after another: none may wait for the slow
#     lookup. Before: one in a run took 3 s (a stat queued behind the lookup on its thread), and
#     in the 3-minute storm lookups and creates holding directory locks waited behind a write
#     stuck on a dead data server, so another host's name recall was acknowledged unsent.
AQ_FAILPOINT=fuse.lookup.slow_name:delay=3000 aq_mount "$M" -o transport=uring
touch "$M/lockfile"
for round in 1 2 3; do
  pids=()
  for i in $(seq 1 12); do
    timeout "$T" flock "$M/lockfile" sleep 0.02 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || aq_fail "flock round $round failed"; done
done
mkdir "$M/other"
# $1: the directory the 60 stats look names up in.
stats_during_slow_lookup() {
  (stat "$M/failpoint-slow-lookup-$RANDOM" >/dev/null 2>&1 || true) &
  local slow=$! worst=0 i t0 ms
  sleep 0.3
  for i in $(seq 1 60); do
    t0=$(date +%s%N)
    timeout "$T" stat "$1/absent-$i" >/dev/null 2>&1 || true
    ms=$((($(date +%s%N) - t0) / 1000000))
    [ "$ms" -gt "$worst" ] && worst=$ms
  done
  wait "$slow"
  echo "$worst"
}
worst_other=$(stats_during_slow_lookup "$M/other")
# The same directory as the slow lookup: the kernel runs lookups of one directory in parallel
# only when the INIT reply says FUSE_PARALLEL_DIROPS (fuse_uring.h), which libfuse 3.14 leaves
# out; before, each of these waited for the slow one (fuse_lock_inode).
worst_same=$(stats_during_slow_lookup "$M")
aq_umount "$M"
[ "$worst_other" -lt 1500 ] ||
  aq_fail "a stat in another directory waited $worst_other ms while a request was slow on the rings"
[ "$worst_same" -lt 1500 ] ||
  aq_fail "a lookup waited $worst_same ms for a slow lookup in the same directory"
aq_log "parked flocks then a 3 s lookup on the rings: the slowest of 60 stats took" \
  "$worst_other ms (another directory), $worst_same ms (the same directory)"

# 3c. A queue whose entries are all busy grows. The kernel queues each request for the CPU its
#     caller runs on; 24 lookups made 3 s long from CPU 0 take more than the 16 entries that
#     queue starts with, and a stat from CPU 0 meanwhile must not wait for one of them. Before,
#     it waited 2.5 s (the other queue idle); in the 3-minute storm writes stuck on a dead data
#     server did this, and another host's name recalls were acknowledged unsent after 2 s.
AQ_FAILPOINT=fuse.lookup.slow_name:delay=3000 aq_mount "$M" -o transport=uring
mkdir -p "$M/busy"
slow=()
for i in $(seq 1 24); do
  (taskset -c 0 stat "$M/failpoint-slow-lookup-busy-$i" >/dev/null 2>&1 || true) &
  slow+=($!)
done
sleep 0.3
worst_busy=0
for i in $(seq 1 20); do
  t0=$(date +%s%N)
  timeout "$T" taskset -c 0 stat "$M/busy/absent-$i" >/dev/null 2>&1 || true
  ms=$((($(date +%s%N) - t0) / 1000000))
  [ "$ms" -gt "$worst_busy" ] && worst_busy=$ms
done
for p in "${slow[@]}"; do wait "$p" || true; done
aq_umount "$M"
[ "$worst_busy" -lt 1500 ] ||
  aq_fail "a stat on CPU 0 waited $worst_busy ms while 24 slow lookups held that CPU's queue"
grep -q "queues x 16 entries" "$AQ_SCRATCH/mount3.log" || aq_fail "the rings' start line is not logged"
grown=$(sed -n 's/.*threads per queue at the end: \([0-9]*\).*/\1/p' "$AQ_SCRATCH/mount3.log")
[ -n "$grown" ] && [ "$grown" -gt 16 ] ||
  aq_fail "queue 0 did not grow past its 16 threads: '$grown'"
aq_log "24 slow lookups on CPU 0's queue: the slowest of 20 stats from CPU 0 took $worst_busy ms;" \
  "queue 0 grew to $grown threads"

# 4. transport=dev with enable_uring=Y: /dev/fuse all the same.
aq_mount "$M" -o transport=dev
io_round "$M" dev
aq_umount "$M"
grep -q "fuse transport=dev (-o transport=dev)" "$AQ_SCRATCH/mount4.log" ||
  aq_fail "transport=dev was not logged"
grep -q "answered on the rings" "$AQ_SCRATCH/mount4.log" &&
  aq_fail "a transport=dev mount counted ring requests"
exit 0
)
echo Y >"$param"

# 5. The correctness tests, every mount forced onto the rings (a mount that cannot take them
#    ends at once, so a pass below is a pass on the rings).
for t in posix_semantics:120 two_mounts:90 fio_verify:180 apps:150 locks:150 \
  data_server_failure:180 cache_leases:300; do
  name=${t%%:*}
  secs=${t##*:}
  start=$SECONDS
  AQ_MOUNT_EXTRA=transport=uring timeout --kill-after=10 "$secs" bash "$here/${name}_test.sh" \
    >"/tmp/aquifer-uring-$name.log" 2>&1 ||
    { tail -n 40 "/tmp/aquifer-uring-$name.log" >&2; echo "FAIL: ${name} on transport=uring" >&2;
      exit 1; }
  rm -f "/tmp/aquifer-uring-$name.log"
  echo "[uring] ${name}: passed in $((SECONDS - start)) s" >&2
done
echo "uring: transport choice and 7 mount tests on the rings passed" >&2
