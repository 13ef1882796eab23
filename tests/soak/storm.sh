#!/usr/bin/env bash
# The storm of issue 22: tests/soak/storm.sh DURATION_S [storm.py run flags...]
# e.g. tests/soak/storm.sh 180 (the ctest soak.storm_3min), tests/soak/storm.sh 1800 --seed 7.
# Starts its own local cluster (8 data servers, RS 4+2, two mounts) in /tmp/aquifer-storm-XXXX,
# runs ingest, training, a metadata storm and fcntl locks on it while a thrasher kills data
# servers and aquifer-meta, SIGSTOPs one data server and fills one data server's disk; then
# repair wait, fsck and a re-read of every closed/fsynced file from both mounts. Prints a table
# and a JSON summary (line STORM-JSON); exits non-zero on any application-visible error or loss.
# Needs root (tmpfs and bind mounts, FUSE), fusermount3, rsync, /usr/bin/python3 with torch, the
# Fashion-MNIST package and /usr/src/linux-source-6.1.tar.xz (else --usr-include).
# The scratch directory is kept on failure (cluster logs in root/logs); --keep keeps it always.
set -euo pipefail
duration=${1:?usage: storm.sh DURATION_S [storm.py run flags]}
shift
# storm.py tears down by itself at DURATION + 840 s; this outer limit is the backstop.
exec timeout --kill-after=60 $((duration + 960)) /usr/bin/python3 "$(dirname "$0")/storm.py" run \
  --duration "$duration" "$@"
