#!/bin/bash
# aquifer-meta's web status page, as a browser renders it (Debian's headless Chromium), shows a
# killed data server as down and the repair that rebuilds its positions, with progress.
# Seven data servers, RS 4+2: every placement group has a spare failure domain, so killing one
# server makes repair tasks. Repair starts 1 s after the server is marked down; 8 placement
# groups hold 192 MiB, so each task rebuilds about 6 MiB, chunk by chunk, reading at 1 MiB/s:
# tasks run for tens of seconds and their progress moves in steps the page can show.
#   before: the page rendered by Chromium says health ok, all seven servers up, no repair row.
#   after kill -9 of data3: the rendered page has data3's row (found by the id data3 reports in
#     its /metrics, and its gRPC address) with data-state="down" and the text DOWN, every other
#     server up, a health that is not ok, and a running repair task from that server whose
#     progress bar and bytes are past 0; the summary counts running tasks. The screenshot is a
#     PNG of the window's size.
# AQ_STATUS_SCREENSHOT=FILE copies the screenshot there (docs/status_page.png is made so).
# Needs /usr/bin/chromium (CHROMIUM=... for another), curl and /usr/bin/python3.
AQ_DATA_SERVERS=7
AQ_META_FLAGS="--pgs-per-table 8 --repair-delay-ms 1000 --move-rate-mib 1"
source "$(dirname "$0")/lib.sh"
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
[ -x "$CHROMIUM" ] || aq_fail "no Chromium at $CHROMIUM"
M=$AQ_SCRATCH/mnt
VICTIM=3
FILES=24 FILE_MIB=8  # 192 MiB: 288 MiB of chunks, about 41 MiB on each server

# Chromium renders URL once: the DOM after rendering to OUT.html, the window to OUT.png (one
# run, so both show the same moment). Its profile, and what it would write under $HOME (crash
# report settings, dconf), live in a directory removed afterwards, and by teardown in any case.
render() {
  local url=$1 out=$2 rc=0
  local profile
  profile=$(mktemp -d "$AQ_SCRATCH/chromium-XXXX")
  env HOME="$profile" XDG_CONFIG_HOME="$profile/config" XDG_CACHE_HOME="$profile/cache" \
    timeout --kill-after=5 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic \
    --no-first-run --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$profile" --window-size=1400,1600 --screenshot="$out.png" --dump-dom "$url" \
    >"$out.html" 2>"$out.chromium.txt" || rc=$?
  rm -rf "$profile"
  if [ $rc != 0 ] || ! grep -q '</html>' "$out.html"; then
    tail -n 20 "$out.chromium.txt" >&2
    aq_fail "chromium exited $rc rendering $url (DOM: $(wc -c <"$out.html") bytes)"
  fi
}

# check_dom FILE EXPECT [VICTIM_ID VICTIM_ADDRESS]: reads the rendered page and prints what it
# found; exits non-zero when it is not what EXPECT (healthy | repairing) says.
check_dom() {
  /usr/bin/python3 - "$@" <<'EOF'
import sys
from html.parser import HTMLParser

path, expect = sys.argv[1], sys.argv[2]

class Page(HTMLParser):
    """Collects the health div, the servers' rows and the moves' rows as lists of cell texts."""
    def __init__(self):
        super().__init__()
        self.health = None
        self.summary = ""
        self.servers = {}   # id -> (data-state, [cells])
        self.moves = []     # (data-kind, [cells], has a progress bar)
        self.table = None
        self.row = None
        self.cell = None
        self.in_summary = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "div" and a.get("id") == "health":
            self.health = a.get("data-health")
        elif tag == "p" and a.get("id") == "moves-summary":
            self.in_summary = True
        elif tag == "table":
            self.table = a.get("id")
        elif tag == "tr":
            self.row = {"attrs": a, "cells": [], "bar": False}
        elif tag in ("td", "th") and self.row is not None:
            self.cell = []
        elif tag == "span" and a.get("class") == "bar" and self.row is not None:
            self.row["bar"] = True

    def handle_endtag(self, tag):
        if tag == "p":
            self.in_summary = False
        elif tag in ("td", "th") and self.cell is not None:
            self.row["cells"].append("".join(self.cell).strip())
            self.cell = None
        elif tag == "tr" and self.row is not None:
            a = self.row["attrs"]
            if self.table == "servers" and "data-server" in a:
                self.servers[a["data-server"]] = (a.get("data-state"), self.row["cells"])
            elif self.table == "moves" and "data-kind" in a:
                self.moves.append((a["data-kind"], self.row["cells"], self.row["bar"]))
            self.row = None
        elif tag == "table":
            self.table = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)
        if self.in_summary:
            self.summary += data

page = Page()
page.feed(open(path, encoding="utf-8").read())
print(f"  health: {page.health}")
for sid, (state, cells) in sorted(page.servers.items(), key=lambda kv: int(kv[0])):
    print(f"  server {sid}: data-state={state} cells={cells[:5]}")
print(f"  moves summary: {' '.join(page.summary.split())}")
for kind, cells, bar in page.moves[:5]:
    print(f"  move: kind={kind} bar={bar} cells={cells}")
print(f"  ({len(page.moves)} move rows)")

problems = []
if expect == "healthy":
    if page.health != "ok":
        problems.append(f"health is {page.health}, not ok")
    if len(page.servers) != 7 or any(s != "up" for s, _ in page.servers.values()):
        problems.append("not seven servers, all up")
    if page.moves:
        problems.append("move rows on a healthy cluster")
else:
    victim, address = sys.argv[3], sys.argv[4]
    if page.health in (None, "ok"):
        problems.append(f"health is {page.health} with a server down")
    if victim not in page.servers:
        problems.append(f"no row for server {victim}")
    else:
        state, cells = page.servers[victim]
        # Columns: ID, Name, Address, State, ...
        if state != "down":
            problems.append(f"server {victim} has data-state={state}")
        if len(cells) < 4 or cells[3] != "DOWN":
            problems.append(f"server {victim}'s State cell is not DOWN: {cells[:4]}")
        if len(cells) < 3 or cells[2] != address:
            problems.append(f"server {victim}'s address is not {address}: {cells[:3]}")
    others = [sid for sid, (s, _) in page.servers.items() if sid != victim and s != "up"]
    if len(page.servers) != 7 or others:
        problems.append(f"not six other servers up (down: {others})")
    # Columns: Task, Kind, State, PG, From, To, Progress, Bytes, Rate, ETA
    running = [c for k, c, bar in page.moves if k == "repair" and len(c) > 7 and
               c[2] == "running" and bar and c[4].split("(")[0] == victim]
    if not running:
        problems.append(f"no running repair row from server {victim} with a progress bar")
    elif not any(c[6] not in ("0%", "") and not c[7].startswith("0 B /") for c in running):
        problems.append("no running repair row shows progress past 0")
    if not page.summary.strip() or page.summary.split()[0] in ("0", ""):
        problems.append(f"moves summary does not count a running task: {page.summary!r}")
for p in problems:
    print(f"  WRONG: {p}")
sys.exit(1 if problems else 0)
EOF
}

# check_png FILE: a PNG of the window's size (1400x1600) and more than 20 KB.
check_png() {
  /usr/bin/python3 - "$1" <<'EOF'
import os, struct, sys
data = open(sys.argv[1], "rb").read()
if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
    sys.exit(f"{sys.argv[1]} is not a PNG")
width, height = struct.unpack(">II", data[16:24])
print(f"  screenshot: {width}x{height}, {len(data)} bytes")
if (width, height) != (1400, 1600) or len(data) < 20000:
    sys.exit("screenshot is not 1400x1600 or not over 20 KB")
EOF
}

aq_start_cluster
META_HTTP=$(cat "$AQ_SCRATCH/meta.http")
URL=http://$META_HTTP/status
aq_mount "$M"
for ((i = 0; i < FILES; i++)); do
  aq_log "random file $M/f$i ${FILE_MIB}MiB seed=$((500 + i))"
  timeout "$T" openssl enc -aes-128-ctr -nosalt -pass "pass:$((500 + i))" -pbkdf2 \
    -in <(head -c $((FILE_MIB << 20)) /dev/zero) -out "$M/f$i" || aq_fail "write f$i"
done
timeout "$T" sync -f "$M/f0" || aq_fail "syncfs"
aq_log "wrote $((FILES * FILE_MIB)) MiB"

render "$URL" "$AQ_SCRATCH/before"
aq_log "rendered page before the kill:"
check_dom "$AQ_SCRATCH/before.html" healthy || aq_fail "page of a healthy cluster is wrong"

# The id aquifer-meta gave data$VICTIM, and its gRPC address (the page's Address column).
metric_id() {
  curl -sf "http://$(cat "$AQ_SCRATCH/data$VICTIM.http")/metrics" |
    awk '$1 == "aquifer_data_server_id" && $2 > 0 { print $2; found = 1 } END { exit !found }'
}
ID=$(metric_id) || aq_fail "no aquifer_data_server_id in data$VICTIM's /metrics"
ADDRESS=$(cat "$AQ_SCRATCH/data$VICTIM.port")
aq_log "data$VICTIM is server $ID at $ADDRESS"
aq_kill_data "$VICTIM"

# curl until the page shows the server down and a running repair task past 0%.
RUNNING_REPAIR='<tr data-kind="repair"><td>[0-9]+</td><td>repair</td><td>running</td>'
repairing() {
  curl -sf "$URL" >"$AQ_SCRATCH/page.html" || return 1
  grep -q "data-server=\"$ID\" data-state=\"down\"" "$AQ_SCRATCH/page.html" &&
    grep -Eq "$RUNNING_REPAIR.*</span> [1-9][0-9]*%" "$AQ_SCRATCH/page.html"
}
aq_wait_for 60 "the page to show server $ID down and a repair under way" repairing
aq_log "page shows server $ID down and repair under way: $(grep -o '<p id="moves-summary">[^<]*' \
  "$AQ_SCRATCH/page.html" | cut -d'>' -f2)"

render "$URL" "$AQ_SCRATCH/after"
aq_log "rendered page after the kill:"
check_dom "$AQ_SCRATCH/after.html" repairing "$ID" "$ADDRESS" ||
  aq_fail "rendered page does not show server $ID down and repairing"
check_png "$AQ_SCRATCH/after.png" || aq_fail "bad screenshot"
if [ -n "${AQ_STATUS_SCREENSHOT:-}" ]; then
  cp "$AQ_SCRATCH/after.png" "$AQ_STATUS_SCREENSHOT" || aq_fail "copy to $AQ_STATUS_SCREENSHOT"
  aq_log "screenshot copied to $AQ_STATUS_SCREENSHOT"
fi
echo "PASS status_page"
