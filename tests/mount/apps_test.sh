#!/bin/bash
# Applications through the mount: sqlite3 (fcntl locks, two processes), numpy memmap (shared
# writable mmap), flock and fcntl locks from two processes, dd conv=notrunc overwrites in the
# middle of stripes compared with a local copy, concurrent writers to different files.
source "$(dirname "$0")/lib.sh"
M=$AQ_SCRATCH/mnt
aq_start_cluster
aq_mount "$M"

aq_log "sqlite3"
timeout "$T" sqlite3 "$M/db.sqlite" "create table t(id integer primary key, v text);
  begin; $(for i in $(seq 500); do echo "insert into t(v) values('row$i');"; done) commit;" ||
  aq_fail "sqlite create"
# Two writer processes at once: SQLite serializes them with fcntl locks (busy_timeout retries).
for w in 1 2; do
  timeout "$T" sqlite3 -cmd ".timeout 20000" "$M/db.sqlite" \
    "$(for i in $(seq 100); do echo "insert into t(v) values('w$w-$i');"; done)" &
  AQ_EXTRA_PIDS+=($!)
done
for pid in "${AQ_EXTRA_PIDS[@]}"; do wait "$pid" || aq_fail "sqlite concurrent writer"; done
AQ_EXTRA_PIDS=()
[ "$(timeout "$T" sqlite3 "$M/db.sqlite" 'select count(*) from t')" = 700 ] || aq_fail "sqlite row count"
[ "$(timeout "$T" sqlite3 "$M/db.sqlite" 'pragma integrity_check')" = ok ] || aq_fail "sqlite integrity"

aq_log "numpy memmap"
timeout "$T" /usr/bin/python3 - "$M/mm.f32" <<'PY' || aq_fail "numpy memmap"
import numpy as np, sys
path = sys.argv[1]
n = 3 * 1024 * 1024  # 12 MiB: several stripes
m = np.memmap(path, dtype="float32", mode="w+", shape=(n,))
m[:] = np.arange(n, dtype="float32")
m.flush(); del m
m = np.memmap(path, dtype="float32", mode="r+", shape=(n,))
assert (m[::4099] == np.arange(n, dtype="float32")[::4099]).all()
m[1_000_000:1_000_010] = -1.0     # update in place through the shared mapping
m.flush(); del m
a = np.fromfile(path, dtype="float32")
expect = np.arange(n, dtype="float32"); expect[1_000_000:1_000_010] = -1.0
assert (a == expect).all()
print("memmap ok")
PY

aq_log "flock and fcntl from two processes"
timeout "$T" /usr/bin/python3 - "$M/lockfile" <<'PY' || aq_fail "locks"
import fcntl, os, sys, time
path = sys.argv[1]
open(path, "w").close()
for kind in ("flock", "fcntl"):
    def lock(fd, flags):
        if kind == "flock":
            fcntl.flock(fd, flags)
        else:
            fcntl.lockf(fd, flags, 100, 0)
    fd = os.open(path, os.O_RDWR)
    lock(fd, fcntl.LOCK_EX)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the second process
        os.close(fd)
        f2 = os.open(path, os.O_RDWR)
        try:
            lock(f2, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.write(w, b"got\n")
        except OSError:
            os.write(w, b"busy\n")
        t = time.time()
        lock(f2, fcntl.LOCK_EX)  # blocks until the parent closes its descriptor
        os.write(w, b"%.3f\n" % (time.time() - t))
        os._exit(0)
    rf = os.fdopen(r)
    assert rf.readline().strip() == "busy", kind
    time.sleep(0.5)  # the child must stay blocked at least this long
    os.close(fd)     # closing releases the lock
    waited = float(rf.readline())
    os.waitpid(pid, 0)
    assert waited >= 0.4, (kind, waited)
    print(kind, "second process blocked for", round(waited, 2), "s")
PY

aq_log "dd conv=notrunc overwrites inside stripes"
aq_random_file "$AQ_SCRATCH/local.bin" 10 21
timeout "$T" cp "$AQ_SCRATCH/local.bin" "$M/over.bin" || aq_fail "cp"
for spec in 0:1 700:5 1048573:9 3145000:4096 4194304:1048576 5000000:3000000 10485000:500; do
  off=${spec%%:*}; len=${spec##*:}
  head -c "$len" /dev/urandom >"$AQ_SCRATCH/patch"
  for f in "$AQ_SCRATCH/local.bin" "$M/over.bin"; do
    timeout "$T" dd if="$AQ_SCRATCH/patch" of="$f" bs="$len" count=1 seek="$off" oflag=seek_bytes \
      conv=notrunc status=none || aq_fail "dd $spec into $f"
  done
done
aq_same "$AQ_SCRATCH/local.bin" "$M/over.bin"

aq_log "concurrent writers to different files"
for i in 1 2 3 4; do
  aq_random_file "$AQ_SCRATCH/cw$i" 6 $((100 + i)) 2>/dev/null
done
for i in 1 2 3 4; do timeout "$T" cp "$AQ_SCRATCH/cw$i" "$M/cw$i" & AQ_EXTRA_PIDS+=($!); done
for pid in "${AQ_EXTRA_PIDS[@]}"; do wait "$pid" || aq_fail "concurrent cp"; done
AQ_EXTRA_PIDS=()
aq_umount "$M"
aq_mount "$M"
for i in 1 2 3 4; do aq_same "$AQ_SCRATCH/cw$i" "$M/cw$i"; done
aq_same "$AQ_SCRATCH/local.bin" "$M/over.bin"
[ "$(timeout "$T" sqlite3 "$M/db.sqlite" 'select count(*) from t')" = 700 ] || aq_fail "sqlite after remount"
echo "PASS apps"
