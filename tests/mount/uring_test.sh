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

# 4. transport=dev with enable_uring=Y: /dev/fuse all the same.
aq_mount "$M" -o transport=dev
io_round "$M" dev
aq_umount "$M"
grep -q "fuse transport=dev (-o transport=dev)" "$AQ_SCRATCH/mount2.log" ||
  aq_fail "transport=dev was not logged"
grep -q "answered on the rings" "$AQ_SCRATCH/mount2.log" &&
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
