#!/usr/bin/env bash
# Prepares this machine to build and run the project's image with podman
# (tests/system/test_container.py, `make image`): installs podman, runc and
# debootstrap with apt-get where root and missing; writes the containers.conf
# settings this host needs; builds the local Debian base image once with
# debootstrap and imports it (skipped when it exists); checks that a
# container runs. Idempotent: seconds when all is done. Exit 0 when
# containers run here, else 1 after one line saying why.
#
# Environment: OB_CONTAINER_BASE (default localhost/debian-base:bookworm),
# OB_DEBIAN_MIRROR (default: the first deb.debian.org-style URI in apt's
# sources, else http://deb.debian.org/debian), CONTAINERS_CONF (default
# /etc/containers/containers.conf).
set -uo pipefail
case "${1:-}" in
  -h|--help) sed -n '2,/^$/s/^# \{0,1\}//p' "$0"; exit 0 ;;
  "") ;;
  *) echo "usage: bash scripts/container_setup.sh [--help]" >&2; exit 2 ;;
esac

BASE=${OB_CONTAINER_BASE:-localhost/debian-base:bookworm}
CONF=${CONTAINERS_CONF:-/etc/containers/containers.conf}
PACKAGES="python3,python3-venv,make,ca-certificates,procps"

say() { echo "[container_setup] $*"; }
cannot() { echo "[container_setup] containers cannot run here: $*"; exit 1; }
is_root() { [ "$(id -u)" = 0 ]; }

install_packages() {
  local missing=() tool
  for tool in podman runc debootstrap; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
  done
  [ ${#missing[@]} = 0 ] && return 0
  is_root || cannot "${missing[*]} missing and not root (run: sudo apt-get install -y ${missing[*]})"
  command -v apt-get >/dev/null 2>&1 || cannot "${missing[*]} missing and no apt-get (install them with this system's package manager)"
  say "installing ${missing[*]} with apt-get"
  if ! apt-get install -y -q "${missing[@]}" >/tmp/container_setup.apt.log 2>&1; then
    apt-get update -q >>/tmp/container_setup.apt.log 2>&1
    apt-get install -y -q "${missing[@]}" >>/tmp/container_setup.apt.log 2>&1 \
      || cannot "apt-get install ${missing[*]} failed (no network? see /tmp/container_setup.apt.log)"
  fi
}

# set_conf SECTION KEY VALUE: adds KEY = VALUE under [SECTION] unless the
# section already sets KEY (a setting someone chose is left alone).
set_conf() {
  python3 - "$CONF" "$1" "$2" "$3" <<'PY' || cannot "cannot write $CONF"
import os, re, sys
path, section, key, value = sys.argv[1:]
lines = open(path).read().splitlines() if os.path.exists(path) else []
start = next((i for i, l in enumerate(lines)
              if l.strip() == f"[{section}]"), None)
if start is None:
    lines += ["", f"[{section}]", f"{key} = {value}"]
else:
    end = next((i for i in range(start + 1, len(lines))
                if lines[i].strip().startswith("[")), len(lines))
    if any(re.match(rf"\s*{key}\s*=", l) for l in lines[start + 1:end]):
        sys.exit(0)
    lines.insert(start + 1, f"{key} = {value}")
os.makedirs(os.path.dirname(path), exist_ok=True)
open(path, "w").write("\n".join(lines).lstrip("\n") + "\n")
print(f"[container_setup] {path}: [{section}] {key} = {value}")
PY
}

configure() {
  # crun stops on a host whose cgroups are v1 or hybrid ("cgroups in hybrid
  # mode not supported"); runc runs there.
  if [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" != cgroup2fs ] \
      && command -v runc >/dev/null 2>&1; then
    set_conf engine runtime '"runc"'
  fi
  # podman raises the open-files limit to 1048576 in each container; below
  # that hard limit (a host that is itself a container) setrlimit fails.
  local hard
  hard=$(ulimit -Hn)
  if [ "$hard" != unlimited ] && [ "$hard" -lt 1048576 ]; then
    set_conf containers default_ulimits '[]'
  fi
}

mirror() {
  if [ -n "${OB_DEBIAN_MIRROR:-}" ]; then echo "$OB_DEBIAN_MIRROR"; return; fi
  local uri
  uri=$(grep -hoE '(URIs:|deb) +https?://[^ ]+/debian/?( |$)' \
        /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null \
        | head -1 | awk '{print $2}')
  echo "${uri:-http://deb.debian.org/debian}"
}

build_base() {
  if podman image exists "$BASE" 2>/dev/null; then say "base image $BASE: present"; return; fi
  is_root || cannot "no base image $BASE and debootstrap needs root"
  local dir log=/tmp/container_setup.debootstrap.log
  dir=$(mktemp -d /var/tmp/ob-debian-base.XXXXXX)
  say "building $BASE with debootstrap (a few minutes; log: $log)"
  if ! debootstrap --variant=minbase --include="$PACKAGES" bookworm \
      "$dir" "$(mirror)" >"$log" 2>&1; then
    rm -rf "$dir"
    cannot "debootstrap failed (no network? last line: $(tail -n 1 "$log"))"
  fi
  rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
  tar -C "$dir" -c . | podman import - "$BASE" >>"$log" 2>&1 \
    || { rm -rf "$dir"; cannot "podman import of $BASE failed (see $log)"; }
  rm -rf "$dir"
  say "base image $BASE: imported"
}

check_run() {
  local out
  out=$(podman run --rm --network none "$BASE" python3 -c 'print("ok")' 2>&1) \
    || cannot "podman run fails: $(echo "$out" | tail -n 1)"
}

install_packages
configure
build_base
check_run
say "ok: podman $(podman --version | awk '{print $3}') runs $BASE"
