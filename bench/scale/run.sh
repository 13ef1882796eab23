#!/usr/bin/env bash
# Aggregate read throughput with 6 and then 9 data servers, each data server limited to the same
# CPU share, several parallel readers through the FUSE mount. Reports MiB/s for 6 and 9 and the
# ratio against linear scaling (9/6 = 1.5x), as a table and JSON.
#
# Each size runs on its own fresh local cluster (`aquifer cluster up`, RS 4+2, 1 MiB units) with
# the same data set (FILES files of FILE_MIB MiB, written through the mount), so the 9-server run
# has its 64 PGs spread over 9 servers. CPU limit per data server, first that works:
#   cgroup v2 cpu.max under /sys/fs/cgroup (one child group per server), else cgroup v1
#   cpu.cfs_quota_us under /sys/fs/cgroup/cpu, else taskset (each server pinned to one CPU,
#   round robin; a weaker limit: servers on one CPU share it).
# Reads use O_DIRECT (dd iflag=direct) so the client's page cache does not serve them; the data
# servers' page cache stays warm (the servers' CPU, not the disk, is what is limited).
#
# usage: bench/scale/run.sh BUILD_DIR [--cpu-pct 15] [--files 24] [--file-mib 24] [--readers 6]
#                           [--passes 3] [--json OUT.json]
set -euo pipefail
BUILD=$(cd "${1:?usage: run.sh BUILD_DIR [options]}" && pwd); shift
CPU_PCT=15 FILES=24 FILE_MIB=24 READERS=6 PASSES=3 JSON=""
while [ $# -gt 0 ]; do
  case "$1" in
    --cpu-pct) CPU_PCT=$2; shift 2 ;;
    --files) FILES=$2; shift 2 ;;
    --file-mib) FILE_MIB=$2; shift 2 ;;
    --readers) READERS=$2; shift 2 ;;
    --passes) PASSES=$2; shift 2 ;;
    --json) JSON=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
AQ="$BUILD/src/cli/aquifer"
SCRATCH=$(mktemp -d /tmp/aquifer-scalebench-XXXXXX)
CG_DIRS=()
ROOT=""

cleanup() {
  local rc=$?
  [ -n "$ROOT" ] && "$AQ" cluster down --root "$ROOT" --grace-ms 3000 >/dev/null 2>&1 || true
  for d in "${CG_DIRS[@]:-}"; do [ -n "$d" ] && rmdir "$d" 2>/dev/null || true; done
  rm -rf "$SCRATCH"
  exit $rc
}
trap cleanup EXIT

# Which CPU limit works here.
LIMIT=taskset
if [ -f /sys/fs/cgroup/cgroup.controllers ] && grep -qw cpu /sys/fs/cgroup/cgroup.controllers \
   && mkdir /sys/fs/cgroup/aquifer-scale-probe 2>/dev/null; then
  rmdir /sys/fs/cgroup/aquifer-scale-probe; LIMIT=cgroup-v2
elif [ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ] && mkdir /sys/fs/cgroup/cpu/aquifer-scale-probe 2>/dev/null; then
  rmdir /sys/fs/cgroup/cpu/aquifer-scale-probe; LIMIT=cgroup-v1
fi
NCPU=$(nproc)

limit_pid() {  # limit_pid NAME PID
  local name=$1 pid=$2 quota=$((CPU_PCT * 1000)) d
  case $LIMIT in
    cgroup-v2) d=/sys/fs/cgroup/aquifer-scale-$name-$$; mkdir -p "$d"; CG_DIRS+=("$d")
               echo "$quota 100000" > "$d/cpu.max"; echo "$pid" > "$d/cgroup.procs" ;;
    cgroup-v1) d=/sys/fs/cgroup/cpu/aquifer-scale-$name-$$; mkdir -p "$d"; CG_DIRS+=("$d")
               echo 100000 > "$d/cpu.cfs_period_us"; echo "$quota" > "$d/cpu.cfs_quota_us"
               for t in /proc/"$pid"/task/*; do echo "${t##*/}" > "$d/tasks" 2>/dev/null || true; done ;;
    taskset)   taskset -a -p -c $(( ${name#ds} % NCPU )) "$pid" >/dev/null ;;
  esac
}
release_limits() {  # move processes back and drop the groups
  for d in "${CG_DIRS[@]:-}"; do
    [ -n "$d" ] || continue
    if [ $LIMIT = cgroup-v2 ]; then
      for p in $(cat "$d/cgroup.procs" 2>/dev/null); do echo "$p" > /sys/fs/cgroup/cgroup.procs; done
    else
      for p in $(cat "$d/tasks" 2>/dev/null); do echo "$p" > /sys/fs/cgroup/cpu/tasks 2>/dev/null || true; done
    fi
    rmdir "$d" 2>/dev/null || true
  done
  CG_DIRS=()
}

# The data set, once, on local disk.
mkdir -p "$SCRATCH/src"
for i in $(seq 1 "$FILES"); do head -c $((FILE_MIB << 20)) /dev/urandom > "$SCRATCH/src/f$i"; done
TOTAL_MIB=$((FILES * FILE_MIB))

read_pass() {  # prints MiB/s of one pass of READERS parallel readers over every file
  local mnt=$1 start end pids=()
  start=$(date +%s.%N)
  for r in $(seq 0 $((READERS - 1))); do
    ( for i in $(seq 1 "$FILES"); do
        if [ $(( (i - 1) % READERS )) -eq "$r" ]; then
          dd if="$mnt/f$i" of=/dev/null bs=4M iflag=direct status=none
        fi
      done ) &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  end=$(date +%s.%N)
  python3 -c "print(f'{$TOTAL_MIB / ($end - $start):.1f}')"
}

declare -A RESULT
for N in 6 9; do
  ROOT="$SCRATCH/c$N"
  echo "== $N data servers: cluster up, write $FILES x $FILE_MIB MiB" >&2
  "$AQ" cluster up --root "$ROOT" --data-servers "$N" --bin-dir "$BUILD" --log-level warn \
    --timeout-ms 60000 >/dev/null
  for i in $(seq 1 "$FILES"); do cp "$SCRATCH/src/f$i" "$ROOT/mnt/f$i"; done
  sync
  dd if="$ROOT/mnt/f1" of=/dev/null bs=4M iflag=direct status=none \
    || { echo "O_DIRECT reads fail on the mount" >&2; exit 1; }
  for i in $(seq 1 "$FILES"); do cmp -s "$SCRATCH/src/f$i" "$ROOT/mnt/f$i" || { echo "f$i differs" >&2; exit 1; }; done
  for d in $(seq 1 "$N"); do
    limit_pid "ds$d" "$(python3 -c "import json; print(json.load(open('$ROOT/cluster.json'))['data_servers'][$d-1]['pid'])")"
  done
  best=0 all=""
  for p in $(seq 1 "$PASSES"); do
    v=$(read_pass "$ROOT/mnt"); all="$all $v"
    echo "   pass $p: $v MiB/s" >&2
    best=$(python3 -c "print(max($best, $v))")
  done
  RESULT[$N]=$best
  RESULT[${N}_passes]=$all
  release_limits
  "$AQ" cluster down --root "$ROOT" --grace-ms 3000 >/dev/null
  rm -rf "$ROOT"; ROOT=""
done

python3 - "$JSON" <<PY
import json, sys
r6, r9 = float("${RESULT[6]}"), float("${RESULT[9]}")
ratio = r9 / r6 if r6 else 0.0
out = {"bench": "scale_read", "cpu_limit": "$LIMIT", "cpu_pct_per_data_server": $CPU_PCT,
       "readers": $READERS, "files": $FILES, "file_mib": $FILE_MIB, "passes": $PASSES,
       "mib_s": {"6": r6, "9": r9},
       "passes_mib_s": {"6": [float(x) for x in "${RESULT[6_passes]}".split()],
                        "9": [float(x) for x in "${RESULT[9_passes]}".split()]},
       "ratio_9_vs_6": round(ratio, 3), "linear_ratio": 1.5,
       "fraction_of_linear": round(ratio / 1.5, 3)}
print(f"| data servers | read MiB/s (best of {out['passes']}) |")
print("|---|---|")
print(f"| 6 | {r6:.1f} |")
print(f"| 9 | {r9:.1f} |")
print(f"ratio 9/6 = {ratio:.2f}x (linear 1.50x: {ratio/1.5*100:.0f}% of linear); "
      f"limit {out['cpu_limit']} {out['cpu_pct_per_data_server']}% CPU per data server, "
      f"{out['readers']} readers, {out['files']} x {out['file_mib']} MiB")
print(json.dumps(out))
if sys.argv[1]:
    open(sys.argv[1], "w").write(json.dumps(out, indent=2) + "\n")
PY
