#!/bin/bash
# Starts a local cluster (1 aquifer-meta + 6 aquifer-data, RS(4,2), 1 MiB units) with
# tests/mount/lib.sh, mounts it, runs fs_bench.py against the mount and a local directory on the
# same disk (and a bindfs pass-through of a local directory, when bindfs is installed), then tears
# everything down. Needs AQ_META_BIN, AQ_DATA_BIN, AQ_MOUNT_BIN (or a build
# dir as $1: bench/mount/run.sh build). Extra arguments go to fs_bench.py.
#   bench/mount/run.sh /work/main/build --seq-mib 256 --json /tmp/mount_bench.json
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -gt 0 ] && [ -d "$1/src" ]; then
  export AQ_META_BIN=$1/src/metadata/aquifer-meta AQ_DATA_BIN=$1/src/server/aquifer-data \
         AQ_MOUNT_BIN=$1/src/client_fuse/aquifer-mount
  shift
fi
export AQ_LOG_LEVEL=${AQ_LOG_LEVEL:-warn} AQ_MOUNT_LOG_LEVEL=${AQ_MOUNT_LOG_LEVEL:-warn}
AQ_CMD_TIMEOUT=1800
source "$here/../../tests/mount/lib.sh"
aq_start_cluster
aq_mount "$AQ_SCRATCH/mnt"
mkdir -p "$AQ_SCRATCH/local"
# A third column when bindfs is installed: a local FUSE pass-through over a directory on the same
# disk (no network, no erasure coding), the floor any FUSE file system pays on this machine.
bind_args=()
if command -v bindfs >/dev/null; then
  mkdir -p "$AQ_SCRATCH/bind-src" "$AQ_SCRATCH/bind"
  bindfs "$AQ_SCRATCH/bind-src" "$AQ_SCRATCH/bind"
  bench_teardown() {
    local rc=$?
    fusermount3 -uz "$AQ_SCRATCH/bind" 2>/dev/null
    (exit $rc)
    aq_teardown
  }
  trap bench_teardown EXIT
  bind_args=(--bindfs "$AQ_SCRATCH/bind")
fi
timeout 1800 /usr/bin/python3 "$here/fs_bench.py" --mount "$AQ_SCRATCH/mnt" --local "$AQ_SCRATCH/local" \
  "${bind_args[@]}" "$@"
