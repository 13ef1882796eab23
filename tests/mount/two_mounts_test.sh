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
# A name replaced by rename on A (write a temporary file, rename it over the old one) while B
# still has the name cached: B's open, stat and getxattr within the entry timeout get the new file,
# never ENOENT (the old inode is gone; the mount answers ESTALE and the kernel looks again).
for i in $(seq 1 20); do
  echo "old$i" >"$A/swap"
  [ "$(timeout "$T" cat "$B/swap")" = "old$i" ] || aq_fail "B did not read old$i"
  echo "new$i" >"$A/swap.tmp"
  mv "$A/swap.tmp" "$A/swap"
  got=$(timeout "$T" cat "$B/swap" 2>&1) || aq_fail "open on B of a name replaced on A: $got"
  [ "$got" = "new$i" ] || aq_fail "B read '$got' for new$i"
  timeout "$T" stat "$B/swap" >/dev/null || aq_fail "stat on B of a replaced name"
done
for i in $(seq 1 10); do
  echo "old$i" >"$A/swap"
  timeout "$T" stat "$B/swap" >/dev/null || aq_fail "stat on B"
  echo "new$i" >"$A/swap.tmp"
  mv "$A/swap.tmp" "$A/swap"
  timeout "$T" stat -c %s "$B/swap" >/dev/null 2>"$AQ_SCRATCH/stat_err" ||
    aq_fail "stat on B of a name replaced on A: $(cat "$AQ_SCRATCH/stat_err")"
  timeout "$T" /usr/bin/python3 -c 'import os, sys, errno
try: os.getxattr(sys.argv[1], "user.none")
except OSError as e: sys.exit(0 if e.errno == errno.ENODATA else f"getxattr: {e}")' "$B/swap" ||
    aq_fail "getxattr on B of a name replaced on A"
done
# A write lease: while B holds the file open for write, A's open for write recalls it (B gives it
# back) and succeeds; B's close afterwards is fine.
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
