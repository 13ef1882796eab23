#!/bin/bash
# Two mounts (entry_timeout and attr_timeout 1 s, cache leases on): a file created, written and
# closed on one mount has its size at once on the other, while both mounts create, rename, unlink
# and list in the same directories (tests/mount/create_stat_storm.py). Before the mount waited
# for its kernel to make an inode it had just described before acknowledging a recall of it,
# about 1 in 400 such stats said 0 bytes (the storm test's finding).
source "$(dirname "$0")/lib.sh"
A=$AQ_SCRATCH/a
B=$AQ_SCRATCH/b
aq_start_cluster
aq_mount "$A"
aq_mount "$B"
timeout 120 /usr/bin/python3 "$(dirname "$0")/create_stat_storm.py" "$A" "$B" 45 ||
  aq_fail "a size closed on one mount was not the size the other mount reported"
echo "PASS create_stat_storm"
