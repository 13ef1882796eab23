#!/bin/bash
# Fail points (issue 16 item 6): one cluster (RS 4+2, 1 MiB units: a stripe is 4 MiB), and for
# each named point in the write, commit, truncate, GC and repair paths: files written and closed
# first (acknowledged: their sha256 recorded), then the point armed in one process (AQ_FAILPOINT
# in that process's environment only: aquifer-mount, aquifer-meta or one aquifer-data, started
# again with it), a workload that crashes it there (cp, an O_TRUNC rewrite of a 6 MiB file, an
# in-place overwrite, truncate, rm, a server kill and backfill), the process started again (the
# mount remounted), and checks through a fresh mount:
#   - every acknowledged file reads back with its sha256 (an EIO fails too);
#   - the file the workload was changing reads as its old bytes, its new bytes, a prefix of
#     either, or fails with EIO: never a stripe mixing two versions, never zeros or bytes at the
#     wrong offset (every 8-byte word holds its offset and the id of the write that stored it);
#   - after an in-place overwrite crashed, another writer's commit does not make the crashed
#     writer's bytes visible;
#   - `aquifer repair wait`, then `aquifer fsck --verbose` names no acknowledged file as LOST,
#     and within 30 s none as MISSING (below k + m: backfill rebuilt what the crashes missed).
# At the end two data servers are killed and every acknowledged file read again (cold): the
# chunks rebuilt after the crashes decode too.
# AQ_FP_POINTS: a subset of the points (their names, space-separated), when debugging.
# Other binaries than CMake's: set AQ_META_BIN, AQ_DATA_BIN, AQ_MOUNT_BIN and AQ_CLI_BIN.
unset AQ_FAILPOINT  # armed per process below, never for the whole test
source "$(dirname "$0")/lib.sh"
: "${AQ_CLI_BIN:=$(dirname "$AQ_META_BIN")/../cli/aquifer}"
PY=/usr/bin/python3
M=$AQ_SCRATCH/mnt
MIB=1048576
POINTS=${AQ_FP_POINTS:-client.stripe.after_some_chunks client.commit.before
  client.truncate.before_setattr meta.commit.before_apply meta.commit.after_apply
  meta.truncate.after_apply meta.heartbeat.before_gc_reply data.write.before_rename
  data.write.after_rename data.gc.before_ack data.repair.after_chunk_write}
START=$SECONDS

# fp.py: the bytes of write V (an id unique in this test) of SIZE bytes, and their checks.
# Word w (8 bytes, little endian) is (w | 2^31, V | 2^30): never 4 zero bytes in a row, and
# every word names its offset and its write.
#   fp.py write PATH V SIZE     open(PATH, "wb"), write, close; prints the sha256
#   fp.py make PATH V SIZE      the same into a local file (a cp source)
#   fp.py sha V SIZE            the sha256 of those bytes
#   fp.py overwrite PATH V OFF LEN   bytes [OFF, OFF+LEN) of write V, in place, then close
#   fp.py patched_sha V_OLD SIZE V_NEW OFF LEN   the sha256 of write V_OLD so overwritten
#   fp.py verify MANIFEST ROOT  every "relpath sha256 V size" line reads back with its sha256
#   fp.py inflight PATH [--may-vanish] V:SIZE...   old/new/prefix/EIO (see the header)
cat >"$AQ_SCRATCH/fp.py" <<'PY'
import errno, hashlib, os, sys
import numpy as np
STRIPE = 4 << 20

def content(v, size):
    words = (size + 7) // 8
    a = np.empty(2 * words, dtype='<u4')
    a[0::2] = np.arange(words, dtype='<u4') | np.uint32(1 << 31)
    a[1::2] = np.uint32(v | (1 << 30))
    return a.tobytes()[:size]

def describe(data):
    """Per stripe: which writes its words name, words at a wrong offset, zero words."""
    out = []
    for off in range(0, len(data), STRIPE):
        piece = data[off:off + STRIPE]
        n = len(piece) // 8
        if n == 0:
            out.append(f"stripe {off // STRIPE}: {len(piece)} bytes")
            continue
        a = np.frombuffer(piece[:n * 8], dtype='<u4')
        lo, hi = a[0::2], a[1::2]
        want_lo = (np.arange(off // 8, off // 8 + n, dtype='<u4') | np.uint32(1 << 31))
        zero = int(np.count_nonzero((lo == 0) & (hi == 0)))
        bad_off = int(np.count_nonzero(lo != want_lo)) - zero
        ids = {}
        for x in np.unique(hi):
            x = int(x)
            ids[x & ~(1 << 30) if x & (1 << 30) else f"raw{x:#x}"] = int(np.count_nonzero(hi == x))
        out.append(f"stripe {off // STRIPE}: writes {dict(list(ids.items())[:6])} "
                   f"zero_words={zero} wrong_offset_words={max(bad_off, 0)}")
    return "; ".join(out)

def read(path):
    with open(path, 'rb') as f:
        return f.read()

def sha(b): return hashlib.sha256(b).hexdigest()

cmd = sys.argv[1]
if cmd == 'sha':
    print(sha(content(int(sys.argv[2]), int(sys.argv[3]))))
elif cmd == 'patched_sha':  # V_OLD SIZE V_NEW OFF LEN: write V_OLD with V_NEW at [OFF, OFF+LEN)
    vo, size, vn, off, n = map(int, sys.argv[2:7])
    b = bytearray(content(vo, size))
    b[off:off + n] = content(vn, off + n)[off:]
    print(sha(bytes(b)))
elif cmd == 'overwrite':  # PATH V OFF LEN: in place (no O_TRUNC), then close
    path, v, off, n = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    b = content(v, off + n)
    try:
        with open(path, 'r+b') as f:
            f.seek(off)
            for o in range(off, off + n, 1 << 20):
                f.write(b[o:min(o + (1 << 20), off + n)])
    except OSError as e:
        print(f"overwrite {path}: {e}", file=sys.stderr)
        sys.exit(1)
elif cmd in ('write', 'make'):
    path, v, size = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    b = content(v, size)
    try:
        with open(path, 'wb') as f:
            for off in range(0, size, 1 << 20):
                f.write(b[off:off + (1 << 20)])
    except OSError as e:
        print(f"write {path}: {e}", file=sys.stderr)
        sys.exit(1)
    print(sha(b))
elif cmd == 'verify':
    root, bad, n = sys.argv[3], 0, 0
    for line in open(sys.argv[2]):
        rel, want, v, size = line.split()
        n += 1
        try:
            data = read(os.path.join(root, rel))
        except OSError as e:
            print(f"LOST acknowledged {rel} (write {v}, {size} bytes): {e}")
            bad += 1
            continue
        if sha(data) != want:
            print(f"CHANGED acknowledged {rel} (write {v}, {size} bytes): read {len(data)} bytes, "
                  + describe(data))
            bad += 1
    print(f"verified {n - bad} of {n} acknowledged files")
    sys.exit(1 if bad else 0)
elif cmd == 'inflight':
    path, args = sys.argv[2], sys.argv[3:]
    may_vanish = '--may-vanish' in args
    allowed = [tuple(map(int, a.split(':'))) for a in args if a != '--may-vanish']
    try:
        data = read(path)
    except OSError as e:
        if e.errno == errno.EIO:
            print(f"{path}: EIO (allowed)")
            sys.exit(0)
        if e.errno == errno.ENOENT and may_vanish:
            print(f"{path}: gone (allowed)")
            sys.exit(0)
        print(f"BAD {path}: {e}")
        sys.exit(1)
    for v, size in allowed:
        if len(data) <= size and data == content(v, len(data)):
            what = "whole" if len(data) == size else f"a prefix of {len(data)} bytes of"
            print(f"{path}: {what} write {v} ({size} bytes) (allowed)")
            sys.exit(0)
    print(f"BAD {path}: {len(data)} bytes, neither a prefix of " +
          " nor ".join(f"write {v} ({s} bytes)" for v, s in allowed) + ": " + describe(data))
    sys.exit(1)
PY

VER=0            # the last write id handed out
MANIFEST=$AQ_SCRATCH/acked.txt
: >"$MANIFEST"
MOUNT_IDX=-1     # index of the current mount in lib.sh's AQ_MOUNTS / AQ_MOUNT_PIDS

forget() { grep -v "^$1 " "$MANIFEST" >"$MANIFEST.new" || true; mv "$MANIFEST.new" "$MANIFEST"; }
# acked REL V SIZE SHA: REL now holds write V (an operation that touched it returned 0).
acked() { forget "$1"; echo "$1 $4 $2 $3" >>"$MANIFEST"; }
# ack_write REL SIZE: writes and closes REL with a new write id (the cluster is healthy).
ack_write() {
  local rel=$1 size=$2 sum
  VER=$((VER + 1))
  sum=$(timeout "$T" "$PY" "$AQ_SCRATCH/fp.py" write "$M/$rel" $VER "$size") ||
    aq_fail "acknowledged write of $rel"
  acked "$rel" $VER "$size" "$sum"
}
# The write id and size REL was acknowledged with.
ver_of() { awk -v r="$1" '$1 == r { print $3 ":" $4 }' "$MANIFEST"; }

mount_fresh() {  # [SPEC]: mounts $M, with AQ_FAILPOINT=SPEC in the mount's environment
  AQ_FAILPOINT=${1:-} aq_mount "$M"
  MOUNT_IDX=$((${#AQ_MOUNTS[@]} - 1))
}
remount() { aq_umount "$M"; mount_fresh "$@"; }

# aquifer-meta, again on the address it first got (clients and data servers know it).
start_meta() { aq_start_meta "$@"; }  # [SPEC]
registrations() { grep -c 'registered with meta' "$AQ_SCRATCH/data$1.log" || true; }
registered_more() { [ "$(registrations "$1")" -gt "$2" ]; }
start_data() {  # I [SPEC]: data server I, with AQ_FAILPOINT=SPEC, and waits for its registration
  local i=$1 before
  before=$(registrations "$i")
  AQ_FAILPOINT=${2:-} aq_start_data "$i"
  aq_wait_for 30 "data$i to register" registered_more "$i" "$before"
}
# crashed PID NAME LOG: waits for the process to exit at fail point NAME, with code 86.
crashed() {
  local pid=$1 name=$2 log=$3 rc=0
  aq_wait_for 60 "the crash at $name (pid $pid)" aq_pid_gone "$pid"
  wait "$pid" || rc=$?
  [ "$rc" = 86 ] || aq_fail "pid $pid exited with $rc, not 86 at $name"
  grep -q "AQ_FAILPOINT: crash at $name " "$log" || aq_fail "no crash line for $name in $log"
  aq_log "crashed at $name: $(grep "AQ_FAILPOINT: crash at $name " "$log" | tail -n 1)"
}

# A workload in the background: bg NAME CMD... ; its exit status is read by bg_rc NAME.
bg() {
  local name=$1
  shift
  (
    rc=0
    timeout "$T" "$@" >"$AQ_SCRATCH/$name.out" 2>&1 || rc=$?
    echo $rc >"$AQ_SCRATCH/$name.rc"
  ) &
  AQ_EXTRA_PIDS+=($!)
  BG_PIDS[$name]=$!
}
declare -A BG_PIDS=()
bg_rc() {
  aq_wait_for "$((T + 10))" "workload $1 to return" aq_pid_gone "${BG_PIDS[$1]}"
  wait "${BG_PIDS[$1]}" 2>/dev/null || true
  local rc
  rc=$(cat "$AQ_SCRATCH/$1.rc")
  aq_log "workload $1 returned $rc: $(head -c 300 "$AQ_SCRATCH/$1.out" | tr '\n' ' ')"
  echo "$rc"
}

verify() {  # every acknowledged file, through a fresh mount
  timeout 120 "$PY" "$AQ_SCRATCH/fp.py" verify "$MANIFEST" "$M" >"$AQ_SCRATCH/verify.out" 2>&1 ||
    { cat "$AQ_SCRATCH/verify.out" >&2; aq_fail "$1: an acknowledged file was lost or changed"; }
  aq_log "$1: $(tail -n 1 "$AQ_SCRATCH/verify.out")"
}
inflight() {  # POINT PATH ARGS...: the file a crash interrupted
  local point=$1 path=$2 out
  shift 2
  out=$(timeout "$T" "$PY" "$AQ_SCRATCH/fp.py" inflight "$M/$path" "$@" 2>&1) ||
    aq_fail "$point: $out"
  aq_log "$point: $out"
}
acked_in_fsck() {  # KIND: prints the acknowledged files fsck.out lists as KIND
  local rel
  while read -r rel _; do
    if grep -q "^$1  /$rel " "$AQ_SCRATCH/fsck.out"; then echo "/$rel"; fi
  done <"$MANIFEST"
}
# fsck_clean POINT: after `repair wait`, fsck names no acknowledged file as LOST, and within
# 30 s none as MISSING either (a stripe below k + m: a degraded write's backfill, due within
# seconds of the commit or of the server's restart).
fsck_clean() {
  local point=$1 rc deadline=$((SECONDS + 30)) lost missing
  timeout 100 "$AQ_CLI_BIN" repair wait --meta "$AQ_META_ADDR" --timeout 90 --interval 5 \
    >"$AQ_SCRATCH/repair_wait.out" 2>&1 ||
    { cat "$AQ_SCRATCH/repair_wait.out" >&2; aq_fail "$point: repair wait"; }
  while true; do
    rc=0
    timeout "$T" "$AQ_CLI_BIN" fsck --verbose --meta "$AQ_META_ADDR" >"$AQ_SCRATCH/fsck.out" 2>&1 ||
      rc=$?
    lost=$(acked_in_fsck LOST)
    [ -z "$lost" ] || { cat "$AQ_SCRATCH/fsck.out" >&2; aq_fail "$point: fsck: LOST" $lost; }
    missing=$(acked_in_fsck MISSING)
    [ -n "$missing" ] || break
    if ((SECONDS >= deadline)); then
      cat "$AQ_SCRATCH/fsck.out" >&2
      aq_fail "$point: fsck: acknowledged files still below k+m after 30 s:" $missing
    fi
    sleep 1  # a poll: backfill passes take about a second
  done
  local kind
  for kind in MISSING LOST; do  # of files a crash interrupted
    if grep -q "^$kind" "$AQ_SCRATCH/fsck.out"; then
      aq_log "$point: fsck $kind: $(grep "^$kind" "$AQ_SCRATCH/fsck.out" | tr '\n' ' ')"
    fi
  done
  aq_log "$point: fsck rc=$rc:" \
    "$(grep -E '^(missing|warnings):' "$AQ_SCRATCH/fsck.out" | tr '\n' ' ')"
}

# before POINT: the point's directory with three acknowledged files: a (6 MiB, two erasure
# coded stripes), b (100,000 bytes, one replicated stripe) and t (6 MiB: the workload's target).
before() {
  D=$(echo "$1" | tr . _)
  timeout "$T" mkdir -p "$M/$D" || aq_fail "mkdir $D"
  ack_write "$D/a" $((6 * MIB))
  ack_write "$D/b" 100000
  ack_write "$D/t" $((6 * MIB))
  T_OLD=$(ver_of "$D/t")
  aq_log "=== $1: acknowledged $D/a $D/b $D/t (write ${T_OLD%%:*})"
}
# after_point POINT: the checks every point ends with.
after_point() {
  remount  # cold: what is read next comes from the data servers
  verify "$1"
  fsck_clean "$1"
  aq_log "=== $1 done at $((SECONDS - START))s"
}
# Rewrite of $D/t (O_TRUNC) with write id NEW, in the background as workload NAME.
rewrite_t() {
  NEW=$((VER = VER + 1))
  bg "$1" "$PY" "$AQ_SCRATCH/fp.py" write "$M/$D/t" "$NEW" $((6 * MIB))
}
# new_src NAME SIZE: a local cp source $AQ_SCRATCH/NAME holding a new write (its id: $VER).
new_src() {
  VER=$((VER + 1))
  "$PY" "$AQ_SCRATCH/fp.py" make "$AQ_SCRATCH/$1" $VER "$2" >/dev/null || aq_fail "make $1"
}
# After a rewrite or truncate of t: acknowledged when it returned 0, else checked as in flight.
settle_t() {  # POINT RC EXPECTED_IF_OK(V:SIZE) ALLOWED...
  local point=$1 rc=$2 ok=$3
  shift 3
  if [ "$rc" = 0 ]; then
    local v=${ok%%:*} size=${ok##*:} sum
    sum=$("$PY" "$AQ_SCRATCH/fp.py" sha "$v" "$size")
    acked "$D/t" "$v" "$size" "$sum"
    aq_log "$point: $D/t acknowledged as write $v ($size bytes)"
  else
    forget "$D/t"
    inflight "$point" "$D/t" "$@"
  fi
}

declare -a LATER_FAILS=()
later_fail() { aq_log "FAIL (reported at the end): $*"; LATER_FAILS+=("$*"); }

in_points() { [[ " $(echo $POINTS) " == *" $1 "* ]]; }

aq_start_cluster
mount_fresh

# ---- Client: aquifer-mount crashes; the mount is started again.
client_crash() {  # POINT: waits for the mount to crash there, then mounts again
  crashed "${AQ_MOUNT_PIDS[$MOUNT_IDX]}" "$1" "$AQ_SCRATCH/mount$MOUNT_IDX.log"
  AQ_MOUNT_PIDS[$MOUNT_IDX]=""
}
client_remount() {
  timeout "$T" fusermount3 -uz "$M" || aq_fail "fusermount3 -uz $M after a crash"
  mount_fresh
}

P=client.stripe.after_some_chunks
if in_points $P; then
  # The second stripe of the rewrite: stripe 0 whole at the new version, stripe 1 torn.
  before $P
  remount "$P:crash@2"
  rewrite_t w
  client_crash $P
  rc=$(bg_rc w)
  client_remount
  settle_t $P "$rc" "$NEW:$((6 * MIB))" "${T_OLD}" "$NEW:$((6 * MIB))"
  # In place (no O_TRUNC) over all of a: the committed old version stays under stripe 0 whole
  # and stripe 1 torn at the crashed writer's version. Only the old bytes may be read, also
  # after another writer commits a higher version that rewrites stripe 1 only (issue 16 item 2:
  # a writer killed before its commit leaves nothing any later reader sees).
  A_OLD=$(ver_of "$D/a")
  remount "$P:crash@2"
  NEW=$((VER = VER + 1))
  bg w2 "$PY" "$AQ_SCRATCH/fp.py" overwrite "$M/$D/a" "$NEW" 0 $((6 * MIB))
  client_crash $P
  rc=$(bg_rc w2)
  [ "$rc" != 0 ] || aq_fail "$P: the in-place overwrite returned 0 although the mount crashed"
  client_remount
  inflight $P "$D/a" "$A_OLD"
  PATCH=$((VER = VER + 1))
  timeout "$T" "$PY" "$AQ_SCRATCH/fp.py" overwrite "$M/$D/a" $PATCH $((5 * MIB)) $MIB ||
    aq_fail "$P: overwrite of a's last MiB"
  acked "$D/a" "$PATCH" $((6 * MIB)) \
    "$("$PY" "$AQ_SCRATCH/fp.py" patched_sha "${A_OLD%%:*}" $((6 * MIB)) $PATCH $((5 * MIB)) $MIB)"
  remount
  grep "^$D/a " "$MANIFEST" >"$AQ_SCRATCH/one.txt"
  if ! timeout "$T" "$PY" "$AQ_SCRATCH/fp.py" verify "$AQ_SCRATCH/one.txt" "$M" \
    >"$AQ_SCRATCH/one.out" 2>&1; then
    # Reported at the end; the other points still run. Expected: all of write ${A_OLD%%:*}
    # but its last MiB, which is write $PATCH.
    later_fail "$P: after the crashed in-place writer (write $NEW) another writer" \
      "committed write $PATCH over a's last MiB; a now reads bytes of the crashed writer" \
      "(issue 16 items 2 and 4): $(head -n 1 "$AQ_SCRATCH/one.out")"
    forget "$D/a"
  fi
  after_point $P
fi

P=client.commit.before
if in_points $P; then
  # cp of two new files: the first one's close commits (and crashes first).
  before $P
  new_src n1 $((6 * MIB))
  N1=$VER
  new_src n2 $((9 * MIB))
  N2=$VER
  remount "$P:crash"
  bg cp cp "$AQ_SCRATCH/n1" "$AQ_SCRATCH/n2" "$M/$D/"
  client_crash $P
  rc=$(bg_rc cp)
  [ "$rc" != 0 ] || aq_fail "$P: cp returned 0 although the mount crashed before its commit"
  client_remount
  inflight $P "$D/n1" --may-vanish "$N1:$((6 * MIB))"
  inflight $P "$D/n2" --may-vanish "$N2:$((9 * MIB))"
  after_point $P
fi

P=client.truncate.before_setattr
if in_points $P; then
  before $P
  remount "$P:crash"
  bg tr truncate -s 3000000 "$M/$D/t"
  client_crash $P
  rc=$(bg_rc tr)
  client_remount
  settle_t $P "$rc" "${T_OLD%%:*}:3000000" "$T_OLD"
  after_point $P
fi

# ---- Metadata server: aquifer-meta crashes and starts again on its address; the mount stays.
meta_arm() { aq_stop_pid "$AQ_META_PID"; start_meta "$1"; }
meta_crash() {  # POINT
  crashed "$AQ_META_PID" "$1" "$AQ_SCRATCH/meta.log"
  start_meta
}

P=meta.commit.before_apply
if in_points $P; then
  before $P
  meta_arm "$P:crash"
  rewrite_t w
  meta_crash $P
  rc=$(bg_rc w)
  remount
  settle_t $P "$rc" "$NEW:$((6 * MIB))" "$T_OLD" "$NEW:$((6 * MIB))"
  after_point $P
fi

P=meta.commit.after_apply
if in_points $P; then
  before $P
  new_src n1 $((6 * MIB))
  N1=$VER
  meta_arm "$P:crash"
  bg cp cp "$AQ_SCRATCH/n1" "$M/$D/n1"
  meta_crash $P
  rc=$(bg_rc cp)
  remount
  if [ "$rc" = 0 ]; then
    acked "$D/n1" $N1 $((6 * MIB)) "$(sha256sum <"$AQ_SCRATCH/n1" | cut -d' ' -f1)"
  else
    inflight $P "$D/n1" --may-vanish "$N1:$((6 * MIB))"
  fi
  after_point $P
fi

P=meta.truncate.after_apply
if in_points $P; then
  before $P
  meta_arm "$P:crash"
  bg tr truncate -s 3000000 "$M/$D/t"
  meta_crash $P
  rc=$(bg_rc tr)
  remount
  settle_t $P "$rc" "${T_OLD%%:*}:3000000" "$T_OLD"
  after_point $P
fi

P=meta.heartbeat.before_gc_reply
if in_points $P; then
  # rm of an acknowledged file: its GC task goes out in the next heartbeat reply.
  before $P
  A_OLD=$(ver_of "$D/a")
  meta_arm "$P:crash"
  bg rm rm "$M/$D/a"
  meta_crash $P
  rc=$(bg_rc rm)
  forget "$D/a"
  remount
  if [ "$rc" = 0 ]; then
    [ ! -e "$M/$D/a" ] || aq_fail "$P: $D/a is back after its rm returned 0"
  else
    inflight $P "$D/a" --may-vanish "$A_OLD"
  fi
  after_point $P
fi

# ---- Data server 0: aquifer-data crashes and starts again (on a new port; a fresh mount).
data_arm() { aq_stop_pid "${AQ_DATA_PIDS[0]}"; start_data 0 "$1"; remount; }
data_crash() {  # POINT
  crashed "${AQ_DATA_PIDS[0]}" "$1" "$AQ_SCRATCH/data0.log"
  AQ_DATA_PIDS[0]=""
  start_data 0
}

P=data.write.before_rename
if in_points $P; then
  # cp of a new file: data0 dies before its first chunk file is renamed into place; the write
  # goes on without it (degraded) and the file is acknowledged.
  before $P
  new_src n1 $((6 * MIB))
  N1=$VER
  data_arm "$P:crash"
  bg cp cp "$AQ_SCRATCH/n1" "$M/$D/n1"
  data_crash $P
  rc=$(bg_rc cp)
  remount
  if [ "$rc" = 0 ]; then
    acked "$D/n1" $N1 $((6 * MIB)) "$(sha256sum <"$AQ_SCRATCH/n1" | cut -d' ' -f1)"
  else
    inflight $P "$D/n1" --may-vanish "$N1:$((6 * MIB))"
  fi
  after_point $P
fi

P=data.write.after_rename
if in_points $P; then
  before $P
  data_arm "$P:crash"
  rewrite_t w
  data_crash $P
  rc=$(bg_rc w)
  remount
  settle_t $P "$rc" "$NEW:$((6 * MIB))" "$T_OLD" "$NEW:$((6 * MIB))"
  after_point $P
fi

P=data.gc.before_ack
if in_points $P; then
  # rm: data0 deletes the file's chunks, then dies before acknowledging the task; it is sent
  # again after the restart, and deleting again is harmless. While data0 is down, a truncate
  # rewrites t's new last stripe without data0's copy: when data0 is back (holding an older
  # version of that chunk), its backfill must rebuild the new one.
  before $P
  data_arm "$P:crash"
  timeout "$T" rm "$M/$D/a" || aq_fail "$P: rm"
  forget "$D/a"
  crashed "${AQ_DATA_PIDS[0]}" $P "$AQ_SCRATCH/data0.log"
  AQ_DATA_PIDS[0]=""
  timeout "$T" truncate -s 4000000 "$M/$D/t" || aq_fail "$P: truncate"  # all 6 positions
  settle_t $P 0 "${T_OLD%%:*}:4000000"
  start_data 0
  remount
  [ ! -e "$M/$D/a" ] || aq_fail "$P: $D/a is back"
  after_point $P
fi

# Waits until data server I's last backfill pass (after its last registration) finished clean.
backfilled() {
  awk '/registered with meta/ { ok = 0 } /backfill requested/ { ok = 0 }
       /backfill done/ { ok = ($0 ~ / failed=0 / && $0 ~ / inodes_unknown=0 /) }
       END { exit ok ? 0 : 1 }' "$AQ_SCRATCH/data$1.log"
}

P=data.repair.after_chunk_write
if in_points $P; then
  # data5 is killed; files written meanwhile lack its chunks; it starts again and its backfill
  # dies after writing the first rebuilt chunk; started once more, the backfill completes.
  aq_kill_data 5
  before $P
  ack_write "$D/c" $((9 * MIB))
  start_data 5 "$P:crash"
  crashed "${AQ_DATA_PIDS[5]}" $P "$AQ_SCRATCH/data5.log"
  AQ_DATA_PIDS[5]=""
  start_data 5
  aq_wait_for 60 "data5's backfill to complete" backfilled 5
  remount
  after_point $P
fi

# ---- Every acknowledged file, with two data servers gone: the chunks that backfill rebuilt
# after the crashes decode too.
for ((i = 0; i < AQ_DATA_SERVERS; i++)); do
  [ -n "${AQ_DATA_PIDS[$i]}" ] && aq_wait_for 60 "data$i's backfill to complete" backfilled "$i"
done
aq_kill_data 1
aq_kill_data 2
remount
verify "two data servers down"
aq_log "$(wc -l <"$MANIFEST") acknowledged files checked; $((SECONDS - START))s in all"
if ((${#LATER_FAILS[@]} > 0)); then
  printf 'FAIL: %s\n' "${LATER_FAILS[@]}" >&2
  aq_fail "${#LATER_FAILS[@]} check(s) failed (above)"
fi
echo "PASS failpoint"
