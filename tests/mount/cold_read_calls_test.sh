#!/bin/bash
# Metadata calls per cold small-file read through a real mount (issue 19 must 3; docs/design.md
# "Opens without a round trip", "Looked-up attributes"): 100 files of 4-14 KiB in 10 directories
# of 10 (fewer than a directory needs before the mount lists it) are written, the mount is
# mounted again (its caches empty, as on a host that just mounted), and each file is read once
# with cat. aquifer-meta's aquifer_meta_rpc_requests_total says what that cost: the namespace
# calls (Lookup, Open, Release, ReleaseBatch, GetAttr, ReadDir) must be at most one per file, plus
# two per directory (its lookup, and again if the kernel's entry for it timed out on a slow
# machine) and 10 of the mount's own (111 on a quiet machine). Before the lookup kept what the open needs, each
# file cost a Lookup, an Open and a ReleaseBatch (317 calls for these 100 files). The bytes read
# must be the bytes written. Then the same files are read again through a fresh mount by globbing
# their directories (the opens after a plus listing, "Listed attributes").
source "$(dirname "$0")/lib.sh"
M=$AQ_SCRATCH/mnt
REF=$AQ_SCRATCH/ref
DIRS=10
PER_DIR=10
aq_start_cluster
aq_mount "$M"
mkdir -p "$REF"
for d in $(seq "$DIRS"); do
  mkdir "$M/d$d" "$REF/d$d"
  for f in $(seq "$PER_DIR"); do
    head -c $((4096 + f * 1000)) /dev/urandom >"$REF/d$d/f$f"
    timeout "$T" cp "$REF/d$d/f$f" "$M/d$d/f$f" || aq_fail "write of d$d/f$f"
  done
done
aq_umount "$M"
aq_mount "$M"

HTTP=$(cat "$AQ_SCRATCH/meta.http")
calls() {  # the namespace calls aquifer-meta served so far
  /usr/bin/python3 - "$HTTP" <<'PY'
import re, sys, urllib.request
text = urllib.request.urlopen(f"http://{sys.argv[1]}/metrics", timeout=10).read().decode()
methods = {"Lookup", "Open", "Release", "ReleaseBatch", "GetAttr", "ReadDir"}
total = 0
for line in text.splitlines():
    m = re.match(r'aquifer_meta_rpc_requests_total\{(.*)\} ([0-9.e+]+)$', line)
    if m and re.search(r'method="([^"]+)"', m.group(1)).group(1) in methods:
        total += float(m.group(2))
print(int(total))
PY
}
before=$(calls) || aq_fail "scrape of aquifer-meta"
for d in $(seq "$DIRS"); do
  for f in $(seq "$PER_DIR"); do
    timeout "$T" cmp "$REF/d$d/f$f" "$M/d$d/f$f" || aq_fail "d$d/f$f read other bytes"
  done
done
after=$(calls) || aq_fail "scrape of aquifer-meta"
files=$((DIRS * PER_DIR))
used=$((after - before))
limit=$((files + 2 * DIRS + 10))
aq_log "cold reads: $used metadata calls for $files files in $DIRS directories (limit $limit)"
((used <= limit)) || aq_fail "cold reads cost $used metadata calls for $files files (over $limit)"

# The same files found by listing their directories (READDIRPLUS: a glob, as a dataset scan that
# lists and then opens each file) through a mount that just mounted again: the plus pages keep
# each file's attributes, so the opens send nothing. At most 3 calls per directory (its lookup,
# the listing, one more) and 10 of the mount's own; before the pages were kept, each file cost
# an Open and a ReleaseBatch (over 200 calls here).
aq_umount "$M"
aq_mount "$M"
before=$(calls) || aq_fail "scrape of aquifer-meta"
for d in $(seq "$DIRS"); do
  timeout "$T" cat "$M/d$d"/* >"$AQ_SCRATCH/listed" || aq_fail "cat of d$d/*"
  cat "$REF/d$d"/* | cmp - "$AQ_SCRATCH/listed" || aq_fail "d$d/* read other bytes"
done
after=$(calls) || aq_fail "scrape of aquifer-meta"
used=$((after - before))
limit=$((3 * DIRS + 10))
aq_log "listed reads: $used metadata calls for $files files in $DIRS directories (limit $limit)"
((used <= limit)) || aq_fail "listed reads cost $used metadata calls for $files files (over $limit)"
aq_log "PASS cold_read_calls"
