#!/bin/bash
# `cmake --install` into a scratch root (DESTDIR), for a /usr and a /usr/local prefix: the four
# programs in PREFIX/bin, mount(8)'s helpers in /sbin pointing at PREFIX/bin/aquifer-mount, the
# systemd units under PREFIX/lib/systemd/system naming exactly the installed programs, configs
# and docs, the example configs binding loopback (not a wildcard), and an operator's edited
# config kept by a second install. usage: install_test.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: install_test.sh BUILD_DIR}
scratch=$(mktemp -d /tmp/aquifer-install-XXXX)
trap 'rm -rf "$scratch"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

check_prefix() {
  local prefix=$1 etc=$2 root=$scratch/root${1//\//_}
  DESTDIR=$root cmake --install "$build" --prefix "$prefix" >"$root.log" 2>&1 ||
    { cat "$root.log" >&2; fail "cmake --install --prefix $prefix"; }
  local p
  for p in aquifer aquifer-meta aquifer-data aquifer-mount; do
    [ -x "$root$prefix/bin/$p" ] || fail "$prefix/bin/$p not installed"
  done
  "$root$prefix/bin/aquifer" --version >/dev/null || fail "the installed aquifer does not run"
  for p in mount.fuse.aquifer mount.aquifer; do
    [ -L "$root/sbin/$p" ] || fail "/sbin/$p not installed"
    [ "$(readlink "$root/sbin/$p")" = "$prefix/bin/aquifer-mount" ] ||
      fail "/sbin/$p points at $(readlink "$root/sbin/$p"), not $prefix/bin/aquifer-mount"
  done
  local units=$root$prefix/lib/systemd/system
  for p in aquifer-meta.service aquifer-data@.service aquifer-mount@.service mnt-aquifer.mount \
           aquifer-meta-backup.service aquifer-meta-backup.timer; do
    [ -f "$units/$p" ] || fail "unit $p not installed in $prefix/lib/systemd/system"
  done
  # Every absolute path a unit names under the install is there, in the scratch root.
  local path
  for path in $(grep -ohE "(ExecStart=|--config |Documentation=file://|EnvironmentFile=|exec )[^ ']+" \
                  "$units"/* | sed -E 's/^(ExecStart=|--config |Documentation=file:\/\/|EnvironmentFile=|exec )//' |
                grep -E "^($prefix|$etc)" | sort -u); do
    case $path in
      *%i*) path=${path//%i/datasets}; [[ $path == *aquifer-data-datasets* ]] && continue ;;
    esac
    [ -e "$root$path" ] || fail "a unit names $path, which the install did not put there"
  done
  grep -q "^ExecStart=$prefix/bin/aquifer-meta --config $etc/aquifer/aquifer-meta.toml" \
    "$units/aquifer-meta.service" || fail "aquifer-meta.service: $(grep ExecStart "$units/aquifer-meta.service")"
  [ -f "$root$etc/aquifer/aquifer-meta.toml" ] || fail "$etc/aquifer/aquifer-meta.toml not installed"
  [ -f "$root$etc/aquifer/mount-datasets.conf" ] || fail "$etc/aquifer/mount-datasets.conf not installed"
  [ -f "$root$prefix/share/doc/aquifer/operations.md" ] || fail "docs not in $prefix/share/doc/aquifer"
  [ -f "$root$prefix/share/doc/aquifer/metrics.md" ] || fail "metrics.md not in the docs"
  [ -f "$root$prefix/share/doc/aquifer/examples/aquifer-data.toml" ] || fail "example configs"
  if grep -qE '^(http_)?listen = "(0\.0\.0\.0|\[::\])' "$root$etc"/aquifer/*.toml; then
    fail "an example config listens on a wildcard address"
  fi
  # A second install keeps what the operator edited.
  echo "# edited by the operator" >>"$root$etc/aquifer/aquifer-meta.toml"
  DESTDIR=$root cmake --install "$build" --prefix "$prefix" >"$root.log" 2>&1 || fail "reinstall"
  grep -q "edited by the operator" "$root$etc/aquifer/aquifer-meta.toml" ||
    fail "a reinstall overwrote $etc/aquifer/aquifer-meta.toml"
  echo "install --prefix $prefix: ok ($(find "$root" -type f -o -type l | wc -l) files)"
}

check_prefix /usr /etc
check_prefix /usr/local /usr/local/etc
echo "PASS install"
