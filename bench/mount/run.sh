#!/bin/bash
# Starts a local cluster (1 aquifer-meta + 6 aquifer-data, RS(4,2), 1 MiB units) with
# tests/mount/lib.sh, mounts it, runs fs_bench.py against the mount and a local directory on the
# same disk (and a bindfs pass-through of a local directory, when bindfs is installed), then tears
# everything down. Before each cold phase the mount is remounted (fs_bench.py --remount), so its
# own caches are empty as well as the kernel's. Needs AQ_META_BIN, AQ_DATA_BIN, AQ_MOUNT_BIN (or a
# build dir as $1: bench/mount/run.sh build). Extra arguments go to fs_bench.py.
#   bench/mount/run.sh /work/main/build --seq-mib 256 --json /tmp/mount_bench.json
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -gt 0 ] && [ -d "$1/src" ]; then
  export AQ_META_BIN=$1/src/metadata/aquifer-meta AQ_DATA_BIN=$1/src/server/aquifer-data \
         AQ_MOUNT_BIN=$1/src/client_fuse/aquifer-mount
  shift
fi
export AQ_LOG_LEVEL=${AQ_LOG_LEVEL:-warn} AQ_MOUNT_LOG_LEVEL=${AQ_MOUNT_LOG_LEVEL:-warn}
# aquifer-meta's default: the tests' 1.5 s marked every data server down when the loaded machine
# kept heartbeats back that long (the untar row then failed with EIO).
export AQ_HEARTBEAT_TIMEOUT_MS=${AQ_HEARTBEAT_TIMEOUT_MS:-6000}
AQ_CMD_TIMEOUT=1800
source "$here/../../tests/mount/lib.sh"
aq_start_cluster
MNT=$AQ_SCRATCH/mnt
aq_mount "$MNT"
mkdir -p "$AQ_SCRATCH/local"

# remount.sh: unmounts the mount (its daemon exits) and starts a new aquifer-mount on it, as a host
# that just mounted, with the same options (AQ_MOUNT_EXTRA, e.g. lazy_opens=0); each new daemon's
# PID goes to remount.pids, which the teardown stops.
cat >"$AQ_SCRATCH/remount.sh" <<EOF
fusermount3 -u "$MNT" || exit 1
for _ in \$(seq 400); do mountpoint -q "$MNT" || break; sleep 0.05; done
"$AQ_MOUNT_BIN" "$AQ_META_ADDR" "$MNT" -f --log-level "$AQ_MOUNT_LOG_LEVEL" \\
  ${AQ_MOUNT_EXTRA:+-o "$AQ_MOUNT_EXTRA"} >>"$AQ_SCRATCH/remount.log" 2>&1 &
echo \$! >>"$AQ_SCRATCH/remount.pids"
for _ in \$(seq 400); do mountpoint -q "$MNT" && exit 0; sleep 0.05; done
echo "remount: $MNT not mounted after 20 s" >&2
exit 1
EOF
# Without set +e a failing step here (a remount daemon that already exited) ended the trap before
# aq_teardown, leaving the cluster's daemons running.
bench_teardown() {
  local rc=$? pid
  set +e
  [ -d "$AQ_SCRATCH/bind" ] && fusermount3 -uz "$AQ_SCRATCH/bind" 2>/dev/null
  fusermount3 -uz "$MNT" 2>/dev/null
  for pid in $(cat "$AQ_SCRATCH/remount.pids" 2>/dev/null); do kill "$pid" 2>/dev/null; done
  (exit $rc)
  aq_teardown
}
trap bench_teardown EXIT

# A third column when bindfs is installed: a local FUSE pass-through over a directory on the same
# disk (no network, no erasure coding), the floor any FUSE file system pays on this machine.
bind_args=()
if command -v bindfs >/dev/null; then
  mkdir -p "$AQ_SCRATCH/bind-src" "$AQ_SCRATCH/bind"
  bindfs "$AQ_SCRATCH/bind-src" "$AQ_SCRATCH/bind"
  bind_args=(--bindfs "$AQ_SCRATCH/bind")
fi
timeout 1800 /usr/bin/python3 "$here/fs_bench.py" --mount "$MNT" --local "$AQ_SCRATCH/local" \
  --remount "bash $AQ_SCRATCH/remount.sh" "${bind_args[@]}" "$@"
