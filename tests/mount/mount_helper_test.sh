#!/bin/bash
# The daemon as mount(8) runs it: `mount -t fuse.aquifer` (through a mount.fuse.aquifer link, put
# in /sbin for the test and removed after), fstab-style options, a line of an fstab file, daemon mode, SIGTERM unmount that
# flushes a file still open for write, fusermount3 -u, and clear errors for bad options.
source "$(dirname "$0")/lib.sh"
: "${AQ_MOUNT_HELPER:=$(dirname "$AQ_MOUNT_BIN")/mount.fuse.aquifer}"
M=$AQ_SCRATCH/mnt
mkdir -p "$M"
aq_start_cluster

# Bad input gets a clear message and a non-zero exit, before anything is mounted.
out=$("$AQ_MOUNT_BIN" "$AQ_META_ADDR" "$M" -o no_such_option 2>&1) && aq_fail "unknown option accepted"
grep -q "no_such_option" <<<"$out" || aq_fail "no clear error for an unknown option: $out"
out=$("$AQ_MOUNT_BIN" "$AQ_META_ADDR" "$M" -o attr_timeout=x 2>&1) && aq_fail "bad attr_timeout accepted"
grep -q "attr_timeout" <<<"$out" || aq_fail "no clear error for attr_timeout=x: $out"
out=$("$AQ_MOUNT_BIN" 127.0.0.1:1 "$M" -f 2>&1) && aq_fail "mounted with no metadata server"
grep -qi "cannot connect" <<<"$out" || aq_fail "no clear error without a metadata server: $out"
aq_not_mounted "$M" || aq_fail "left a mount after errors"

# mount -t fuse.aquifer, as from /etc/fstab: SOURCE DIR -o options.
created_link=0
if [ ! -e /sbin/mount.fuse.aquifer ]; then
  ln -s "$AQ_MOUNT_HELPER" /sbin/mount.fuse.aquifer && created_link=1
fi
cleanup_link() { [ $created_link = 1 ] && rm -f /sbin/mount.fuse.aquifer; return 0; }
# cleanup_link returns 0: the script's own status must reach aq_teardown (it exits with it).
trap 'rc=$?; cleanup_link; (exit $rc); aq_teardown' EXIT
AQ_MOUNTS+=("$M")
timeout "$T" mount -t fuse.aquifer "$AQ_META_ADDR" "$M" \
  -o "rw,_netdev,noauto,nofail,x-systemd.automount,attr_timeout=2,entry_timeout=2,log_file=$AQ_SCRATCH/helper.log" ||
  aq_fail "mount -t fuse.aquifer"
aq_is_mounted "$M" || aq_fail "mount(8) returned before the mount was up"
daemon=""
for d in /proc/[0-9]*; do
  if { tr '\0' ' ' <"$d/cmdline"; } 2>/dev/null | grep -q "mount.fuse.aquifer $AQ_META_ADDR $M"; then
    daemon=${d#/proc/}
  fi
done
[ -n "$daemon" ] || aq_fail "no daemon process for $M"
AQ_MOUNT_PIDS+=("$daemon")
grep -q "aquifer:$AQ_META_ADDR $M fuse.aquifer" /proc/mounts || aq_fail "mount table entry"
echo hello >"$M/hello" && [ "$(cat "$M/hello")" = hello ] || aq_fail "I/O through mount(8) mount"
# Another mount's chmod reaches the daemon's kernel at once (attr_timeout is 2 s): its cache
# lease recalls go through a thread of the daemon. That thread was once made before the fork, so
# the daemon had none: no recall reached its kernel, and it hung at exit joining it.
aq_mount "$AQ_SCRATCH/other"
for mode in 600 640 604; do
  timeout "$T" stat "$M/hello" >/dev/null
  chmod "$mode" "$AQ_SCRATCH/other/hello"
  [ "$(timeout "$T" stat -c %a "$M/hello")" = "$mode" ] ||
    aq_fail "the mount(8) mount's mode after a chmod on another mount: $(stat -c %a "$M/hello"), wanted $mode"
done

# SIGTERM with a file still open for write: the daemon unmounts and flushes it.
aq_random_file "$AQ_SCRATCH/payload" 3 51
exec 9>"$M/open_at_exit"
cat "$AQ_SCRATCH/payload" >&9
kill -TERM "$daemon"
aq_wait_for 20 "the daemon to exit after SIGTERM" aq_pid_gone "$daemon"
exec 9>&-
aq_wait_for 10 "the mount to go" aq_not_mounted "$M"
grep -q "released open files at exit count=1 failed=0" "$AQ_SCRATCH/helper.log" ||
  aq_fail "the open file was not released at exit: $(tail -3 "$AQ_SCRATCH/helper.log")"

# fusermount3 -u of a foreground mount; the data above must be there.
aq_mount "$M"
aq_same "$AQ_SCRATCH/payload" "$M/open_at_exit"
[ "$(cat "$M/hello")" = hello ] || aq_fail "hello lost"
# A second aquifer-mount on the mounted point is refused (it used to stack on it, hiding the
# first); the first mount goes on working.
out=$(timeout "$T" "$AQ_MOUNT_BIN" "$AQ_META_ADDR" "$M" -f 2>&1) && aq_fail "mounted twice on $M"
grep -q "already a mount point (fuse.aquifer)" <<<"$out" || aq_fail "no clear error for a second mount: $out"
[ "$(grep -c " $M fuse.aquifer" /proc/mounts)" = 1 ] || aq_fail "two mounts on $M"
[ "$(cat "$M/hello")" = hello ] || aq_fail "the first mount stopped working after a refused second"
aq_umount "$M"
aq_not_mounted "$M" || aq_fail "still mounted after fusermount3 -u"

# An /etc/fstab line, as an operator writes it (mount -T reads this file instead of /etc/fstab):
# `mount DIR` alone finds source, type and options there.
fstab=$AQ_SCRATCH/fstab
echo "$AQ_META_ADDR $M fuse.aquifer noauto,_netdev,nofail,attr_timeout=1,log_file=$AQ_SCRATCH/fstab.log 0 0" >"$fstab"
timeout "$T" mount -T "$fstab" "$M" || aq_fail "mount -T fstab $M"
aq_is_mounted "$M" || aq_fail "the fstab mount is not in the mount table"
daemon=""
for d in /proc/[0-9]*; do
  if { tr '\0' ' ' <"$d/cmdline"; } 2>/dev/null | grep -q "mount.fuse.aquifer $AQ_META_ADDR $M"; then
    AQ_MOUNT_PIDS+=("${d#/proc/}")
    daemon=${d#/proc/}
  fi
done
[ -n "$daemon" ] || aq_fail "no daemon process for the fstab mount of $M"
[ "$(timeout "$T" cat "$M/hello")" = hello ] || aq_fail "hello through the fstab mount"
timeout "$T" fusermount3 -u "$M" || aq_fail "fusermount3 -u of the fstab mount"
aq_wait_for 20 "the fstab mount's daemon to exit" aq_pid_gone "$daemon"
echo "PASS mount_helper"
