#!/usr/bin/env bash
# Reduced main job on a fresh local cluster under /tmp/aquifer-lt-XXXXXX: 3,000 samples, one
# epoch, linux-source-6.1/kernel (~560 files) of the kernel tree, then two data servers stopped
# and everything evaluated and verified again. Fails if any checksum differs, if the evaluation
# with two servers down differs, or if accuracy < 60% (a broken training reaches ~10%).
# Always tears the cluster down (trap). usage: lifecycle_test.sh BUILD_DIR
set -euo pipefail
BUILD=$(cd "$1" && pwd)
REPO=$(cd "$(dirname "$0")/../.." && pwd)
AQ="$BUILD/src/cli/aquifer"
ROOT=$(mktemp -d /tmp/aquifer-lt-XXXXXX)

cleanup() {
  local rc=$?
  "$AQ" cluster down --root "$ROOT" --grace-ms 5000 >/dev/null 2>&1 || true
  fusermount3 -uz "$ROOT/mnt" 2>/dev/null || true
  if [ -f "$ROOT/cluster.json" ]; then
    for pid in $(python3 -c "import json; s=json.load(open('$ROOT/cluster.json')); print(' '.join(str(p) for p in [s['meta']['pid'], s['mount']['pid']] + [d['pid'] for d in s['data_servers']]))" 2>/dev/null); do
      [ "$pid" -gt 0 ] && kill -9 "$pid" 2>/dev/null || true
    done
  fi
  if [ $rc -ne 0 ]; then
    echo "--- lifecycle FAILED (exit $rc); last lines of the daemons' logs:"
    tail -n 25 "$ROOT"/logs/*.log 2>/dev/null || true
  fi
  rm -rf "$ROOT"
  exit $rc
}
trap cleanup EXIT

"$AQ" cluster up --root "$ROOT" --bin-dir "$BUILD" --timeout-ms 60000
bash "$REPO/examples/lifecycle/run_lifecycle.sh" --dir "$ROOT/mnt/lifecycle" \
  --work "$ROOT/work" --samples 3000 --epochs 1 --workers 2 --kernel-subset kernel \
  --cluster-root "$ROOT" --aquifer "$AQ" --stop-servers "2 5" --min-accuracy 0.60
