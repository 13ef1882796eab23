#!/bin/bash
# Hand-off to a spare failure domain (issue 16 problem 3), through a real mount of eight data
# servers, RS 4+2: a stripe's placement group has six of them, so every stripe has two spare
# failure domains.
#   down: data0 is killed, then a 48 MiB file and 100 small files are written. Each chunk data0
#     should have taken goes to a spare server instead, so the stripes keep all six chunks:
#     after two more kills (data1, data2) and a cold remount every file reads back equal (before,
#     a stripe placed on all three of them had 3 of 6 chunks left: EIO), and `aquifer status`
#     never counted a stripe as written below k+m.
#   full: data3 is restarted with a capacity it already exceeds, so it refuses chunk writes
#     (ENOSPC) while it stays up; the next file's chunks for it go to spare servers, and two kills
#     (data4, data5) again leave every file readable: readers find a chunk its target does not
#     hold on the spare server.
# Other binaries than CMake's: set AQ_META_BIN, AQ_DATA_BIN, AQ_MOUNT_BIN and AQ_CLI_BIN.
AQ_DATA_SERVERS=8
source "$(dirname "$0")/lib.sh"
: "${AQ_CLI_BIN:=$(dirname "$AQ_META_BIN")/../cli/aquifer}"
M=$AQ_SCRATCH/mnt
FAILED=()  # checks that fail without stopping the script (it fails at its end)

# Writes FILE (MiB of seed SEED) and COUNT small files under DIR on the mount, and their copies
# under $AQ_SCRATCH/src-DIR.
write_set() {
  local name=$1 mib=$2 seed=$3 count=$4 i
  aq_random_file "$AQ_SCRATCH/src-$name.bin" "$mib" "$seed"
  mkdir -p "$AQ_SCRATCH/src-$name"
  for ((i = 0; i < count; i++)); do
    head -c $((1000 + i * 37)) "$AQ_SCRATCH/src-$name.bin" | tail -c $((500 + i)) \
      >"$AQ_SCRATCH/src-$name/f$i"
  done
  timeout "$T" cp "$AQ_SCRATCH/src-$name.bin" "$M/$name.bin" || aq_fail "write $name.bin"
  timeout "$T" cp -r "$AQ_SCRATCH/src-$name" "$M/$name" || aq_fail "write $name/"
  timeout "$T" sync -f "$M/$name.bin" || aq_fail "syncfs after $name"
}

# Every file written so far reads back equal, on a remounted (cold) mount.
check_sets() {
  local name
  aq_umount "$M"
  aq_mount "$M"
  for name in "$@"; do
    aq_same "$AQ_SCRATCH/src-$name.bin" "$M/$name.bin"
    timeout "$T" diff -r "$AQ_SCRATCH/src-$name" "$M/$name" >/dev/null ||
      aq_fail "small files of $name differ or cannot be read"
  done
}

no_degraded_stripes() {
  timeout "$T" "$AQ_CLI_BIN" status --meta "$AQ_META_ADDR" >"$AQ_SCRATCH/status.txt" 2>&1 || true
  # A status that did not answer would pass the check below: it must have printed its health.
  grep -q "^health " "$AQ_SCRATCH/status.txt" || aq_fail "$1: status printed no health line"
  if grep -q "below k+m" "$AQ_SCRATCH/status.txt"; then
    cat "$AQ_SCRATCH/status.txt" >&2
    FAILED+=("$1: status counts stripes written below k+m although spare servers took them")
  fi
}

aq_start_cluster
aq_mount "$M"

# down
aq_kill_data 0
sleep 3  # past the heartbeat timeout (1.5 s): the map shows data0 down
write_set down 48 71 100
no_degraded_stripes down
grep -h "hand-off\|written degraded" "$AQ_SCRATCH"/mount*.log | tail -3 >&2 || true
aq_kill_data 1
aq_kill_data 2
sleep 3
check_sets down
aq_log "down: every file reads back with data0, data1 and data2 killed"
for i in 0 1 2; do aq_start_data "$i"; done
for i in 0 1 2; do
  aq_wait_for 30 "data$i to register again" bash -c \
    "grep -c 'registered with meta' '$AQ_SCRATCH/data$i.log' | grep -q 2"
done
sleep 3

# full
kill -KILL "${AQ_DATA_PIDS[3]}" 2>/dev/null || true
wait "${AQ_DATA_PIDS[3]}" 2>/dev/null || true
aq_start_data 3 --capacity-bytes 1048576
aq_wait_for 30 "data3 to register again" bash -c \
  "grep -c 'registered with meta' '$AQ_SCRATCH/data3.log' | grep -q 2"
aq_umount "$M"
aq_mount "$M"  # a map with every server up
write_set full 32 72 50
no_degraded_stripes full
aq_kill_data 4
aq_kill_data 5
sleep 3
check_sets down full
aq_log "full: every file reads back with data3 full and data4, data5 killed"
[ ${#FAILED[@]} = 0 ] || aq_fail "${FAILED[@]}"
echo "PASS handoff"
