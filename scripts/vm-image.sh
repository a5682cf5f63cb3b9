#!/usr/bin/env bash
# Builds the VM node image that scripts/vm-node.sh boots: a Debian 12 (bookworm) root
# filesystem made by debootstrap (systemd, containerd, runc, CNI plugins), Debian's
# kernel and its modules, packed as an uncompressed newc cpio that the kernel unpacks as
# its initramfs and runs /sbin/init (systemd) from. Node.js, the project and the
# command agent are not in the image: vm-node.sh shares them in over virtio-9p at boot.
# The kernel's initial rootfs cannot be pivot_root'ed away from (runc needs pivot_root for
# every container), so /kts-init copies it into a tmpfs and switch_root's there first.
# Usage: vm-image.sh OUT_DIR
#   Writes OUT_DIR/{vmlinuz,initrd.cpio,kernel-release,packages,build-seconds} (atomically:
#   built in OUT_DIR.tmp, renamed at the end). The caller (vm-node.sh build) picks OUT_DIR
#   from a hash of this file, so a change here builds a new image.
# Environment: KTS_VM_MIRROR (default http://deb.debian.org/debian); KTS_VM_CACHE_DIR: when
# set, the debootstrapped base (keyed by suite, mirror and package list) and the kernel
# package are kept there, so that a change of the node's configuration only repacks.
set -euo pipefail
KTS_SCRIPT_NAME=vm-image.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

MIRROR=${KTS_VM_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
# What the node runs (openssl: kubelet-ts makes its self-signed serving certificate with it);
# ca-certificates and the like are not needed (no traffic but the
# local registries). kmod: modprobe for the kernel's module requests (no udev here).
VM_PACKAGES=(systemd systemd-sysv dbus kmod containerd runc containernetworking-plugins
  iproute2 iptables procps util-linux openssl)
# The kernel: Debian 12's generic amd64 flavour, whatever version linux-image-amd64 names.
KERNEL_META=linux-image-amd64
# Module trees a virtio guest running containers never loads (keeps the image small).
MODULE_PRUNE=(drivers/gpu drivers/media drivers/infiniband drivers/net/wireless drivers/net/ethernet
  drivers/staging drivers/scsi drivers/usb drivers/bluetooth drivers/iio drivers/hid drivers/input
  drivers/isdn drivers/mtd drivers/hwmon drivers/platform drivers/net/can drivers/ata drivers/thunderbolt
  drivers/edac drivers/leds drivers/mfd drivers/nfc drivers/pinctrl drivers/power drivers/regulator
  drivers/rtc drivers/spi drivers/i2c drivers/w1 drivers/watchdog drivers/misc drivers/md
  drivers/target drivers/nvme drivers/firewire drivers/pcmcia drivers/comedi drivers/crypto
  sound net/wireless net/mac80211 net/bluetooth net/nfc net/ieee802154 net/mac802154 fs/ocfs2
  fs/nls fs/btrfs fs/xfs fs/f2fs fs/gfs2 fs/nfs fs/nfsd fs/smb fs/ceph)

OUT=${1:-}
[ -n "$OUT" ] || kts_die "usage: vm-image.sh OUT_DIR"
[ "$(id -u)" = 0 ] || kts_die "must run as root (debootstrap and chroot need it)"
for tool in debootstrap cpio apt-get dpkg-deb; do
  command -v "$tool" >/dev/null || kts_die "$tool not found (install debootstrap and cpio: scripts/setup-node.sh --packages-only)"
done

TMP=$OUT.tmp
ROOTFS=$TMP/rootfs
START=$SECONDS

# Unmounts whatever debootstrap left mounted in the target if it failed half-way, so
# that removing the work directory never reaches into the host's /proc or /sys.
cleanup_mounts() {
  local m
  [ -d "$ROOTFS" ] || return 0
  for m in $(awk -v r="$ROOTFS" '$2 == r || index($2, r "/") == 1 {print $2}' /proc/mounts | sort -r); do
    umount -l "$m" 2>/dev/null || true
  done
}
on_exit() {
  local rc=$?
  cleanup_mounts
  if [ "$rc" != 0 ]; then
    kts_log "image build failed; work left in $TMP (removed by the next build)"
  fi
}
trap on_exit EXIT

cleanup_mounts
rm -rf "$TMP"
mkdir -p "$TMP"

t=$SECONDS
packages=$(IFS=,; echo "${VM_PACKAGES[*]}")
CACHE=${KTS_VM_CACHE_DIR:-}
base_tar=""
if [ -n "$CACHE" ]; then
  mkdir -p "$CACHE"
  base_tar=$CACHE/base-$(printf '%s\n' "$SUITE" "$MIRROR" "$packages" | sha256sum | cut -c1-16).tar
fi
if [ -n "$base_tar" ] && [ -f "$base_tar" ]; then
  mkdir -p "$ROOTFS"
  tar -C "$ROOTFS" --numeric-owner -xpf "$base_tar"
  kts_log "debootstrap: cached base $base_tar unpacked in $((SECONDS - t))s"
else
  kts_log "debootstrap $SUITE (minbase + ${VM_PACKAGES[*]}) from $MIRROR"
  debootstrap --variant=minbase --include="$packages" "$SUITE" "$ROOTFS" "$MIRROR" >"$TMP/debootstrap.log" 2>&1 || {
    tail -n 20 "$TMP/debootstrap.log" >&2
    kts_die "debootstrap failed (log: $TMP/debootstrap.log)"
  }
  cleanup_mounts
  if [ -n "$base_tar" ]; then
    rm -f "$CACHE"/base-*.tar
    tar -C "$ROOTFS" --numeric-owner -cpf "$base_tar.tmp" . && mv "$base_tar.tmp" "$base_tar"
  fi
  kts_log "debootstrap: done in $((SECONDS - t))s"
fi

# The kernel: resolve linux-image-amd64 to its versioned package inside the new root's
# apt (the same mirror and suite), download it there and unpack vmlinuz and modules.
t=$SECONDS
kpkg=$(chroot "$ROOTFS" apt-cache depends "$KERNEL_META" 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-/ {print $2; exit}')
[ -n "$kpkg" ] || kts_die "cannot resolve $KERNEL_META to a kernel package in the $SUITE archive"
kdeb=$(ls "${CACHE:-/nonexistent}"/"$kpkg"_*.deb 2>/dev/null | head -n 1 || true)
if [ -z "$kdeb" ]; then
  chroot "$ROOTFS" sh -c "cd /tmp && apt-get -o APT::Sandbox::User=root download -q $kpkg" >"$TMP/kernel.log" 2>&1 || {
    tail -n 20 "$TMP/kernel.log" >&2
    kts_die "apt-get download $kpkg failed"
  }
  kdeb=$(ls "$ROOTFS"/tmp/"$kpkg"_*.deb | head -n 1)
  if [ -n "$CACHE" ]; then
    rm -f "$CACHE"/linux-image-*.deb
    mv "$kdeb" "$CACHE/" && kdeb=$CACHE/$(basename "$kdeb")
  fi
fi
mkdir -p "$TMP/kernel"
dpkg-deb -x "$kdeb" "$TMP/kernel"
rm -f "$ROOTFS"/tmp/"$kpkg"_*.deb
krel=${kpkg#linux-image-}
[ -f "$TMP/kernel/boot/vmlinuz-$krel" ] || kts_die "$kpkg has no /boot/vmlinuz-$krel"
cp "$TMP/kernel/boot/vmlinuz-$krel" "$TMP/vmlinuz"
for d in "${MODULE_PRUNE[@]}"; do rm -rf "$TMP/kernel/lib/modules/$krel/kernel/$d"; done
mkdir -p "$ROOTFS/lib/modules"
cp -a "$TMP/kernel/lib/modules/$krel" "$ROOTFS/lib/modules/"
chroot "$ROOTFS" depmod -a "$krel"
rm -rf "$TMP/kernel"
echo "$krel" >"$TMP/kernel-release"
kts_log "kernel $krel: done in $((SECONDS - t))s"

# --- node configuration ---------------------------------------------------------------
echo kts-vm-node >"$ROOTFS/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\tkts-vm-node\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$ROOTFS/etc/hosts"
: >"$ROOTFS/etc/fstab"
# A fixed machine id: an empty one makes every boot a "first boot" (systemd-firstboot).
head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$ROOTFS/etc/machine-id"
echo >>"$ROOTFS/etc/machine-id"

# Modules the virtio devices need: there is no udev to load them by modalias.
cat >"$ROOTFS/etc/modules-load.d/kts-vm.conf" <<'EOF'
virtio_pci
virtio_net
9pnet_virtio
9p
overlay
br_netfilter
EOF

# Units a throwaway test node does not want: timers, the console login, first-boot prompts.
for unit in apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer \
  e2scrub_reap.service fstrim.timer getty@tty1.service serial-getty@ttyS0.service \
  systemd-firstboot.service systemd-pstore.service remote-fs.target; do
  ln -sf /dev/null "$ROOTFS/etc/systemd/system/$unit"
done
rm -f "$ROOTFS"/etc/systemd/system/*.wants/{apt-daily.timer,apt-daily-upgrade.timer,dpkg-db-backup.timer,e2scrub_all.timer,e2scrub_reap.service,fstrim.timer,getty@tty1.service,systemd-pstore.service,remote-fs.target}
ln -sf /lib/systemd/system/multi-user.target "$ROOTFS/etc/systemd/system/default.target"
mkdir -p "$ROOTFS/etc/systemd/journald.conf.d"
printf '[Journal]\nStorage=volatile\nRuntimeMaxUse=32M\n' >"$ROOTFS/etc/systemd/journald.conf.d/kts-vm.conf"

# The first process (rdinit=/kts-init): the initial rootfs cannot be left by pivot_root,
# which runc needs for each container; a copy in a tmpfs can. switch_root frees the original.
mkdir -p "$ROOTFS/newroot"
cat >"$ROOTFS/kts-init" <<'EOF'
#!/bin/sh
mount -t tmpfs -o mode=0755,size=75% tmpfs /newroot
cp -ax /. /newroot
exec switch_root /newroot /sbin/init
EOF
chmod 0755 "$ROOTFS/kts-init"

# The agent: the setup and the command server come from the host's share (vm-node.sh),
# so that they can change without a new image. Network is static (qemu user mode).
cat >"$ROOTFS/usr/local/sbin/kts-vm-agent" <<'EOF'
#!/bin/sh
# Mounts the host's control share and hands over to the setup script it carries.
set -e
mkdir -p /run/kts-host
mountpoint -q /run/kts-host || mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144 kts-host /run/kts-host
exec /bin/sh /run/kts-host/guest-setup.sh
EOF
chmod 0755 "$ROOTFS/usr/local/sbin/kts-vm-agent"
cat >"$ROOTFS/etc/systemd/system/kts-vm-agent.service" <<'EOF'
[Unit]
Description=kubelet-ts VM node: host shares and command agent
After=systemd-modules-load.service
Wants=systemd-modules-load.service
Before=containerd.service
StartLimitIntervalSec=0

[Service]
Type=simple
ExecStart=/usr/local/sbin/kts-vm-agent
KillMode=process
Restart=on-failure
RestartSec=2

[Install]
WantedBy=multi-user.target
EOF
ln -sf /etc/systemd/system/kts-vm-agent.service "$ROOTFS/etc/systemd/system/multi-user.target.wants/kts-vm-agent.service"

# containerd as a kubeadm node runs it: systemd cgroups for runc, the CRI plugin, a bridge
# CNI network; images come from the host's local registries, which the agent forwards to
# 127.0.0.1:5000 and :5001 inside the node, so image names are the same as on the host.
cat >"$ROOTFS/etc/containerd/config.toml" <<'EOF'
# Written by scripts/vm-image.sh.
version = 2

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "127.0.0.1:5000/kubelet-ts/pause:3.9"
  enable_selinux = false

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = true

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "/etc/cni/net.d"
    max_conf_num = 1

  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "/etc/containerd/certs.d"

[plugins."io.containerd.internal.v1.opt"]
  path = "/var/lib/containerd/opt"
EOF
for port in 5000 5001; do
  mkdir -p "$ROOTFS/etc/containerd/certs.d/127.0.0.1:$port"
  printf 'server = "http://127.0.0.1:%s"\n\n[host."http://127.0.0.1:%s"]\n  capabilities = ["pull", "resolve"]\n' \
    "$port" "$port" >"$ROOTFS/etc/containerd/certs.d/127.0.0.1:$port/hosts.toml"
done
mkdir -p "$ROOTFS/etc/cni/net.d"
cat >"$ROOTFS/etc/cni/net.d/10-containerd-net.conflist" <<'EOF'
{
  "cniVersion": "1.0.0",
  "name": "containerd-net",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{ "subnet": "10.85.0.0/16" }]],
        "routes": [{ "dst": "0.0.0.0/0" }]
      }
    },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}
EOF
mkdir -p "$ROOTFS/etc/systemd/system/containerd.service.d"
# containerd waits for the agent, which starts the registry forwards.
printf '[Unit]\nAfter=kts-vm-agent.service\n' >"$ROOTFS/etc/systemd/system/containerd.service.d/kts-vm.conf"

# Nothing the node needs at run time: package caches, lists, docs, locales.
rm -rf "$ROOTFS"/var/cache/apt/*.bin "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/* \
  "$ROOTFS"/usr/share/doc/* "$ROOTFS"/usr/share/man/* "$ROOTFS"/usr/share/info/*
find "$ROOTFS/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name 'locale.alias' -exec rm -rf {} +
chroot "$ROOTFS" dpkg-query -W -f='${Package} ${Version}\n' >"$TMP/packages"

# --- pack -----------------------------------------------------------------------------
# Uncompressed: under emulation the kernel would spend many seconds inflating a gzip'd one.
t=$SECONDS
(cd "$ROOTFS" && find . -mindepth 1 -print0 | LC_ALL=C sort -z | cpio --null --create --format=newc --quiet) >"$TMP/initrd.cpio"
rm -rf "$ROOTFS"
kts_log "initramfs $(du -m "$TMP/initrd.cpio" | cut -f1) MB: done in $((SECONDS - t))s"
echo $((SECONDS - START)) >"$TMP/build-seconds"
rm -rf "$OUT"
mv "$TMP" "$OUT"
trap - EXIT
kts_log "image $OUT built in $((SECONDS - START))s (kernel $krel)"
