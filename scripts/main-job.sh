#!/usr/bin/env bash
# The README's first command: on a fresh Debian 12 machine (as root or with sudo), installs what
# Aquifer needs, builds it, starts a local cluster (1 aquifer-meta, 6 aquifer-data, RS 4+2, a FUSE
# mount at /tmp/aquifer-cluster/mnt), runs the main job (examples/lifecycle) on real data, prints
# what it did, and leaves the cluster up.
# usage: bash scripts/main-job.sh [run_lifecycle.sh flags: --samples N --epochs E --skip-kernel
#        --kernel-subset DIR --workers W ...]
# env: AQUIFER_ROOT (default /tmp/aquifer-cluster); AQUIFER_BUILD_DIR (default build);
#      AQUIFER_SKIP_BUILD=1 to reuse an existing build (no package install, no build)
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
ROOT=${AQUIFER_ROOT:-/tmp/aquifer-cluster}
BUILD_DIR=${AQUIFER_BUILD_DIR:-build}
AQ="$REPO/$BUILD_DIR/src/cli/aquifer"
start=$SECONDS

if [ "${AQUIFER_SKIP_BUILD:-0}" = 1 ]; then
  echo "== 1-2/4 AQUIFER_SKIP_BUILD=1: using the build in $BUILD_DIR"
else
  echo "== 1/4 install packages (scripts/install-deps.sh --with-data)"
  bash scripts/install-deps.sh --with-data
  echo "== 2/4 build (scripts/build.sh $BUILD_DIR)"
  bash scripts/build.sh "$BUILD_DIR"
  echo "   built in $((SECONDS - start)) s"
fi

echo "== 3/4 start the local cluster at $ROOT"
"$AQ" cluster up --root "$ROOT"
MNT=$(python3 -c "import json; print(json.load(open('$ROOT/cluster.json'))['mount']['dir'])")
"$AQ" status --root "$ROOT" || echo "(status exit $?: not healthy, see its first line)"

echo "== 4/4 the main job on $MNT/lifecycle"
set +e
bash examples/lifecycle/run_lifecycle.sh --dir "$MNT/lifecycle" --clean \
  --cluster-root "$ROOT" --aquifer "$AQ" --work "$ROOT/lifecycle-work" "$@"
rc=$?
set -e
echo
"$AQ" status --root "$ROOT" || true
echo
echo "main job: $([ $rc = 0 ] && echo "done" || echo "FAILED (exit $rc)") after $((SECONDS - start)) s."
echo "The cluster is still up: browse $MNT (e.g. ls $MNT/lifecycle/images/train)."
echo "  status:  $AQ status --root $ROOT"
echo "  stop:    $AQ cluster down --root $ROOT"
echo "  restart: $AQ cluster up --root $ROOT   (keeps all data)"
exit $rc
