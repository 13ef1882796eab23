# Shared helpers of the mount tests and the mount benchmark. Source it from bash:
#
#   source "$(dirname "$0")/lib.sh"
#   aq_start_cluster          # 1 aquifer-meta + 6 aquifer-data on 127.0.0.1, port 0, RS(4,2)
#   aq_mount "$AQ_SCRATCH/mnt"   # a foreground aquifer-mount, tracked for teardown
#
# Needs AQ_META_BIN, AQ_DATA_BIN and AQ_MOUNT_BIN (CMake passes them). Every daemon writes its log
# and port file under a fresh scratch directory /tmp/aquifer-mt-XXXX, which also holds the
# cluster key (cluster.key, exported as AQUIFER_KEY_FILE). An EXIT trap lazily unmounts
# every mount (fusermount3 -uz), kills every daemon it started (SIGTERM, then SIGKILL after a
# deadline) and removes the scratch directory; AQ_KEEP=1 keeps it. Waits poll a condition with a
# deadline; nothing sleeps a fixed time to let something happen.
set -euo pipefail

: "${AQ_META_BIN:?set AQ_META_BIN to the aquifer-meta binary}"
: "${AQ_DATA_BIN:?set AQ_DATA_BIN to the aquifer-data binary}"
: "${AQ_MOUNT_BIN:?set AQ_MOUNT_BIN to the aquifer-mount binary}"
AQ_DATA_SERVERS=${AQ_DATA_SERVERS:-6}
AQ_K=${AQ_K:-4}
AQ_M=${AQ_M:-2}
AQ_UNIT_BYTES=${AQ_UNIT_BYTES:-1048576}
AQ_LOG_LEVEL=${AQ_LOG_LEVEL:-info}
T=${AQ_CMD_TIMEOUT:-60}  # seconds allowed to one command that touches a mount

AQ_SCRATCH=$(mktemp -d /tmp/aquifer-mt-XXXX)
# The cluster key (docs/operations.md "The cluster key"): every daemon and mount of the test
# finds it through $AQUIFER_KEY_FILE; a mount's -o key= overrides it. AQ_NO_KEY=1: keyless.
if [ "${AQ_NO_KEY:-0}" != 1 ]; then
  (umask 077 && openssl rand -hex 32 >"$AQ_SCRATCH/cluster.key")
  export AQUIFER_KEY_FILE="$AQ_SCRATCH/cluster.key"
fi
# AQ_TLS=1: TLS on every port (docs/operations.md "TLS"). A CA and a server certificate naming
# "aquifer" are made with the openssl command (so certificates from outside Aquifer are what the
# tier runs on), every daemon gets --tls and the files, and every mount and CLI command finds the
# CA through $AQUIFER_TLS_CA.
declare -a AQ_TLS_FLAGS=()
if [ "${AQ_TLS:-0}" = 1 ]; then
  mkdir -p "$AQ_SCRATCH/tls"
  (
    cd "$AQ_SCRATCH/tls" && umask 077 &&
      openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
        -keyout ca.key -out ca.pem -subj "/O=aquifer test/CN=test CA" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign" &&
      openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -keyout server.key -out server.csr -subj "/O=aquifer test/CN=aquifer" &&
      printf 'subjectAltName=DNS:aquifer,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >ext.cnf &&
      openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 \
        -extfile ext.cnf -out server.pem
  ) >"$AQ_SCRATCH/tls/openssl.log" 2>&1 || { cat "$AQ_SCRATCH/tls/openssl.log" >&2; exit 1; }
  chmod 644 "$AQ_SCRATCH/tls/ca.pem" "$AQ_SCRATCH/tls/server.pem"
  AQ_TLS_FLAGS=(--tls --tls-ca "$AQ_SCRATCH/tls/ca.pem" --tls-cert "$AQ_SCRATCH/tls/server.pem"
                --tls-key "$AQ_SCRATCH/tls/server.key")
  export AQUIFER_TLS_CA="$AQ_SCRATCH/tls/ca.pem"
fi
AQ_META_ADDR=""
AQ_META_PID=""
declare -a AQ_DATA_PIDS=()
declare -a AQ_MOUNTS=()
declare -a AQ_MOUNT_PIDS=()
declare -a AQ_EXTRA_PIDS=()

aq_log() { echo "[$(date +%H:%M:%S.%N | cut -c1-12)] $*" >&2; }

aq_fail() {
  echo "FAIL: $*" >&2
  for f in "$AQ_SCRATCH"/*.log; do
    [ -f "$f" ] || continue
    echo "---- last lines of $f" >&2
    tail -n 15 "$f" >&2 || true
  done
  exit 1
}

# aq_wait_until SECONDS COMMAND...: polls COMMAND (every 20 ms); false when it did not succeed
# within SECONDS (for checks that measure how soon something happens; aq_wait_for fails instead).
aq_wait_until() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@" 2>/dev/null; do
    ((SECONDS < deadline)) || return 1
    sleep 0.02
  done
}

# aq_wait_for SECONDS DESCRIPTION COMMAND...: polls COMMAND (every 50 ms) until it succeeds.
aq_wait_for() {
  local seconds=$1 what=$2
  shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then aq_fail "timed out after ${seconds}s waiting for $what"; fi
    sleep 0.05
  done
}

aq_is_mounted() { grep -q " $1 fuse.aquifer " /proc/mounts; }

# aq_mount_refused NAME [ENV...] CMD [MOUNT ARGS...]: runs CMD META_ADDR DIR -f ... (aquifer-mount
# in the foreground) and expects it to exit non-zero within 30 s without mounting, saying why in
# words of the key, the refusal or TLS (unauthenticated, cluster key, permission, denied; tls_ca
# for a plain mount of a TLS cluster, certificate verify for one that does not trust its CA).
aq_mount_refused() {
  local name=$1
  shift
  local dir=$AQ_SCRATCH/$name
  mkdir -p "$dir"
  local rc=0
  timeout 30 "$@" "$AQ_META_ADDR" "$dir" -f -o meta_wait=2 >"$AQ_SCRATCH/$name.log" 2>&1 || rc=$?
  aq_is_mounted "$dir" && { fusermount3 -uz "$dir"; aq_fail "$name: mounted"; }
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] ||
    aq_fail "$name: aquifer-mount exit $rc (want a failure, not a hang)"
  grep -qi "unauthenticated\|cluster key\|cluster-key\|permission\|denied\|tls_ca\|certificate verify" \
    "$AQ_SCRATCH/$name.log" || aq_fail "$name: no reason given in: $(cat "$AQ_SCRATCH/$name.log")"
  aq_log "$name: refused (exit $rc): $(grep -i 'denied\|key\|unauth\|permission\|tls_ca\|certificate verify' \
    "$AQ_SCRATCH/$name.log" | head -1)"
}
aq_not_mounted() { ! aq_is_mounted "$1"; }
aq_pid_gone() { ! kill -0 "$1" 2>/dev/null; }

# Stops one process we started: SIGTERM, then SIGKILL if it is still there after 10 s.
aq_stop_pid() {
  local pid=$1
  kill -TERM "$pid" 2>/dev/null || return 0
  local deadline=$((SECONDS + 10))
  while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.05; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

aq_teardown() {
  local rc=$?
  set +e
  for m in "${AQ_MOUNTS[@]}"; do
    aq_is_mounted "$m" && fusermount3 -uz "$m" 2>/dev/null
  done
  for pid in "${AQ_EXTRA_PIDS[@]}" "${AQ_MOUNT_PIDS[@]}" "${AQ_DATA_PIDS[@]}" $AQ_META_PID; do
    [ -n "$pid" ] && aq_stop_pid "$pid"
  done
  if [ "${AQ_KEEP:-0}" = 1 ] || { [ $rc -ne 0 ] && [ "${AQ_KEEP_ON_FAIL:-0}" = 1 ]; }; then
    echo "scratch kept: $AQ_SCRATCH" >&2
  else
    rm -rf "$AQ_SCRATCH"
  fi
  exit $rc
}
trap aq_teardown EXIT
trap 'exit 130' INT TERM

aq_read_port_file() { [ -s "$1" ] && grep -q ':' "$1"; }

# aq_start_meta [FAILPOINT]: starts aquifer-meta on its --db with the cluster's flags and waits
# for its port file: on 127.0.0.1 port 0 the first time (setting AQ_META_ADDR), afterwards again on
# that address (clients and data servers know it). FAILPOINT arms AQ_FAILPOINT in that process.
# AQ_META_FLAGS (e.g. "--repair-delay-ms 1000"), split on spaces, adds aquifer-meta flags.
# AQ_HEARTBEAT_TIMEOUT_MS: a data server silent this long is down (1500: failure tests see it
# soon; the benchmark uses the default 6000, so load alone marks no server down).
aq_start_meta() {
  local -a env_fp=()
  [ -n "${1:-}" ] && env_fp=(env "AQ_FAILPOINT=$1")
  rm -f "$AQ_SCRATCH/meta.port"
  "${env_fp[@]}" "$AQ_META_BIN" --listen "${AQ_META_ADDR:-127.0.0.1:0}" --db "$AQ_SCRATCH/meta-db" \
    --port-file "$AQ_SCRATCH/meta.port" --k "$AQ_K" --m "$AQ_M" --unit-bytes "$AQ_UNIT_BYTES" \
    --heartbeat-timeout-ms "${AQ_HEARTBEAT_TIMEOUT_MS:-1500}" --session-ttl-ms 5000 --log-level "$AQ_LOG_LEVEL" \
    --http-listen 127.0.0.1:0 --http-port-file "$AQ_SCRATCH/meta.http" ${AQ_META_FLAGS:-} \
    "${AQ_TLS_FLAGS[@]}" \
    >>"$AQ_SCRATCH/meta.log" 2>&1 &
  AQ_META_PID=$!
  aq_wait_for 20 "aquifer-meta port file" aq_read_port_file "$AQ_SCRATCH/meta.port"
  if [ -z "$AQ_META_ADDR" ]; then
    AQ_META_ADDR=$(cat "$AQ_SCRATCH/meta.port")
  elif [ "$(cat "$AQ_SCRATCH/meta.port")" != "$AQ_META_ADDR" ]; then
    aq_fail "aquifer-meta moved address"
  fi
}

# Starts aquifer-meta and AQ_DATA_SERVERS aquifer-data processes, each its own failure domain,
# and waits until every data server has registered.
aq_start_cluster() {
  aq_start_meta
  local i
  for ((i = 0; i < AQ_DATA_SERVERS; i++)); do aq_start_data "$i"; done
  for ((i = 0; i < AQ_DATA_SERVERS; i++)); do
    aq_wait_for 30 "data$i to register" grep -q "registered with meta" "$AQ_SCRATCH/data$i.log"
    # AQ_TLS=1: a pass must be a pass over TLS. Servers that serve TLS refuse plain clients, so
    # a mount that works afterwards speaks TLS too.
    if [ "${AQ_TLS:-0}" = 1 ] && ! grep -q "TLS on:" "$AQ_SCRATCH/data$i.log"; then
      aq_fail "AQ_TLS=1 but data$i does not serve TLS"
    fi
  done
  aq_log "cluster up: meta=$AQ_META_ADDR data_servers=$AQ_DATA_SERVERS k=$AQ_K m=$AQ_M"
}

# aq_start_data I [FLAG...]: starts data server I (again) on its directory, with more aquifer-data
# flags if given. Its log stays at info: the registration wait reads the "registered with meta"
# line.
aq_start_data() {
  local i=$1
  shift
  mkdir -p "$AQ_SCRATCH/data$i"
  rm -f "$AQ_SCRATCH/data$i.port"
  "$AQ_DATA_BIN" --listen 127.0.0.1:0 --dir "$AQ_SCRATCH/data$i" --meta "$AQ_META_ADDR" \
    --failure-domain "fd$i" --port-file "$AQ_SCRATCH/data$i.port" --log-level info \
    --http-listen 127.0.0.1:0 --http-port-file "$AQ_SCRATCH/data$i.http" "${AQ_TLS_FLAGS[@]}" \
    "$@" \
    >>"$AQ_SCRATCH/data$i.log" 2>&1 &
  AQ_DATA_PIDS[$i]=$!
}

# kill -9 of data server I.
aq_kill_data() {
  local i=$1
  kill -KILL "${AQ_DATA_PIDS[$i]}" 2>/dev/null || true
  wait "${AQ_DATA_PIDS[$i]}" 2>/dev/null || true
  aq_log "killed data$i (pid ${AQ_DATA_PIDS[$i]})"
  AQ_DATA_PIDS[$i]=""
}

# aq_mount DIR [-o OPTIONS]: mounts the cluster on DIR with a foreground aquifer-mount.
# AQ_MOUNT_EXTRA (e.g. cache_leases=1) adds mount options to every mount, to run a whole tier so.
aq_mount() {
  local dir=$1
  shift
  mkdir -p "$dir"
  local n=${#AQ_MOUNTS[@]}
  "$AQ_MOUNT_BIN" "$AQ_META_ADDR" "$dir" -f --log-level "${AQ_MOUNT_LOG_LEVEL:-info}" \
    ${AQ_MOUNT_EXTRA:+-o "$AQ_MOUNT_EXTRA"} "$@" \
    >"$AQ_SCRATCH/mount$n.log" 2>&1 &
  local pid=$!
  AQ_MOUNTS+=("$dir")
  AQ_MOUNT_PIDS+=("$pid")
  local deadline=$((SECONDS + 20))
  until aq_is_mounted "$dir"; do
    kill -0 "$pid" 2>/dev/null || aq_fail "aquifer-mount on $dir exited"
    ((SECONDS < deadline)) || aq_fail "aquifer-mount on $dir not mounted after 20s"
    sleep 0.05
  done
  timeout "$T" stat "$dir" >/dev/null || aq_fail "stat of fresh mount $dir"
}

# Unmounts DIR with fusermount3 -u and waits for its daemon to exit.
aq_umount() {
  local dir=$1 i
  timeout "$T" fusermount3 -u "$dir" || aq_fail "fusermount3 -u $dir"
  for i in "${!AQ_MOUNTS[@]}"; do
    if [ "${AQ_MOUNTS[$i]}" = "$dir" ] && [ -n "${AQ_MOUNT_PIDS[$i]}" ]; then
      aq_wait_for 20 "aquifer-mount of $dir to exit" aq_pid_gone "${AQ_MOUNT_PIDS[$i]}"
      AQ_MOUNT_PIDS[$i]=""
    fi
  done
}

# Writes COUNT MiB of reproducible pseudo-random bytes (seed SEED) to FILE. Logged for replay.
aq_random_file() {
  local file=$1 mib=$2 seed=$3
  aq_log "random file $file ${mib}MiB seed=$seed"
  openssl enc -aes-128-ctr -nosalt -pass "pass:$seed" -pbkdf2 -in <(head -c $((mib * 1048576)) /dev/zero) \
    -out "$file" 2>/dev/null || aq_fail "openssl could not generate $file"
}

# aq_within SECONDS WHAT CMD...: runs CMD in the background (stdout and stderr to
# $AQ_SCRATCH/within.out) and returns its exit status; fails the test when it has not returned
# within SECONDS. No signal is sent: a call stuck inside the mount may not die of one (D state),
# and teardown's stop of the mount daemon ends it.
aq_within() {
  local seconds=$1 what=$2
  shift 2
  "$@" >"$AQ_SCRATCH/within.out" 2>&1 &
  local pid=$! rc=0
  aq_wait_for "$seconds" "$what to return" aq_pid_gone "$pid"
  wait "$pid" || rc=$?
  return $rc
}

aq_same() {  # aq_same A B: byte-for-byte equality
  timeout "$T" cmp "$1" "$2" || aq_fail "$1 and $2 differ"
}
