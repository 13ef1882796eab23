#!/usr/bin/env bash
# Issue 22 (the 30-minute storm): `aquifer fsck` run right after a burst of deletes listed the
# chunks of deleted files still waiting for their GC as orphans and exited 1; 30 s later it was
# clean. Here every data server runs with data.gc.before_apply armed (`error`: GC tasks arrive
# and are not applied, so they stay pending on the metadata server, as a busy cluster's backlog
# does). Files are written through a mount, most removed and one truncated; fsck at once must
# exit 0 and count their chunks as being collected, not as orphans, and `fsck --repair` must not
# delete them. Then the data servers restart without the fail point, the GC runs, and fsck is
# clean with nothing being collected; the files that were kept read back equal.
#
# Needs AQ_CLI_BIN besides lib.sh's binaries; CMake passes them (ctest -R mount.fsck_gc).
source "$(dirname "$0")/lib.sh"
: "${AQ_CLI_BIN:?set AQ_CLI_BIN to the aquifer binary}"
CLI=$AQ_CLI_BIN
MIB=1048576

# fsck_out NAME [ARGS...]: runs fsck, its output in $AQ_SCRATCH/NAME.txt; prints its exit code.
fsck_out() {
  local name=$1 rc=0
  shift
  timeout "$T" "$CLI" fsck --verbose --meta "$AQ_META_ADDR" "$@" >"$AQ_SCRATCH/$name.txt" 2>&1 ||
    rc=$?
  echo "$rc"
}
# The "being collected" count of an fsck output (0 when the line is absent).
collecting() {
  sed -n 's/^being collected: \([0-9]*\) chunk versions.*/\1/p' "$AQ_SCRATCH/$1.txt" | grep . ||
    echo 0
}

AQ_FAILPOINT=data.gc.before_apply:error aq_start_cluster
for ((i = 0; i < AQ_DATA_SERVERS; i++)); do
  grep -q "data.gc.before_apply" /proc/"${AQ_DATA_PIDS[$i]}"/environ ||
    aq_fail "data$i runs without the fail point"
done
M=$AQ_SCRATCH/mnt
aq_mount "$M"
SRC=$AQ_SCRATCH/src
mkdir -p "$SRC" "$M/d"
for i in $(seq 1 40); do
  aq_random_file "$SRC/s$i" 1 "$((100 + i))"  # 1 MiB: one unit, replicated
done
for i in 1 2 3; do aq_random_file "$SRC/b$i" 9 "$((200 + i))"; done  # 9 MiB: 3 stripes of RS 4+2
timeout "$T" cp "$SRC"/* "$M/d/" || aq_fail "cp into the mount"
timeout "$T" sync -f "$M/d" || aq_fail "syncfs"

rc=$(fsck_out fsck0)
[ "$rc" = 0 ] || { cat "$AQ_SCRATCH/fsck0.txt" >&2; aq_fail "fsck before the deletes exited $rc"; }

# 35 small files and 2 large ones go; b3 is cut to 1 MiB (its stripes 1-2 become GC's).
timeout "$T" rm -f "$M"/d/s{1..35} "$M/d/b1" "$M/d/b2" || aq_fail "rm"
timeout "$T" truncate -s "$MIB" "$M/d/b3" || aq_fail "truncate"
truncate -s "$MIB" "$SRC/b3"
timeout "$T" sync -f "$M/d" || aq_fail "syncfs after rm"

rc=$(fsck_out fsck1)
cat "$AQ_SCRATCH/fsck1.txt" >&2
[ "$rc" = 0 ] || aq_fail "fsck right after the deletes exited $rc (GC backlog counted as problems)"
! grep -q "^ORPHAN" "$AQ_SCRATCH/fsck1.txt" || aq_fail "fsck lists chunks awaiting GC as orphans"
n=$(collecting fsck1)
# At least the 35 small files' 3 chunks and the large ones' 2 x (6 + 6 + 3). (b3's cut stripes
# are not in its stripe map any more: fsck does not look at them at all.)
((n >= 35 * 3 + 2 * 15)) || aq_fail "fsck counts $n chunk versions being collected"
grep -q "^being collected: .* of 37 deleted or truncated files" "$AQ_SCRATCH/fsck1.txt" ||
  aq_fail "fsck does not count the 37 deleted files"

rc=$(fsck_out fsck2 --repair)
[ "$rc" = 0 ] || { cat "$AQ_SCRATCH/fsck2.txt" >&2; aq_fail "fsck --repair exited $rc"; }
grep -q "deleted 0 chunk versions" "$AQ_SCRATCH/fsck2.txt" ||
  { cat "$AQ_SCRATCH/fsck2.txt" >&2; aq_fail "fsck --repair deleted chunks GC owns"; }
[ "$(collecting fsck2)" = "$n" ] || aq_fail "fsck --repair changed what is being collected"

# The data servers restart without the fail point: the GC applies every pending task.
for ((i = 0; i < AQ_DATA_SERVERS; i++)); do
  aq_stop_pid "${AQ_DATA_PIDS[$i]}"
  aq_start_data "$i"
done
registered_twice() { [ "$(grep -c "registered with meta" "$AQ_SCRATCH/data$1.log")" -ge 2 ]; }
for ((i = 0; i < AQ_DATA_SERVERS; i++)); do
  aq_wait_for 30 "data$i to register again" registered_twice "$i"
done
gc_done() { [ "$(fsck_out fsck3)" = 0 ] && [ "$(collecting fsck3)" = 0 ]; }
aq_wait_for 60 "the GC backlog to drain" gc_done
cat "$AQ_SCRATCH/fsck3.txt" >&2
grep -q "^fsck: clean" "$AQ_SCRATCH/fsck3.txt" || aq_fail "fsck after the GC is not clean"

for f in s36 s37 s38 s39 s40 b3; do
  aq_same "$SRC/$f" "$M/d/$f" || aq_fail "$f differs after the GC"
done
[ "$(find "$M/d" -type f | wc -l)" = 6 ] || aq_fail "the directory does not hold 6 files"
aq_log "PASS fsck_gc: $n chunk versions being collected right after the deletes, clean after GC"
