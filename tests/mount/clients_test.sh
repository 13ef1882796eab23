#!/bin/bash
# Client credentials and exports through real processes (issue 20 item 2; docs/design.md
# "Client credentials and exports"): `aquifer client add/list/remove` make and revoke credential
# files; mounts with them get what the registry says. Cases: a wrong credential and no key fail
# to mount; a read-only credential reads but its writes, creates, chmods, mkdirs fail with EROFS;
# a --path credential sees the subtree as its root, and a direct RPC naming an inode outside it
# (or ".." from its root) answers ENOENT; root squash makes root's files nobody's; --allow refuses
# a peer outside its networks; a removed client's mount fails within a minute, and its old
# credential stays refused after the name is added again; a data server refuses a chunk write
# made with a read-only credential. Chunk capabilities (docs/design.md "Chunk capabilities"): a
# data server refuses a credential's chunk read or write without a capability, with one for
# another inode, or with a read capability for a write; the metadata server gives a --path
# credential none for a file outside its subtree and a read-only one no write capability; a
# read-write credential's write with its capability is taken; mounts read and write as before.
source "$(dirname "$0")/lib.sh"
: "${AQ_CLI_BIN:?set AQ_CLI_BIN to the aquifer binary}"
: "${AQ_CLIENT_PROBE_BIN:?set AQ_CLIENT_PROBE_BIN to aquifer_client_probe}"
[ -n "${AQUIFER_KEY_FILE:-}" ] || aq_fail "lib.sh made no cluster key"
REG=$AQ_SCRATCH/clients
# Capabilities good for 4 s, so mounts renew them many times during the test, and a file held
# open across several lifetimes is checked below.
CAP_LIFETIME=4
export AQ_META_FLAGS="--clients $REG --capability-lifetime-s $CAP_LIFETIME ${AQ_META_FLAGS:-}"
aq_start_cluster
DATA_ADDR=$(cat "$AQ_SCRATCH/data0.port")

# The administrator's mount (cluster key) makes the tree the clients see.
ADMIN=$AQ_SCRATCH/admin
aq_mount "$ADMIN"
mkdir -p "$ADMIN/datasets/sub" "$ADMIN/outside"
aq_random_file "$AQ_SCRATCH/v1" 2 71
cp "$AQ_SCRATCH/v1" "$ADMIN/datasets/a.bin"
echo secret >"$ADMIN/outside/secret"
chmod 600 "$ADMIN/outside/secret"
echo root-owned >"$ADMIN/rootfile"
chmod 644 "$ADMIN/rootfile"
aq_random_file "$ADMIN/outside/big" 9 73  # erasure-coded stripes, outside the subtree
echo target >"$ADMIN/probe_target"
SECRET_INO=$(stat -c %i "$ADMIN/outside/secret")
BIG_INO=$(stat -c %i "$ADMIN/outside/big")
A_INO=$(stat -c %i "$ADMIN/datasets/a.bin")
TARGET_INO=$(stat -c %i "$ADMIN/probe_target")
OUTSIDE_INO=$(stat -c %i "$ADMIN/outside")
DATASETS_INO=$(stat -c %i "$ADMIN/datasets")

cli() { timeout 30 "$AQ_CLI_BIN" client "$@" --registry "$REG"; }
add() {
  local name=$1
  shift
  cli add "$name" --out "$AQ_SCRATCH/$name.key" --key "$AQUIFER_KEY_FILE" "$@" >&2 ||
    aq_fail "client add $name"
}
add ro --read-only
add sub --path /datasets
add squash --root-squash
add rw --allow 127.0.0.0/8
add fenced --allow 10.0.0.0/8
add rw2
[ "$(stat -c %a "$AQ_SCRATCH/ro.key")" = 600 ] || aq_fail "credential mode $(stat -c %a "$AQ_SCRATCH/ro.key")"
grep -q "^aquifer-client-1 ro [0-9a-f]\{32\} ro [0-9a-f]\{64\}$" "$AQ_SCRATCH/ro.key" ||
  aq_fail "credential format: $(cut -c1-40 "$AQ_SCRATCH/ro.key")"
cli add ro --out "$AQ_SCRATCH/ro-again.key" --key "$AQUIFER_KEY_FILE" 2>/dev/null &&
  aq_fail "a second client named ro was added"
cli list >"$AQ_SCRATCH/list.txt" || aq_fail "client list"
cat "$AQ_SCRATCH/list.txt" >&2
for n in ro sub squash rw fenced rw2; do
  grep -q "^$n " "$AQ_SCRATCH/list.txt" || aq_fail "client list lacks $n"
done
grep -q "^sub .* /datasets$" "$AQ_SCRATCH/list.txt" || aq_fail "client list: sub's path"

# A wrong credential: the right shape, one key digit changed.
(umask 077 && awk '{c = substr($5, 64, 1); $5 = substr($5, 1, 63) (c == "0" ? "1" : "0"); print}' \
  "$AQ_SCRATCH/rw.key" >"$AQ_SCRATCH/wrong.key")
cmp -s "$AQ_SCRATCH/wrong.key" "$AQ_SCRATCH/rw.key" && aq_fail "wrong.key equals rw.key"
aq_mount_refused wrong_credential "$AQ_MOUNT_BIN" -o key="$AQ_SCRATCH/wrong.key"
aq_mount_refused no_key env -u AQUIFER_KEY_FILE "$AQ_MOUNT_BIN"
aq_mount_refused fenced "$AQ_MOUNT_BIN" -o key="$AQ_SCRATCH/fenced.key"

# Read-only: reads work, every change fails with EROFS.
RO=$AQ_SCRATCH/ro_mnt
aq_mount "$RO" -o key="$AQ_SCRATCH/ro.key"
aq_same "$AQ_SCRATCH/v1" "$RO/datasets/a.bin"
expect_erofs() {
  local what=$1
  shift
  local out
  if out=$(timeout "$T" "$@" 2>&1); then aq_fail "read-only: $what succeeded"; fi
  grep -q "Read-only file system" <<<"$out" || aq_fail "read-only: $what: $out"
}
expect_erofs create sh -c "echo x > '$RO/new'"
expect_erofs overwrite sh -c "echo x > '$RO/datasets/a.bin'"
expect_erofs mkdir mkdir "$RO/newdir"
expect_erofs chmod chmod 600 "$RO/datasets/a.bin"
expect_erofs truncate truncate -s 0 "$RO/datasets/a.bin"
expect_erofs unlink rm -f "$RO/datasets/a.bin"
expect_erofs rename mv "$RO/datasets/a.bin" "$RO/datasets/b.bin"
expect_erofs setxattr python3 -c 'import os, sys; os.setxattr(sys.argv[1], "user.x", b"1")' \
  "$RO/datasets/a.bin"
aq_same "$AQ_SCRATCH/v1" "$ADMIN/datasets/a.bin"
[ ! -e "$ADMIN/new" ] || aq_fail "read-only: new file appeared"

# A direct chunk write: refused with the read-only credential, taken with a read-write one (the
# same request, so the refusal is the credential's).
if "$AQ_CLIENT_PROBE_BIN" "$AQ_SCRATCH/ro.key" "$DATA_ADDR" writechunk 987654321 >"$AQ_SCRATCH/probe.txt"; then
  aq_fail "data server took a chunk write from a read-only credential: $(cat "$AQ_SCRATCH/probe.txt")"
fi
grep -q "code=6 .*read-only" "$AQ_SCRATCH/probe.txt" || aq_fail "chunk write refusal: $(cat "$AQ_SCRATCH/probe.txt")"
# A read-write credential needs a write capability for that inode, from the metadata server.
if "$AQ_CLIENT_PROBE_BIN" "$AQ_SCRATCH/rw2.key" "$DATA_ADDR" writechunk "$TARGET_INO" >"$AQ_SCRATCH/probe.txt"; then
  aq_fail "chunk write without a capability: $(cat "$AQ_SCRATCH/probe.txt")"
fi
grep -q "code=6 .*no capability" "$AQ_SCRATCH/probe.txt" || aq_fail "capability-less write: $(cat "$AQ_SCRATCH/probe.txt")"
"$AQ_CLIENT_PROBE_BIN" "$AQ_SCRATCH/rw2.key" "$DATA_ADDR" writechunk "$TARGET_INO" \
  "$AQ_META_ADDR" "$TARGET_INO" w >"$AQ_SCRATCH/probe.txt" ||
  aq_fail "chunk write with a read-write credential and its capability: $(cat "$AQ_SCRATCH/probe.txt")"
grep -q "^capability bytes=72$" "$AQ_SCRATCH/probe.txt" || aq_fail "capability: $(cat "$AQ_SCRATCH/probe.txt")"
# A read-only credential gets read capabilities, never a write one, and a read capability does
# not open a write.
"$AQ_CLIENT_PROBE_BIN" "$AQ_SCRATCH/ro.key" "$AQ_META_ADDR" capability "$A_INO" r >"$AQ_SCRATCH/probe.txt" ||
  aq_fail "read capability for a read-only credential: $(cat "$AQ_SCRATCH/probe.txt")"
if "$AQ_CLIENT_PROBE_BIN" "$AQ_SCRATCH/ro.key" "$AQ_META_ADDR" capability "$A_INO" w >"$AQ_SCRATCH/probe.txt"; then
  aq_fail "write capability for a read-only credential: $(cat "$AQ_SCRATCH/probe.txt")"
fi
grep -q "^capability code=10 " "$AQ_SCRATCH/probe.txt" || aq_fail "ro write capability: $(cat "$AQ_SCRATCH/probe.txt")"
if "$AQ_CLIENT_PROBE_BIN" "$AQ_SCRATCH/rw2.key" "$DATA_ADDR" writechunk "$TARGET_INO" \
  "$AQ_META_ADDR" "$TARGET_INO" r >"$AQ_SCRATCH/probe.txt"; then
  aq_fail "chunk write with a read capability: $(cat "$AQ_SCRATCH/probe.txt")"
fi
grep -q "code=6 .*read capability for a write" "$AQ_SCRATCH/probe.txt" ||
  aq_fail "write with a read capability: $(cat "$AQ_SCRATCH/probe.txt")"

# Subtree: /datasets is the root; nothing outside it by name, by "..", or by inode number.
SUB=$AQ_SCRATCH/sub_mnt
aq_mount "$SUB" -o key="$AQ_SCRATCH/sub.key"
[ "$(ls "$SUB" | tr '\n' ' ')" = "a.bin sub " ] || aq_fail "subtree root lists: $(ls "$SUB")"
aq_same "$AQ_SCRATCH/v1" "$SUB/a.bin"
[ "$(stat -c %i "$SUB")" = 1 ] || aq_fail "subtree root is inode $(stat -c %i "$SUB")"
echo inside >"$SUB/sub/made" || aq_fail "write inside the subtree"
[ "$(cat "$ADMIN/datasets/sub/made")" = inside ] || aq_fail "subtree write not under /datasets"
[ ! -e "$SUB/outside" ] || aq_fail "subtree sees /outside"
probe() { "$AQ_CLIENT_PROBE_BIN" "$@" >"$AQ_SCRATCH/probe.txt" 2>&1; }
for ino in "$SECRET_INO" "$OUTSIDE_INO"; do
  probe "$AQUIFER_KEY_FILE" "$AQ_META_ADDR" getattr "$ino" ||
    aq_fail "control: getattr $ino with the cluster key: $(cat "$AQ_SCRATCH/probe.txt")"
  if probe "$AQ_SCRATCH/sub.key" "$AQ_META_ADDR" getattr "$ino"; then
    aq_fail "subtree credential read inode $ino outside it: $(cat "$AQ_SCRATCH/probe.txt")"
  fi
  grep -q "^code=1 " "$AQ_SCRATCH/probe.txt" || aq_fail "getattr $ino outside: $(cat "$AQ_SCRATCH/probe.txt")"
done
if probe "$AQ_SCRATCH/sub.key" "$AQ_META_ADDR" lookup 1 ..; then
  aq_fail "lookup of .. from the export root: $(cat "$AQ_SCRATCH/probe.txt")"
fi
grep -q "^code=1 " "$AQ_SCRATCH/probe.txt" || aq_fail "lookup ..: $(cat "$AQ_SCRATCH/probe.txt")"
# The export's root by its real number is inode 1 to this client, never its parent's child.
probe "$AQ_SCRATCH/sub.key" "$AQ_META_ADDR" getattr "$DATASETS_INO" ||
  aq_fail "getattr of the export root by number: $(cat "$AQ_SCRATCH/probe.txt")"
grep -q "^ino=1$" "$AQ_SCRATCH/probe.txt" || aq_fail "export root shown as $(cat "$AQ_SCRATCH/probe.txt")"
if probe "$AQ_SCRATCH/sub.key" "$AQ_META_ADDR" lookup 1 outside; then
  aq_fail "lookup of /outside from the export root: $(cat "$AQ_SCRATCH/probe.txt")"
fi
# Chunks of files outside the subtree, straight from every data server: refused without a
# capability, with a capability for a file inside (another inode), and the metadata server
# gives none for the outside file. The cluster key reads the same chunk (the control).
for port_file in "$AQ_SCRATCH"/data*.port; do
  addr=$(cat "$port_file")
  for ino in "$SECRET_INO" "$BIG_INO"; do
    for op in readchunk writechunk; do
      if probe "$AQ_SCRATCH/sub.key" "$addr" "$op" "$ino"; then
        aq_fail "subtree credential: $op of outside inode $ino on $addr: $(cat "$AQ_SCRATCH/probe.txt")"
      fi
      grep -q "^code=6 .*no capability" "$AQ_SCRATCH/probe.txt" ||
        aq_fail "$op $ino on $addr: $(cat "$AQ_SCRATCH/probe.txt")"
      mode=r
      [ "$op" = writechunk ] && mode=w
      if probe "$AQ_SCRATCH/sub.key" "$addr" "$op" "$ino" "$AQ_META_ADDR" "$A_INO" "$mode"; then
        aq_fail "subtree credential: $op of $ino with a capability for $A_INO: $(cat "$AQ_SCRATCH/probe.txt")"
      fi
      grep -q "^code=6 .*capability for inode $A_INO" "$AQ_SCRATCH/probe.txt" ||
        aq_fail "$op $ino with another inode's capability: $(cat "$AQ_SCRATCH/probe.txt")"
    done
  done
done
if probe "$AQ_SCRATCH/sub.key" "$AQ_META_ADDR" capability "$SECRET_INO" r; then
  aq_fail "capability for a file outside the subtree: $(cat "$AQ_SCRATCH/probe.txt")"
fi
grep -q "^capability code=1 " "$AQ_SCRATCH/probe.txt" || aq_fail "outside capability: $(cat "$AQ_SCRATCH/probe.txt")"
# The chunk (stripe 0, position 0) of the 9 MiB file lives on some data server: the cluster key
# reads it there, so the refusals above were the capability's, not a missing chunk's.
found=0
for port_file in "$AQ_SCRATCH"/data*.port; do
  probe "$AQUIFER_KEY_FILE" "$(cat "$port_file")" readchunk "$BIG_INO" && found=1
done
[ "$found" = 1 ] || aq_fail "control: no data server has chunk 0/0 of inode $BIG_INO"
# Inside the subtree, with its capability, the same read is served.
for port_file in "$AQ_SCRATCH"/data*.port; do
  probe "$AQ_SCRATCH/sub.key" "$(cat "$port_file")" readchunk "$A_INO" "$AQ_META_ADDR" "$A_INO" r ||
    true  # code=1: this server holds no chunk 0/0 of it
  grep -q "^code=[01] " "$AQ_SCRATCH/probe.txt" ||
    aq_fail "read of an inside chunk with its capability: $(cat "$AQ_SCRATCH/probe.txt")"
done
# The chunk wire checks no capabilities: a credential cannot pass its handshake at all (the
# cluster key can).
probe "$AQUIFER_KEY_FILE" "$DATA_ADDR" wirehandshake ||
  aq_fail "control: chunk wire handshake with the cluster key: $(cat "$AQ_SCRATCH/probe.txt")"
for key in sub rw2 ro; do
  if probe "$AQ_SCRATCH/$key.key" "$DATA_ADDR" wirehandshake; then
    aq_fail "credential $key passed the chunk wire handshake: $(cat "$AQ_SCRATCH/probe.txt")"
  fi
  grep -q "^code=" "$AQ_SCRATCH/probe.txt" || aq_fail "wire probe $key: $(cat "$AQ_SCRATCH/probe.txt")"
done
# Whole files through the subtree mount, erasure-coded and replicated, written and read back.
aq_random_file "$AQ_SCRATCH/v9" 9 74
cp "$AQ_SCRATCH/v9" "$SUB/sub/big9" || aq_fail "subtree: write a 9 MiB file"
aq_same "$AQ_SCRATCH/v9" "$SUB/sub/big9"
aq_same "$AQ_SCRATCH/v9" "$ADMIN/datasets/sub/big9"
aq_same "$AQ_SCRATCH/v9" "$RO/datasets/sub/big9"
# Files held open for three capability lifetimes keep working: a writer (fsync after each
# write: chunk writes) on the subtree mount and an O_DIRECT reader on the read-only mount, so
# every round goes to the data servers with a capability renewed on the way.
timeout 60 python3 - "$SUB/sub/long" "$RO/datasets/sub/long" "$CAP_LIFETIME" <<'PY' ||
import mmap, os, sys, time
wpath, rpath, life = sys.argv[1], sys.argv[2], float(sys.argv[3])
w = os.open(wpath, os.O_RDWR | os.O_CREAT, 0o644)
r = None
rounds, end = 0, time.monotonic() + 3 * life + 1
while time.monotonic() < end:
    block = bytes([rounds % 251]) * 4096
    os.pwrite(w, block, rounds * 4096)
    os.fsync(w)
    if os.pread(w, 4096, rounds * 4096) != block:
        sys.exit("writer read back other bytes in round %d" % rounds)
    if r is None:
        r = os.open(rpath, os.O_RDONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, 4096)  # O_DIRECT wants an aligned buffer
    os.lseek(r, 0, os.SEEK_SET)
    n = os.readv(r, [buf])
    if n != 4096 or buf[:] != bytes([0]) * 4096:
        sys.exit("reader got %d bytes, other than round 0's, in round %d" % (n, rounds))
    rounds += 1
    time.sleep(0.25)
print("long-open rounds", rounds)
PY
  aq_fail "a file held open across capability lifetimes failed"
refusals=$(cat "$AQ_SCRATCH"/data*.log | grep -c "refused chunk .*client=sub .*expired" || true)
aq_log "capability renewals: $refusals expired-capability refusals of sub (each retried fresh)"

# Root squash: root acts as nobody.
SQ=$AQ_SCRATCH/squash_mnt
aq_mount "$SQ" -o key="$AQ_SCRATCH/squash.key"
if [ "$(id -u)" = 0 ]; then
  mkdir "$SQ/squashed" 2>/dev/null && aq_fail "squashed root made a directory in root's 0755 /"
  mkdir "$ADMIN/open" && chmod 1777 "$ADMIN/open"
  echo mine >"$SQ/open/by_squashed_root" || aq_fail "squashed root: create in a 1777 directory"
  [ "$(stat -c %u:%g "$ADMIN/open/by_squashed_root")" = 65534:65534 ] ||
    aq_fail "squashed root's file is owned by $(stat -c %u:%g "$ADMIN/open/by_squashed_root")"
  if timeout "$T" sh -c "echo x >> '$SQ/rootfile'" 2>/dev/null; then
    aq_fail "squashed root wrote root's 0644 file"
  fi
  cat "$SQ/outside/secret" 2>/dev/null && aq_fail "squashed root read root's 0600 file"
  # Looked up first, so the mount keeps its attributes: the open must still ask the server,
  # which squashes (an open answered from kept attributes let root read it).
  echo hidden >"$ADMIN/private0600" && chmod 600 "$ADMIN/private0600"
  stat "$SQ/private0600" >/dev/null || aq_fail "squashed root: stat of root's file in /"
  if timeout "$T" cat "$SQ/private0600" 2>/dev/null; then
    aq_fail "squashed root read root's 0600 file after a lookup"
  fi
else
  aq_log "not root: root squash is not exercised"
fi

# Revocation: the rw mount works, then fails within a minute of `client remove`.
RW=$AQ_SCRATCH/rw_mnt
aq_mount "$RW" -o key="$AQ_SCRATCH/rw.key"
echo before >"$RW/rw_file" || aq_fail "rw: write"
[ "$(cat "$ADMIN/rw_file")" = before ] || aq_fail "rw: written bytes"
cli remove rw >&2 || aq_fail "client remove rw"
cli list | grep -q "^rw " && aq_fail "rw still listed"
start=$SECONDS
revoked() { ! ls "$RW" >/dev/null 2>&1 && ! touch "$RW/after_$RANDOM" 2>/dev/null; }
aq_wait_for 60 "the removed client's mount to fail" revoked
aq_log "revoked mount failed after $((SECONDS - start))s"
# The same name again is a new credential (a new id): the old one stays refused.
mv "$AQ_SCRATCH/rw.key" "$AQ_SCRATCH/rw.key.old"
add rw
accepted() { probe "$AQ_SCRATCH/rw.key" "$AQ_META_ADDR" getattr 1; }
aq_wait_for 20 "the re-added rw to be accepted" accepted
if probe "$AQ_SCRATCH/rw.key.old" "$AQ_META_ADDR" getattr 1; then
  aq_fail "the old rw credential works again after re-adding rw"
fi
grep -q "^code=6 " "$AQ_SCRATCH/probe.txt" || aq_fail "old rw credential: $(cat "$AQ_SCRATCH/probe.txt")"
if ls "$RW" >/dev/null 2>&1; then aq_fail "the old rw mount works again after re-adding rw"; fi

# The other mounts were not disturbed.
aq_same "$AQ_SCRATCH/v1" "$RO/datasets/a.bin"
aq_same "$AQ_SCRATCH/v1" "$SUB/a.bin"
echo "clients: OK"
