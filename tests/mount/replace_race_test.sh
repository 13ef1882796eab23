#!/bin/bash
# Two mounts (cache leases on, the default): mount A replaces a name by write-to-temporary and
# rename-over as fast as it can while two readers on mount B open and read it, 40 s. Every open
# succeeds (never ESTALE or ENOENT for a name that always exists), every read is one whole
# generation, and no reader goes back to an older generation (tests/mount/replace_race.py).
# Before the metadata server told an opener that the change that unlinked its inode had not
# returned yet (OpenReply.unlink_pending), opens whose retry met a second replace failed with
# ESTALE (the storm's log reader: 29 of 3,565 opens).
source "$(dirname "$0")/lib.sh"
A=$AQ_SCRATCH/a
B=$AQ_SCRATCH/b
aq_start_cluster
aq_mount "$A"
aq_mount "$B"
timeout 150 /usr/bin/python3 "$(dirname "$0")/replace_race.py" "$A" "$B" 40 2 ||
  aq_fail "an open of a name being replaced on the other mount failed, or read the wrong bytes"
echo "PASS replace_race"
