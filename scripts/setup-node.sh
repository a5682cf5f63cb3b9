#!/usr/bin/env bash
# Prepares this machine as a kubelet-ts test node (Debian 12, run as root), idempotently:
# installs the runtime packages, starts the local registry, builds and pushes the test
# images, starts containerd with its CRI plugin. Quick when everything is already up.
# Usage: setup-node.sh [--no-apt | --packages-only]
#   --no-apt         do not install packages; fail naming the missing ones instead
#   --packages-only  install the packages, start nothing
# Environment: KTS_NODE_DIR (default /var/lib/kubelet-ts/node), KTS_RUN_DIR (default
# /run/kubelet-ts), KTS_REGISTRY_PORT (default 5000).
set -euo pipefail
KTS_SCRIPT_NAME=setup-node.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

USE_APT=1
PACKAGES_ONLY=0
for arg in "$@"; do
  case "$arg" in
    --no-apt) USE_APT=0 ;;
    --packages-only) PACKAGES_ONLY=1 ;;
    -h | --help) sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) kts_die "unknown argument $arg (usage: setup-node.sh [--no-apt | --packages-only])" ;;
  esac
done
[ "$USE_APT$PACKAGES_ONLY" != 01 ] || kts_die "--no-apt and --packages-only exclude each other"

[ "$(id -u)" = 0 ] || kts_die "must run as root (containerd, mounts and network namespaces need it)"

# openssl: the kubelet's self-signed serving certificate; e2fsprogs: the small loop-device
# filesystem of the disk-pressure test; python3-prometheus-client: the
# Prometheus text parser the metrics endpoints' tests check their output with; prometheus:
# promtool (`promtool check metrics`), the lint every metrics endpoint must pass;
# libclang-rt-14-dev: libFuzzer and the sanitizers' runtimes for the native parsers' fuzz harnesses;
# apache2-utils: htpasswd, the bcrypt password file of the registry that requires authentication;
# qemu-system-x86, debootstrap, cpio: the VM node of scripts/vm-node.sh (systemd, cgroup v2).
# libsystemd-dev: sd-bus, the addon's D-Bus client for the systemd cgroup driver.
PACKAGES=(containerd runc containernetworking-plugins docker-registry skopeo busybox-static e2fsprogs
  gcc libc6-dev iproute2 clang libclang-rt-14-dev libbpf-dev bpftool openssl python3-prometheus-client prometheus apache2-utils
  qemu-system-x86 debootstrap cpio libsystemd-dev)

missing_packages() {
  local pkg
  for pkg in "${PACKAGES[@]}"; do
    [ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null)" = "ii " ] || echo "$pkg"
  done
}

install_packages() {
  local missing policy=/usr/sbin/policy-rc.d added_policy=0
  mapfile -t missing < <(missing_packages)
  [ "${#missing[@]}" -gt 0 ] || return 0
  if [ "$USE_APT" = 0 ]; then
    kts_die "missing packages: ${missing[*]} (run scripts/setup-node.sh without --no-apt, or apt-get install them)"
  fi
  kts_log "installing ${missing[*]}"
  # Without systemd, invoke-rc.d would start Debian's own docker-registry on *:5000
  # (and containerd on /run/containerd): forbid service starts during the install.
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 0755 "$policy"
    added_policy=1
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q || kts_die "apt-get update failed"
  apt-get install -y -q --no-install-recommends "${missing[@]}" || kts_die "apt-get install ${missing[*]} failed"
  if [ "$added_policy" = 1 ]; then
    rm -f "$policy"
    trap - EXIT
  fi
}

step() {
  local name=$1 start=$SECONDS
  shift
  "$@" || kts_die "step '$name' failed (command: $*)"
  kts_log "$name: done in $((SECONDS - start))s"
}

kts_lock setup
install_packages
if [ "$PACKAGES_ONLY" = 1 ]; then
  kts_log "packages installed: ${PACKAGES[*]}"
  exit 0
fi
step "registry" "$KTS_SCRIPTS_DIR/registry.sh" start
step "images" "$KTS_SCRIPTS_DIR/build-images.sh"
step "auth registry" "$KTS_SCRIPTS_DIR/registry.sh" start-auth
step "containerd" "$KTS_SCRIPTS_DIR/containerd.sh" start

cat <<EOF
kubelet-ts node ready
  node dir:        $KTS_NODE_DIR (containerd root/state/config, certs.d, cni, registry storage, images, logs)
  run dir:         $KTS_RUN_DIR (sockets, pid files)
  CRI endpoint:    unix://$KTS_RUN_DIR/containerd/containerd.sock
  registry:        http://$KTS_REGISTRY (storage $KTS_NODE_DIR/registry/storage)
  auth registry:   http://$KTS_AUTH_REGISTRY (htpasswd user $KTS_AUTH_REGISTRY_USER; serves $KTS_PRIVATE_IMAGE)
  images:          $KTS_PAUSE_IMAGE
                   $KTS_BUSYBOX_IMAGE
                   $KTS_BUSYBOX_LATEST_IMAGE
  logs:            $KTS_LOG_DIR/{containerd,registry}.log
  stop:            scripts/containerd.sh stop; scripts/registry.sh stop; scripts/registry.sh stop-auth
EOF
