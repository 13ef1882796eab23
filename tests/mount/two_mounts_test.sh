#!/bin/bash
# Two mounts of one cluster: close-to-open consistency. What one mount writes and closes, an open
# on the other sees whole, also when the reader had the old contents cached, for new files, after
# truncation, rename and unlink.
source "$(dirname "$0")/lib.sh"
A=$AQ_SCRATCH/a
B=$AQ_SCRATCH/b
aq_start_cluster
aq_mount "$A"
aq_mount "$B"
aq_random_file "$AQ_SCRATCH/v1" 5 31
aq_random_file "$AQ_SCRATCH/v2" 7 32
timeout "$T" cp "$AQ_SCRATCH/v1" "$A/f" || aq_fail "write v1 on A"
aq_same "$AQ_SCRATCH/v1" "$B/f"            # B caches v1 in its page cache
timeout "$T" cp "$AQ_SCRATCH/v2" "$A/f" || aq_fail "overwrite with v2 on A"
aq_same "$AQ_SCRATCH/v2" "$B/f"            # open on B after close on A: all of v2, new size
printf 'appended' | timeout "$T" tee -a "$A/f" >/dev/null
cat "$AQ_SCRATCH/v2" >"$AQ_SCRATCH/v2a" && printf 'appended' >>"$AQ_SCRATCH/v2a"
aq_same "$AQ_SCRATCH/v2a" "$B/f"
timeout "$T" truncate -s 1000 "$A/f" || aq_fail "truncate on A"
aq_same <(head -c 1000 "$AQ_SCRATCH/v2") "$B/f"
# Small writes in place, on B this time, read on A.
printf 'XYZ' | timeout "$T" dd of="$B/f" bs=1 seek=500 conv=notrunc status=none
[ "$(timeout "$T" dd if="$A/f" bs=1 skip=500 count=3 status=none)" = XYZ ] || aq_fail "in-place write on B not seen on A"
# Namespace changes: new file, rename, unlink (within the entry timeout of 1 s, so poll).
echo new >"$A/new"
aq_wait_for 5 "new file visible on B" test -f "$B/new"
[ "$(cat "$B/new")" = new ] || aq_fail "new file content on B"
mv "$A/new" "$A/renamed"
aq_wait_for 5 "rename visible on B" test -f "$B/renamed"
rm "$A/renamed"
aq_wait_for 5 "unlink visible on B" test ! -e "$B/renamed"
# A write lease: while B holds the file open for write, A's open for write waits for it.
exec 7>>"$B/f"
timeout "$T" bash -c "exec 8>>'$A/f'; echo opened" >"$AQ_SCRATCH/open_a" 2>&1 &
waiter=$!
AQ_EXTRA_PIDS+=($waiter)
exec 7>&-
wait "$waiter" || aq_fail "A could not open for write after B closed: $(cat "$AQ_SCRATCH/open_a")"
# Appends alternating between the mounts, each a separate open/append/close: every line lands,
# in order (a kernel places an append at its cached size, stale after the other mount appended;
# the mount appends at the library's end of file instead).
rm -f "$A/log" "$AQ_SCRATCH/log.want"
for i in $(seq 1 25); do
  timeout "$T" sh -c "echo a$i >> '$A/log'" || aq_fail "append a$i on A"
  timeout "$T" sh -c "echo b$i >> '$B/log'" || aq_fail "append b$i on B"
  printf 'a%s\nb%s\n' "$i" "$i" >>"$AQ_SCRATCH/log.want"
done
aq_same "$AQ_SCRATCH/log.want" "$A/log"
aq_same "$AQ_SCRATCH/log.want" "$B/log"
echo "PASS two_mounts"
