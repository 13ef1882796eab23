#!/bin/bash
# Two mounts (cache leases on, the default): mount A replaces a name by write-to-temporary and
# rename-over as fast as it can while two readers on mount B open and read it, 40 s. Every open
# succeeds (never ESTALE or ENOENT for a name that always exists), every read is one whole
# generation, and no reader goes back to an older generation (tests/mount/replace_race.py).
# Before opens racing the replace were served (docs/design.md "A name replaced on another host":
# OpenReply.unlink_pending, the kernel's retry followed by StaleRetries, fstat of an open file
# whose inode the server deleted), 6 of 134,000 opens here failed with ESTALE.
source "$(dirname "$0")/lib.sh"
A=$AQ_SCRATCH/a
B=$AQ_SCRATCH/b
aq_start_cluster
aq_mount "$A"
aq_mount "$B"
timeout 150 /usr/bin/python3 "$(dirname "$0")/replace_race.py" "$A" "$B" 40 2 ||
  aq_fail "an open of a name being replaced on the other mount failed, or read the wrong bytes"
echo "PASS replace_race"
