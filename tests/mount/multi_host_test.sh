#!/bin/bash
# Several hosts for real (issue 21 item 8): the steps of docs/operations.md "A multi-host install"
# on nine network namespaces of this machine joined by a bridge, each daemon on its own address
# of 198.18.0.0/24 (the benchmarking range; nothing leaves the machine):
#
#   aqm-X-meta  198.18.0.10      aquifer-meta --config (deploy/aquifer-meta.toml)
#   aqm-X-d1..6 198.18.0.11..16  aquifer-data --config (deploy/aquifer-data.toml), one per "host"
#   aqm-X-c1,c2 198.18.0.21,22   aquifer-mount 198.18.0.10:7400 (options of deploy/aquifer-mount.conf)
#   aqm-X-sw    -                the switch: bridge br0 and the host end of every veth
#
# The configs are the deploy/ examples with only listen, http_listen, db/dir, port_file,
# backup_root, meta and failure_domain rewritten, and no flag beside --config (mount 2 adds
# http_listen to read its degraded-read counter). The mounts run under `nsenter --net` (only the
# network namespace: the FUSE mount is in this shell's mount namespace). Checks, in order:
#   - every data server registered its storage-network address 198.18.0.1I:7500, none a loopback
#     one (`aquifer status --meta 198.18.0.10:7400` run on c2's network, exit 0, 6 up);
#   - a tree (3,000 small files, 4 random files of 8-32 MiB) copied with `cp -a` on mount 1 reads
#     back on mount 2 with every path, type, size, mode, mtime and sha256 equal to the source;
#   - both clients talk to the metadata wire (198.18.0.10:7401) and the chunk wire of every data
#     server (:7501) across the bridge, not only gRPC;
#   - data server 3's host dies (kill -9, its namespace deleted: its address stops answering at
#     all, no RST). Mount 2, mounted afresh just before (cold caches), reads every file back equal
#     to the source at once, while the cluster map still says 3 is up (heartbeat_timeout_ms is
#     6 s); its degraded-read counter moves;
#   - `aquifer status --meta` from c2 then exits non-zero (4 degraded; 3, waiting for a server,
#     once the 30 s repair delay has passed with no spare failure domain) and lists
#     198.18.0.13:7500 DOWN;
#   - mount 2 mounted again (cold, the map now says 3 is down) reads every file back equal.
# AQ_MH_SEED replays a run (the tree's and the big files' seed is logged). Needs root, ip, nsenter,
# ss, curl, fusermount3 and /usr/bin/python3.
source "$(dirname "$0")/lib.sh"
: "${AQ_CLI_BIN:?set AQ_CLI_BIN to the aquifer CLI binary (status)}"
HERE=$(cd "$(dirname "$0")" && pwd)
DEPLOY=$HERE/../../deploy
TOOL="/usr/bin/python3 $HERE/ingest_tool.py"
SEED=${AQ_MH_SEED:-$RANDOM}
SMALL_FILES=${AQ_MH_FILES:-3000}
S=$AQ_SCRATCH
NS=aqm-${S##*-}  # aqm-XXXX, the scratch directory's random suffix
SW=$NS-sw
META_IP=198.18.0.10
META=$META_IP:7400
M1=$S/m1
M2=$S/m2
declare -a MH_NETNS=()
declare -A MOUNT_PID=()

mh_teardown() {
  local rc=$?
  set +e
  local m pid n
  for m in "${AQ_MOUNTS[@]}"; do aq_is_mounted "$m" && fusermount3 -uz "$m" 2>/dev/null; done
  for pid in "${AQ_MOUNT_PIDS[@]}" "${AQ_DATA_PIDS[@]}" $AQ_META_PID; do
    [ -n "$pid" ] && aq_stop_pid "$pid"
  done
  # Deleting a namespace deletes the veth ends in it and so their peers; the switch's namespace
  # holds the bridge.
  for n in "${MH_NETNS[@]}"; do
    [ -e "/run/netns/$n" ] && ip netns del "$n" 2>/dev/null
  done
  (exit $rc)
  aq_teardown  # the rest (nothing left to stop) and the scratch directory; exits with rc
}
trap mh_teardown EXIT

# since T0: seconds (0.1) since EPOCHREALTIME was T0.
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.1f", b - a}'; }
t_start=$EPOCHREALTIME
phase_start=$EPOCHREALTIME
phase() {  # phase WHAT: logs WHAT with the seconds the phase took (since the previous one)
  aq_log "$1 ($(since "$phase_start") s)"
  phase_start=$EPOCHREALTIME
}

# --- the network -----------------------------------------------------------------------------------
# host NAME IP: a namespace with lo up and eth0 (IP/24) whose peer vNAME is a port of the bridge.
host() {
  local name=$1 ip=$2
  ip netns add "$NS-$name" || aq_fail "ip netns add $NS-$name"
  MH_NETNS+=("$NS-$name")
  ip -n "$SW" link add "v$name" type veth peer name eth0 netns "$NS-$name" || aq_fail "veth of $name"
  ip -n "$SW" link set "v$name" master br0 up || aq_fail "bridge port v$name"
  ip -n "$NS-$name" link set lo up
  ip -n "$NS-$name" addr add "$ip/24" dev eth0 || aq_fail "address $ip on $name"
  ip -n "$NS-$name" link set eth0 up || aq_fail "eth0 up on $name"
}
ip netns add "$SW" || aq_fail "ip netns add $SW (needs root)"
MH_NETNS+=("$SW")
ip -n "$SW" link add br0 type bridge || aq_fail "bridge in $SW"
ip -n "$SW" link set br0 up
host meta $META_IP
for i in 1 2 3 4 5 6; do host "d$i" "198.18.0.1$i"; done
host c1 198.18.0.21
host c2 198.18.0.22
# A closed port answering "connection refused" shows the path works both ways.
reachable() {
  local out
  out=$(ip netns exec "$NS-$1" bash -c "exec 3<>/dev/tcp/$2/9" 2>&1) || true
  grep -q refused <<<"$out"
}
aq_wait_for 20 "198.18.0.10 to answer from c1" reachable c1 $META_IP
aq_wait_for 20 "198.18.0.16 to answer from c2" reachable c2 198.18.0.16
phase "network: namespaces $NS-{sw,meta,d1..d6,c1,c2}, bridge br0 in $NS-sw"

# --- configs from deploy/ ----------------------------------------------------------------------------
# set_key FILE KEY VALUE: rewrites `KEY = "..."` (keeping a trailing comment); fails when FILE has
# no such line, so a renamed key in deploy/ breaks this test rather than being silently ignored.
set_key() {
  local file=$1 key=$2 value=$3
  grep -q "^$key = \"" "$file" || aq_fail "$file has no string key $key"
  sed -i "s|^$key = \"[^\"]*\"|$key = \"$value\"|" "$file"
  grep -q "^$key = \"$value\"" "$file" || aq_fail "could not set $key in $file"
}
cp "$DEPLOY/aquifer-meta.toml" "$S/meta.toml"
set_key "$S/meta.toml" listen "$META"
set_key "$S/meta.toml" http_listen "$META_IP:7480"
set_key "$S/meta.toml" db "$S/meta-db"
set_key "$S/meta.toml" port_file "$S/meta.port"
set_key "$S/meta.toml" backup_root "$S/meta-backups"
for i in 1 2 3 4 5 6; do
  f=$S/data$i.toml
  cp "$DEPLOY/aquifer-data.toml" "$f"
  set_key "$f" listen "198.18.0.1$i:7500"
  set_key "$f" http_listen "198.18.0.1$i:7580"
  set_key "$f" dir "$S/data$i"
  set_key "$f" meta "$META"
  set_key "$f" failure_domain "host$i"
  set_key "$f" port_file "$S/data$i.port"
  mkdir -p "$S/data$i"
done
# The mount takes deploy/aquifer-mount.conf's OPTIONS with its log file moved into the scratch
# directory, as aquifer-mount@.service passes them.
MOUNT_OPTS=$(sed -n 's/^OPTIONS=//p' "$DEPLOY/aquifer-mount.conf")
[ -n "$MOUNT_OPTS" ] || aq_fail "deploy/aquifer-mount.conf has no OPTIONS line"
[ "$(grep -c '^wire_port = 7401' "$S/meta.toml")" = 1 ] || aq_fail "meta.toml: wire_port is not 7401"
[ "$(grep -c '^wire_port = 7501' "$S/data1.toml")" = 1 ] || aq_fail "data.toml: wire_port is not 7501"

# --- daemons -------------------------------------------------------------------------------------
ip netns exec "$NS-meta" "$AQ_META_BIN" --config "$S/meta.toml" >>"$S/meta.log" 2>&1 &
AQ_META_PID=$!
aq_wait_for 20 "aquifer-meta's port file" aq_read_port_file "$S/meta.port"
[ "$(cat "$S/meta.port")" = "$META" ] || aq_fail "aquifer-meta serves $(cat "$S/meta.port"), not $META"
for i in 1 2 3 4 5 6; do
  ip netns exec "$NS-d$i" "$AQ_DATA_BIN" --config "$S/data$i.toml" >>"$S/data$i.log" 2>&1 &
  AQ_DATA_PIDS[$i]=$!
done
for i in 1 2 3 4 5 6; do
  aq_wait_for 30 "data server $i to register" grep -q "registered with meta" "$S/data$i.log"
  grep -q "registered with meta=$META .* address=198\.18\.0\.1$i:7500 domain=host$i " "$S/data$i.log" ||
    aq_fail "data server $i: $(grep 'registered with meta' "$S/data$i.log")"
done
# status_from CLIENT: `aquifer status --meta` run on that client's network; its exit code in RC.
status_from() {
  RC=0
  timeout "$T" nsenter --net="/run/netns/$NS-$1" "$AQ_CLI_BIN" status --meta "$META" \
    >"$S/status.out" 2>&1 || RC=$?
}
all_up() { status_from c2 && [ "$RC" = 0 ] && grep -q "6 registered, 6 up, 0 down" "$S/status.out"; }
aq_wait_for 30 "status from c2 to report 6 servers up and exit 0" all_up
for i in 1 2 3 4 5 6; do
  grep -Eq "^ +[0-9]+ +198\.18\.0\.1$i:7500 +host$i +up " "$S/status.out" ||
    aq_fail "status does not list data server $i as 198.18.0.1$i:7500 host$i up: $(cat "$S/status.out")"
done
grep -q "127\.0\.0\.1" "$S/status.out" && aq_fail "status names a loopback address: $(cat "$S/status.out")"
phase "daemons: meta on $META, data servers on 198.18.0.11..16:7500, all registered with their own address"

# --- mounts --------------------------------------------------------------------------------------
# mount_from CLIENT DIR [EXTRA_OPTS]: aquifer-mount in CLIENT's network namespace only.
mount_from() {
  local client=$1 dir=$2 extra=${3:+,$3}
  mkdir -p "$dir"
  local n=${#AQ_MOUNTS[@]}
  local opts
  opts=$(sed "s|log_file=[^,]*|log_file=$S/mount-$client-$n.log|" <<<"$MOUNT_OPTS")
  nsenter --net="/run/netns/$NS-$client" "$AQ_MOUNT_BIN" "$META" "$dir" -f -o "$opts$extra" \
    >"$S/mount-$client-$n.out" 2>&1 &
  local pid=$!
  AQ_MOUNTS+=("$dir")
  AQ_MOUNT_PIDS+=("$pid")
  MOUNT_PID[$dir]=$pid
  local deadline=$((SECONDS + 20))
  until aq_is_mounted "$dir"; do
    kill -0 "$pid" 2>/dev/null || aq_fail "aquifer-mount in $client on $dir exited: $(cat "$S/mount-$client-$n.out")"
    ((SECONDS < deadline)) || aq_fail "aquifer-mount in $client on $dir not mounted after 20s"
    sleep 0.05
  done
  timeout "$T" stat "$dir" >/dev/null || aq_fail "stat of fresh mount $dir"
}
mount_from c1 "$M1"
mount_from c2 "$M2" "http_listen=198.18.0.22:0,http_port_file=$S/m2.http"
phase "mounts: $M1 from c1 (198.18.0.21), $M2 from c2 (198.18.0.22), options of deploy/aquifer-mount.conf"

# --- ingest on mount 1, read-back on mount 2 -------------------------------------------------------
aq_log "seed=$SEED (AQ_MH_SEED replays it)"
mkdir -p "$S/src/big"
$TOOL tree "$S/src/small" "$SMALL_FILES" "$SEED" || aq_fail "making the source tree"
for mib in 8 16 24 32; do aq_random_file "$S/src/big/r$mib.bin" "$mib" "$SEED-$mib"; done
$TOOL manifest "$S/src" >"$S/want.txt" || aq_fail "manifest of the source"
entries=$(wc -l <"$S/want.txt")
bytes=$(du -sb "$S/src" | cut -f1)
phase "source: $entries entries, $((bytes >> 20)) MiB"
timeout 200 cp -a "$S/src" "$M1/t" 2>"$S/cp.err" || aq_fail "cp -a onto mount 1: $(head -c 2000 "$S/cp.err")"
phase "cp -a of the source onto mount 1 (c1)"
# compare_on WHAT: manifest of $M2/t (its sha256 read through mount 2) equal to the source's.
compare_on() {
  timeout 200 $TOOL manifest "$M2/t" >"$S/got.txt" 2>"$S/got.err" ||
    aq_fail "$1: manifest of mount 2: $(head -c 2000 "$S/got.err")"
  if ! cmp -s "$S/want.txt" "$S/got.txt"; then
    { diff "$S/want.txt" "$S/got.txt" || true; } | head -20 >&2
    aq_fail "$1: mount 2's tree differs from the source"
  fi
}
compare_on "read-back"
phase "read-back on mount 2 (c2): all $entries entries equal to the source (paths, sizes, modes, mtimes, sha256)"

# Both clients reached the metadata wire and the chunk wire of every data server over the bridge.
wires_used() {
  local client=$1 peers
  peers=$(nsenter --net="/run/netns/$NS-$client" ss -tnH state established | awk '{print $4}')
  grep -qx "$META_IP:7401" <<<"$peers" || { echo "$client: no connection to $META_IP:7401"; return 1; }
  for i in 1 2 3 4 5 6; do
    grep -qx "198.18.0.1$i:7501" <<<"$peers" || { echo "$client: no connection to 198.18.0.1$i:7501"; return 1; }
  done
}
for c in c1 c2; do
  why=$(wires_used "$c") || aq_fail "$why; established: $(nsenter --net="/run/netns/$NS-$c" ss -tnH state established)"
done
aq_log "c1 and c2 hold connections to $META_IP:7401 (metadata wire) and 198.18.0.11..16:7501 (chunk wire)"

# --- a data host dies ------------------------------------------------------------------------------
degraded_reads() {  # mount 2's aquifer_client_degraded_reads_total, all causes
  nsenter --net="/run/netns/$NS-c2" curl -sf "http://$(cat "$S/m2.http")/metrics" |
    awk '/^aquifer_client_degraded_reads_total/ {s += $2} END {printf "%d\n", s}'
}
remount_2() {  # mount 2 afresh: no page cache, no cached attributes
  timeout "$T" fusermount3 -u "$M2" || aq_fail "fusermount3 -u $M2"
  aq_wait_for 20 "mount 2's aquifer-mount to exit" aq_pid_gone "${MOUNT_PID[$M2]}"
  rm -f "$S/m2.http"
  mount_from c2 "$M2" "http_listen=198.18.0.22:0,http_port_file=$S/m2.http"
  aq_wait_for 10 "mount 2's metrics" aq_read_port_file "$S/m2.http"
}
remount_2
held=$(du -sb "$S/data3" | cut -f1)
((held >= bytes / 8)) || aq_fail "data server 3 holds only $held bytes of a $bytes-byte ingest"
kill -KILL "${AQ_DATA_PIDS[3]}"
wait "${AQ_DATA_PIDS[3]}" 2>/dev/null || true
AQ_DATA_PIDS[3]=""
ip netns del "$NS-d3" || aq_fail "ip netns del $NS-d3"
t_kill=$EPOCHREALTIME
phase "data server 3 (198.18.0.13, $((held >> 20)) MiB of chunks) killed -9 and its namespace deleted"

# At once, well inside heartbeat_timeout_ms (6 s in the config): the cluster map still says 3 is
# up, so mount 2 finds by itself that 198.18.0.13 no longer answers (no RST: the address is gone).
before=$(degraded_reads)
compare_on "read-back right after the kill"
after=$(degraded_reads)
((after > before)) || aq_fail "mount 2's aquifer_client_degraded_reads_total did not move ($before -> $after)"
phase "read-back on mount 2 (cold) right after the kill: all $entries entries equal; degraded stripe reads $before -> $after"

one_down() { status_from c2; [ "$RC" != 0 ] && grep -q "6 registered, 5 up, 1 down" "$S/status.out"; }
aq_wait_for 30 "status from c2 to report 1 server down" one_down
case $RC in
  3 | 4) ;;
  *) aq_fail "status exit code $RC with one of six servers down (want 4 degraded or 3 waiting for a server): $(cat "$S/status.out")" ;;
esac
grep -Eq "^ +[0-9]+ +198\.18\.0\.13:7500 +host3 +DOWN " "$S/status.out" ||
  aq_fail "status does not list 198.18.0.13:7500 down: $(cat "$S/status.out")"
phase "status from c2, $(since "$t_kill") s after the kill: exit $RC, $(grep '^health' "$S/status.out" | tr -s ' ')"

# Mount 2 afresh again, now with a cluster map that says 3 is down.
remount_2
before=$(degraded_reads)
compare_on "read-back with 3 marked down"
after=$(degraded_reads)
((after > before)) || aq_fail "mount 2's aquifer_client_degraded_reads_total did not move ($before -> $after)"
phase "read-back on mount 2 mounted again (cold), 3 marked down: all $entries entries equal; degraded stripe reads $before -> $after"

echo "PASS multi_host ($(since "$t_start") s)"
