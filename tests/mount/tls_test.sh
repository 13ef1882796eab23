#!/bin/bash
# TLS through real processes (issue 20 item 3; docs/operations.md "TLS"): `aquifer cluster up
# --tls` makes ROOT/tls and starts every daemon and the mount with it. Cases: files written and
# read back (20 MiB with its sha256, small ones) through the wires and through gRPC only
# (-o data_wire=0,meta_wire=0); a second mount sees the first's writes and the first the
# second's; `aquifer mount --root` finds the CA itself; a mount without the CA, one with another
# CA (`aquifer tls new`), and one with the right CA but a wrong cluster key are refused; a plain
# TCP client gets no plaintext hello from any port while Python's ssl module with the CA and
# server_hostname "aquifer" completes a TLS 1.3 handshake on every wire port and gRPC port (and
# the wire's hello then arrives inside it); `aquifer status` and `fsck` work, and the CLI without
# the CA fails at once saying why; a data server killed with -9: the 20 MiB file reads back whole
# (degraded) on a fresh mount, and `cluster start-server` brings it back with TLS; `cluster down`
# then `cluster up` without --tls keeps TLS.
AQ_NO_KEY=1  # `cluster up` makes the cluster's own key (ROOT/cluster.key) and its own CA:
AQ_TLS=0     # not lib.sh's, and no $AQUIFER_TLS_CA from outside (it would win over ROOT/tls)
unset AQUIFER_TLS_CA
source "$(dirname "$0")/lib.sh"
: "${AQ_CLI_BIN:?set AQ_CLI_BIN to the aquifer binary}"
ROOT=$AQ_SCRATCH/c
BUILD=$(dirname "$(dirname "$(dirname "$AQ_META_BIN")")")  # build/src/metadata/aquifer-meta
PY=/usr/bin/python3

aq() { timeout 120 "$AQ_CLI_BIN" "$@"; }
json() { $PY -c "import json; s=json.load(open('$ROOT/cluster.json')); print($1)"; }

tls_teardown() {
  local rc=$?
  set +e
  for m in "${AQ_MOUNTS[@]}"; do aq_is_mounted "$m" && fusermount3 -uz "$m" 2>/dev/null; done
  timeout 60 "$AQ_CLI_BIN" cluster down --root "$ROOT" --grace-ms 3000 >/dev/null 2>&1
  fusermount3 -uz "$ROOT/mnt" 2>/dev/null
  if [ -f "$ROOT/cluster.json" ]; then  # anything of the cluster still alive: SIGKILL by pid
    for pid in $(json "' '.join(str(p) for p in [s['meta']['pid'], s['mount']['pid']] + [d['pid'] for d in s['data_servers']])" 2>/dev/null); do
      [ "$pid" -gt 0 ] && kill -9 "$pid" 2>/dev/null
    done
  fi
  if [ $rc -ne 0 ]; then
    for f in "$ROOT"/logs/*.log; do
      [ -f "$f" ] && { echo "---- last lines of $f" >&2; tail -n 15 "$f" >&2; }
    done
  fi
  (exit $rc)
  aq_teardown
}
trap tls_teardown EXIT

# ---- cluster up --tls
aq cluster up --root "$ROOT" --tls --bin-dir "$BUILD" --timeout-ms 60000 >"$AQ_SCRATCH/up.txt" 2>&1 ||
  aq_fail "cluster up --tls: $(cat "$AQ_SCRATCH/up.txt")"
cat "$AQ_SCRATCH/up.txt" >&2
[ "$(json "s.get('tls')")" = True ] || aq_fail "cluster.json does not record tls"
for f in ca.pem ca.key server.pem server.key; do [ -s "$ROOT/tls/$f" ] || aq_fail "no $ROOT/tls/$f"; done
[ "$(stat -c %a "$ROOT/tls/server.key")" = 600 ] || aq_fail "server.key is not 0600"
CA=$ROOT/tls/ca.pem
KEY=$ROOT/cluster.key
AQ_META_ADDR=$(json "s['meta']['address']")
for pid in $(json "' '.join(str(p) for p in [s['meta']['pid']] + [d['pid'] for d in s['data_servers']])"); do
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "--tls --tls-ca $CA --tls-cert $ROOT/tls/server.pem --tls-key $ROOT/tls/server.key" ||
    aq_fail "pid $pid runs without the TLS flags: $(tr '\0' ' ' <"/proc/$pid/cmdline")"
done
tr '\0' ' ' <"/proc/$(json "s['mount']['pid']")/cmdline" | grep -q "tls_ca=$CA" ||
  aq_fail "the mount runs without tls_ca"
M1=$ROOT/mnt
aq_is_mounted "$M1" || aq_fail "$M1 is not mounted"

# ---- data through the first mount (wires on, the default)
aq_random_file "$AQ_SCRATCH/big" 20 2020
BIG_SHA=$(sha256sum <"$AQ_SCRATCH/big" | cut -d' ' -f1)
timeout "$T" cp "$AQ_SCRATCH/big" "$M1/big" || aq_fail "write 20 MiB through the TLS mount"
mkdir -p "$M1/small"
for i in $(seq 1 40); do echo "small file $i $(head -c $((i * 97)) /dev/zero | tr '\0' x)" >"$M1/small/$i"; done
[ "$(timeout "$T" sha256sum <"$M1/big" | cut -d' ' -f1)" = "$BIG_SHA" ] || aq_fail "20 MiB read back differs"
aq_log "wires: 20 MiB and 40 small files written and read back"

# ---- a second mount, gRPC only: sees the first's writes; the first sees its writes
M2=$AQ_SCRATCH/m2
aq_mount "$M2" -o "key=$KEY,tls_ca=$CA,data_wire=0,meta_wire=0"
[ "$(timeout "$T" sha256sum <"$M2/big" | cut -d' ' -f1)" = "$BIG_SHA" ] || aq_fail "gRPC mount: 20 MiB differs"
for i in $(seq 1 40); do
  timeout "$T" cmp -s "$M1/small/$i" "$M2/small/$i" || aq_fail "gRPC mount: small/$i differs"
done
aq_random_file "$AQ_SCRATCH/g" 5 2021
timeout "$T" cp "$AQ_SCRATCH/g" "$M2/g" || aq_fail "write through the gRPC-only TLS mount"
echo "from the gRPC mount" >"$M2/note"
aq_same "$AQ_SCRATCH/g" "$M2/g"
aq_same "$AQ_SCRATCH/g" "$M1/g"
[ "$(cat "$M1/note")" = "from the gRPC mount" ] || aq_fail "the first mount does not see note"
aq_log "gRPC only: reads and writes, seen by the other mount"

# ---- `aquifer mount --root`: finds the CA and the key of the local cluster itself
M3=$AQ_SCRATCH/m3
mkdir -p "$M3"
AQ_MOUNTS+=("$M3")  # for teardown's fusermount3 -uz; its daemon (daemonized) ends with the mount
AQ_MOUNT_PIDS+=("")
aq mount --root "$ROOT" "$M3" >&2 || aq_fail "aquifer mount --root on a TLS cluster"
[ "$(timeout "$T" sha256sum <"$M3/big" | cut -d' ' -f1)" = "$BIG_SHA" ] || aq_fail "aquifer mount: 20 MiB differs"
timeout "$T" fusermount3 -u "$M3" || aq_fail "fusermount3 -u $M3"

# ---- refusals: no CA, another CA, the right CA with a wrong cluster key
aq tls new "$AQ_SCRATCH/other" >"$AQ_SCRATCH/tls_new.txt" || aq_fail "aquifer tls new"
grep -q "ca.pem" "$AQ_SCRATCH/tls_new.txt" || aq_fail "tls new says nothing of ca.pem"
(umask 077 && openssl rand -hex 32 >"$AQ_SCRATCH/wrong.key")
aq_mount_refused no_ca env -u AQUIFER_TLS_CA "$AQ_MOUNT_BIN" -o "key=$KEY"
aq_mount_refused other_ca "$AQ_MOUNT_BIN" -o "key=$KEY,tls_ca=$AQ_SCRATCH/other/ca.pem"
aq_mount_refused other_ca_grpc "$AQ_MOUNT_BIN" \
  -o "key=$KEY,tls_ca=$AQ_SCRATCH/other/ca.pem,data_wire=0,meta_wire=0"
aq_mount_refused wrong_key "$AQ_MOUNT_BIN" -o "key=$AQ_SCRATCH/wrong.key,tls_ca=$CA"

# ---- every port: no plaintext hello; a TLS 1.3 handshake with the CA and the name "aquifer"
GRPC_PORTS="${AQ_META_ADDR##*:} $(json "' '.join(d['address'].rsplit(':', 1)[1] for d in s['data_servers'])")"
WIRE_PORTS=""
for log in "$ROOT/logs/meta.log" "$ROOT"/logs/ds*.log; do
  p=$(grep -o 'wire_port=[0-9]*' "$log" | tail -1 | cut -d= -f2)
  [ -n "$p" ] && [ "$p" != 0 ] || aq_fail "no wire port in $log"
  WIRE_PORTS="$WIRE_PORTS $p"
done
aq_log "gRPC ports:$GRPC_PORTS; wire ports:$WIRE_PORTS"
timeout 120 $PY - "$CA" "$GRPC_PORTS" "$WIRE_PORTS" <<'PY' || aq_fail "TLS probes"
import socket, ssl, sys
ca, grpc_ports, wire_ports = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()

def plain(port):
    """A plain TCP client: the server must send nothing (it waits for a ClientHello), and
    bytes that are no ClientHello get at most a TLS alert record (0x15), never plaintext."""
    s = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
    s.settimeout(1.0)
    try:
        got = s.recv(64)
    except socket.timeout:
        got = None
    assert not got, "port %s sent %r to a plain client before any ClientHello" % (port, got)
    s.settimeout(10)
    try:
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes(64))  # a plaintext h2c preface
        got = s.recv(4096)
    except (ConnectionResetError, BrokenPipeError, socket.timeout):
        got = b""
    assert got == b"" or got[0] == 0x15, "port %s answered plaintext with %r" % (port, got[:32])
    s.close()

def handshake(port, alpn):
    ctx = ssl.create_default_context(cafile=ca)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    if alpn:
        ctx.set_alpn_protocols(["h2"])
    raw = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
    s = ctx.wrap_socket(raw, server_hostname="aquifer")  # verifies chain and name
    assert s.version() == "TLSv1.3", s.version()
    return s

def wrong_name(port):
    ctx = ssl.create_default_context(cafile=ca)
    raw = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
    try:
        ctx.wrap_socket(raw, server_hostname="not-aquifer")
    except ssl.SSLCertVerificationError:
        return
    raise AssertionError("port %s: a certificate for another name was accepted" % port)

for p in grpc_ports + wire_ports:
    plain(p)
for p in grpc_ports:
    handshake(p, alpn=True).close()
for p in wire_ports:
    s = handshake(p, alpn=False)
    hello = b""
    while len(hello) < 48:
        chunk = s.recv(48 - len(hello))
        assert chunk, "wire port %s: closed before its hello inside TLS" % p
        hello += chunk
    assert hello[6] & 1, "wire port %s: hello inside TLS without the auth flag: %r" % (p, hello)
    s.close()
wrong_name(grpc_ports[0])
wrong_name(wire_ports[0])
print("probed %d gRPC and %d wire ports" % (len(grpc_ports), len(wire_ports)))
PY

# ---- the CLI: status and fsck through TLS; without the CA it fails at once, saying why
aq status --root "$ROOT" >"$AQ_SCRATCH/status.txt" 2>&1 || aq_fail "status: $(cat "$AQ_SCRATCH/status.txt")"
head -1 "$AQ_SCRATCH/status.txt" | grep -qx "health    ok" || aq_fail "status: $(cat "$AQ_SCRATCH/status.txt")"
grep -q "6 registered, 6 up, 0 down" "$AQ_SCRATCH/status.txt" || aq_fail "status: $(cat "$AQ_SCRATCH/status.txt")"
aq fsck --root "$ROOT" >"$AQ_SCRATCH/fsck.txt" 2>&1 || aq_fail "fsck: $(cat "$AQ_SCRATCH/fsck.txt")"
aq server list --meta "$AQ_META_ADDR" --key "$KEY" --tls-ca "$CA" >/dev/null ||
  aq_fail "server list --meta --tls-ca"
AQUIFER_TLS_CA=$CA aq server list --meta "$AQ_META_ADDR" --key "$KEY" >/dev/null ||
  aq_fail "server list --meta with AQUIFER_TLS_CA"
cli_refused() {  # cli_refused NAME CMD...: fails within 30 s, saying why (the CA)
  local name=$1 rc=0 t0=$SECONDS
  shift
  timeout 30 "$@" >"$AQ_SCRATCH/$name.txt" 2>&1 || rc=$?
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || aq_fail "$name: exit $rc: $(cat "$AQ_SCRATCH/$name.txt")"
  grep -qi "tls-ca\|certificate verify failed" "$AQ_SCRATCH/$name.txt" ||
    aq_fail "$name: no word of TLS: $(cat "$AQ_SCRATCH/$name.txt")"
  aq_log "$name: refused in $((SECONDS - t0)) s: $(grep -i "tls-ca\|certificate verify" "$AQ_SCRATCH/$name.txt" | tail -1)"
}
cli_refused cli_no_ca env -u AQUIFER_TLS_CA "$AQ_CLI_BIN" server list --meta "$AQ_META_ADDR" --key "$KEY"
cli_refused cli_other_ca env AQUIFER_TLS_CA="$AQ_SCRATCH/other/ca.pem" "$AQ_CLI_BIN" server list --root "$ROOT"

# ---- kill -9 a data server: the 20 MiB file reads back whole, degraded, on fresh mounts
aq cluster stop-server 3 --kill --root "$ROOT" >&2 || aq_fail "stop-server 3 --kill"
M4=$AQ_SCRATCH/m4
aq_mount "$M4" -o "key=$KEY,tls_ca=$CA"
[ "$(timeout "$T" sha256sum <"$M4/big" | cut -d' ' -f1)" = "$BIG_SHA" ] || aq_fail "degraded read (wires) differs"
M5=$AQ_SCRATCH/m5
aq_mount "$M5" -o "key=$KEY,tls_ca=$CA,data_wire=0,meta_wire=0"
[ "$(timeout "$T" sha256sum <"$M5/big" | cut -d' ' -f1)" = "$BIG_SHA" ] || aq_fail "degraded read (gRPC) differs"
aq_same "$AQ_SCRATCH/g" "$M5/g"
aq_log "degraded reads with ds3 down: correct"
aq cluster start-server 3 --root "$ROOT" >&2 || aq_fail "start-server 3 (with TLS) did not register"
aq_umount "$M4"
aq_umount "$M5"
aq_umount "$M2"

# ---- down, then up without --tls: the record keeps TLS
aq cluster down --root "$ROOT" --grace-ms 5000 >&2 || aq_fail "cluster down"
aq cluster up --root "$ROOT" --bin-dir "$BUILD" --timeout-ms 60000 >"$AQ_SCRATCH/up2.txt" 2>&1 ||
  aq_fail "cluster up again: $(cat "$AQ_SCRATCH/up2.txt")"
grep -q "tls    on" "$AQ_SCRATCH/up2.txt" || aq_fail "cluster up again is not TLS: $(cat "$AQ_SCRATCH/up2.txt")"
[ "$(timeout "$T" sha256sum <"$M1/big" | cut -d' ' -f1)" = "$BIG_SHA" ] || aq_fail "after restart: 20 MiB differs"
aq_same "$AQ_SCRATCH/g" "$M1/g"
aq status --root "$ROOT" >/dev/null 2>&1 || aq_fail "status after restart"
echo "tls: OK"
