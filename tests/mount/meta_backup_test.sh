#!/usr/bin/env bash
# Issue 17: a second copy of the namespace. `aquifer meta backup` is taken while an ingest
# (cp -r into the mount) runs; after the backup a file from it is overwritten in place, a file
# held open since before it is finished, and more files are made. Then aquifer-meta is stopped
# and its metadata directory wiped; `aquifer meta restore` brings the backup back; aquifer-meta
# starts on it (same port, the data servers never stopped). `aquifer fsck` must list the chunks
# written after the backup as orphans (files that do not exist any more, and versions of
# restored files newer than the backup), `fsck --repair` removes them, fsck is then clean, and
# every file in the backup reads back as it was (whole files equal to their source, files the
# ingest was writing a prefix of it). A file made after the restore gets an inode number above
# every one the lost server handed out. Also: the backup and restore refuse bad destinations,
# a directory in use and a non-empty one without --force.
#
# Needs AQ_CLI_BIN besides lib.sh's binaries; CMake passes them (ctest -R mount.meta_backup).
source "$(dirname "$0")/lib.sh"
: "${AQ_CLI_BIN:?set AQ_CLI_BIN to the aquifer binary}"
CLI=$AQ_CLI_BIN

# make_tree DIR COUNT SEED: COUNT files of reproducible random bytes in nested directories,
# mostly small (replicated stripes), some of a few stripe units, a few of several stripes.
make_tree() {
  python3 - "$@" <<'EOF'
import os, random, sys
root, count, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
r = random.Random(seed)
for i in range(count):
    d = os.path.join(root, "d%d" % (i % 7), "e%d" % (i % 3))
    os.makedirs(d, exist_ok=True)
    x = r.random()
    if x < 0.9:
        size = r.randint(1, 64 * 1024)
    elif x < 0.99:
        size = r.randint(200 * 1024, 1536 * 1024)
    else:
        size = r.randint(4 << 20, 9 << 20)
    with open(os.path.join(d, "f%d.bin" % i), "wb") as f:
        f.write(r.randbytes(size))
EOF
}


all_servers_up() { { "$CLI" status --meta "$AQ_META_ADDR" || true; } | grep -q "6 registered, 6 up, 0 down"; }
max_inode() { find "$1" -printf '%i\n' | sort -n | tail -1; }

SRC=$AQ_SCRATCH/src
make_tree "$SRC/base" 40 1701
make_tree "$SRC/ingest" 900 1702
aq_log "source trees: base $(find "$SRC/base" -type f | wc -l) files, ingest $(find "$SRC/ingest" -type f | wc -l) files, $(du -sh "$SRC" | cut -f1)"

aq_start_cluster
M1=$AQ_SCRATCH/mnt1
aq_mount "$M1"
timeout "$T" cp -r "$SRC/base" "$M1/base" || aq_fail "cp of the base tree"
BIG=$(cd "$SRC/base" && find . -type f -size +1M | sort | head -1)
[ -n "$BIG" ] || aq_fail "the base tree has no file over 1 MiB"
# Held open across the backup, written in two parts: before it (head's close of its copy of
# the descriptor flushes, so that part may be committed) and after it.
head -c 504800 /dev/urandom >"$AQ_SCRATCH/inflight.src"
exec 7>"$M1/base/inflight"
head -c 204800 "$AQ_SCRATCH/inflight.src" >&7

# --- the backup, while an ingest runs ---------------------------------------------------------
mkdir -p "$AQ_SCRATCH/backups/full"
touch "$AQ_SCRATCH/backups/full/x"
cp -r "$SRC/ingest" "$M1/ingest" &
CP_PID=$!
AQ_EXTRA_PIDS+=("$CP_PID")
ingest_started() { [ "$(find "$M1/ingest" -type f 2>/dev/null | wc -l)" -ge 150 ]; }
aq_wait_for 60 "the ingest to copy 150 files" ingest_started

for bad in "relative/b1" "$AQ_SCRATCH/backups/full" "$AQ_SCRATCH/no-such-dir/b1" \
           "$AQ_SCRATCH/meta-db/b1"; do
  if "$CLI" meta backup --meta "$AQ_META_ADDR" "$bad" >"$AQ_SCRATCH/bad.out" 2>&1; then
    aq_fail "meta backup into $bad succeeded"
  fi
  aq_log "refused as expected: $(cat "$AQ_SCRATCH/bad.out")"
done
grep -q "overlaps the metadata server's RocksDB directory" "$AQ_SCRATCH/bad.out" \
  || aq_fail "no clear error for a destination inside the RocksDB directory"

B1=$AQ_SCRATCH/backups/b1
timeout "$T" "$CLI" meta backup --meta "$AQ_META_ADDR" "$B1" >"$AQ_SCRATCH/backup.out" \
  2>"$AQ_SCRATCH/backup.err" || { cat "$AQ_SCRATCH/backup.err" >&2; aq_fail "meta backup"; }
kill -0 "$CP_PID" 2>/dev/null || aq_fail "the ingest had ended before the backup did: make it longer"
aq_log "$(cat "$AQ_SCRATCH/backup.out")"
grep -q "same file system" "$AQ_SCRATCH/backup.err" || aq_fail "no same-disk warning"
[ -f "$B1/AQUIFER-BACKUP" ] && [ -f "$B1/CURRENT" ] || aq_fail "backup lacks its manifest or CURRENT"
ls -a "$AQ_SCRATCH/backups" | grep -q partial && aq_fail "a partial directory was left behind"

# --- after the backup: what the restore must not bring back -----------------------------------
dd if=/dev/urandom of="$M1/base/$BIG" bs=64K count=8 seek=2 conv=notrunc status=none \
  || aq_fail "in-place overwrite of $BIG"
tail -c +204801 "$AQ_SCRATCH/inflight.src" >&7
exec 7>&-
mkdir "$M1/after"
for i in 1 2 3; do head -c $((i * 700000)) /dev/urandom >"$M1/after/f$i"; done
wait "$CP_PID" || aq_fail "the ingest (cp -r) failed"
AQ_EXTRA_PIDS=()
OLD_MAX_INO=$(max_inode "$M1")
INGEST_TOTAL=$(find "$SRC/ingest" -type f | wc -l)
aq_umount "$M1"

# --- the metadata disk is lost ----------------------------------------------------------------
if "$CLI" meta restore --from "$B1" --meta-dir "$AQ_SCRATCH/meta-db" --force \
    >"$AQ_SCRATCH/busy.out" 2>&1; then
  aq_fail "restore into the directory of a running aquifer-meta succeeded"
fi
grep -q "holds its RocksDB lock" "$AQ_SCRATCH/busy.out" || { cat "$AQ_SCRATCH/busy.out" >&2; aq_fail "no clear error for a directory in use"; }
aq_stop_pid "$AQ_META_PID"
AQ_META_PID=""
rm -rf "$AQ_SCRATCH/meta-db"
mkdir "$AQ_SCRATCH/meta-db"
touch "$AQ_SCRATCH/meta-db/stray"
if "$CLI" meta restore --from "$B1" --meta-dir "$AQ_SCRATCH/meta-db" >"$AQ_SCRATCH/full.out" 2>&1; then
  aq_fail "restore into a non-empty directory without --force succeeded"
fi
grep -q "not empty" "$AQ_SCRATCH/full.out" || aq_fail "no clear error for a non-empty directory"
timeout "$T" "$CLI" meta restore --from "$B1" --meta-dir "$AQ_SCRATCH/meta-db" --force \
  >"$AQ_SCRATCH/restore.out" 2>&1 || { cat "$AQ_SCRATCH/restore.out" >&2; aq_fail "meta restore"; }
cat "$AQ_SCRATCH/restore.out" >&2
ls -d "$AQ_SCRATCH"/meta-db.pre-restore-* >/dev/null || aq_fail "--force did not move the old contents aside"

aq_start_meta
aq_wait_for 30 "the restored aquifer-meta to see every data server" all_servers_up

# --- fsck lists what came after the backup, and removes it on request ------------------------
rc=0
timeout "$T" "$CLI" fsck --verbose --meta "$AQ_META_ADDR" >"$AQ_SCRATCH/fsck1.txt" 2>&1 || rc=$?
grep -v "^ORPHAN  inode" "$AQ_SCRATCH/fsck1.txt" >&2
[ $rc = 1 ] || aq_fail "fsck after the restore exited $rc, not 1 (orphans)"
grep -q "^note: the namespace was restored from a backup" "$AQ_SCRATCH/fsck1.txt" \
  || aq_fail "fsck does not say the namespace was restored"
grep -q "^ORPHAN  inode [0-9]* does not exist" "$AQ_SCRATCH/fsck1.txt" \
  || aq_fail "fsck lists no orphan inode (files made after the backup)"
grep -q "^ORPHAN  /base/${BIG#./} (inode [0-9]*): [0-9]* chunk versions written after the backup" \
  "$AQ_SCRATCH/fsck1.txt" || aq_fail "fsck does not list the overwrite of $BIG as written after the backup"
grep -q "^ORPHAN  /base/inflight (inode [0-9]*): [0-9]* chunk versions written after the backup" \
  "$AQ_SCRATCH/fsck1.txt" || aq_fail "fsck does not list the held file's chunks as written after the backup"
grep -qE "^(MISSING|LOST) " "$AQ_SCRATCH/fsck1.txt" && aq_fail "fsck finds chunks missing after the restore"
timeout "$T" "$CLI" fsck --repair --meta "$AQ_META_ADDR" >"$AQ_SCRATCH/fsck2.txt" 2>&1 \
  || { cat "$AQ_SCRATCH/fsck2.txt" >&2; aq_fail "fsck --repair did not clean up"; }
grep "^orphans:" "$AQ_SCRATCH/fsck2.txt" >&2
timeout "$T" "$CLI" fsck --meta "$AQ_META_ADDR" >"$AQ_SCRATCH/fsck3.txt" 2>&1 \
  || { cat "$AQ_SCRATCH/fsck3.txt" >&2; aq_fail "fsck not clean after --repair"; }
grep -q "^orphans: 0 chunk versions" "$AQ_SCRATCH/fsck3.txt" || aq_fail "orphans left after --repair"

# --- every file in the backup reads back as it was --------------------------------------------
M2=$AQ_SCRATCH/mnt2
aq_mount "$M2"
timeout "$T" diff -r -x inflight "$SRC/base" "$M2/base" || aq_fail "the base tree differs after the restore"
INFLIGHT_SIZE=$(stat -c %s "$M2/base/inflight")
case $INFLIGHT_SIZE in 0|204800) ;; *) aq_fail "the held file has $INFLIGHT_SIZE bytes, not what the backup held" ;; esac
timeout "$T" cmp -n "$INFLIGHT_SIZE" "$M2/base/inflight" "$AQ_SCRATCH/inflight.src" \
  || aq_fail "the held file does not read back as it was in the backup"
[ ! -e "$M2/after" ] || aq_fail "a directory made after the backup came back"
restored=0 whole=0
while IFS= read -r -d '' f; do
  rel=${f#"$M2/ingest/"}
  src=$SRC/ingest/$rel
  [ -f "$src" ] || aq_fail "restored $rel has no source"
  size=$(stat -c %s "$f")
  [ "$size" -le "$(stat -c %s "$src")" ] || aq_fail "restored $rel is longer than its source"
  timeout "$T" cmp -n "$size" "$f" "$src" || aq_fail "restored $rel is not a prefix of its source"
  restored=$((restored + 1))
  [ "$size" = "$(stat -c %s "$src")" ] && whole=$((whole + 1))
done < <(find "$M2/ingest" -type f -print0)
aq_log "ingest: $restored of $INGEST_TOTAL files in the backup, $whole of them whole"
[ "$whole" -ge 100 ] || aq_fail "only $whole whole ingest files in the backup"
[ "$restored" -lt "$INGEST_TOTAL" ] || aq_fail "the backup holds the whole ingest: it was not taken during it"

# --- nothing handed out after the backup is handed out again ----------------------------------
head -c 3000000 /dev/urandom >"$AQ_SCRATCH/new.bin"
cp "$AQ_SCRATCH/new.bin" "$M2/new-after-restore" || aq_fail "create after the restore"
aq_same "$AQ_SCRATCH/new.bin" "$M2/new-after-restore"
NEW_INO=$(stat -c %i "$M2/new-after-restore")
[ "$NEW_INO" -gt "$OLD_MAX_INO" ] || aq_fail "new inode $NEW_INO is not above $OLD_MAX_INO, handed out before the restore"
dd if=/dev/urandom of="$M2/base/$BIG" bs=64K count=2 conv=notrunc status=none || aq_fail "rewrite after the restore"
timeout "$T" "$CLI" fsck --meta "$AQ_META_ADDR" >"$AQ_SCRATCH/fsck4.txt" 2>&1 \
  || { cat "$AQ_SCRATCH/fsck4.txt" >&2; aq_fail "fsck not clean after new writes"; }
aq_log "PASS: backup during an ingest, restore, fsck cleanup, every backed-up file reads back"
