#!/bin/bash
# The cluster key through real processes (docs/design.md "Cluster identity"): a mount with the
# cluster's key works; a mount with a wrong key, or with none, fails to mount; raw connections
# with no or a wrong handshake to the metadata wire, a chunk wire and a gRPC port are refused
# at once, each server logging one rate-limited line, and the mount keeps working meanwhile.
source "$(dirname "$0")/lib.sh"
[ -n "${AQUIFER_KEY_FILE:-}" ] || aq_fail "lib.sh made no cluster key"
aq_start_cluster
aq_mount "$AQ_SCRATCH/mnt"
aq_random_file "$AQ_SCRATCH/v1" 3 41
timeout "$T" cp "$AQ_SCRATCH/v1" "$AQ_SCRATCH/mnt/f" || aq_fail "write with the right key"
aq_same "$AQ_SCRATCH/v1" "$AQ_SCRATCH/mnt/f"

(umask 077 && openssl rand -hex 32 >"$AQ_SCRATCH/wrong.key")
aq_mount_refused wrong_key "$AQ_MOUNT_BIN" -o key="$AQ_SCRATCH/wrong.key"
aq_mount_refused no_key env -u AQUIFER_KEY_FILE "$AQ_MOUNT_BIN"
# A key file others can read is refused before anything is sent.
cp "$AQ_SCRATCH/wrong.key" "$AQ_SCRATCH/open.key" && chmod 644 "$AQ_SCRATCH/open.key"
aq_mount_refused open_key "$AQ_MOUNT_BIN" -o key="$AQ_SCRATCH/open.key"

# Raw connections: 200 to each port, half sending nothing, half 64 bytes of garbage.
META_WIRE=$(grep -o 'wire_port=[0-9]*' "$AQ_SCRATCH/meta.log" | tail -1 | cut -d= -f2)
DATA_WIRE=$(grep -o 'wire_port=[0-9]*' "$AQ_SCRATCH/data0.log" | tail -1 | cut -d= -f2)
[ -n "$META_WIRE" ] && [ -n "$DATA_WIRE" ] || aq_fail "wire ports not logged"
python3 - "$META_WIRE" "$DATA_WIRE" <<'PY' || aq_fail "raw connections"
import socket, sys
for port in map(int, sys.argv[1:]):
    for i in range(200):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        hello = s.recv(48, socket.MSG_WAITALL)
        assert len(hello) == 48 and hello[6] & 1, "hello without the auth flag: %r" % hello
        if i % 2:
            s.sendall(bytes(range(64)))
            try:
                answer = s.recv(1)
            except ConnectionResetError:
                answer = b""
            assert answer == b"", "a garbage proof got an answer"
        s.close()
PY
# gRPC without a token: grpc's own python package may be absent, so use the CLI with no key.
if [ -n "${AQ_CLI_BIN:-}" ]; then
  if env -u AQUIFER_KEY_FILE timeout 30 "$AQ_CLI_BIN" server list --meta "$AQ_META_ADDR" \
    >"$AQ_SCRATCH/cli_nokey.txt" 2>&1; then
    aq_fail "aquifer server list without a key succeeded: $(cat "$AQ_SCRATCH/cli_nokey.txt")"
  fi
  grep -qi "unauthenticated\|cluster-key token" "$AQ_SCRATCH/cli_nokey.txt" ||
    aq_fail "cli without a key: $(cat "$AQ_SCRATCH/cli_nokey.txt")"
  timeout 30 "$AQ_CLI_BIN" server list --meta "$AQ_META_ADDR" >/dev/null ||
    aq_fail "aquifer server list with the key failed"
fi
# The mount still works, and each server logged its refusals in one line (10 s rate limit).
aq_random_file "$AQ_SCRATCH/v2" 2 42
timeout "$T" cp "$AQ_SCRATCH/v2" "$AQ_SCRATCH/mnt/g" || aq_fail "write after the refusals"
aq_same "$AQ_SCRATCH/v2" "$AQ_SCRATCH/mnt/g"
aq_same "$AQ_SCRATCH/v1" "$AQ_SCRATCH/mnt/f"
n_meta_wire=$(grep -c "metadata wire refused unauthenticated connection" "$AQ_SCRATCH/meta.log" || true)
n_data_wire=$(grep -c "chunk wire refused unauthenticated connection" "$AQ_SCRATCH/data0.log" || true)
n_meta_rpc=$(grep -c "refused unauthenticated call" "$AQ_SCRATCH/meta.log" || true)
aq_log "log lines: meta wire $n_meta_wire, data0 wire $n_data_wire, meta gRPC $n_meta_rpc"
grep -m1 "refused unauthenticated connection" "$AQ_SCRATCH/meta.log" >&2 || true
grep -m1 "refused unauthenticated call" "$AQ_SCRATCH/meta.log" >&2 || true
[ "$n_meta_wire" -ge 1 ] && [ "$n_meta_wire" -le 3 ] || aq_fail "meta wire logged $n_meta_wire refusal lines for 200 refusals"
[ "$n_data_wire" -ge 1 ] && [ "$n_data_wire" -le 3 ] || aq_fail "data wire logged $n_data_wire refusal lines for 200 refusals"
[ "$n_meta_rpc" -ge 1 ] || aq_fail "meta logged no refused gRPC call"
echo "auth: OK"
