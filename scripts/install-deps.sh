#!/usr/bin/env bash
# Installs every Debian 12 package Aquifer's build, tests, benchmarks and main job need.
# usage: scripts/install-deps.sh [--with-data] [--with-fuzz]   (--with-data adds the real data sets and PyTorch
# that examples/lifecycle uses; the tests use python3-torch too, so .ci/run passes it)
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
build_pkgs=(
  build-essential cmake ninja-build ccache pkg-config git
  libfuse3-dev fuse3 liburing-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libisal-dev libspdlog-dev librocksdb-dev libssl-dev openssl
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev libtomlplusplus-dev nlohmann-json3-dev libcpp-httplib-dev prometheus-cpp-dev
  fio sqlite3 rsync bindfs procps psmisc util-linux python3 curl
  python3-prometheus-client chromium fonts-dejavu-core
)
data_pkgs=(python3-torch python3-pil python3-numpy dataset-fashion-mnist linux-source-6.1 xz-utils)
# --with-fuzz: clang and its runtimes (libFuzzer, ASan) for scripts/fuzz.sh; never needed by the
# normal gcc build.
fuzz_pkgs=(clang libclang-rt-14-dev)
pkgs=("${build_pkgs[@]}")
for arg in "$@"; do
  [ "$arg" = "--with-data" ] && pkgs+=("${data_pkgs[@]}")
  [ "$arg" = "--with-fuzz" ] && pkgs+=("${fuzz_pkgs[@]}")
done
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${#missing[@]} packages: ${missing[*]}"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "install-deps: all ${#pkgs[@]} packages present"
