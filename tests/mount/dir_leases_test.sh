#!/bin/bash
# Exclusive directory leases (docs/design.md "Exclusive directory leases"): mount A with
# -o dir_leases=1 creates files in directories no other mount looks at without a metadata round
# trip each, and sends them in batches; mount B (cache leases, kernel timeouts of 30 s, so
# nothing passes by a cache expiring) sees every create at once, because its first look at such
# a directory makes aquifer-meta recall A's lease, and A sends what it created before giving it
# back. Checked through the two mounts:
#   burst     2,000 empty files made in one directory on A: at most a few Create calls reach
#             aquifer-meta (the rest go in ChangeBatch calls); B lists the 2,000 at once;
#   data      300 files of 1-40 KiB written and closed on A in a fresh directory (their commits
#             go in the batches: at most a few Commit calls), stat'ed and read back on A right
#             after close, a tenth appended to after a reopen, then read on B: byte-for-byte;
#   parallel  4 writers making 1,200 new directories with a file each at once on A: all whole
#             on B, none refused (concurrent grants' number ranges are taken in order);
#   rounds    200 rounds of: A makes a directory and a file in it, B reads the file at once;
#   order     A creates, renames and unlinks its new files: B sees exactly the result;
#   tree      24 directories, 480 files renamed from temporary names, renamed over one another
#             and across directories, and unlinked on A (mkdir, rename and unlink under the
#             lease cost no round trip either): at most 12 such calls reach aquifer-meta, and
#             the tree on B equals a local copy made the same way (names, modes, sizes,
#             sha256);
#   reopen    a file made under the lease and open again on A keeps working after B wrote it
#             and A listed it from the server; a held directory's nlink and mode on A follow a
#             directory renamed out of it and a chmod at once;
#   broken    a holder stopped (SIGSTOP) with creates it had not sent loses the lease (its
#             session's expiry or --cache-lease-ms): the other mount sees none of them, and the holder's fsyncdir
#             fails and its kernel drops them once it runs again;
#   fsync     with the batch sender held back (a fail point), a file's fsync and its directory's
#             fsync each send the batch; kill -9 of mount A after a burst of creates where every
#             tenth file was fsynced:
#             each fsynced file is there on B, and fsyncdir makes the rest durable;
#   orphans   files written on a mount whose batches are held back, killed -9: the fsynced ones
#             are whole, and the chunks of the never-created ones are collected (fsck clean);
#   restart   kill -9 of aquifer-meta in the middle of an ingest on A (creates under the lease,
#             reserved inode numbers outlive the restart): every file is there on B afterwards;
# and `aquifer fsck` is clean at the end.
source "$(dirname "$0")/lib.sh"
: "${AQ_CLI_BIN:?set AQ_CLI_BIN to the aquifer CLI binary (fsck)}"
A=$AQ_SCRATCH/a
B=$AQ_SCRATCH/b
OPTS=cache_leases=1,entry_timeout=30,attr_timeout=30
aq_start_cluster
aq_mount "$A" -o "$OPTS,dir_leases=1"
aq_mount "$B" -o "$OPTS"
grep -q "exclusive directory leases on" "$AQ_SCRATCH/mount0.log" ||
  aq_fail "mount A did not turn directory leases on"
A_PID=${AQ_MOUNT_PIDS[0]}

HTTP=$(cat "$AQ_SCRATCH/meta.http")
served() {  # served METHOD: how many METHOD calls aquifer-meta served so far
  /usr/bin/python3 - "$HTTP" "$1" <<'PY'
import re, sys, urllib.request
text = urllib.request.urlopen(f"http://{sys.argv[1]}/metrics", timeout=10).read().decode()
total = 0
for line in text.splitlines():
    m = re.match(r'aquifer_meta_rpc_requests_total\{(.*)\} ([0-9.e+]+)$', line)
    if m and f'method="{sys.argv[2]}"' in m.group(1):
        total += float(m.group(2))
print(int(total))
PY
}

# ---- burst: 2,000 empty files, as tar, cp -r and a dataset's writer make them.
mkdir "$A/burst"
creates0=$(served Create)
batches0=$(served ChangeBatch)
/usr/bin/python3 - "$A/burst" <<'PY'
import os, sys, time
d = sys.argv[1]
t = time.perf_counter()
for i in range(2000):
    os.close(os.open(os.path.join(d, f"f{i:05d}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o640))
print(f"burst: 2000 creates at {2000 / (time.perf_counter() - t):.0f}/s", file=sys.stderr)
PY
creates=$(($(served Create) - creates0))
batches=$(($(served ChangeBatch) - batches0))
aq_log "burst: $creates Create calls and $batches ChangeBatch calls for 2,000 creates on A"
((creates <= 5)) || aq_fail "burst: $creates of 2,000 creates went to aquifer-meta one by one"
((batches >= 2)) || aq_fail "burst: $batches ChangeBatch calls (the creates were not batched)"
n=$(timeout "$T" ls "$B/burst" | wc -l)
[ "$n" = 2000 ] || aq_fail "burst: B lists $n files, wanted 2000"
[ "$(timeout "$T" stat -c %a:%s "$B/burst/f01999")" = "640:0" ] ||
  aq_fail "burst: B's stat of f01999: $(stat -c %a:%s "$B/burst/f01999")"
diff <(cd "$A/burst" && ls) <(cd "$B/burst" && ls) >/dev/null || aq_fail "burst: listings differ"

# ---- data: files written and closed under the lease, read on B.
# Their commits go in the change batch (issue 18 must 4): close waits for the chunk writes only,
# so aquifer-meta serves (almost) no Commit call, while A's own stat and read right after each
# close, and an append after a reopen, see the written file.
mkdir "$A/data" "$AQ_SCRATCH/ref"
commits0=$(served Commit)
/usr/bin/python3 - "$A/data" "$AQ_SCRATCH/ref" <<'PY'
import os, random, sys
rng = random.Random(18)
for i in range(300):
    data = rng.randbytes(rng.randint(1024, 40 * 1024))
    for d in sys.argv[1:]:
        path = os.path.join(d, f"s{i:03d}")
        with open(path, "wb") as f:
            f.write(data)
        if os.stat(path).st_size != len(data):
            sys.exit(f"data: stat of {path} right after close: {os.stat(path).st_size}, wanted {len(data)}")
        if i % 10 == 0:
            with open(path, "rb") as f:
                if f.read() != data:
                    sys.exit(f"data: {path} read back right after close differs")
            with open(path, "ab") as f:
                f.write(b"tail")
PY
commits=$(($(served Commit) - commits0))
aq_log "data: aquifer-meta served $commits Commit calls for 300 files written and closed on A"
((commits <= 5)) || aq_fail "data: $commits Commit calls (the commits were not batched)"
for i in $(seq -f %03g 0 299); do
  timeout "$T" cmp "$AQ_SCRATCH/ref/s$i" "$B/data/s$i" || aq_fail "data: B read other bytes of s$i"
done
aq_log "data: 300 files written under the lease on A read identically on B"

# ---- parallel: four writers each make 300 new directories with a file in each on A at once, as
# tar's and cp's threads do. New directories ask for leases concurrently, and when few reserved
# numbers are left each grant brings a new range; their answers may come in either order, and a
# client that went back to the older range would have its creates refused ("used before") and
# their chunks collected. Every file must be whole on B, and A's mount logs no refused change.
# (A check, not a reproduction: the case passed on a build without the in-order rule too.)
mkdir "$A/par"
timeout 300 /usr/bin/python3 - "$A/par" <<'PY' || aq_fail "parallel: a writer on A failed"
import os, sys, threading
d = sys.argv[1]
errors = []
def writer(w):
    try:
        for i in range(300):
            sub = os.path.join(d, f"w{w}-{i:03d}")
            os.mkdir(sub)
            with open(os.path.join(sub, "f"), "wb") as f:
                f.write(f"{w}:{i}\n".encode() * 50)
    except OSError as e:
        errors.append(f"writer {w}: {e}")
threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
for t in threads: t.start()
for t in threads: t.join()
if errors:
    sys.exit("; ".join(errors[:3]))
PY
timeout 120 /usr/bin/python3 - "$B/par" <<'PY' || aq_fail "parallel: B's view of A's files"
import os, sys
d = sys.argv[1]
for w in range(4):
    for i in range(300):
        got = open(os.path.join(d, f"w{w}-{i:03d}", "f"), "rb").read()
        if got != f"{w}:{i}\n".encode() * 50:
            sys.exit(f"parallel: w{w}-{i:03d}/f on B: {len(got)} bytes, not what A wrote")
PY
! grep -q "sent in a batch" "$AQ_SCRATCH/mount0.log" ||
  { grep "sent in a batch" "$AQ_SCRATCH/mount0.log" | head -3 >&2; aq_fail "parallel: A's changes were refused"; }
aq_log "parallel: 1,200 directories and files made by 4 writers at once on A, whole on B"

# ---- rounds: a fresh directory and a file in it on A, read at once on B.
for i in $(seq 1 200); do
  mkdir "$A/r$i"
  echo "round $i" >"$A/r$i/f"
  got=$(timeout "$T" cat "$B/r$i/f" 2>&1) || aq_fail "rounds: B: $got"
  [ "$got" = "round $i" ] || aq_fail "rounds: B read '$got' in round $i"
done
aq_log "rounds: 200 of 200 files created under A's lease read at once on B"

# ---- order: creates under the lease, then calls that go to the server.
mkdir "$A/order"
for i in $(seq 1 50); do
  echo "x$i" >"$A/order/tmp$i"
  mv "$A/order/tmp$i" "$A/order/final$i"
  [ $((i % 5)) = 0 ] && rm "$A/order/final$i"
  touch "$A/order/empty$i"
done
want=$(cd "$A/order" && ls | sort | tr '\n' ' ')
got=$(cd "$B/order" && timeout "$T" ls | sort | tr '\n' ' ')
[ "$got" = "$want" ] || aq_fail "order: B lists '$got', A '$want'"
[ "$(cat "$B/order/final7")" = x7 ] || aq_fail "order: B read '$(cat "$B/order/final7")'"
aq_log "order: creates, renames and unlinks on A seen on B as A made them"

# ---- tree: directories, files, renames and unlinks made on A under leases (mkdir, unlink and
# rename in a directory A holds are local too, and a directory A makes is A's), then the whole
# tree compared on B: names, types, modes, sizes and contents.
mk0=$(served Mkdir)
ren0=$(served Rename)
unl0=$(served Unlink)
set0=$(served SetAttr)
/usr/bin/python3 - "$A/tree" "$AQ_SCRATCH/tree-ref" <<'PY'
import os, random, sys
rng = random.Random(1818)
for root in sys.argv[1:]:
    r = random.Random(1818)
    os.mkdir(root)
    for d in range(12):
        sub = os.path.join(root, f"d{d:02d}", "inner")
        os.makedirs(sub, mode=0o750)
        for f in range(40):
            p = os.path.join(sub if f % 2 else os.path.dirname(sub), f"f{f:02d}.tmp")
            with open(p, "wb") as out:
                out.write(r.randbytes(r.randint(0, 9000)))
            os.chmod(p, 0o600 + (f % 3) * 0o40)
            os.rename(p, p[:-4])                        # rsync's temporary file, then its name
        os.rename(os.path.join(sub, "f01"), os.path.join(sub, "f03"))  # over another file
        os.rename(os.path.join(root, f"d{d:02d}", "f00"),
                  os.path.join(sub, "moved"))          # across directories
        for f in range(4, 40, 7):
            victim = os.path.join(sub if f % 2 else os.path.dirname(sub), f"f{f:02d}")
            os.unlink(victim)
PY
mk=$(($(served Mkdir) - mk0))
ren=$(($(served Rename) - ren0))
unl=$(($(served Unlink) - unl0))
aq_log "tree: aquifer-meta served $mk Mkdir, $ren Rename and $unl Unlink calls for 24 mkdirs, 504 renames and 36 unlinks on A"
((mk + ren + unl <= 12)) || aq_fail "tree: the changes under A's leases went to aquifer-meta one by one"
setattrs=$(($(served SetAttr) - set0))
aq_log "tree: aquifer-meta served $setattrs SetAttr calls for 480 chmods of files made on A"
((setattrs <= 12)) || aq_fail "tree: the chmods of A's own new files went to aquifer-meta one by one"
describe() {  # names, types, modes, sizes and checksums of a tree, one line each
  (cd "$1" && timeout "$T" find . -printf '%p %y %m %s\n' | sort &&
    timeout "$T" find . -type f -exec sha256sum {} + | sort -k2)
}
describe "$AQ_SCRATCH/tree-ref" >"$AQ_SCRATCH/tree.local"
describe "$B/tree" >"$AQ_SCRATCH/tree.b"
describe "$A/tree" >"$AQ_SCRATCH/tree.a"
diff "$AQ_SCRATCH/tree.local" "$AQ_SCRATCH/tree.b" >&2 || aq_fail "tree: B's view differs from a local copy"
diff "$AQ_SCRATCH/tree.local" "$AQ_SCRATCH/tree.a" >&2 || aq_fail "tree: A's view differs from a local copy"
aq_log "tree: $(wc -l <"$AQ_SCRATCH/tree.b") lines of names, modes, sizes and sha256 equal on A, B and a local copy"

# ---- attrs: chmod, chown and utimes of files made under the lease are answered on A and sent in
# the batch, by the rules aquifer-meta applies: as tar does it (futimens, fchown, fchmod on the
# open file), and by a user who owns the file (chmod and utimes allowed; chown to another user,
# and chgrp to a group the user is not in, refused at once with EPERM); B sees A's results.
chmod 0711 "$AQ_SCRATCH"  # uid 4321 must reach the mount point
mkdir -m 0777 "$A/attrs"
timeout "$T" /usr/bin/python3 - "$A/attrs" <<'PY' || aq_fail "attrs: tar's sequence on A failed"
import os, sys
d = sys.argv[1]
fd = os.open(f"{d}/tarred", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
os.write(fd, b"t" * 5000)
os.utime(fd, ns=(1_700_000_000_123_456_789, 1_600_000_000_987_654_321))
os.fchown(fd, 1234, 5678)
os.fchmod(fd, 0o4755)
os.close(fd)
st = os.stat(f"{d}/tarred")
want = (0o104755, 1234, 5678, 5000, 1_600_000_000_987_654_321)
got = (st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_mtime_ns)
if got != want:
    sys.exit(f"attrs: A's stat of tarred {got}, wanted {want}")
PY
timeout "$T" setpriv --reuid=4321 --regid=4321 --clear-groups -- /usr/bin/python3 - "$A/attrs" <<'PY' ||
import errno, os, sys
d = sys.argv[1]
with open(f"{d}/mine", "wb") as f:
    f.write(b"m" * 100)
os.chmod(f"{d}/mine", 0o2640)  # the owner, in the file's group: the setgid bit stays
os.utime(f"{d}/mine", ns=(1_500_000_000_000_000_000, 1_500_000_000_000_000_001))
for what, call in (("chown to root", lambda: os.chown(f"{d}/mine", 0, -1)),
                   ("chgrp to a group not the user's", lambda: os.chown(f"{d}/mine", -1, 0))):
    try:
        call()
        sys.exit(f"attrs: {what} by the owner was allowed")
    except PermissionError as e:
        if e.errno != errno.EPERM:
            sys.exit(f"attrs: {what}: {e}")
st = os.stat(f"{d}/mine")
if (st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns) != (0o102640, 4321, 4321, 1_500_000_000_000_000_001):
    sys.exit(f"attrs: A's stat of mine {oct(st.st_mode)} {st.st_uid} {st.st_gid} {st.st_mtime_ns}")
PY
  aq_fail "attrs: a user's changes of its own file on A"
got=$(timeout "$T" stat -c '%a %u %g %s %Y' "$B/attrs/tarred" "$B/attrs/mine" | tr '\n' ' ')
[ "$got" = "4755 1234 5678 5000 1600000000 2640 4321 4321 100 1500000000 " ] ||
  aq_fail "attrs: B sees '$got'"
aq_log "attrs: tar's and a user's chmod, chown and utimes made on A seen on B; refused ones refused at once"

# ---- reopen: a file made under the lease, open again on A while B writes it and A lists its
# directory from the server, keeps working (the kernel failed every call on such an open file
# with EIO when the server's generation of the inode differed from the one A made it with).
mkdir "$A/ro"
timeout "$T" /usr/bin/python3 - "$A/ro" "$B/ro" <<'PY' || aq_fail "reopen: an open file made under the lease failed"
import os, sys
a, b = sys.argv[1], sys.argv[2]
fd = os.open(f"{a}/f", os.O_CREAT | os.O_RDWR, 0o644)
os.write(fd, b"hello")
os.close(fd)
fd = os.open(f"{a}/f", os.O_RDWR)  # as SQLite: its database opened again
open(f"{b}/other", "w").close()     # B's create recalls the directory
bfd = os.open(f"{b}/f", os.O_RDWR)  # B's write open recalls A's write lease
os.pwrite(bfd, b"B", 0)
os.close(bfd)
os.listdir(a)
os.stat(f"{a}/f")                   # A's kernel gets f's attributes from the server
os.pwrite(fd, b"A", 1)
os.fstat(fd)
os.close(fd)
PY
[ "$(cat "$B/ro/f")" = "BAllo" ] || aq_fail "reopen: B reads '$(cat "$B/ro/f")', wanted BAllo"
# A held directory's nlink and mode after changes A sent to the server (a directory renamed out,
# a chmod): what stat shows on A at once, not the copy taken at the grant.
mkdir "$A/da" "$A/db"
: >"$A/da/f1"         # local: A holds da
mkdir "$A/da/s1"      # local too
mv "$A/da/s1" "$A/db/s1"  # a directory rename goes to the server
[ "$(stat -c %h "$A/da")" = 2 ] || aq_fail "held dir: A's nlink of da after moving s1 out: $(stat -c %h "$A/da")"
chmod 700 "$A/da"
: >"$A/da/f2"
[ "$(stat -c %a "$A/da")" = 700 ] || aq_fail "held dir: A's mode of da after chmod 700: $(stat -c %a "$A/da")"
aq_log "reopen: an open file made under the lease survives B's write and A's listing; held directory attributes follow A's own server changes"

# ---- broken: a holder that stops answering loses the lease when its session expires or after
# --cache-lease-ms, whichever is first, and the changes it had not sent are refused, not applied behind the other host's back: mount C (its
# batches held back by a fail point) creates 5 files and is stopped (SIGSTOP); B's listing
# breaks the lease and sees none of them; once C runs again its fsyncdir fails (EIO), its mount
# logs each refused create, and its own kernel no longer shows them.
AQ_FAILPOINT=client.change_batch.before_send:delay=12000 aq_mount "$AQ_SCRATCH/c" -o "$OPTS,dir_leases=1"
C=$AQ_SCRATCH/c
C_PID=${AQ_MOUNT_PIDS[2]}
mkdir "$C/brk"
for i in 1 2 3 4 5; do : >"$C/brk/lost$i"; done
kill -STOP "$C_PID"
t0=$SECONDS
n=$(timeout "$T" ls "$B/brk" | wc -l)
kill -CONT "$C_PID"
waited=$((SECONDS - t0))
[ "$n" = 0 ] || aq_fail "broken: B lists $n files a stopped holder never sent"
# The lease ends with C's session (its 5 s ttl here) or after the 8 s lease, whichever is first.
((waited >= 3 && waited <= 20)) || aq_fail "broken: B's listing waited $waited s"
if timeout "$T" /usr/bin/python3 -c 'import os, sys; os.fsync(os.open(sys.argv[1], os.O_RDONLY))' "$C/brk" \
    2>"$AQ_SCRATCH/fsyncdir.err"; then
  aq_fail "broken: fsyncdir on C succeeded after its creates were refused"
fi
aq_wait_for 20 "C to log its refused creates" grep -q "create of 'lost5' .*sent in a batch" "$AQ_SCRATCH/mount2.log"
n=$(timeout "$T" ls "$C/brk" | wc -l)
[ "$n" = 0 ] || aq_fail "broken: C still lists $n of its refused files"
timeout "$T" test ! -e "$C/brk/lost3" || aq_fail "broken: C's kernel still has lost3"
aq_log "broken: B waited $waited s for stopped C, saw none of C's 5 unsent creates; C's fsyncdir failed ($(tail -n1 "$AQ_SCRATCH/fsyncdir.err" | cut -c1-60)) and C lists none"
aq_umount "$C"

# ---- fsync sends the batch: on mount D, whose batch sender a fail point holds back, a created
# file open with nothing else sent reaches aquifer-meta only with its fsync, and a second
# create only with the directory's fsync (the count of ChangeBatch calls moves by one each).
AQ_FAILPOINT=client.change_batch.before_send:delay=12000 aq_mount "$AQ_SCRATCH/d" -o "$OPTS,dir_leases=1"
mkdir "$AQ_SCRATCH/d/fs"
timeout "$T" /usr/bin/python3 - "$AQ_SCRATCH/d/fs" "$HTTP" <<'PY' || aq_fail "fsync: see above"
import os, re, sys, urllib.request
d, http = sys.argv[1], sys.argv[2]
def batches():
    text = urllib.request.urlopen(f"http://{http}/metrics", timeout=10).read().decode()
    return sum(float(m.group(1)) for m in re.finditer(
        r'aquifer_meta_rpc_requests_total\{[^}]*method="ChangeBatch"[^}]*\} ([0-9.e+]+)', text))
fd = os.open(f"{d}/one", os.O_CREAT | os.O_WRONLY, 0o644)
before = batches()
if batches() != before:
    sys.exit("fsync: a batch went out with nothing asking for it")
os.fsync(fd)
if batches() != before + 1:
    sys.exit(f"fsync: {batches() - before} batches went out at the file's fsync, wanted 1")
fd2 = os.open(f"{d}/two", os.O_CREAT | os.O_WRONLY, 0o644)
dfd = os.open(d, os.O_RDONLY)
os.fsync(dfd)
if batches() != before + 2:
    sys.exit(f"fsync: {batches() - before - 1} batches went out at the directory's fsync, wanted 1")
for x in (fd, fd2, dfd):
    os.close(x)
PY
aq_log "fsync: a file's fsync and its directory's fsync each sent the batch the sender held back"

# ---- fsync: kill -9 of mount A after creates; every fsynced one is there.
mkdir "$A/k"
/usr/bin/python3 - "$A/k" <<'PY'
import os, sys
d = sys.argv[1]
for i in range(200):
    fd = os.open(os.path.join(d, f"k{i:03d}"), os.O_CREAT | os.O_WRONLY, 0o644)
    if i % 10 == 9:
        os.fsync(fd)
    os.close(fd)
PY
kill -KILL "$A_PID"
wait "$A_PID" 2>/dev/null || true
fusermount3 -uz "$A" || true
AQ_MOUNT_PIDS[0]=""
aq_log "killed mount A (pid $A_PID) right after 200 creates"
for i in $(seq 9 10 199); do
  f=$(printf "k%03d" "$i")
  timeout "$T" test -f "$B/k/$f" || aq_fail "fsync: $f was fsynced on A but is not there after A died"
done
survived=$(timeout "$T" ls "$B/k" | wc -l)
aq_log "fsync: all 20 fsynced files there after kill -9 of A ($survived of 200 in all)"

# ---- orphans: a file made for write under the lease writes its chunks at a write version its
# grant reserved, before its create is sent. Mount E (its batch sender held back) writes 30
# files, fsyncs the 10th and the 20th, and is killed -9: the fsynced files and those before them
# are whole on B, the ones after are absent (or empty: their commit was not sent), and the chunks
# E stored for files never created are collected when E's session expires (fsck at the end is
# clean).
AQ_FAILPOINT=client.change_batch.before_send:delay=12000 aq_mount "$AQ_SCRATCH/e" -o "$OPTS,dir_leases=1"
E=$AQ_SCRATCH/e
E_PID=${AQ_MOUNT_PIDS[-1]}
mkdir "$E/o"
timeout "$T" /usr/bin/python3 - "$E/o" <<'PY' || aq_fail "orphans: E's writes failed"
import os, sys
d = sys.argv[1]
for i in range(30):
    fd = os.open(os.path.join(d, f"o{i:02d}"), os.O_CREAT | os.O_WRONLY, 0o644)
    os.write(fd, bytes([65 + i]) * 3000)
    if i in (9, 19):
        os.fsync(fd)
    os.close(fd)
PY
# Three more, 8 MiB each and still open at the kill: whole stripes go to the data servers while
# the file is written, so chunks of inodes aquifer-meta never heard of are stored.
/usr/bin/python3 - "$E/o" "$AQ_SCRATCH/e.ready" <<'PY' &
import os, sys, time
d, ready = sys.argv[1], sys.argv[2]
fds = []
for i in range(30, 33):
    fd = os.open(os.path.join(d, f"o{i:02d}"), os.O_CREAT | os.O_WRONLY, 0o644)
    os.write(fd, bytes([65 + i]) * (8 << 20))
    fds.append(fd)
open(ready, "w").close()
time.sleep(120)
PY
OPENER=$!
aq_wait_for 60 "E's open writers" test -e "$AQ_SCRATCH/e.ready"
sleep 0.5
kill -KILL "$E_PID"
wait "$E_PID" 2>/dev/null || true
kill -KILL "$OPENER" 2>/dev/null || true
wait "$OPENER" 2>/dev/null || true
fusermount3 -uz "$E" || true
for i in $(seq 0 19); do
  f=$(printf "o%02d" "$i")
  want=$(/usr/bin/python3 -c "import sys; sys.stdout.write(chr(65 + $i) * 3000)")
  [ "$(timeout "$T" cat "$B/o/$f")" = "$want" ] || aq_fail "orphans: $f (fsynced or before) not whole on B"
done
# A later call of E's (its release of a file) may have sent some creates after the last fsync:
# such a file is there empty (its commit was not sent) or whole, never anything else.
for f in $(cd "$B/o" && timeout "$T" ls); do
  i=$((10#${f#o}))
  ((i >= 20)) || continue
  got=$(timeout "$T" cat "$B/o/$f")
  want=$(/usr/bin/python3 -c "import sys; sys.stdout.write(chr(65 + $i) * 3000)")
  ((i < 30)) || want=""  # the open ones were never committed
  [ -z "$got" ] || [ "$got" = "$want" ] || aq_fail "orphans: $f on B is neither empty nor whole"
done
n=$(timeout "$T" ls "$B/o" | wc -l)
aq_log "orphans: E killed -9 with written files unsent; the 20 fsynced ones whole on B ($n of 33 there)"

# ---- restart: kill -9 of aquifer-meta in the middle of an ingest under the lease.
aq_mount "$A" -o "$OPTS,dir_leases=1"
mkdir "$A/m"
/usr/bin/python3 - "$A/m" "$AQ_SCRATCH/ingest.half" <<'PY' &
import os, sys, time
d, half = sys.argv[1], sys.argv[2]
for i in range(600):
    with open(os.path.join(d, f"m{i:03d}"), "w") as f:
        f.write(f"m{i}\n")
    if i == 150:
        open(half, "w").close()
    time.sleep(0.002)
fd = os.open(d, os.O_RDONLY)
os.fsync(fd)  # fsyncdir: durable on aquifer-meta before it returns
os.close(fd)
PY
INGEST=$!
aq_wait_for 60 "ingest to be half way" test -e "$AQ_SCRATCH/ingest.half"
kill -KILL "$AQ_META_PID"
wait "$AQ_META_PID" 2>/dev/null || true
aq_log "kill -9 aquifer-meta (pid $AQ_META_PID) during the ingest"
sleep 2  # an outage, not a blip
aq_start_meta
wait "$INGEST" || aq_fail "restart: the ingest on A failed"
n=$(timeout "$T" ls "$B/m" | wc -l)
[ "$n" = 600 ] || aq_fail "restart: B lists $n files, wanted 600"
for i in 0 149 150 151 300 599; do
  f=$(printf "m%03d" "$i")
  [ "$(timeout "$T" cat "$B/m/$f")" = "m$i" ] || aq_fail "restart: B read '$(cat "$B/m/$f")' from $f"
done
aq_log "restart: 600 of 600 files of an ingest across a kill -9 of aquifer-meta are there"

# ---- fsck: the namespace and the chunks agree (A's killed session's opens expire first).
rc=1
for _ in $(seq 1 12); do
  rc=0
  timeout 120 "$AQ_CLI_BIN" fsck --meta "$AQ_META_ADDR" >"$AQ_SCRATCH/fsck.out" 2>&1 || rc=$?
  [ $rc = 0 ] && grep -q '^fsck: clean' "$AQ_SCRATCH/fsck.out" && break
  grep -Eq '^missing: 0 stripes.*0 stripes lost' "$AQ_SCRATCH/fsck.out" || break
  rc=1
  sleep 5
done
[ $rc = 0 ] && grep -q '^fsck: clean' "$AQ_SCRATCH/fsck.out" ||
  { head -n 30 "$AQ_SCRATCH/fsck.out" >&2; aq_fail "aquifer fsck not clean (rc $rc)"; }
# E's expired session had its unused reserved numbers collected (the chunks of its open files).
grep -q "reserved inode numbers it did not use are collected" "$AQ_SCRATCH/meta.log" ||
  aq_fail "orphans: aquifer-meta collected no unused reserved numbers of E's expired session"
# Only C's (mount2) changes were refused; A's (mount0, and mount3 after its restart) never.
if grep -q "sent in a batch" "$AQ_SCRATCH"/mount[013].log; then
  grep "sent in a batch" "$AQ_SCRATCH"/mount[013].log | head -5 >&2
  aq_fail "a batched change of A was refused"
fi
aq_log "PASS dir_leases"
