#!/bin/bash
# POSIX behaviours through a real mount (posix_checks.py), df, many-entry directory listings with
# seekdir, and ls -la showing "." and "..".
source "$(dirname "$0")/lib.sh"
M=$AQ_SCRATCH/mnt
aq_start_cluster
aq_mount "$M"
timeout "$T" /usr/bin/python3 "$(dirname "$0")/posix_checks.py" "$M" || aq_fail "posix_checks.py"
timeout "$T" df -h "$M" | grep -q aquifer || aq_fail "df does not show the mount"
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
echo "PASS posix_semantics"
