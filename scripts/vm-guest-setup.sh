#!/bin/sh
# Runs inside the VM node (from the kts-vm-agent unit, after the host's control share is
# mounted at /run/kts-host): brings the network up, mounts the directories vm-node.sh
# shares at the same paths they have on the host, and becomes the command agent.
# /run/kts-host holds: bin/node, vm-agent.mjs, token, mounts ("TAG PATH OPTIONS" lines),
# env (NAME=VALUE lines every command gets).
set -eu
H=/run/kts-host
# What goes wrong here is shown on the serial console (vm-node.sh console) as well.
exec 2>/dev/ttyS0

# qemu user-mode network: the guest is 10.0.2.15, qemu's gateway 10.0.2.2. No DHCP needed.
ip link set lo up
ip link set eth0 up
ip addr replace 10.0.2.15/24 dev eth0
ip route replace default via 10.0.2.2 dev eth0

while read -r tag path opts; do
  [ -n "$tag" ] || continue
  mkdir -p "$path"
  mountpoint -q "$path" ||
    mount -t 9p -o "trans=virtio,version=9p2000.L,msize=262144,$opts" "$tag" "$path"
done <"$H/mounts"

# The test registries of the host, reachable through qemu's guestfwd at 10.0.2.100, are
# forwarded to the same 127.0.0.1 ports inside: image names stay those of the host.
exec "$H/bin/node" "$H/vm-agent.mjs" serve --port 7000 --token-file "$H/token" --base-env-file "$H/env" \
  --forward 127.0.0.1:5000=10.0.2.100:5000 --forward 127.0.0.1:5001=10.0.2.100:5001
