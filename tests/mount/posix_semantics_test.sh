#!/bin/bash
# POSIX behaviours through a real mount (posix_checks.py), df, set-id bits cleared by a
# non-owner's write, many-entry directory listings with seekdir, and ls -la showing "." and "..".
source "$(dirname "$0")/lib.sh"
M=$AQ_SCRATCH/mnt
aq_start_cluster
aq_mount "$M"
timeout "$T" /usr/bin/python3 "$(dirname "$0")/posix_checks.py" "$M" || aq_fail "posix_checks.py"
timeout "$T" df -h "$M" | grep -q aquifer || aq_fail "df does not show the mount"
# Size bounds (issue 16). 2^63 is past what off_t holds: refused (by truncate(1) itself, with
# EOVERFLOW, or by the file system with EFBIG), and the file keeps its size. 2^63 - 1 is the
# largest size; a truncate up to it and back down to 2^62 each return at once, and the file stats
# and unlinks. fallocate of 4 EiB is past the free space: ENOSPC, at once.
big=$M/big
: >"$big"
if aq_within 5 "truncate -s 2^63" truncate -s 9223372036854775808 "$big"; then
  aq_fail "truncate -s 2^63 succeeded"
fi
grep -Eq "File too large|Value too large" "$AQ_SCRATCH/within.out" ||
  aq_fail "truncate -s 2^63: $(cat "$AQ_SCRATCH/within.out")"
[ "$(timeout "$T" stat -c %s "$big")" = 0 ] || aq_fail "a refused truncate changed the size"
aq_within 5 "truncate -s 2^63-1" truncate -s 9223372036854775807 "$big" ||
  aq_fail "truncate -s 2^63-1: $(cat "$AQ_SCRATCH/within.out")"
aq_within 5 "stat" stat -c %s "$big" || aq_fail "stat of a 2^63-1 byte file failed"
[ "$(cat "$AQ_SCRATCH/within.out")" = 9223372036854775807 ] || aq_fail "size $(cat "$AQ_SCRATCH/within.out")"
aq_within 5 "truncate -s 2^62" truncate -s 4611686018427387904 "$big" ||
  aq_fail "truncate -s 2^62: $(cat "$AQ_SCRATCH/within.out")"
aq_within 5 "stat" stat -c %s "$big" || aq_fail "stat after the truncate down failed"
[ "$(cat "$AQ_SCRATCH/within.out")" = 4611686018427387904 ] || aq_fail "size $(cat "$AQ_SCRATCH/within.out")"
aq_within 5 "rm" rm "$big" || aq_fail "rm of a 2^62 byte file: $(cat "$AQ_SCRATCH/within.out")"
[ ! -e "$big" ] || aq_fail "rm left $big"
if aq_within 5 "fallocate -l 4E" fallocate -l 4E "$M/falloc"; then
  aq_fail "fallocate of 4 EiB succeeded"
fi
grep -q "No space left on device" "$AQ_SCRATCH/within.out" ||
  aq_fail "fallocate -l 4E: $(cat "$AQ_SCRATCH/within.out")"
rm -f "$M/falloc"
# A write by a non-owner clears the set-id bits (the kernel asks with a chmod from the writer):
# it succeeds, the bytes land, S_ISUID goes, and S_ISGID too when the group may execute.
chmod 0711 "$AQ_SCRATCH"  # uid 65534 must reach the mount point
as_nobody() { timeout "$T" setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }
mode_of() { timeout "$T" stat -c %a "$1"; }
printf 'root\n' > "$M/suid" && chmod 04777 "$M/suid"
as_nobody sh -c "printf 'nobody\n' >> '$M/suid'" || aq_fail "append by a non-owner to a 04777 file failed"
[ "$(mode_of "$M/suid")" = 777 ] || aq_fail "append by a non-owner left mode $(mode_of "$M/suid"), want 777"
[ "$(cat "$M/suid")" = "$(printf 'root\nnobody')" ] || aq_fail "append by a non-owner: wrong bytes"
printf 'root\n' > "$M/sgid" && chmod 06777 "$M/sgid"
as_nobody sh -c "printf 'new\n' > '$M/sgid'" || aq_fail "truncating write by a non-owner to a 06777 file failed"
[ "$(mode_of "$M/sgid")" = 777 ] || aq_fail "O_TRUNC write by a non-owner left mode $(mode_of "$M/sgid"), want 777"
[ "$(cat "$M/sgid")" = new ] || aq_fail "O_TRUNC write by a non-owner: wrong bytes"
stat -c %U "$M/sgid" | grep -qx root || aq_fail "the owner changed"
printf 'root\n' > "$M/locked" && chmod 04755 "$M/locked"
if as_nobody sh -c "printf x >> '$M/locked'" 2>/dev/null; then aq_fail "non-owner wrote a 04755 file"; fi
[ "$(mode_of "$M/locked")" = 4755 ] || aq_fail "a refused write changed the mode"
rm -f "$M/suid" "$M/sgid" "$M/locked"
# A directory larger than one readdir buffer, listed with and without attributes.
mkdir "$M/many"
(cd "$M/many" && timeout "$T" bash -c 'for i in $(seq 1500); do : > "entry_with_a_longish_name_$i"; done') ||
  aq_fail "create 1500 entries"
n=$(timeout "$T" ls -f "$M/many" | wc -l)
[ "$n" -eq 1502 ] || aq_fail "ls -f listed $n entries, want 1502 (with . and ..)"
n=$(timeout "$T" ls -la "$M/many" | grep -c entry_with)
[ "$n" -eq 1500 ] || aq_fail "ls -la listed $n entries"
timeout "$T" /usr/bin/python3 - "$M/many" <<'PY' || aq_fail "telldir/seekdir"
import ctypes, sys
libc = ctypes.CDLL(None)
libc.opendir.restype = ctypes.c_void_p
libc.readdir.restype = ctypes.c_void_p
libc.readdir.argtypes = libc.telldir.argtypes = libc.closedir.argtypes = [ctypes.c_void_p]
libc.telldir.restype = ctypes.c_long
libc.seekdir.argtypes = [ctypes.c_void_p, ctypes.c_long]
d = libc.opendir(sys.argv[1].encode())
names, pos = [], None
for i in range(2000):
    if i == 700:
        pos = libc.telldir(d)
    e = libc.readdir(d)
    if not e:
        break
    names.append(ctypes.string_at(e + 19))
libc.seekdir(d, pos)
again = []
while True:
    e = libc.readdir(d)
    if not e:
        break
    again.append(ctypes.string_at(e + 19))
libc.closedir(d)
assert again == names[700:], (len(again), len(names))
print("seekdir ok", len(names))
PY
timeout "$T" rm -rf "$M/many" || aq_fail "rm -rf many"

# du counts what was written, not holes (st_blocks from the file's recorded stripes, counted whole
# up to the size): a 1 GiB file made by truncate has no blocks; 1 MiB written 64 MiB into a file
# has the blocks of that 1 MiB (one stripe of 4 x 1 MiB units, clipped to the size).
timeout "$T" truncate -s 1G "$M/sparse" || aq_fail "truncate -s 1G"
[ "$(timeout "$T" stat -c %b "$M/sparse")" = 0 ] || aq_fail "a 1 GiB hole has $(stat -c %b "$M/sparse") blocks"
timeout "$T" dd if=/dev/zero of="$M/holey" bs=1M seek=64 count=1 status=none || aq_fail "dd holey"
[ "$(timeout "$T" stat -c %b "$M/holey")" = 2048 ] || aq_fail "1 MiB in a 65 MiB file has $(stat -c %b "$M/holey") blocks, wanted 2048"
[ "$(timeout "$T" du -k "$M/holey" | cut -f1)" = 1024 ] || aq_fail "du -k holey: $(du -k "$M/holey")"
timeout "$T" rm -f "$M/sparse" "$M/holey"
echo "PASS posix_semantics"
