#!/bin/bash
# Names with terminal escapes through the admin tools (issue 20 item 4): a file named
# "evil<ESC>[2J<newline>name" on the mount, made unreadable by stopping three of six data servers,
# is listed by `aquifer fsck` and printed by `aquifer layout get`; neither output carries a raw
# ESC, and the name stays on one line, escaped as \x1b[2J\x0a.
source "$(dirname "$0")/../mount/lib.sh"
: "${AQ_CLI_BIN:?set AQ_CLI_BIN to the aquifer binary}"
aq_start_cluster
aq_mount "$AQ_SCRATCH/mnt"
name=$'evil\e[2J\nname'
aq_random_file "$AQ_SCRATCH/src" 4 7
timeout "$T" cp "$AQ_SCRATCH/src" "$AQ_SCRATCH/mnt/$name" || aq_fail "write of the evil name"
timeout "$T" mkdir "$AQ_SCRATCH/mnt/dir"$'\r\e]0;title\a' || aq_fail "mkdir of the evil name"

no_raw_escapes() {  # FILE WHAT: no ESC, BEL or CR bytes, and no line that starts with "name"
  if grep -q $'[\e\a\r]' "$1"; then aq_fail "$2 printed raw control bytes: $(cat -v "$1")"; fi
  if grep -qE '^name($| )' "$1"; then aq_fail "$2 split the name over two lines: $(cat -v "$1")"; fi
}

timeout "$T" "$AQ_CLI_BIN" layout get "$AQ_SCRATCH/mnt/$name" >"$AQ_SCRATCH/layout.txt" 2>&1 ||
  aq_fail "layout get: $(cat -v "$AQ_SCRATCH/layout.txt")"
no_raw_escapes "$AQ_SCRATCH/layout.txt" "layout get"
grep -qF 'evil\x1b[2J\x0aname' "$AQ_SCRATCH/layout.txt" ||
  aq_fail "layout get does not show the escaped name: $(cat -v "$AQ_SCRATCH/layout.txt")"

# Three of six servers down: the file's one 4+2 stripe is lost and fsck names it.
aq_kill_data 0
aq_kill_data 1
aq_kill_data 2
three_down() { [ "$(timeout 10 "$AQ_CLI_BIN" server list --meta "$AQ_META_ADDR" | grep -c DOWN)" = 3 ]; }
aq_wait_for 30 "the metadata server to see three servers down" three_down
rc=0
timeout "$T" "$AQ_CLI_BIN" fsck --meta "$AQ_META_ADDR" >"$AQ_SCRATCH/fsck.txt" 2>&1 || rc=$?
cat -v "$AQ_SCRATCH/fsck.txt" >&2
[ "$rc" != 0 ] || aq_fail "fsck found no problem with three of six servers down"
no_raw_escapes "$AQ_SCRATCH/fsck.txt" "fsck"
grep -qF '/evil\x1b[2J\x0aname' "$AQ_SCRATCH/fsck.txt" ||
  aq_fail "fsck does not list the lost file by its escaped name"
timeout "$T" "$AQ_CLI_BIN" status --meta "$AQ_META_ADDR" >"$AQ_SCRATCH/status.txt" 2>&1 || true
no_raw_escapes "$AQ_SCRATCH/status.txt" "status"
aq_log "PASS: layout get, fsck and status print the names escaped"
