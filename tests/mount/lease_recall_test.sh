#!/bin/bash
# Write-lease recall (issue 17 item 2). One cluster (RS 4+2, six data servers) and two mounts, A
# and B; a second mount's open for write of a file another mount holds open for write recalls
# the holder's lease (the holder commits what it buffered and gives the lease back), and the
# holder's next write takes it back the same way, at the file's current size:
#   append   a process on A and one on B hold one file open with O_APPEND for the whole case and
#            take strict turns (a token passed through FIFOs outside the mount), 100 records
#            each, one os.write per 72-byte line: no write fails, and the file read through A and
#            through B is exactly the 200 lines, whole, in the order A0 B0 A1 B1 ... (each write
#            landed at the true end);
#   open     a process on A writes 1 MiB and keeps the file open (no close, no fsync); a process
#            on B opens it O_RDWR within 5 s, reads A's 1 MiB, writes 4 KiB at 1 MiB and closes;
#            A then writes 4 KiB at 2 MiB (taking the lease back) and closes: both mounts read
#            A's MiB, B's 4 KiB, a hole of zeros, A's last 4 KiB;
#   sqlite   one writer process on A and one on B, 200 one-row transactions each into one
#            database (rollback journal, fcntl locks, 60 s busy timeout), at the same time (each
#            commits its first row before the other commits its last): both exit 0, `PRAGMA
#            integrity_check` is ok through A and B, all 400 (writer, seq) rows there once;
#   stopped  mounts C and D with -o lease_wait=2: a process on C holds a file open for write and
#            is SIGSTOPped; an open for write on D still succeeds within 1.5 s (the mount daemon
#            answers the recall, not the process) and sees the stopped process's bytes; after
#            SIGCONT the process writes again (recalling the lease from D, which still has the
#            file open) and closes, and both mounts read every region right.
# Each case prints its figures (open latencies, time per record or transaction). AQ_LR_CASES=
# "append open sqlite stopped" picks a subset. Other binaries than CMake's: set AQ_META_BIN,
# AQ_DATA_BIN and AQ_MOUNT_BIN.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
SQL="$(dirname "$0")/sqlite_tool.py"
A=$AQ_SCRATCH/a
B=$AQ_SCRATCH/b
C=$AQ_SCRATCH/c
D=$AQ_SCRATCH/d
WT=120  # seconds allowed to one workload process
START=$SECONDS

# lr.py: the processes of the cases (see each command's comment). Control files and FIFOs live
# outside the mounts; a wait for one has a deadline.
cat >"$AQ_SCRATCH/lr.py" <<'PY'
import errno, hashlib, os, sys, time

def block(seed, size):  # reproducible bytes
    return hashlib.shake_256(str(seed).encode()).digest(size)

def mark(path, text=""):  # a control file, written whole, by rename
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)

def await_file(path, seconds=90):
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            sys.exit(f"no {path} after {seconds} s")
        time.sleep(0.01)

def die(msg):
    print(msg, flush=True)
    sys.exit(1)

def pwrite_all(fd, data, offset, what):
    try:
        n = os.pwrite(fd, data, offset)
    except OSError as e:
        die(f"{what}: pwrite of {len(data)} bytes at {offset} failed: "
            f"{errno.errorcode.get(e.errno, e.errno)} {e.strerror}")
    if n != len(data):
        die(f"{what}: short pwrite, {n} of {len(data)} bytes at {offset}")

def read_all(path):
    with open(path, "rb", buffering=0) as f:
        return f.read()

def record(w, seq):  # one whole line of 72 bytes
    return f"{w} {seq:04d} {hashlib.sha256(f'{w}:{seq}'.encode()).hexdigest()}\n".encode()

cmd, args = sys.argv[1], sys.argv[2:]
if cmd == "appender":  # A|B PATH CTRL N: strict turns with the other appender, N records
    me, path, ctrl, n = args[0], args[1], args[2], int(args[3])
    # FIFOs opened in the same order on both sides (A->B first), so neither open deadlocks; a
    # peer that dies closes its ends and this side reads EOF.
    if me == "A":
        tx = os.open(f"{ctrl}/a2b", os.O_WRONLY)
        rx = os.open(f"{ctrl}/b2a", os.O_RDONLY)
    else:
        rx = os.open(f"{ctrl}/a2b", os.O_RDONLY)
        tx = os.open(f"{ctrl}/b2a", os.O_WRONLY)
    def token_in():
        if os.read(rx, 1) != b"t":
            die(f"{me}: the other appender is gone (EOF on its FIFO)")
    def token_out():
        os.write(tx, b"t")
    if me == "B":
        token_in()  # A has opened the file
    t = time.monotonic()
    try:
        f = open(path, "ab", buffering=0)
    except OSError as e:
        die(f"{me}: open(ab) failed: {errno.errorcode.get(e.errno, e.errno)} {e.strerror}")
    open_s = time.monotonic() - t
    fd = f.fileno()
    if me == "A":
        token_out()  # B may open
        token_in()   # B has opened: both hold the file open with O_APPEND from here on
    else:
        token_out()
    longest = total = 0.0
    t0 = time.monotonic()
    for seq in range(n):
        if me == "B" or seq > 0:
            token_in()
        rec = record(me, seq)
        t = time.monotonic()
        try:
            k = os.write(fd, rec)
        except OSError as e:
            die(f"{me}: write of record {seq} failed: {errno.errorcode.get(e.errno, e.errno)} "
                f"{e.strerror}")
        took = time.monotonic() - t
        if k != len(rec):
            die(f"{me}: short write of record {seq}: {k} of {len(rec)} bytes")
        longest = max(longest, took)
        total += took
        token_out()
    if me == "A":
        token_in()  # B's last record is written
    t = time.monotonic()
    f.close()
    el = time.monotonic() - t0
    print(f"appender {me}: open {open_s * 1000:.1f} ms, {2 * n} records of both in {el:.2f}s "
          f"of turns ({el / (2 * n) * 1000:.1f} ms a record), own write mean "
          f"{total / n * 1000:.1f} ms "
          f"longest {longest * 1000:.1f} ms, close {(time.monotonic() - t) * 1000:.1f} ms")
elif cmd == "appendcheck":  # PATH N: exactly A0 B0 A1 B1 ... A(N-1) B(N-1), whole lines
    path, n = args[0], int(args[1])
    data = read_all(path)
    want = [record(w, s) for s in range(n) for w in "AB"]
    lines = data.split(b"\n")
    tail = lines.pop()  # after the last newline: b"" when the file ends with a whole line
    lines = [l + b"\n" for l in lines]
    valid = {record(w, s): (w, s) for s in range(n) for w in "AB"}
    bad = [i for i, l in enumerate(lines) if l not in valid]
    seen = {}
    for l in lines:
        if l in valid:
            seen[valid[l]] = seen.get(valid[l], 0) + 1
    missing = [k for k in valid.values() if k not in seen]
    twice = [k for k, c in seen.items() if c > 1]
    first_off = next((i for i, (got, exp) in enumerate(zip(lines, want)) if got != exp), None)
    print(f"{len(data)} bytes ({2 * n * 72} expected), {len(lines)} lines, {len(bad)} invalid, "
          f"{len(missing)} records missing, {len(twice)} there twice, tail {len(tail)} bytes")
    problems = []
    if bad:
        problems.append(f"invalid lines at {bad[:5]}, first {lines[bad[0]][:80]!r}")
    if missing:
        problems.append(f"missing records {missing[:6]}")
    if twice:
        problems.append(f"records there twice {twice[:6]}")
    if tail:
        problems.append(f"a partial last line {tail[:80]!r}")
    if lines != want:
        i = first_off if first_off is not None else min(len(lines), len(want))
        got = lines[i][:14] if i < len(lines) else b"(end of file)"
        problems.append(f"order differs from A0 B0 A1 B1 ... first at line {i}: "
                        f"{got!r}, expected {want[i][:14] if i < len(want) else b'(end)'!r}")
    for p in problems:
        print(f"  {p}")
    sys.exit(1 if problems else 0)
elif cmd == "holder":  # PATH CTRL SIZE SEED OFFSET2: see the open and stopped cases
    # Writes SIZE bytes at 0 (no close, no fsync), CTRL/ready; at CTRL/go writes 4 KiB at
    # OFFSET2 and closes.
    path, ctrl, size, seed, off2 = args[0], args[1], int(args[2]), args[3], int(args[4])
    mark(f"{ctrl}/holder.pid", str(os.getpid()))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    t = time.monotonic()
    pwrite_all(fd, block(f"{seed}:first", size), 0, "holder")
    first_s = time.monotonic() - t
    mark(f"{ctrl}/ready")
    await_file(f"{ctrl}/go")
    t = time.monotonic()
    pwrite_all(fd, block(f"{seed}:last", 4096), off2, "holder (lease taken back)")
    again_s = time.monotonic() - t
    t = time.monotonic()
    try:
        os.close(fd)
    except OSError as e:
        die(f"holder: close failed: {errno.errorcode.get(e.errno, e.errno)} {e.strerror}")
    print(f"holder: {size} bytes written in {first_s * 1000:.1f} ms; after the other mount's "
          f"write, 4 KiB at {off2} in {again_s * 1000:.1f} ms, close "
          f"{(time.monotonic() - t) * 1000:.1f} ms")
elif cmd == "opener":  # PATH CTRL SIZE SEED MAX_S: see the open and stopped cases
    # Opens O_RDWR (at most MAX_S seconds), reads the holder's SIZE bytes, writes 4 KiB at SIZE,
    # CTRL/written; closes at CTRL/close (at once when CTRL/close exists already).
    path, ctrl, size, seed, max_s = args[0], args[1], int(args[2]), args[3], float(args[4])
    t = time.monotonic()
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError as e:
        die(f"opener: open O_RDWR failed after {time.monotonic() - t:.3f}s: "
            f"{errno.errorcode.get(e.errno, e.errno)} {e.strerror}")
    open_s = time.monotonic() - t
    print(f"opener: open O_RDWR took {open_s * 1000:.1f} ms (allowed {max_s} s)", flush=True)
    if open_s > max_s:
        die(f"opener: open took {open_s:.3f}s, more than {max_s}s")
    got = os.pread(fd, size + 65536, 0)
    want = block(f"{seed}:first", size)
    if got != want:
        same = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]),
                    min(len(got), len(want)))
        die(f"opener: read {len(got)} bytes, expected the holder's {size}; first {same} bytes "
            f"right")
    t = time.monotonic()
    pwrite_all(fd, block(f"{seed}:other", 4096), size, "opener")
    write_s = time.monotonic() - t
    mark(f"{ctrl}/written")
    await_file(f"{ctrl}/close")
    t = time.monotonic()
    try:
        os.close(fd)
    except OSError as e:
        die(f"opener: close failed: {errno.errorcode.get(e.errno, e.errno)} {e.strerror}")
    print(f"opener: read the holder's {size} bytes right, 4 KiB at {size} in "
          f"{write_s * 1000:.1f} ms, close {(time.monotonic() - t) * 1000:.1f} ms")
elif cmd == "regions":  # PATH SIZE SEED OFFSET2: the file the holder and the opener left
    path, size, seed, off2 = args[0], int(args[1]), args[2], int(args[3])
    data = read_all(path)
    parts = [("holder's first bytes", 0, block(f"{seed}:first", size)),
             ("opener's 4 KiB", size, block(f"{seed}:other", 4096)),
             ("hole", size + 4096, bytes(off2 - size - 4096)),
             ("holder's last 4 KiB", off2, block(f"{seed}:last", 4096))]
    problems = [] if len(data) == off2 + 4096 else [f"size {len(data)}, expected {off2 + 4096}"]
    for name, off, want in parts:
        got = data[off:off + len(want)]
        if got != want:
            nz = sum(1 for b in got if b) if name == "hole" else None
            problems.append(f"{name} [{off}, {off + len(want)}) wrong ({len(got)} bytes there"
                            + (f", {nz} non-zero)" if nz is not None else ")"))
    print(f"{len(data)} bytes, " + ("every region right" if not problems else "; ".join(problems)))
    sys.exit(1 if problems else 0)
PY

declare -a FAILED=()
CASE=""
bad() {
  aq_log "FAIL [$CASE] $*"
  FAILED+=("$CASE: $*")
}
want() { [ -z "${AQ_LR_CASES:-}" ] || [[ " $AQ_LR_CASES " == *" $1 "* ]]; }

# bg NAME CMD...: a workload process in the background under `timeout $WT`, stdout in NAME.out,
# stderr in NAME.err, exit status in NAME.rc (read by bg_wait NAME; 124: it did not finish).
declare -A BG_PIDS=()
bg() {
  local name=$1
  shift
  rm -f "$AQ_SCRATCH/$name.rc"
  (
    rc=0
    timeout --kill-after=5 "$WT" "$@" >"$AQ_SCRATCH/$name.out" 2>"$AQ_SCRATCH/$name.err" || rc=$?
    echo $rc >"$AQ_SCRATCH/$name.rc"
  ) &
  BG_PIDS[$name]=$!
  AQ_EXTRA_PIDS+=($!)
}
bg_done() { [ -s "$AQ_SCRATCH/$1.rc" ]; }
# bg_wait NAME: waits for the workload (its timeout bounds it), logs its output; status in BG_RC.
bg_wait() {
  aq_wait_for "$((WT + 15))" "workload $1 to return" bg_done "$1"
  wait "${BG_PIDS[$1]}" 2>/dev/null || true
  forget_pid "${BG_PIDS[$1]}"
  BG_RC=$(cat "$AQ_SCRATCH/$1.rc")
  aq_log "$CASE: $1 exit $BG_RC: $(tr '\n' ' ' <"$AQ_SCRATCH/$1.out")" \
    "$(tail -n 3 "$AQ_SCRATCH/$1.err" | tr '\n' ' ')"
}
bg_ok() {  # NAME: bg_wait, and a failure unless it exited 0
  bg_wait "$1"
  [ "$BG_RC" = 0 ] || bad "$1 exited $BG_RC: $(tail -n 1 "$AQ_SCRATCH/$1.out")" \
    "$(tail -n 1 "$AQ_SCRATCH/$1.err")"
}
# forget_pid PID: a process of ours that was reaped leaves teardown's list (PIDs wrap around).
forget_pid() {
  local p
  local -a keep=()
  for p in "${AQ_EXTRA_PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
  AQ_EXTRA_PIDS=("${keep[@]}")
}
# check WHAT CMD...: runs an lr.py check under timeout, logs its output, a failure unless 0.
check_with() {  # TOOL WHAT ARGS...: runs TOOL ARGS; a failure is a failed check WHAT
  local tool=$1 what=$2 rc=0 out
  shift 2
  out=$(timeout "$T" "$PY" "$tool" "$@" 2>&1) || rc=$?
  aq_log "$CASE: $what: $out"
  [ $rc = 0 ] || bad "$what (rc $rc): $(echo "$out" | tr '\n' ' ')"
}
check() { check_with "$AQ_SCRATCH/lr.py" "$@"; }

# A stopped process (the stopped case) gets SIGCONT before teardown stops it.
STOPPED_PID=""
trap 'rc=$?; set +e; [ -z "$STOPPED_PID" ] || kill -CONT "$STOPPED_PID" 2>/dev/null;
  (exit $rc); aq_teardown' EXIT

aq_start_cluster
aq_mount "$A"
aq_mount "$B"

# ---- append: strict turns of two O_APPEND writers, one on each mount.
CASE=append
if want append; then
  t0=$SECONDS
  N=100
  CD=$AQ_SCRATCH/append
  mkdir -p "$CD"
  mkfifo "$CD/a2b" "$CD/b2a"
  timeout "$T" mkdir "$A/append" || aq_fail "mkdir $A/append"
  aq_wait_for 5 "the append directory on B" test -d "$B/append"
  aq_log "case append: one O_APPEND writer on A and one on B, strict turns, $N records each"
  bg appendA "$PY" "$AQ_SCRATCH/lr.py" appender A "$A/append/log" "$CD" $N
  bg appendB "$PY" "$AQ_SCRATCH/lr.py" appender B "$B/append/log" "$CD" $N
  bg_ok appendA
  bg_ok appendB
  for m in A:$A B:$B; do
    check "the log read through ${m%%:*}" appendcheck "${m#*:}/append/log" $N
  done
  aq_log "case append done in $((SECONDS - t0)) s"
fi

# holder_opener NAME HOLD_MOUNT OPEN_MOUNT SIZE SEED OFF2 MAX_OPEN_S close|stop: the open and
# stopped cases. The holder writes SIZE bytes and keeps the file open (stop: it is SIGSTOPped);
# the opener opens O_RDWR within MAX_OPEN_S, reads the holder's bytes and writes 4 KiB at SIZE;
# close: the opener closes, then the holder writes 4 KiB at OFF2 and closes; stop: SIGCONT, the
# holder writes 4 KiB at OFF2 and closes while the opener still has the file open (so the write
# recalls the opener's lease), then the opener closes. Both mounts read the regions.
holder_opener() {
  local name=$1 hm=$2 om=$3 size=$4 seed=$5 off2=$6 max_s=$7 stop=$8
  local cd=$AQ_SCRATCH/$name
  mkdir -p "$cd"
  timeout "$T" mkdir "$hm/$name" || aq_fail "mkdir $hm/$name"
  bg "${name}_holder" "$PY" "$AQ_SCRATCH/lr.py" holder "$hm/$name/f" "$cd" "$size" "$seed" "$off2"
  aq_wait_until 60 test -e "$cd/ready" ||
    aq_fail "[$CASE] the holder did not write its $size bytes in 60 s:" \
      "$(cat "$AQ_SCRATCH/${name}_holder.out" "$AQ_SCRATCH/${name}_holder.err")"
  aq_wait_for 5 "the file on the other mount" test -e "$om/$name/f"
  local hpid
  hpid=$(cat "$cd/holder.pid")
  if [ "$stop" = stop ]; then
    kill -STOP "$hpid" || bad "kill -STOP $hpid"
    STOPPED_PID=$hpid
    state() { [ "$(cut -d' ' -f3 "/proc/$hpid/stat")" = T ]; }
    aq_wait_until 5 state || bad "the holder (pid $hpid) is not stopped"
    local l fds=0
    for l in "/proc/$hpid/fd"/*; do
      if [[ "$(readlink "$l")" == *"/$name/f" ]]; then fds=$((fds + 1)); fi
    done
    [ $fds = 1 ] || bad "the stopped holder has $fds descriptors of the file, not 1"
    aq_log "$CASE: holder pid $hpid stopped (state $(cut -d' ' -f3 "/proc/$hpid/stat")) with" \
      "$fds descriptor of the file open for write"
  fi
  bg "${name}_opener" "$PY" "$AQ_SCRATCH/lr.py" opener "$om/$name/f" "$cd" "$size" "$seed" "$max_s"
  wrote() { [ -e "$cd/written" ] || bg_done "${name}_opener"; }
  aq_wait_until 60 wrote || bad "the opener had not written 60 s after it started"
  local opener_waited=0
  if bg_done "${name}_opener"; then
    bg_ok "${name}_opener"  # before its close: it failed
    opener_waited=1
  else
    aq_log "$CASE: opener: $(head -n 1 "$AQ_SCRATCH/${name}_opener.out")"
  fi
  if [ "$stop" = stop ]; then
    kill -0 "$hpid" 2>/dev/null || bad "the stopped holder died"
    kill -CONT "$hpid" || bad "kill -CONT $hpid"
    STOPPED_PID=""
    touch "$cd/go"
    bg_ok "${name}_holder"
    touch "$cd/close"
    [ $opener_waited = 1 ] || bg_ok "${name}_opener"
  else
    touch "$cd/close"
    [ $opener_waited = 1 ] || bg_ok "${name}_opener"
    touch "$cd/go"
    bg_ok "${name}_holder"
  fi
  for m in "$hm" "$om"; do
    check "the file read through ${m##*/}" regions "$m/$name/f" "$size" "$seed" "$off2"
  done
}

# ---- open: an open for write on B while A holds the file open for write with bytes buffered.
CASE=open
if want open; then
  t0=$SECONDS
  aq_log "case open: A writes 1 MiB and stays open; B opens O_RDWR (at most 5 s), reads, writes" \
    "4 KiB at 1 MiB, closes; A writes 4 KiB at 2 MiB and closes"
  holder_opener open "$A" "$B" 1048576 11 2097152 5 close
  aq_log "case open done in $((SECONDS - t0)) s"
fi

# ---- sqlite: one writer on A and one on B, one database, at the same time.
CASE=sqlite
if want sqlite; then
  t0=$SECONDS
  ROWS=200
  aq_log "case sqlite: one writer on A and one on B, $ROWS one-row transactions each"
  timeout "$T" mkdir "$A/sqlite" || aq_fail "mkdir $A/sqlite"
  out=$(timeout "$T" "$PY" "$SQL" create "$A/sqlite/db" 2>&1) ||
    aq_fail "sqlite create: $out"
  aq_log "sqlite: created, $out"
  aq_wait_for 5 "the database on B" test -e "$B/sqlite/db"
  GO=$AQ_SCRATCH/sqlite.go
  # 20 ms of work between transactions: fcntl waiters poll with no fairness, so a writer that
  # relocks at once can run all its rows before the other mount's gets a turn (seen once).
  bg sqlite1 "$PY" "$SQL" write "$A/sqlite/db" 1 $ROWS --go "$GO" --pause 0.02
  bg sqlite2 "$PY" "$SQL" write "$B/sqlite/db" 2 $ROWS --go "$GO" --pause 0.02
  touch "$GO"  # both start their transactions together (each has connected by then or soon)
  bg_ok sqlite1
  bg_ok sqlite2
  # At the same time: each writer committed its first row before the other committed its last.
  read -r f1 l1 < <(tail -n 1 "$AQ_SCRATCH/sqlite1.out") || true
  read -r f2 l2 < <(tail -n 1 "$AQ_SCRATCH/sqlite2.out") || true
  if [ -n "${l2:-}" ] && [ -n "${l1:-}" ]; then
    awk -v f1="$f1" -v l1="$l1" -v f2="$f2" -v l2="$l2" 'BEGIN { exit !(f1 < l2 && f2 < l1) }' ||
      bad "the writers did not overlap: writer 1 committed from $f1 to $l1, writer 2 from $f2" \
        "to $l2"
    aq_log "sqlite: commits overlapped for" \
      "$(awk -v f1="$f1" -v l1="$l1" -v f2="$f2" -v l2="$l2" \
        'BEGIN { a = f1 > f2 ? f1 : f2; b = l1 < l2 ? l1 : l2; printf "%.1f", b - a }') s"
  fi
  for m in A:$A B:$B; do
    check_with "$SQL" "the database read through ${m%%:*}" check "${m#*:}/sqlite/db" $ROWS
  done
  aq_log "case sqlite: $((2 * ROWS)) transactions in $((SECONDS - t0)) s (case included)"
fi

# ---- stopped: the recall is answered by the holder's mount daemon, not by its process.
CASE=stopped
if want stopped; then
  t0=$SECONDS
  aq_mount "$C" -o lease_wait=2
  aq_mount "$D" -o lease_wait=2
  aq_log "case stopped: mounts C and D with lease_wait=2; the holder on C writes 64 KiB, stays" \
    "open and is SIGSTOPped; D opens O_RDWR (at most 1.5 s), reads, writes 4 KiB at 64 KiB;" \
    "SIGCONT, the holder writes 4 KiB at 128 KiB and closes"
  holder_opener stopped "$C" "$D" 65536 12 131072 1.5 stop
  aq_log "case stopped done in $((SECONDS - t0)) s"
fi

aq_log "lease_recall: $((SECONDS - START)) s, ${#FAILED[@]} failures"
if [ ${#FAILED[@]} -gt 0 ]; then
  printf '  %s\n' "${FAILED[@]}" >&2
  aq_fail "${#FAILED[@]} checks failed"
fi
echo "PASS lease_recall"
