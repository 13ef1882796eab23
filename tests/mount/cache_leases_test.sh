#!/bin/bash
# Cache leases (docs/design.md "Cache leases"): two mounts with -o cache_leases=1 and kernel
# timeouts of 30 s, so nothing here can pass by a cache expiring. A change on mount A returns
# only after mount B's kernel dropped what it cached of it, so B sees it at once, with no sleep
# and no retry: rename-over (buffered and O_DIRECT reads), an O_TRUNC rewrite's size, chmod,
# unlink, a create after B's negative lookup. Both mounts creating in one directory at once
# finish (the kernel's directory lock is never waited on for long), and a holder killed -9
# delays a change on A by at most its session's expiry.
source "$(dirname "$0")/lib.sh"
A=$AQ_SCRATCH/a
B=$AQ_SCRATCH/b
OPTS=cache_leases=1,entry_timeout=30,attr_timeout=30
aq_start_cluster
aq_mount "$A" -o "$OPTS"
aq_mount "$B" -o "$OPTS"
grep -q "cache leases on" "$AQ_SCRATCH/mount1.log" || aq_fail "mount B did not turn cache leases on"
mkdir "$A/d"
timeout "$T" ls "$B/d" >/dev/null

# Rename-over, as checkpoints and manifests are saved: B has the old file cached each time.
for i in $(seq 1 30); do
  echo "old$i" >"$A/d/ckpt"
  [ "$(timeout "$T" cat "$B/d/ckpt")" = "old$i" ] || aq_fail "B did not read old$i"
  echo "new$i new$i" >"$A/d/ckpt.tmp"
  mv "$A/d/ckpt.tmp" "$A/d/ckpt"
  got=$(timeout "$T" cat "$B/d/ckpt" 2>&1) || aq_fail "B: open of the replaced name: $got"
  [ "$got" = "new$i new$i" ] || aq_fail "B read '$got' after rename-over $i (wanted new$i new$i)"
  got=$(timeout "$T" dd if="$B/d/ckpt" iflag=direct bs=4096 status=none 2>&1) ||
    aq_fail "B: O_DIRECT read of the replaced name: $got"
  [ "$got" = "new$i new$i" ] || aq_fail "B read '$got' with O_DIRECT after rename-over $i"
done
aq_log "rename-over: 30 of 30 seen at once on B (buffered and O_DIRECT)"

# O_TRUNC rewrite: stat on B reports the new size at once (attr_timeout is 30 s).
for i in $(seq 1 20); do
  head -c $((1000 + i * 37)) /dev/zero >"$A/d/size"
  [ "$(timeout "$T" stat -c %s "$B/d/size")" = $((1000 + i * 37)) ] ||
    aq_fail "B's size of a file rewritten on A: $(stat -c %s "$B/d/size"), wanted $((1000 + i * 37))"
  head -c $((10 + i)) /dev/zero >"$A/d/size"
  [ "$(timeout "$T" stat -c %s "$B/d/size")" = $((10 + i)) ] || aq_fail "B's size after O_TRUNC $i"
done
# chmod, unlink, and a create after B looked the name up and found nothing.
for mode in 600 640 755 700; do
  chmod "$mode" "$A/d/size"
  [ "$(timeout "$T" stat -c %a "$B/d/size")" = "$mode" ] || aq_fail "B's mode after chmod $mode"
done
rm "$A/d/size"
timeout "$T" test ! -e "$B/d/size" || aq_fail "B still sees a file unlinked on A"
for i in $(seq 1 10); do
  timeout "$T" test ! -e "$B/d/later$i" || aq_fail "later$i exists before its create"
  echo "x" >"$A/d/later$i"
  timeout "$T" test -f "$B/d/later$i" || aq_fail "B does not see later$i created on A"
done
mkdir "$A/d/sub"
mv "$A/d/sub" "$A/d/sub2"
timeout "$T" test -d "$B/d/sub2" -a ! -e "$B/d/sub" || aq_fail "B's view of a directory renamed on A"
aq_log "O_TRUNC sizes, chmod, unlink, negative lookups, directory rename: all seen at once on B"

# Both mounts changing one directory at once: each change waits for the other mount's
# acknowledgement while its own kernel holds the directory; neither may stall for long.
mkdir "$A/busy"
t0=$SECONDS
(for i in $(seq 1 150); do echo a >"$A/busy/a$i"; mv "$A/busy/a$i" "$A/busy/A$i"; done) &
pa=$!
(for i in $(seq 1 150); do echo b >"$B/busy/b$i"; mv "$B/busy/b$i" "$B/busy/B$i"; done) &
pb=$!
aq_wait_for 120 "the two writers in one directory" aq_pid_gone "$pa"
aq_wait_for 120 "the two writers in one directory" aq_pid_gone "$pb"
wait "$pa" || aq_fail "writer on A failed"
wait "$pb" || aq_fail "writer on B failed"
[ "$(timeout "$T" ls "$A/busy" | wc -l)" = 300 ] || aq_fail "A lists $(ls "$A/busy" | wc -l) of 300"
[ "$(timeout "$T" ls "$B/busy" | wc -l)" = 300 ] || aq_fail "B lists $(ls "$B/busy" | wc -l) of 300"
aq_log "600 creates and renames from both mounts in one directory: $((SECONDS - t0)) s"
if grep -q "lease broken" "$AQ_SCRATCH/meta.log"; then
  aq_fail "a recall went unanswered: $(grep -c 'lease broken' "$AQ_SCRATCH/meta.log") broken leases"
fi

# Directories whose every name B knows (client/rpc/dir_names.h), so B answers their negative
# lookups itself: one B made, and one B listed after lookups there missed. A name A makes or
# removes there is seen on B at once, also for a name B just found absent.
mkdir "$B/mine" "$A/theirs"
for i in $(seq 1 8); do
  timeout "$T" test ! -e "$B/mine/m$i" || aq_fail "m$i exists in B's new directory"
  timeout "$T" test ! -e "$B/theirs/t$i" || aq_fail "t$i exists before its create"
done
for i in $(seq 1 8); do
  echo "m$i" >"$A/mine/m$i"
  [ "$(timeout "$T" cat "$B/mine/m$i" 2>&1)" = "m$i" ] || aq_fail "B does not see mine/m$i made on A"
  echo "t$i" >"$A/theirs/t$i"
  [ "$(timeout "$T" cat "$B/theirs/t$i" 2>&1)" = "t$i" ] || aq_fail "B does not see theirs/t$i"
  mv "$A/theirs/t$i" "$A/mine/moved$i"
  timeout "$T" test ! -e "$B/theirs/t$i" -a -f "$B/mine/moved$i" ||
    aq_fail "B's view of theirs/t$i renamed on A into B's directory"
done
# B's own creates there keep its list whole: each is found by B and by A.
for i in $(seq 1 20); do echo "b$i" >"$B/mine/b$i"; done
[ "$(timeout "$T" ls "$A/mine" | wc -l)" = 36 ] || aq_fail "A lists $(ls "$A/mine" | wc -l) of 36"
[ "$(cat "$B/mine/b20")" = b20 ] || aq_fail "B's own create b20"
# rename(2) between two links of one inode does nothing (POSIX): B's list keeps both names.
echo l >"$B/mine/link1"
ln "$B/mine/link1" "$B/mine/link2"
/usr/bin/python3 -c "import os,sys; os.rename(sys.argv[1], sys.argv[2])" "$B/mine/link1" "$B/mine/link2"
timeout "$T" test -f "$B/mine/link1" -a -f "$B/mine/link2" || aq_fail "a rename between two links lost a name on B"
rm "$B/mine/link1" "$B/mine/link2"
aq_log "known-complete directories on B: every change on A seen at once"

# Rounds in one directory, each way (coherence_rounds.py): create after a negative lookup,
# O_TRUNC rewrite, chmod, append, rename-over and unlink on one mount, each seen at once on the
# other, buffered and O_DIRECT. B made the directory, so B answers its absent names itself.
mkdir "$B/rounds"
t0=$SECONDS
got=$(timeout 300 /usr/bin/python3 "$(dirname "$0")/coherence_rounds.py" "$A/rounds" "$B/rounds" \
  "${AQ_COHERENCE_ROUNDS:-1000}" 2>&1) || aq_fail "$got"
aq_log "$got ($((SECONDS - t0)) s)"

# Attributes answered by the client (client/rpc/dir_names.h): mount C's kernel caches nothing, so
# each stat there is C's client's to answer. After 16 stats in a directory C lists it with
# attributes and answers the rest itself; every change on A, and C's own, shows in C's next stat.
C=$AQ_SCRATCH/c
aq_mount "$C" -o cache_leases=1,entry_timeout=0,attr_timeout=0
mkdir "$A/kept"
got=$(timeout 120 /usr/bin/python3 "$(dirname "$0")/kept_attrs.py" "$A/kept" "$C/kept" 2>&1) ||
  aq_fail "$got"
aq_log "$got"
mkdir "$C/rounds2"
got=$(timeout 300 /usr/bin/python3 "$(dirname "$0")/coherence_rounds.py" "$A/rounds2" "$C/rounds2" \
  "${AQ_COHERENCE_ROUNDS_C:-300}" 2>&1) || aq_fail "A and C: $got"
aq_log "A and C (no kernel caching on C): $got"
aq_umount "$C"
# lease_counts LOG: the counts a mount logged at unmount, as $kept (the line), $absent (lookups
# answered absent in the mount) and $found (lookups answered from kept attributes).
lease_counts() {
  kept=$(grep -o "cache leases: answered here.*" "$1") || aq_fail "$1: no cache-lease counts"
  absent=$(sed -E 's/.*answered here ([0-9]+) lookups absent.*/\1/' <<<"$kept")
  found=$(sed -E 's/.* absent, ([0-9]+) lookups and ([0-9]+) getattrs.*/\1/' <<<"$kept")
}
lease_counts "$AQ_SCRATCH/mount2.log"
[ "$found" -ge 150 ] || aq_fail "C answered only $found lookups from kept attributes: $kept"
aq_log "C: $kept"
# A fresh mount trusts what it caches from its first moments (its first recall ask does not
# long-poll): 100 stats right after mounting D, 84 of them answered by D's client. Then 50 stats
# of a name that does not exist cost one lookup: the kernel keeps the negative entry (entry_timeout
# 1 s here), which a create on another host recalls at once.
mkdir "$A/fresh"
for i in $(seq 100); do : >"$A/fresh/f$i"; done
D=$AQ_SCRATCH/dmnt
aq_mount "$D" -o cache_leases=1
timeout "$T" /usr/bin/python3 -c "
import os, sys
[os.stat(f'{sys.argv[1]}/f{i}') for i in range(1, 101)]
for _ in range(50):
    if os.path.exists(sys.argv[1] + '/nope'): sys.exit('nope exists')
" "$D/fresh" || aq_fail "stats of fresh/ on D"
echo made >"$A/fresh/nope"
[ "$(timeout "$T" cat "$D/fresh/nope" 2>&1)" = made ] || aq_fail "D kept a negative entry past A's create"
aq_umount "$D"
lease_counts "$AQ_SCRATCH/mount3.log"
[ "$found" -ge 80 ] || aq_fail "a fresh mount answered only $found of 100 stats itself: $kept"
[ "$absent" -le 3 ] || aq_fail "50 stats of a missing name reached D's client $absent times: $kept"
aq_log "D (fresh): $kept"

# Opens without a round trip (docs/design.md "Opens without a round trip"): mount E stats every
# file of a directory (its client then keeps their attributes), opens three of them and reads
# half of each; A then deletes one, renames a new file over another and truncates the third.
# E's descriptors of the deleted and the replaced file still read every byte they opened; the
# truncated one reads end of file past its new size, as on a local file system (never zeros
# or other bytes). E's log at unmount says its opens
# were answered from kept attributes and told to the server at A's changes (which held the
# inodes and the truncated stripes until then).
mkdir "$A/lazy"
for i in $(seq 20); do head -c $((300000 + i)) /dev/urandom >"$A/lazy/f$i"; done
E=$AQ_SCRATCH/emnt
aq_mount "$E" -o cache_leases=1
rm -f "$AQ_SCRATCH/lazy.ready" "$AQ_SCRATCH/lazy.go"
timeout 120 /usr/bin/python3 -c "
import hashlib, os, sys, time
d, ready, go = sys.argv[1:4]
for i in range(1, 21): os.stat(f'{d}/f{i}')
fds = {n: os.open(f'{d}/{n}', os.O_RDONLY) for n in ('f1', 'f2', 'f3')}
want = {n: 300000 + int(n[1:]) for n in fds}
first = {n: os.pread(fd, want[n] // 2, 0) for n, fd in fds.items()}
open(ready, 'w').close()
while not os.path.exists(go): time.sleep(0.01)
for n, fd in fds.items():
    rest = os.pread(fd, want[n], want[n] // 2)
    if n == 'f3':
        if rest: sys.exit(f'f3: {len(rest)} bytes read past the size A truncated it to')
        print('f3 eof')
        continue
    got = first[n] + rest
    if len(got) != want[n]: sys.exit(f'{n}: read {len(got)} bytes of {want[n]} after the change on A')
    print(n, hashlib.sha256(got).hexdigest())
" "$E/lazy" "$AQ_SCRATCH/lazy.ready" "$AQ_SCRATCH/lazy.go" >"$AQ_SCRATCH/lazy.out" 2>&1 &
lazy_pid=$!
want_sums=$(cd "$A/lazy" && sha256sum f1 f2 | awk '{print $2, $1}'; echo f3 eof)
aq_wait_for 60 "E's lazy opens" test -e "$AQ_SCRATCH/lazy.ready"
rm "$A/lazy/f1"
echo new >"$A/lazy/.f2" && mv "$A/lazy/.f2" "$A/lazy/f2"
truncate -s 0 "$A/lazy/f3"
touch "$AQ_SCRATCH/lazy.go"
wait "$lazy_pid" || aq_fail "E's open files after A's changes: $(cat "$AQ_SCRATCH/lazy.out")"
[ "$(cat "$AQ_SCRATCH/lazy.out")" = "$want_sums" ] ||
  aq_fail "E's open files read other bytes after A's changes: $(cat "$AQ_SCRATCH/lazy.out")"
aq_umount "$E"
lazy=$(grep -o "lazy opens: .*" "$AQ_SCRATCH/mount4.log") || aq_fail "E logged no lazy opens"
opened=$(sed -E 's/lazy opens: ([0-9]+) .*/\1/' <<<"$lazy")
told=$(sed -E 's/.*, ([0-9]+) of them later told.*/\1/' <<<"$lazy")
[ "$opened" -ge 3 ] && [ "$told" -ge 3 ] || aq_fail "E's opens were not lazy, or not told: $lazy"
aq_log "E: open files whole after an unlink, a rename-over and a truncate on A; $lazy"

# aquifer-meta killed -9 and started again: it knows none of the leases and counts recalls
# from 1 again. B's lists and acknowledgements are of the old run; changes on A must still be
# seen on B at once once A's call returned.
# What B's kernel cached under the old run cannot be recalled by the new one: its timeouts
# (30 s asked here) are capped at B's trust in its leases, and B resyncs only once they ended,
# so a chmod and a create on A after the restart are seen on B at once.
echo pre >"$A/mine/pre"
chmod 644 "$A/mine/pre"
[ "$(timeout "$T" stat -c %a "$B/mine/pre")" = 644 ] || aq_fail "B's mode of mine/pre"
timeout "$T" test ! -e "$B/mine/late" || aq_fail "mine/late exists before its create"
kill -KILL "$AQ_META_PID"
wait "$AQ_META_PID" 2>/dev/null || true
aq_start_meta
aq_within 30 "a chmod on A after the restart" chmod 600 "$A/mine/pre" ||
  aq_fail "chmod on A after the restart: $(cat "$AQ_SCRATCH/within.out")"
[ "$(timeout "$T" stat -c %a "$B/mine/pre")" = 600 ] ||
  aq_fail "B kept the old run's attributes of mine/pre after the restart"
aq_within 30 "a create on A after the restart" sh -c "echo late >'$A/mine/late'" ||
  aq_fail "create on A after the restart: $(cat "$AQ_SCRATCH/within.out")"
[ "$(timeout "$T" cat "$B/mine/late" 2>&1)" = late ] ||
  aq_fail "B kept the old run's negative entry of mine/late after the restart"
for i in $(seq 1 8); do
  timeout "$T" test ! -e "$B/mine/r$i" || aq_fail "r$i exists before its create (after the restart)"
  aq_within 30 "a create on A after the restart" sh -c "echo r$i >'$A/mine/r$i'" ||
    aq_fail "create on A after the restart: $(cat "$AQ_SCRATCH/within.out")"
  [ "$(timeout "$T" cat "$B/mine/r$i" 2>&1)" = "r$i" ] ||
    aq_fail "B does not see mine/r$i made on A after the metadata server restarted"
done
aq_log "after a metadata server restart: 8 of 8 creates on A seen at once on B"

# A holder killed -9: A's changes wait at most until B's session expires (5 s here), or the
# server's cache-lease bound (8 s), not forever.
timeout "$T" stat "$B/d/ckpt" >/dev/null
kill -KILL "${AQ_MOUNT_PIDS[1]}"
wait "${AQ_MOUNT_PIDS[1]}" 2>/dev/null || true
fusermount3 -uz "$B" 2>/dev/null || true
t0=$SECONDS
echo gone >"$A/d/ckpt.tmp"
aq_within 20 "a rename while the holder is dead" mv "$A/d/ckpt.tmp" "$A/d/ckpt" ||
  aq_fail "rename on A with B dead: $(cat "$AQ_SCRATCH/within.out")"
[ $((SECONDS - t0)) -le 12 ] || aq_fail "rename on A waited $((SECONDS - t0)) s for a dead holder"
[ "$(cat "$A/d/ckpt")" = gone ] || aq_fail "A's own view after the rename"
aq_log "cache leases: all checks passed"
