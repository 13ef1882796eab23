#!/bin/bash
# Starts a local cluster (1 aquifer-meta + 6 aquifer-data, RS(4,2), 1 MiB units) with
# tests/mount/lib.sh, mounts it, runs fs_bench.py against the mount and a local directory on the
# same disk, then tears everything down. Needs AQ_META_BIN, AQ_DATA_BIN, AQ_MOUNT_BIN (or a build
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
timeout 1800 /usr/bin/python3 "$here/fs_bench.py" --mount "$AQ_SCRATCH/mnt" --local "$AQ_SCRATCH/local" "$@"
