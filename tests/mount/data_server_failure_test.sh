#!/bin/bash
# kill -9 of two of the six data servers in the middle of a large sequential read, and in the
# middle of a large write: the read returns the source bytes (degraded reads), the write completes
# and reads back equal to the source.
source "$(dirname "$0")/lib.sh"
M=$AQ_SCRATCH/mnt
aq_start_cluster
aq_mount "$M"
aq_random_file "$AQ_SCRATCH/src" 96 41
timeout "$T" cp "$AQ_SCRATCH/src" "$M/big" || aq_fail "write big"
aq_umount "$M"
aq_mount "$M"   # cold page cache

# Started copy, then two data servers die once the reader is well into the file.
size() { stat -c %s "$1" 2>/dev/null || echo 0; }
past() { [ "$(size "$1")" -ge "$2" ]; }
timeout 120 dd if="$M/big" of="$AQ_SCRATCH/readback" bs=1M iflag=direct status=none &
reader=$!
AQ_EXTRA_PIDS+=($reader)
aq_wait_for 60 "the reader to pass 16 MiB" past "$AQ_SCRATCH/readback" $((16 << 20))
aq_kill_data 1
aq_kill_data 4
wait "$reader" || aq_fail "read failed after two data servers died"
aq_same "$AQ_SCRATCH/src" "$AQ_SCRATCH/readback"
aq_log "degraded sequential read ok"

# Back to six servers, then kill two during a write.
aq_start_data 1
aq_start_data 4
aq_wait_for 30 "data1 to register again" bash -c "grep -c 'registered with meta' '$AQ_SCRATCH/data1.log' | grep -q 2"
aq_wait_for 30 "data4 to register again" bash -c "grep -c 'registered with meta' '$AQ_SCRATCH/data4.log' | grep -q 2"
# A fresh mount fetches the cluster map with all six up (a running client refreshes it every few
# seconds; writing while it still thinks two servers are down would leave stripes with only k
# chunks, which a second double failure may not survive: RS(4,2) tolerates two losses in total).
aq_umount "$M"
aq_mount "$M"
timeout 120 dd if="$AQ_SCRATCH/src" of="$M/written" bs=1M status=none conv=fsync &
writer=$!
AQ_EXTRA_PIDS+=($writer)
aq_wait_for 60 "the writer to pass 16 MiB" past "$M/written" $((16 << 20))
aq_kill_data 2
aq_kill_data 5
wait "$writer" || aq_fail "write failed after two data servers died"
aq_umount "$M"
aq_mount "$M"
aq_same "$AQ_SCRATCH/src" "$M/written"
aq_same "$AQ_SCRATCH/src" "$M/big"
aq_log "write through two data server crashes ok"
echo "PASS data_server_failure"
