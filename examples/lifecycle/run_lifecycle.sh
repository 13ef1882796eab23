#!/usr/bin/env bash
# Aquifer's main job: the life of a data set on one shared file system.
#
#   ingest     cp the raw Fashion-MNIST files (Debian's dataset-fashion-mnist) into DIR, and tar
#              the Linux source tree (linux-source-6.1, ~80k files) into DIR
#   transform  IDX -> 70,000 PNG files in train|test/CLASS/ folders + labels.csv (2 processes)
#   explore    ls, find, du over the tree, as a person at a shell would
#   train      a small CNN, a few epochs, PyTorch DataLoader workers reading random PNG batches
#   evaluate   accuracy on the held-back test split
#   side by side  one more training epoch while a second pipeline ingests and transforms
#              another copy of the data on the same file system
#   verify     sha256 of every ingested file vs. the source; then (on a local Aquifer cluster)
#              stop two data servers, evaluate and verify again, and restart them
#
# Works on any directory; on an Aquifer mount pass --cluster-root so it can stop data servers.
# usage: run_lifecycle.sh --dir DIR [--samples N] [--epochs E] [--workers W]
#          [--skip-kernel | --kernel-subset PATH] [--cluster-root ROOT] [--aquifer BIN]
#          [--stop-servers "2 5"] [--min-accuracy FRACTION] [--work DIR] [--clean]
#          [--skip-side-by-side]
# Exit 0 only when every checksum matches, the accuracy reaches --min-accuracy, and the
# evaluation with two servers stopped gives the same predictions.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-/usr/bin/python3}   # Debian's python3 has torch, PIL, numpy
LC="$HERE/lifecycle.py"
DIR="" WORK="" SAMPLES=70000 EPOCHS=3 WORKERS=3 KERNEL=full KERNEL_SUBSET="" CLUSTER_ROOT=""
AQ="" STOP_SERVERS="2 5" MIN_ACC=0.85 CLEAN=0 SIDE_BY_SIDE=1
FMNIST_DIR=${FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
KERNEL_TAR=${KERNEL_TAR:-/usr/src/linux-source-6.1.tar.xz}

usage() { sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) DIR=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --samples) SAMPLES=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    --workers) WORKERS=$2; shift 2 ;;
    --skip-kernel) KERNEL=none; shift ;;
    --kernel-subset) KERNEL=subset; KERNEL_SUBSET=$2; shift 2 ;;
    --cluster-root) CLUSTER_ROOT=$2; shift 2 ;;
    --aquifer) AQ=$2; shift 2 ;;
    --stop-servers) STOP_SERVERS=$2; shift 2 ;;
    --min-accuracy) MIN_ACC=$2; shift 2 ;;
    --clean) CLEAN=1; shift ;;
    --skip-side-by-side) SIDE_BY_SIDE=0; shift ;;
    -h|--help) usage 0 ;;
    *) echo "run_lifecycle: unknown argument $1" >&2; usage 2 ;;
  esac
done
[ -n "$DIR" ] || { echo "run_lifecycle: --dir is required" >&2; usage 2; }
[ -x "$PY" ] || { echo "run_lifecycle: $PY not found (apt-get install python3-torch python3-pil)" >&2; exit 2; }
[ -f "$FMNIST_DIR/train-images-idx3-ubyte.gz" ] || { echo "run_lifecycle: no Fashion-MNIST in $FMNIST_DIR (apt-get install dataset-fashion-mnist)" >&2; exit 2; }
if [ "$KERNEL" != none ] && [ ! -f "$KERNEL_TAR" ]; then
  echo "run_lifecycle: $KERNEL_TAR missing (apt-get install linux-source-6.1), or pass --skip-kernel" >&2; exit 2
fi
if [ -n "$CLUSTER_ROOT" ] && [ -z "$AQ" ]; then
  AQ=$(command -v aquifer || true)
  [ -n "$AQ" ] || { echo "run_lifecycle: --cluster-root needs --aquifer BIN" >&2; exit 2; }
fi

mkdir -p "$DIR"
if [ -n "$(ls -A "$DIR" 2>/dev/null)" ]; then
  if [ $CLEAN = 1 ]; then
    echo "run_lifecycle: removing the previous run under $DIR"
    rm -rf "${DIR:?}"/*
  else
    echo "run_lifecycle: $DIR is not empty (pass --clean to remove its contents)" >&2; exit 2
  fi
fi
[ -n "$WORK" ] || WORK=$(mktemp -d /tmp/aquifer-lifecycle-work-XXXXXX)
mkdir -p "$WORK"
RESULTS="$WORK/results.jsonl"
: > "$RESULTS"
export OMP_WAIT_POLICY=PASSIVE   # trainer threads must not spin against DataLoader workers

T0=0
now() { date +%s%N; }   # nanoseconds
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", (b - a) / 1e9 }'; }
begin() { T0=$(now); echo; echo "=== $1"; }
# record STAGE FILES BYTES [NOTE]: appends the stage's time and throughput to the results.
record() {
  local secs; secs=$(elapsed "$T0")
  "$PY" - "$RESULTS" "$1" "$secs" "$2" "$3" "${4:-}" <<'EOF'
import json, sys
path, stage, secs, files, nbytes, note = sys.argv[1:7]
secs, files, nbytes = float(secs), int(files), int(nbytes)
r = {"stage": stage, "seconds": secs, "files": files, "bytes": nbytes,
     "files_per_s": files / secs if secs else 0.0,
     "mib_per_s": nbytes / 1048576 / secs if secs else 0.0}
if note:
    r["note"] = note
open(path, "a").write(json.dumps(r) + "\n")
print(f"{stage}: {files} files, {nbytes / 1048576:.1f} MiB in {secs:.1f} s = "
      f"{r['files_per_s']:.0f} files/s, {r['mib_per_s']:.1f} MiB/s" + (f" ({note})" if note else ""))
EOF
}
tree_bytes() { du -sb --apparent-size "$1" | cut -f1; }
tree_files() { find "$1" -type f | wc -l; }

echo "lifecycle: data in $DIR, scratch in $WORK, $SAMPLES samples, $EPOCHS epochs, $WORKERS loader workers, kernel tree: $KERNEL ${KERNEL_SUBSET}"
RUN_START=$(now)

# --- reference checksums of the sources (local disk, not timed as a stage of the file system)
"$PY" "$LC" manifest-files --dir "$FMNIST_DIR" --out "$WORK/raw.manifest.json"
KPREFIX="linux-source-6.1"
if [ "$KERNEL" = subset ]; then KPREFIX="linux-source-6.1/${KERNEL_SUBSET#linux-source-6.1/}"; fi
if [ "$KERNEL" != none ]; then
  "$PY" "$LC" manifest-tar --tar "$KERNEL_TAR" --prefix "$KPREFIX" --strip "linux-source-6.1/" \
    --out "$WORK/kernel.manifest.json"
fi

# --- ingest
begin "ingest: cp the raw data set into $DIR/raw"
mkdir -p "$DIR/raw"
cp -r "$FMNIST_DIR" "$DIR/raw/"
n=$(tree_files "$DIR/raw"); b=$(tree_bytes "$DIR/raw")
record ingest_raw "$n" "$b" "cp -r"
if [ "$KERNEL" != none ]; then
  begin "ingest: tar the Linux source tree ($KPREFIX) into $DIR/kernel"
  mkdir -p "$DIR/kernel"
  if [ "$KERNEL" = subset ]; then
    tar -xJf "$KERNEL_TAR" -C "$DIR/kernel" "$KPREFIX"
  else
    tar -xJf "$KERNEL_TAR" -C "$DIR/kernel"
  fi
  n=$(tree_files "$DIR/kernel"); b=$(tree_bytes "$DIR/kernel")
  record ingest_kernel "$n" "$b" "tar -xJf, includes xz decompression"
fi

# --- transform
begin "transform: IDX -> one PNG per sample + labels.csv, 2 processes"
"$PY" "$LC" transform --raw "$DIR/raw/fashion-mnist" --out "$DIR/images" --samples "$SAMPLES" \
  --procs 2 --manifest "$WORK/images.manifest.json" --results "$RESULTS" --tag transform

# --- explore
begin "explore: ls, find, du"
(
  set +e +o pipefail   # `ls | head` may end ls with SIGPIPE; that is not a failure here
  set -x
  ls "$DIR"
  ls "$DIR/images/train"
  ls -l "$DIR/images/train/Sneaker" | head -5
  find "$DIR/images" -name '*.png' | wc -l
  find "$DIR/images/test" -type d | sort
  du -sh "$DIR/images" "$DIR/raw"
  head -3 "$DIR/images/test/labels.csv"
  for c in "$DIR"/images/train/*/; do printf '%s %s\n' "$(basename "$c")" "$(ls "$c" | wc -l)"; done
  file_count=$(find "$DIR" -type f | wc -l); echo "files in $DIR: $file_count"
  if [ -d "$DIR/kernel" ]; then
    find "$DIR/kernel" -name '*.c' | wc -l
    du -sh "$DIR/kernel"
    ls "$DIR/kernel/linux-source-6.1" | head -20
    grep -rl "MODULE_LICENSE" "$DIR/kernel" 2>/dev/null | head -3
  fi
) 2>&1 | sed 's/^/  /' || true
n=$(find "$DIR" -type f | wc -l)
record explore "$n" 0 "ls, find, du, grep over the tree"

# --- train
begin "train: small CNN, $EPOCHS epochs, DataLoader with $WORKERS workers reading PNGs"
"$PY" "$LC" train --data "$DIR/images" --model "$DIR/checkpoints/model.pt" --epochs "$EPOCHS" \
  --workers "$WORKERS" --results "$RESULTS" --tag train

# --- evaluate
begin "evaluate: accuracy on the test split"
"$PY" "$LC" evaluate --data "$DIR/images" --model "$DIR/checkpoints/model.pt" \
  --workers "$WORKERS" --results "$RESULTS" --tag evaluate

# --- side by side: training while a second pipeline ingests and transforms another copy
if [ $SIDE_BY_SIDE = 1 ]; then
  begin "side by side: one training epoch while a second pipeline ingests and transforms a copy"
  cp "$DIR/checkpoints/model.pt" "$WORK/model-side.pt"
  (
    t=$(now)
    mkdir -p "$DIR/copy2/raw"
    cp -r "$FMNIST_DIR" "$DIR/copy2/raw/"
    "$PY" "$LC" transform --raw "$DIR/copy2/raw/fashion-mnist" --out "$DIR/copy2/images" \
      --samples "$SAMPLES" --procs 2 --results "$RESULTS" --tag transform_side_by_side \
      > "$WORK/pipeline2.log" 2>&1
    elapsed "$t" > "$WORK/pipeline2.seconds"
  ) &
  PIPE2=$!
  "$PY" "$LC" train --data "$DIR/images" --model "$WORK/model-side.pt" --resume --epochs 1 \
    --workers "$WORKERS" --results "$RESULTS" --tag train_side_by_side
  wait $PIPE2 || { echo "side by side: the second pipeline failed:"; cat "$WORK/pipeline2.log"; exit 1; }
  sed 's/^/  pipeline 2: /' "$WORK/pipeline2.log"
  echo "  pipeline 2 (cp + transform of a second copy) took $(printf '%.1f' "$(cat "$WORK/pipeline2.seconds")") s"
fi

# --- verify
verify_all() {  # verify_all SUFFIX
  "$PY" "$LC" verify --dir "$DIR/raw/fashion-mnist" --manifest "$WORK/raw.manifest.json" \
    --results "$RESULTS" --tag "verify_raw$1" || true
  "$PY" "$LC" verify --dir "$DIR/images" --manifest "$WORK/images.manifest.json" \
    --results "$RESULTS" --tag "verify_images$1" || true
  if [ "$KERNEL" != none ]; then
    local kdir="$DIR/kernel/linux-source-6.1"
    local kman="$WORK/kernel.manifest.json"
    if [ "$KERNEL" = subset ]; then
      # The manifest names are relative to linux-source-6.1/; verify that subtree only.
      kdir="$DIR/kernel/$KPREFIX"
      "$PY" - "$kman" "${KPREFIX#linux-source-6.1/}/" "$WORK/kernel.sub.json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1])); p = sys.argv[2]
json.dump({k[len(p):]: v for k, v in m.items() if k.startswith(p)}, open(sys.argv[3], "w"))
EOF
      kman="$WORK/kernel.sub.json"
    fi
    "$PY" "$LC" verify --dir "$kdir" --manifest "$kman" --results "$RESULTS" \
      --tag "verify_kernel$1" || true
  fi
}
begin "verify: sha256 of every ingested and transformed file vs. the source"
verify_all ""

if [ -n "$CLUSTER_ROOT" ]; then
  begin "failure: stop data servers $STOP_SERVERS, evaluate and verify again"
  for s in $STOP_SERVERS; do "$AQ" cluster stop-server "$s" --root "$CLUSTER_ROOT"; done
  "$AQ" status --root "$CLUSTER_ROOT" | sed 's/^/  /' || true
  "$PY" "$LC" evaluate --data "$DIR/images" --model "$DIR/checkpoints/model.pt" \
    --workers "$WORKERS" --results "$RESULTS" --tag evaluate_servers_stopped
  verify_all "_servers_stopped"
  begin "failure: restart data servers $STOP_SERVERS"
  for s in $STOP_SERVERS; do "$AQ" cluster start-server "$s" --root "$CLUSTER_ROOT"; done
  record restart_servers 0 0 "servers $STOP_SERVERS back"
else
  echo; echo "(no --cluster-root: skipping the two-server stop)"
fi

TOTAL=$(elapsed "$RUN_START")
echo; echo "=== summary (total $(printf '%.0f' "$TOTAL") s; results in $RESULTS)"
REQUIRE=(--require ingest_raw --require transform --require train --require evaluate
         --require verify_raw --require verify_images)
[ "$KERNEL" != none ] && REQUIRE+=(--require verify_kernel)
[ -n "$CLUSTER_ROOT" ] && REQUIRE+=(--require evaluate_servers_stopped --require verify_raw_servers_stopped)
"$PY" "$LC" summary --results "$RESULTS" --min-accuracy "$MIN_ACC" "${REQUIRE[@]}"
