#!/bin/bash
# fio with --verify=crc32c through the mount: sequential and random, 1 MiB and 4 KiB blocks.
# Each job writes with verification headers, then reads every block back and checks it; the files
# are re-verified after a remount (cold page cache: the bytes come from the data servers).
source "$(dirname "$0")/lib.sh"
M=$AQ_SCRATCH/mnt
aq_start_cluster
aq_mount "$M"
run_fio() {  # name rw bs size
  timeout 150 fio --name="$1" --directory="$M" --filename="$1.dat" --rw="$2" --bs="$3" --size="$4" \
    --ioengine=psync --verify=crc32c --verify_fatal=1 --do_verify=1 --randseed=4242 \
    --output="$AQ_SCRATCH/$1.fio" >/dev/null 2>&1 || { cat "$AQ_SCRATCH/$1.fio" >&2; aq_fail "fio $1"; }
  grep -q "err= 0" "$AQ_SCRATCH/$1.fio" || aq_fail "fio $1 reported an error"
  aq_log "fio $1: $(grep -E '^ +(READ|WRITE):' "$AQ_SCRATCH/$1.fio" | sed 's/  */ /g' | cut -c1-60 | tr '\n' ';')"
}
run_fio seq1m write 1M 64M
run_fio rand1m randwrite 1M 64M
run_fio seq4k write 4k 16M
run_fio rand4k randwrite 4k 8M
aq_umount "$M"
aq_mount "$M"
for job in seq1m:write:1M:64M rand1m:randwrite:1M:64M seq4k:write:4k:16M rand4k:randwrite:4k:8M; do
  IFS=: read -r name rw bs size <<<"$job"
  timeout 150 fio --name="$name" --directory="$M" --filename="$name.dat" --rw="$rw" --bs="$bs" \
    --size="$size" --ioengine=psync --verify=crc32c --verify_fatal=1 --verify_only --randseed=4242 \
    --output="$AQ_SCRATCH/$name.reverify" >/dev/null 2>&1 || { cat "$AQ_SCRATCH/$name.reverify" >&2; aq_fail "re-verify $name after remount"; }
done
echo "PASS fio_verify"
