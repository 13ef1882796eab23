#!/bin/bash
# Ingest on one mount, seen on another at once (issue 18, must 5). Mounts A and B with cache
# leases and kernel timeouts of 30 s, so nothing here can pass by a cache expiring:
#   tar    a tree of 5,000 files (100 a directory, 0-64 KiB and a few of 1-3 MiB, modes, mtimes,
#          symlinks, empty directories) extracted by `tar -x` on A into a directory B had listed;
#          the moment tar exits, B's listing, types, sizes, modes, mtimes (ns), link targets and
#          every file's sha256 equal those of the same tar extracted on a local disk;
#   races  50 rounds of the same change from both mounts at one moment (two threads at a
#          barrier): unlink, O_EXCL create, one source renamed to two targets, two temporaries
#          renamed over one name, mkdir, rmdir. Exactly one wins where POSIX says so, the other
#          gets ENOENT or EEXIST; both renames-over succeed and the name holds one file whole;
#          both mounts list the same names right after;
#   crash  a third mount C ingests files, each fsynced before it is logged, while B holds the
#          directory's names cached; C's aquifer-mount is killed -9 mid-ingest. Every file whose
#          fsync returned reads back whole on B at once; a change on B in that directory waits
#          at most C's session expiry; `aquifer fsck` is then clean.
# AQ_TI_FILES sets the tree's size, AQ_TI_OPTS the mounts' options. Other binaries than CMake's: set AQ_META_BIN, AQ_DATA_BIN,
# AQ_MOUNT_BIN and AQ_CLI_BIN.
source "$(dirname "$0")/lib.sh"
: "${AQ_CLI_BIN:?set AQ_CLI_BIN to the aquifer CLI binary (fsck)}"
TOOL="/usr/bin/python3 $(dirname "$0")/ingest_tool.py"
FILES=${AQ_TI_FILES:-5000}
A=$AQ_SCRATCH/a
B=$AQ_SCRATCH/b
C=$AQ_SCRATCH/c
OPTS=${AQ_TI_OPTS:-cache_leases=1,entry_timeout=30,attr_timeout=30}
aq_start_cluster
aq_mount "$A" -o "$OPTS"
aq_mount "$B" -o "$OPTS"

# --- tar -----------------------------------------------------------------------------------------
$TOOL tree "$AQ_SCRATCH/src" "$FILES" 18 || aq_fail "making the source tree"
tar -C "$AQ_SCRATCH/src" --format=posix -cf "$AQ_SCRATCH/src.tar" . || aq_fail "tar -c"
mkdir "$AQ_SCRATCH/local"
tar -C "$AQ_SCRATCH/local" -xf "$AQ_SCRATCH/src.tar" || aq_fail "tar -x on the local disk"
$TOOL manifest "$AQ_SCRATCH/local" >"$AQ_SCRATCH/want.txt"
mkdir "$A/t"
# B caches the directory's (empty) names and its attributes, which tar then changes.
[ -z "$(timeout "$T" ls -A "$B/t")" ] || aq_fail "B lists something in the new directory"
timeout "$T" stat "$B/t" >/dev/null
t0=$SECONDS
timeout 600 tar -C "$A/t" -xf "$AQ_SCRATCH/src.tar" 2>"$AQ_SCRATCH/tar.err" ||
  aq_fail "tar -x on A: $(head -c 2000 "$AQ_SCRATCH/tar.err")"
took=$((SECONDS - t0))
timeout 300 $TOOL manifest "$B/t" >"$AQ_SCRATCH/b.txt" || aq_fail "manifest of B's view"
if ! cmp -s "$AQ_SCRATCH/want.txt" "$AQ_SCRATCH/b.txt"; then
  diff "$AQ_SCRATCH/want.txt" "$AQ_SCRATCH/b.txt" | head -20 >&2
  aq_fail "B's view of the tree A extracted differs from the local extraction"
fi
timeout 300 $TOOL manifest "$A/t" >"$AQ_SCRATCH/a.txt" || aq_fail "manifest of A's view"
cmp -s "$AQ_SCRATCH/want.txt" "$AQ_SCRATCH/a.txt" || aq_fail "A's view of its own extraction differs"
aq_log "tar: $(wc -l <"$AQ_SCRATCH/want.txt") entries extracted on A in $took s; B's view equal at once"

# --- races ---------------------------------------------------------------------------------------
mkdir "$A/r"
timeout 300 $TOOL races "$A/r" "$B/r" 50 >"$AQ_SCRATCH/races.out" 2>&1 ||
  aq_fail "races: $(cat "$AQ_SCRATCH/races.out")"
aq_log "$(cat "$AQ_SCRATCH/races.out")"

# --- crash of an ingesting mount -----------------------------------------------------------------
aq_mount "$C" -o "$OPTS"
C_PID=${AQ_MOUNT_PIDS[2]}
mkdir "$C/w"
timeout "$T" ls "$B/w" >/dev/null
timeout 300 $TOOL writer "$C/w" "$AQ_SCRATCH/fsynced.log" 7 >"$AQ_SCRATCH/writer.out" 2>&1 &
WRITER=$!
AQ_EXTRA_PIDS+=("$WRITER")
fsynced() { [ -f "$AQ_SCRATCH/fsynced.log" ] && [ "$(wc -l <"$AQ_SCRATCH/fsynced.log")" -ge 150 ]; }
aq_wait_for 120 "150 fsynced files on C" fsynced
timeout "$T" ls "$B/w" >/dev/null  # B's names of the directory are recent ones
kill -KILL "$C_PID"
wait "$C_PID" 2>/dev/null || true
fusermount3 -uz "$C" 2>/dev/null || true
aq_wait_for 30 "the writer to end" aq_pid_gone "$WRITER"
aq_log "C killed -9 after $(wc -l <"$AQ_SCRATCH/fsynced.log") fsynced files"
timeout 300 $TOOL verify "$B/w" "$AQ_SCRATCH/fsynced.log" >"$AQ_SCRATCH/verify.out" 2>&1 ||
  aq_fail "after the crash: $(cat "$AQ_SCRATCH/verify.out")"
aq_log "crash: $(cat "$AQ_SCRATCH/verify.out") on B at once"
t0=$SECONDS
echo later >"$B/w/later.tmp"
aq_within 20 "a rename on B in the dead mount's directory" mv "$B/w/later.tmp" "$B/w/later" ||
  aq_fail "rename on B with C dead: $(cat "$AQ_SCRATCH/within.out")"
waited=$((SECONDS - t0))
[ $waited -le 12 ] || aq_fail "B's create and rename waited $waited s for dead C"
[ "$(cat "$A/w/later")" = later ] || aq_fail "A's view of B's rename"
# fsck: C's writes that never committed leave chunk versions that its session's expiry and GC
# give up; allow them that (a minute), then nothing but clean passes.
rc=1
tries=0
for _ in $(seq 1 12); do
  tries=$((tries + 1))
  rc=0
  timeout 120 "$AQ_CLI_BIN" fsck --meta "$AQ_META_ADDR" >"$AQ_SCRATCH/fsck.out" 2>&1 || rc=$?
  [ $rc = 0 ] && grep -q '^fsck: clean' "$AQ_SCRATCH/fsck.out" && break
  grep -Eq '^missing: 0 stripes.*0 stripes lost' "$AQ_SCRATCH/fsck.out" || break
  rc=1
  sleep 5
done
aq_log "a change on B beside dead C's files waited $waited s; fsck (try $tries): $(grep -E '^(checked|missing|orphans|warnings|fsck):' "$AQ_SCRATCH/fsck.out" | tr '\n' ' ')"
[ $rc = 0 ] && grep -q '^fsck: clean' "$AQ_SCRATCH/fsck.out" ||
  { head -n 30 "$AQ_SCRATCH/fsck.out" >&2; aq_fail "aquifer fsck not clean after the crash"; }
aq_log "two mounts ingest: all checks passed"
