#!/usr/bin/env bash
# The README's test command: installs dependencies, builds, runs every test under ctest.
# Mount tests need root and /dev/fuse (as on CI). usage: scripts/test.sh [ctest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --with-data
bash scripts/build.sh build
cd build
# Every tier, the 3-minute storm (label soak) included; `-LE soak` leaves it out.
ctest --output-on-failure --timeout 900 "$@"
