#!/bin/bash
# Bad input at the edges, live (issue 20 item 4): while a workload on the mount writes, reads back
# and compares files, aquifer_wire_flood (wire_flood.cc) sends AQ_FLOOD_FRAMES (10,000) malformed,
# truncated and random frames and handshakes to every port of aquifer-meta and of each
# aquifer-data: the gRPC ports and both wires. Afterwards: the flood saw no server misbehave
# (no proof for a wrong handshake, no undecodable reply, no hang), the workload had zero errors,
# every daemon is alive, serving and no fatter than 256 MiB more than before, the rejected-frame
# warnings stayed rate-limited, and fsck is clean. AQ_FLOOD_SEED replays a run's frames.
source "$(dirname "$0")/lib.sh"
: "${AQ_WIRE_FLOOD_BIN:?set AQ_WIRE_FLOOD_BIN to the aquifer_wire_flood binary}"
[ -n "${AQUIFER_KEY_FILE:-}" ] || aq_fail "lib.sh made no cluster key"
FRAMES=${AQ_FLOOD_FRAMES:-10000}
SEED=${AQ_FLOOD_SEED:-$((RANDOM * 32768 + RANDOM))}
aq_log "flood seed=$SEED frames=$FRAMES per port (replay: AQ_FLOOD_SEED=$SEED)"

aq_start_cluster
aq_mount "$AQ_SCRATCH/mnt"

# Every port: gRPC from the port files, the wires from each daemon's "serving" line.
wire_port() { grep -o 'wire_port=[0-9]*' "$1" | tail -1 | cut -d= -f2; }
targets=("grpc:$AQ_META_ADDR" "meta:127.0.0.1:$(wire_port "$AQ_SCRATCH/meta.log")")
for ((i = 0; i < AQ_DATA_SERVERS; i++)); do
  aq_wait_for 20 "data$i serving line" grep -q "wire_port=" "$AQ_SCRATCH/data$i.log"
  targets+=("grpc:$(cat "$AQ_SCRATCH/data$i.port")" "chunk:127.0.0.1:$(wire_port "$AQ_SCRATCH/data$i.log")")
done
for t in "${targets[@]}"; do
  [[ "$t" =~ :[0-9]+$ ]] || aq_fail "no port in target $t"
done
aq_log "targets: ${targets[*]}"

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
pids=("$AQ_META_PID" "${AQ_DATA_PIDS[@]}")
declare -A rss_before
for pid in "${pids[@]}"; do rss_before[$pid]=$(rss_kib "$pid"); done

# The workload: files written, read back and compared, and three older files re-read, until the
# stop file appears. Every failure is counted; the result is "rounds errors".
M=$AQ_SCRATCH/mnt
for n in 1 2 3; do
  aq_random_file "$AQ_SCRATCH/keep$n" "$n" "$((SEED + n))"
  timeout "$T" cp "$AQ_SCRATCH/keep$n" "$M/keep$n" || aq_fail "write keep$n before the flood"
done
workload() {
  local rounds=0 errors=0 size
  while [ ! -e "$AQ_SCRATCH/stop" ]; do
    rounds=$((rounds + 1))
    size=$(((rounds * 7919 * 131) % 3000000 + 1))
    head -c "$size" /dev/urandom >"$AQ_SCRATCH/w.src"
    timeout "$T" cp "$AQ_SCRATCH/w.src" "$M/w$((rounds % 8))" || { errors=$((errors + 1)); echo "cp failed round $rounds" >&2; }
    timeout "$T" cmp -s "$AQ_SCRATCH/w.src" "$M/w$((rounds % 8))" || { errors=$((errors + 1)); echo "cmp failed round $rounds" >&2; }
    timeout "$T" cmp -s "$AQ_SCRATCH/keep$((rounds % 3 + 1))" "$M/keep$((rounds % 3 + 1))" || { errors=$((errors + 1)); echo "keep cmp failed round $rounds" >&2; }
    timeout "$T" ls -l "$M" >/dev/null || { errors=$((errors + 1)); echo "ls failed round $rounds" >&2; }
  done
  echo "$rounds $errors" >"$AQ_SCRATCH/workload.result"
}
workload 2>"$AQ_SCRATCH/workload.err" &
AQ_EXTRA_PIDS+=($!)
WORKLOAD_PID=$!

start=$SECONDS
rc=0
timeout 200 "$AQ_WIRE_FLOOD_BIN" --key "$AQUIFER_KEY_FILE" --frames "$FRAMES" --seed "$SEED" \
  "${targets[@]}" >"$AQ_SCRATCH/flood.out" 2>&1 || rc=$?
flood_seconds=$((SECONDS - start))
cat "$AQ_SCRATCH/flood.out" >&2
touch "$AQ_SCRATCH/stop"
aq_wait_for 120 "the workload to finish its round" aq_pid_gone "$WORKLOAD_PID"
[ "$rc" = 0 ] || aq_fail "the flood saw a server misbehave (exit $rc, seed $SEED)"
grep -q "^wire flood: $((FRAMES * ${#targets[@]})) cases" "$AQ_SCRATCH/flood.out" ||
  aq_fail "the flood did not send $FRAMES cases to each of ${#targets[@]} ports"

read -r rounds errors <"$AQ_SCRATCH/workload.result"
aq_log "workload: $rounds rounds, $errors errors, during a ${flood_seconds}s flood"
[ "$errors" = 0 ] || aq_fail "workload errors during the flood: $(head -5 "$AQ_SCRATCH/workload.err")"
[ "$rounds" -ge 3 ] || aq_fail "the workload ran only $rounds rounds"

# Every daemon alive, no fatter, and serving (the flood checked each port at its end; the mount
# writes and reads again here).
for pid in "${pids[@]}"; do
  kill -0 "$pid" 2>/dev/null || aq_fail "daemon $pid died in the flood"
  grown=$(($(rss_kib "$pid") - ${rss_before[$pid]}))
  aq_log "pid $pid rss grew ${grown} KiB"
  [ "$grown" -lt $((256 * 1024)) ] || aq_fail "daemon $pid grew $grown KiB in the flood"
done
aq_random_file "$AQ_SCRATCH/after" 4 "$((SEED + 9))"
timeout "$T" cp "$AQ_SCRATCH/after" "$M/after" || aq_fail "write after the flood"
aq_same "$AQ_SCRATCH/after" "$M/after"
for n in 1 2 3; do aq_same "$AQ_SCRATCH/keep$n" "$M/keep$n"; done

# Rejected frames and refused handshakes are logged at most once per 10 s per listener.
limit=$((flood_seconds / 10 + 3))
for log in "$AQ_SCRATCH"/meta.log "$AQ_SCRATCH"/data*.log; do
  n_rej=$(grep -c "rejected a frame" "$log" || true)
  n_ref=$(grep -c "refused unauthenticated connection" "$log" || true)
  aq_log "$(basename "$log"): $n_rej rejected-frame lines, $n_ref refused-connection lines"
  [ "$n_rej" -le "$limit" ] || aq_fail "$log: $n_rej rejected-frame lines in ${flood_seconds}s (limit $limit)"
  [ "$n_ref" -le "$limit" ] || aq_fail "$log: $n_ref refused-connection lines in ${flood_seconds}s"
done

if [ -n "${AQ_CLI_BIN:-}" ]; then
  timeout "$T" "$AQ_CLI_BIN" fsck --meta "$AQ_META_ADDR" >"$AQ_SCRATCH/fsck.txt" 2>&1 ||
    aq_fail "fsck after the flood: $(tail -5 "$AQ_SCRATCH/fsck.txt")"
  aq_log "fsck: $(tail -1 "$AQ_SCRATCH/fsck.txt")"
fi
aq_log "PASS: ${#targets[@]} ports x $FRAMES cases in ${flood_seconds}s, workload $rounds rounds, 0 errors"
