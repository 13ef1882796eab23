#!/bin/bash
# A metadata server restart is a pause, not an error (issue 17 item 1). One cluster (RS 4+2, six
# data servers) and two mounts, A and B; aquifer-meta is killed -9 and started again on the same
# address and --db while applications run, and every case checks that they never saw an error:
#   cp      `cp -r /usr/include` into A across four kill -9 (outages of 3, 20, 3 and 5 s, at 3%,
#           20%, 45% and 70% of the entries copied): cp exits 0 with nothing on stderr, `diff -r`
#           of the source with the copy read through A and through B finds nothing, and
#           `aquifer fsck` is clean (close() calls in flight at a kill were retried and committed);
#   locks   an fcntl F_WRLCK and a flock(LOCK_EX) held by a process on A across a kill -9: after
#           the restart, processes on B (and another on A) still get EAGAIN, on B again 7 s
#           after it (past the 5 s session TTL); after the holder unlocks, B takes each within 2 s;
#   sqlite  one writer process on A and one on B, 300 one-row transactions each into one
#           database (rollback journal, fcntl locks, 60 s busy timeout), meta killed -9 for 5 s
#           once both have committed 30 rows: both exit 0, `PRAGMA integrity_check` is ok through
#           A and B, every (writer, seq) row is there once. Both hosts hold the database open for
#           write at once: each write recalls the other's write lease (issue 17 item 2), and each
#           lock grant drops what the mount cached of a database the other host changed.
#   loader  a PyTorch DataLoader epoch (2 workers) over 500 files of 4-64 KiB on B, meta killed -9
#           after 100 samples for 5 s: zero errors, every sample matches its manifest sha256;
#   long    a file open for write on A and another open for read on B, meta away for 30 s while
#           both keep going (1 MiB a second): the writer's writes and close succeed and B reads
#           back its bytes, the reader reads every byte right.
# At the end `aquifer fsck` of the whole namespace is clean. Each case prints its figures (the
# longest pause an application call saw). A kill that comes after its workload finished fails the
# case: it would prove nothing. No case passes `-o meta_wait`: the default (120 s) must do.
# AQ_MR_CASES="cp locks sqlite loader long" picks a subset, AQ_MR_TREE another tree. Other
# binaries than CMake's: set AQ_META_BIN, AQ_DATA_BIN, AQ_MOUNT_BIN and AQ_CLI_BIN.
source "$(dirname "$0")/lib.sh"
: "${AQ_CLI_BIN:=$(dirname "$AQ_META_BIN")/../cli/aquifer}"
PY=/usr/bin/python3
TOOL="$(dirname "$0")/lock_tool.py"
SQL="$(dirname "$0")/sqlite_tool.py"
SRC_TREE=${AQ_MR_TREE:-/usr/include}
A=$AQ_SCRATCH/a
B=$AQ_SCRATCH/b
OT=240  # seconds allowed to a command that runs across an outage (outages last up to 30 s)
START=$SECONDS

# mr.py: the applications of the cases (see each command's comment).
cat >"$AQ_SCRATCH/mr.py" <<'PY'
import hashlib, os, sys, time

def progress(path, n):  # a local file the test polls: written whole, by rename
    with open(path + ".tmp", "w") as f:
        f.write(str(n))
    os.replace(path + ".tmp", path)

def block(seed, i, size=1 << 20):  # reproducible bytes: block i of a stream
    return hashlib.shake_256(f"{seed}:{i}".encode()).digest(size)

cmd, args = sys.argv[1], sys.argv[2:]
if cmd == "gen":  # DIR MANIFEST N SEED: N files of 4-64 KiB, "name sha256 size" lines
    import random
    d, manifest, n, seed = args[0], args[1], int(args[2]), int(args[3])
    rng = random.Random(seed)
    os.makedirs(d, exist_ok=True)
    with open(manifest, "w") as m:
        for i in range(n):
            data = rng.randbytes(rng.randint(4 << 10, 64 << 10))
            name = f"s{i:04d}.bin"
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
            m.write(f"{name} {hashlib.sha256(data).hexdigest()} {len(data)}\n")
elif cmd == "loader":  # ROOT MANIFEST PROGRESS: one DataLoader epoch, every sample checked
    import torch
    from torch.utils.data import DataLoader, Dataset
    root, manifest, prog = args
    items = [l.split() for l in open(manifest)]

    class Files(Dataset):
        def __len__(self):
            return len(items)

        def __getitem__(self, i):
            name, _, _ = items[i]
            t0 = time.monotonic()
            try:
                with open(os.path.join(root, name), "rb") as f:
                    data = f.read()
            except OSError as e:  # counted, not raised: one error must not hide the others
                return i, None, f"{name}: {e}", time.monotonic() - t0
            return i, hashlib.sha256(data).hexdigest(), None, time.monotonic() - t0

    g = torch.Generator()
    g.manual_seed(17)
    print(f"loader: torch {torch.__version__}, {len(items)} samples, 2 workers, shuffle seed 17")
    loader = DataLoader(Files(), batch_size=8, shuffle=True, generator=g, num_workers=2,
                        collate_fn=lambda batch: batch)
    seen, errors, mismatched, done = {}, [], [], 0
    t0 = last = time.monotonic()
    longest_gap = longest_read = 0.0
    for batch in loader:
        now = time.monotonic()
        longest_gap = max(longest_gap, now - last)
        for i, sha, err, took in batch:
            longest_read = max(longest_read, took)
            seen[i] = seen.get(i, 0) + 1
            if err:
                errors.append(err)
            elif sha != items[i][1]:
                mismatched.append(items[i][0])
        done += len(batch)
        progress(prog, done)
        time.sleep(0.02)  # the training step
        last = time.monotonic()
    twice = [i for i, c in seen.items() if c != 1]
    missing = len(items) - len(seen)
    print(f"loader: epoch of {done} samples in {time.monotonic() - t0:.1f}s, {len(errors)} errors, "
          f"{len(mismatched)} mismatched, {missing} never delivered, {len(twice)} delivered twice; "
          f"longest wait for a batch {longest_gap:.2f}s, longest sample read {longest_read:.2f}s")
    for e in errors[:10]:
        print(f"  error: {e}")
    for n in mismatched[:10]:
        print(f"  mismatch: {n}")
    sys.exit(1 if errors or mismatched or missing or twice else 0)
elif cmd == "writer":  # PATH CTRL SEED: see the "long" case
    path, ctrl, seed = args
    h = hashlib.sha256()
    longest, n, during = 0.0, 0, 0
    def put(f):
        global longest, n
        b = block(seed, n)
        t = time.monotonic()
        view = memoryview(b)
        while view:
            view = view[f.write(view):]
        longest = max(longest, time.monotonic() - t)
        h.update(b)
        n += 1
    f = open(path, "wb", buffering=0)
    for _ in range(8):
        put(f)
    progress(f"{ctrl}/writer-ready", n)
    while not os.path.exists(f"{ctrl}/restarted") and during < 90:
        put(f)
        during += 1
        time.sleep(1)  # the application's pace
    for _ in range(4):
        put(f)
    t = time.monotonic()
    f.close()
    print(f"writer: {n} MiB in {n} writes ({during} while meta was away or restarting), longest "
          f"write {longest:.2f}s, close {time.monotonic() - t:.2f}s")
    print(h.hexdigest())
elif cmd == "reader":  # PATH CTRL: see the "long" case; prints the sha256 of what it read
    path, ctrl = args
    h = hashlib.sha256()
    longest, total, during = 0.0, 0, 0
    f = open(path, "rb", buffering=0)
    def get():
        global longest, total
        t = time.monotonic()
        b = f.read(1 << 20)
        longest = max(longest, time.monotonic() - t)
        h.update(b)
        total += len(b)
        return b
    get()
    progress(f"{ctrl}/reader-ready", total)
    while not os.path.exists(f"{ctrl}/restarted") and during < 90 and get():
        during += 1
        time.sleep(1)
    while get():
        pass
    f.close()
    print(f"reader: {total} bytes ({during} reads of 1 MiB while meta was away or restarting), "
          f"longest read {longest:.2f}s")
    print(h.hexdigest())
PY

declare -a FAILED=()
CASE=""
bad() {
  aq_log "FAIL [$CASE] $*"
  FAILED+=("$CASE: $*")
}
want() { [ -z "${AQ_MR_CASES:-}" ] || [[ " $AQ_MR_CASES " == *" $1 "* ]]; }

count_of() { cat "$1" 2>/dev/null || echo 0; }  # a progress file's number (0 before the first)

# bg NAME SECONDS CMD...: a workload in the background, stdout in NAME.out, stderr in NAME.err,
# exit status in NAME.rc (read by bg_wait NAME; 124: it did not finish within SECONDS).
declare -A BG_PIDS=()
bg() {
  local name=$1 seconds=$2
  shift 2
  rm -f "$AQ_SCRATCH/$name.rc"
  (
    rc=0
    timeout "$seconds" "$@" >"$AQ_SCRATCH/$name.out" 2>"$AQ_SCRATCH/$name.err" || rc=$?
    echo $rc >"$AQ_SCRATCH/$name.rc"
  ) &
  BG_PIDS[$name]=$!
  AQ_EXTRA_PIDS+=($!)
}
bg_done() { [ -s "$AQ_SCRATCH/$1.rc" ]; }
bg_wait() {  # NAME: waits for the workload (its own timeout bounds it); its exit status in BG_RC
  aq_wait_for "$((OT + 20))" "workload $1 to return" bg_done "$1"
  wait "${BG_PIDS[$1]}" 2>/dev/null || true
  forget_pid "${BG_PIDS[$1]}"
  BG_RC=$(cat "$AQ_SCRATCH/$1.rc")
}
# forget_pid PID: a process of ours that was reaped leaves teardown's list (PIDs wrap around
# within one run of this test, and teardown must not signal a number now someone else's).
forget_pid() {
  local p
  local -a keep=()
  for p in "${AQ_EXTRA_PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
  AQ_EXTRA_PIDS=("${keep[@]}")
}

# ---- aquifer-meta: kill -9, and a start on the address and --db it first had.
KILLS=0
meta_kill() {
  kill -KILL "$AQ_META_PID" 2>/dev/null || aq_fail "aquifer-meta (pid $AQ_META_PID) was not running"
  wait "$AQ_META_PID" 2>/dev/null || true
  KILLS=$((KILLS + 1))
  aq_log "kill -9 aquifer-meta (pid $AQ_META_PID), kill $KILLS of the test"
  AQ_META_PID=""
}
meta_start() { aq_start_meta; }
# outage SECONDS: kill -9 of aquifer-meta, SECONDS without it, then it starts again.
outage() {
  local t0=$SECONDS
  meta_kill
  sleep "$1"  # makes the outage last; nothing waits on it to happen
  meta_start
  aq_log "aquifer-meta listening again (pid $AQ_META_PID) after a $((SECONDS - t0)) s outage"
}

fsck_clean() {  # WHAT: `aquifer fsck` of the whole namespace exits 0 and says clean
  # Deleted files' chunks (SQLite's journals) go with asynchronous GC: orphans of inodes that no
  # longer exist are given up to 30 s to be collected; anything else fails at once.
  local rc tries=0
  while :; do
    rc=0
    timeout 120 "$AQ_CLI_BIN" fsck --meta "$AQ_META_ADDR" >"$AQ_SCRATCH/fsck.out" 2>&1 || rc=$?
    grep -q '^fsck: clean' "$AQ_SCRATCH/fsck.out" && [ $rc = 0 ] && break
    grep -Eq '^missing: 0 stripes.*0 stripes lost' "$AQ_SCRATCH/fsck.out" || break
    grep -Eq '^warnings: 0 uncommitted chunk versions, 0 partial' "$AQ_SCRATCH/fsck.out" || break
    tries=$((tries + 1))
    [ $tries -le 6 ] || break
    sleep 5
  done
  aq_log "$1: fsck rc=$rc: $(grep -E '^(checked|missing|orphans|warnings|fsck):' \
    "$AQ_SCRATCH/fsck.out" | tr '\n' ' ')"
  if [ $rc != 0 ] || ! grep -q '^fsck: clean' "$AQ_SCRATCH/fsck.out"; then
    head -n 30 "$AQ_SCRATCH/fsck.out" >&2
    bad "$1: aquifer fsck not clean (rc $rc)"
  fi
}

aq_start_cluster
aq_mount "$A"
aq_mount "$B"

# ---- cp: cp -r of a tree into A across four kill -9.
CASE="cp"
if want cp; then
  t0=$SECONDS
  entries=$(find "$SRC_TREE" | wc -l)
  files=$(find "$SRC_TREE" -type f | wc -l)
  bytes=$(du -sb "$SRC_TREE" | cut -f1)
  aq_log "case cp: cp -r $SRC_TREE ($entries entries, $files files, $bytes bytes) into A" \
    "across four kill -9 of aquifer-meta"
  timeout "$T" mkdir "$A/cp" || aq_fail "mkdir $A/cp"
  # cp -v names each entry once it is copied: its stdout is the progress the kills wait on.
  bg cp "$((OT + 120))" cp -rv "$SRC_TREE" "$A/cp/"
  copied() { wc -l <"$AQ_SCRATCH/cp.out"; }
  reached() { [ "$(copied)" -ge "$1" ] || bg_done cp; }
  n=0
  for plan in 3:3 20:20 45:3 70:5; do  # percent of the entries copied : seconds of outage
    n=$((n + 1))
    pct=${plan%%:*}
    aq_wait_until 180 reached $((entries * pct / 100)) ||
      bad "kill $n: cp stalled below $pct% ($(copied) entries copied)"
    if bg_done cp; then
      bad "cp exited (rc $(cat "$AQ_SCRATCH/cp.rc")) before kill $n of 4, at $(copied) of" \
        "$entries entries: the kills did not all hit it"
      break
    fi
    aq_log "cp: kill $n of 4 at $(copied) of $entries entries copied, $((SECONDS - t0)) s in;" \
      "outage ${plan##*:} s"
    outage "${plan##*:}"
  done
  bg_wait cp
  rc=$BG_RC
  cp_s=$((SECONDS - t0))
  errs=$(wc -l <"$AQ_SCRATCH/cp.err")
  aq_log "cp: exit $rc after ${cp_s} s (outages included), $(copied) entries named on stdout," \
    "$errs lines on stderr"
  if [ "$rc" != 0 ] || [ "$errs" != 0 ]; then
    head -n 20 "$AQ_SCRATCH/cp.err" >&2
    bad "cp -r exited $rc with $errs lines on stderr (first: $(head -n 1 "$AQ_SCRATCH/cp.err"))"
  fi
  # Symlinks compared as links (some point outside the tree), every file's bytes, through A and
  # through B (whose caches never saw the tree).
  for m in A:$A B:$B; do
    drc=0
    timeout 300 diff -rq --no-dereference "$SRC_TREE" "${m#*:}/cp/$(basename "$SRC_TREE")" \
      >"$AQ_SCRATCH/diff${m%%:*}.out" 2>&1 || drc=$?
    ndiff=$(wc -l <"$AQ_SCRATCH/diff${m%%:*}.out")
    aq_log "cp: diff -r $SRC_TREE against the copy read through mount ${m%%:*}: rc $drc," \
      "$ndiff differences"
    if [ $drc != 0 ]; then
      head -n 20 "$AQ_SCRATCH/diff${m%%:*}.out" >&2
      bad "diff -r through mount ${m%%:*}: rc $drc, $ndiff differences (first:" \
        "$(head -n 1 "$AQ_SCRATCH/diff${m%%:*}.out"))"
    fi
  done
  fsck_clean "cp"
  aq_log "case cp done in $((SECONDS - t0)) s"
fi

# ---- locks: a held fcntl lock and a held flock across a kill -9.
CASE=locks
if want locks; then
  t0=$SECONDS
  aq_log "case locks: F_WRLCK and flock(LOCK_EX) held on A across a kill -9 of aquifer-meta"
  CD=$AQ_SCRATCH/locks
  mkdir -p "$CD/posix" "$CD/flock"
  timeout "$T" mkdir "$A/locks" || aq_fail "mkdir $A/locks"
  : >"$A/locks/posix"
  : >"$A/locks/flock"
  aq_wait_for 5 "the lock files on B" test -e "$B/locks/flock"
  # lt SECONDS ARGS...: a one-shot lock_tool.py; its exit status is returned, its output logged
  # (0: taken, 3: held by another, 124: no answer within SECONDS).
  lt() {
    local seconds=$1 rc=0 out
    shift
    out=$(timeout "$seconds" "$PY" "$TOOL" "$@" 2>&1) || rc=$?
    aq_log "  lock_tool $1 $2 ${3#"$AQ_SCRATCH"/}: rc=$rc $out"
    return $rc
  }
  expect_held() {  # SECONDS KIND PATH WHAT
    local rc=0
    lt "$1" take "$2" "$3" || rc=$?
    [ $rc = 3 ] || bad "$4: $2 on ${3#"$AQ_SCRATCH"/}: expected EAGAIN (rc 3), got rc $rc"
  }
  declare -A HOLDERS=()
  for kind in posix flock; do
    hk=posix-w
    [ $kind = posix ] || hk=flock-ex
    "$PY" "$TOOL" hold $hk "$A/locks/$kind" "$CD/$kind" --within 1 >"$CD/$kind.out" 2>&1 &
    HOLDERS[$kind]=$!
    AQ_EXTRA_PIDS+=($!)
  done
  for kind in posix flock; do
    aq_wait_until 10 test -e "$CD/$kind/held" ||
      bad "the $kind holder got no lock: $(cat "$CD/$kind.out")"
  done
  # B opens read-only (a write open would recall A's write lease, which the outage would hold
  # up): its POSIX request is a read lock, which a write lock excludes as well.
  expect_held "$T" posix-r "$B/locks/posix" "before the kill"
  expect_held "$T" flock-ex "$B/locks/flock" "before the kill"
  outage 4
  back=$SECONDS
  expect_held "$OT" posix-r "$B/locks/posix" "after the restart"
  expect_held "$OT" posix-w "$A/locks/posix" "after the restart (another process on A)"
  expect_held "$OT" flock-ex "$B/locks/flock" "after the restart"
  expect_held "$OT" flock-ex "$A/locks/flock" "after the restart (another process on A)"
  # Again once the sessions' 5 s TTL has passed since the restart: a lock kept only by a grace
  # period, or dropped with a session the restart forgot, is free by then.
  while ((SECONDS < back + 7)); do sleep 0.2; done  # makes time pass; nothing to wait on
  expect_held "$OT" posix-r "$B/locks/posix" "7 s after the restart"
  expect_held "$OT" flock-ex "$B/locks/flock" "7 s after the restart"
  for kind in posix flock; do
    kill -0 "${HOLDERS[$kind]}" 2>/dev/null || bad "the $kind holder died: $(cat "$CD/$kind.out")"
    touch "$CD/$kind/unlock"
    aq_wait_until 30 test -e "$CD/$kind/unlocked" ||
      bad "the $kind holder's unlock did not return within 30 s: $(cat "$CD/$kind.out")"
  done
  rc=0
  lt "$T" take posix-r "$B/locks/posix" --within 2 || rc=$?
  [ $rc = 0 ] || bad "after the unlock B did not get the POSIX lock within 2 s (rc $rc)"
  rc=0
  lt "$T" take flock-ex "$B/locks/flock" --within 2 || rc=$?
  [ $rc = 0 ] || bad "after the unlock B did not get the flock within 2 s (rc $rc)"
  kill -KILL "${HOLDERS[@]}" 2>/dev/null || true
  for kind in posix flock; do
    wait "${HOLDERS[$kind]}" 2>/dev/null || true
    forget_pid "${HOLDERS[$kind]}"
  done
  aq_log "case locks done in $((SECONDS - t0)) s"
fi

# ---- sqlite: one writer on each mount, one database, a kill -9 in the middle.
CASE=sqlite
if want sqlite; then
  t0=$SECONDS
  ROWS=300
  aq_log "case sqlite: one writer on A and one on B, $ROWS one-row transactions each, one kill -9"
  timeout "$T" mkdir "$A/sqlite" || aq_fail "mkdir $A/sqlite"
  out=$(timeout "$T" "$PY" "$SQL" create "$A/sqlite/db" 2>&1) ||
    aq_fail "sqlite create: $out"
  aq_log "sqlite: created, $out"
  aq_wait_for 5 "the database on B" test -e "$B/sqlite/db"
  P1=$AQ_SCRATCH/sqlite1.progress
  P2=$AQ_SCRATCH/sqlite2.progress
  # A pause of 20 ms after each commit, as an application works between transactions: fcntl
  # waiters poll (1 ms doubling to 50 ms) with no fairness, so a writer that relocks at once can
  # starve the other mount's (seen under load: 300 rows to 0).
  bg sqlite1 "$OT" "$PY" "$SQL" write "$A/sqlite/db" 1 $ROWS --progress "$P1" --pause 0.02
  bg sqlite2 "$OT" "$PY" "$SQL" write "$B/sqlite/db" 2 $ROWS --progress "$P2" --pause 0.02
  # The kill comes once both writers are under way (each has committed a tenth of its rows).
  both_going() { { [ "$(count_of "$P1")" -ge $((ROWS / 10)) ] &&
    [ "$(count_of "$P2")" -ge $((ROWS / 10)) ]; } || bg_done sqlite1 || bg_done sqlite2; }
  aq_wait_until 120 both_going || bad "the writers committed only $(count_of "$P1") and" \
    "$(count_of "$P2") rows in 120 s"
  at1=$(count_of "$P1")
  at2=$(count_of "$P2")
  if bg_done sqlite1 || bg_done sqlite2; then
    bad "a writer had ended before the kill (writer 1 on A at $at1 rows, writer 2 on B at $at2" \
      "of $ROWS): the two did not write at the same time (an open or a write of the database" \
      "waited for the other mount's write lease instead of recalling it?), and the kill did" \
      "not hit both"
  fi
  aq_log "sqlite: kill at $at1 + $at2 rows committed, outage 5 s"
  outage 5
  aq_log "sqlite: restarted at $(count_of "$P1") + $(count_of "$P2") rows committed"
  for w in 1 2; do
    bg_wait sqlite$w
    rc=$BG_RC
    aq_log "sqlite: writer $w exit $rc: $(tr '\n' ' ' <"$AQ_SCRATCH/sqlite$w.out")" \
      "$(tail -n 3 "$AQ_SCRATCH/sqlite$w.err" | tr '\n' ' ')"
    [ "$rc" = 0 ] || bad "writer $w exited $rc after $(count_of "$AQ_SCRATCH/sqlite$w.progress")" \
      "rows: $(tail -n 1 "$AQ_SCRATCH/sqlite$w.err")"
  done
  for m in A:$A B:$B; do
    rc=0
    out=$(timeout "$T" "$PY" "$SQL" check "${m#*:}/sqlite/db" $ROWS 2>&1) || rc=$?
    aq_log "sqlite: read through ${m%%:*}: $out"
    [ $rc = 0 ] || bad "database read through mount ${m%%:*}: $(echo "$out" | tr '\n' ' ')"
  done
  aq_log "case sqlite done in $((SECONDS - t0)) s"
fi

# ---- loader: a DataLoader epoch on B across a kill -9.
CASE=loader
if want loader; then
  t0=$SECONDS
  NS=500
  aq_log "case loader: DataLoader epoch over $NS files on B, kill -9 after 100 samples"
  "$PY" "$AQ_SCRATCH/mr.py" gen "$AQ_SCRATCH/ds" "$AQ_SCRATCH/ds.manifest" $NS 4 ||
    aq_fail "data set generation"
  timeout "$T" cp -r "$AQ_SCRATCH/ds" "$A/ds" || aq_fail "cp of the data set into A"
  aq_log "loader: data set of $NS files, $(du -sb "$AQ_SCRATCH/ds" | cut -f1) bytes, written on A"
  PL=$AQ_SCRATCH/loader.progress
  bg loader "$OT" "$PY" "$AQ_SCRATCH/mr.py" loader "$B/ds" "$AQ_SCRATCH/ds.manifest" "$PL"
  started() { [ "$(count_of "$PL")" -ge 100 ] || bg_done loader; }
  aq_wait_until 120 started || bad "the loader delivered only $(count_of "$PL") samples in 120 s"
  at=$(count_of "$PL")
  if bg_done loader || [ "$at" -ge $NS ]; then
    bad "the epoch had ended before the kill ($at samples): the kill hit nothing"
  fi
  aq_log "loader: kill at $at of $NS samples, outage 5 s"
  outage 5
  aq_log "loader: restarted at $(count_of "$PL") of $NS samples"
  bg_wait loader
  rc=$BG_RC
  aq_log "loader: exit $rc: $(cat "$AQ_SCRATCH/loader.out")"
  if [ "$rc" != 0 ]; then
    tail -n 5 "$AQ_SCRATCH/loader.err" >&2
    bad "the DataLoader epoch exited $rc: $(grep '^loader: epoch' "$AQ_SCRATCH/loader.out")" \
      "$(tail -n 1 "$AQ_SCRATCH/loader.err")"
  fi
  aq_log "case loader done in $((SECONDS - t0)) s"
fi

# ---- long: a 30 s outage under a writer on A and a reader on B, both with the file open.
CASE=long
if want long; then
  t0=$SECONDS
  aq_log "case long: a writer on A and a reader on B keep going across a 30 s outage"
  CD=$AQ_SCRATCH/long
  mkdir -p "$CD"
  timeout "$T" mkdir "$A/long" || aq_fail "mkdir $A/long"
  aq_random_file "$CD/r.src" 48 5
  timeout "$T" cp "$CD/r.src" "$A/long/r" || aq_fail "cp of the reader's file into A"
  aq_wait_for 5 "the reader's file on B" test -e "$B/long/r"
  bg writer "$OT" "$PY" "$AQ_SCRATCH/mr.py" writer "$A/long/w" "$CD" 5
  bg reader "$OT" "$PY" "$AQ_SCRATCH/mr.py" reader "$B/long/r" "$CD"
  ready() { [ -e "$CD/writer-ready" ] && [ -e "$CD/reader-ready" ] || bg_done writer ||
    bg_done reader; }
  aq_wait_until 60 ready || bad "writer or reader not ready after 60 s"
  if bg_done writer || bg_done reader; then bad "the writer or the reader ended before the kill"; fi
  outage 30
  touch "$CD/restarted"
  for w in writer reader; do
    bg_wait $w
    rc=$BG_RC
    aq_log "long: $w exit $rc: $(head -n 1 "$AQ_SCRATCH/$w.out") $(tail -n 2 "$AQ_SCRATCH/$w.err" |
      tr '\n' ' ')"
    [ "$rc" = 0 ] || bad "the $w exited $rc: $(tail -n 1 "$AQ_SCRATCH/$w.err")"
  done
  want_w=$(tail -n 1 "$AQ_SCRATCH/writer.out")
  for m in A:$A B:$B; do
    got=$(timeout "$T" sha256sum <"${m#*:}/long/w" | cut -d' ' -f1) || got="(read failed)"
    [ "$got" = "$want_w" ] || bad "the written file read through ${m%%:*}: sha256 $got," \
      "the writer wrote $want_w ($(timeout "$T" stat -c %s "${m#*:}/long/w" 2>&1) bytes)"
  done
  want_r=$(sha256sum <"$CD/r.src" | cut -d' ' -f1)
  if [ "$(cat "$AQ_SCRATCH/reader.rc")" = 0 ] &&
    [ "$(tail -n 1 "$AQ_SCRATCH/reader.out")" != "$want_r" ]; then
    bad "the reader read other bytes than the file holds"
  fi
  aq_log "case long done in $((SECONDS - t0)) s"
fi

CASE=end
fsck_clean "end"
aq_log "$KILLS kill -9 of aquifer-meta in $((SECONDS - START)) s, ${#FAILED[@]} failures"
if [ ${#FAILED[@]} -gt 0 ]; then
  printf '  %s\n' "${FAILED[@]}" >&2
  aq_fail "${#FAILED[@]} checks failed"
fi
echo "PASS meta_restart"
