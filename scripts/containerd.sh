#!/usr/bin/env bash
# A private containerd (with its CRI plugin) for the test node: own root, state, socket,
# registry mirror config and CNI bridge network, started without systemd.
# Usage: containerd.sh start|stop|status|env
#   start   writes the config and starts containerd unless it already answers
#   stop    removes every CRI pod it can, stops containerd, kills leftover shims and
#           containers, unmounts what is left under its root and state
#   status  exit 0 when running (prints a line), 3 when not
#   env     prints CONTAINER_RUNTIME_ENDPOINT and the image names as shell assignments
# Environment (besides lib.sh's KTS_NODE_DIR, KTS_RUN_DIR, KTS_REGISTRY_PORT): a second
# node on the same machine also needs its own KTS_BRIDGE (kts0) and KTS_POD_CIDR.
set -euo pipefail
KTS_SCRIPT_NAME=containerd.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CTR_DIR=$KTS_NODE_DIR/containerd
CTR_ROOT=$CTR_DIR/root
CTR_STATE=$CTR_DIR/state
CTR_CONFIG=$CTR_DIR/config.toml
CTR_CERTS=$CTR_DIR/certs.d
CTR_LOG=$KTS_LOG_DIR/containerd.log
CNI_CONF_DIR=$KTS_NODE_DIR/cni/net.d
CNI_IPAM_DIR=$KTS_NODE_DIR/cni/networks
CNI_BIN_DIR=${KTS_CNI_BIN_DIR:-/usr/lib/cni}
CTR_RUN=$KTS_RUN_DIR/containerd
CTR_SOCK=$CTR_RUN/containerd.sock
CTR_PID=$CTR_RUN/containerd.pid
# runc keeps its container state here (per namespace), not in the shared /run/containerd/runc.
RUNC_ROOT=$KTS_RUN_DIR/runc
POD_CIDR=${KTS_POD_CIDR:-10.88.0.0/16}
BRIDGE=${KTS_BRIDGE:-kts0}

ctr_() { ctr --address "$CTR_SOCK" "$@"; }
ctr_answers() { timeout 5 ctr --address "$CTR_SOCK" version >/dev/null 2>&1; }
running() { kts_pid_alive "$CTR_PID" containerd && ctr_answers; }

# write_config: (re)writes config.toml, hosts.toml and the CNI conflist; returns 0 when
# config.toml changed (hosts.toml and the conflist are re-read by a running containerd).
write_config() {
  local toml_changed=1
  # Plugins this node never uses; skipping them makes start-up quicker and quieter.
  kts_write_if_changed "$CTR_CONFIG" <<EOF && toml_changed=0
# Written by scripts/containerd.sh; edits are overwritten.
version = 2
root = "$CTR_ROOT"
state = "$CTR_STATE"
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
]

[grpc]
  address = "$CTR_SOCK"

[debug]
  address = ""
  level = "info"

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "$CTR_DIR/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$KTS_PAUSE_IMAGE"
  # Root here may lack CAP_SYS_RESOURCE: without this every RunPodSandbox fails.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$RUNC_ROOT"

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_BIN_DIR"
    conf_dir = "$CNI_CONF_DIR"
    max_conf_num = 1

  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$CTR_CERTS"
EOF

  # Plain-http pulls from the local registry.
  kts_write_if_changed "$CTR_CERTS/$KTS_REGISTRY/hosts.toml" <<EOF || true
server = "http://$KTS_REGISTRY"

[host."http://$KTS_REGISTRY"]
  capabilities = ["pull", "resolve", "push"]
EOF
  kts_write_if_changed "$CTR_CERTS/$KTS_AUTH_REGISTRY/hosts.toml" <<EOF || true
server = "http://$KTS_AUTH_REGISTRY"

[host."http://$KTS_AUTH_REGISTRY"]
  capabilities = ["pull", "resolve"]
EOF

  # The CRI plugin adds the loopback network itself (from the loopback plugin in bin_dir).
  kts_write_if_changed "$CNI_CONF_DIR/10-kubelet-ts.conflist" <<EOF || true
{
  "cniVersion": "1.0.0",
  "name": "kubelet-ts",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{ "subnet": "$POD_CIDR" }]],
        "routes": [{ "dst": "0.0.0.0/0" }],
        "dataDir": "$CNI_IPAM_DIR"
      }
    },
    {
      "type": "portmap",
      "capabilities": { "portMappings": true }
    }
  ]
}
EOF
  return "$toml_changed"
}

check_binaries() {
  local b
  for b in containerd ctr containerd-shim-runc-v2 runc; do
    command -v "$b" >/dev/null || kts_die "$b not found (install the containerd and runc packages)"
  done
  for b in bridge host-local loopback portmap; do
    [ -x "$CNI_BIN_DIR/$b" ] || kts_die "CNI plugin $CNI_BIN_DIR/$b not found (install containernetworking-plugins)"
  done
}

cmd_start() {
  check_binaries
  mkdir -p "$CTR_ROOT" "$CTR_STATE" "$CTR_RUN" "$RUNC_ROOT" "$CNI_CONF_DIR" "$CNI_IPAM_DIR" "$KTS_LOG_DIR"
  local restart=no
  write_config && restart=yes
  pod_egress_guard -I
  if running; then
    if [ "$restart" = no ]; then
      kts_log "containerd already running (pid $(cat "$CTR_PID"), $CTR_SOCK)"
      return 0
    fi
    kts_log "configuration changed: restarting containerd"
    kts_stop_daemon "$CTR_PID" containerd 20
  elif kts_pid_alive "$CTR_PID" containerd; then
    kts_log "containerd (pid $(cat "$CTR_PID")) does not answer on $CTR_SOCK; restarting it"
    kts_stop_daemon "$CTR_PID" containerd 20
  elif [ -S "$CTR_SOCK" ] && ctr_answers; then
    kts_die "another containerd already serves $CTR_SOCK (not the one in $CTR_PID)"
  fi
  rm -f "$CTR_SOCK" "$CTR_SOCK.ttrpc"
  # oom_score is left unset on purpose: lowering it needs CAP_SYS_RESOURCE.
  kts_start_daemon "$CTR_PID" "$CTR_LOG" containerd --config "$CTR_CONFIG"
  kts_wait_ready "$CTR_PID" containerd "$CTR_LOG" ctr_answers || kts_die "containerd failed to start"
  # containerd serves its socket even when the CRI plugin failed to load: check it.
  local cri_status
  cri_status=$(ctr_ plugins ls 2>/dev/null | awk '$2 == "cri" {print $NF}') || true
  if [ "$cri_status" != ok ]; then
    kts_log "error: the CRI plugin of containerd did not load; last lines of $CTR_LOG:"
    kts_log_tail "$CTR_LOG"
    kts_stop_daemon "$CTR_PID" containerd
    exit 1
  fi
  kts_log "containerd running (pid $(cat "$CTR_PID"), $CTR_SOCK)"
}

# pod_egress_guard -I|-D: adds/removes a rule dropping what pods send off the node (the
# bridge plugin turns ip_forward on); pod-to-pod and pod-to-host traffic is unaffected.
pod_egress_guard() {
  local rule=(FORWARD -i "$BRIDGE" ! -o "$BRIDGE" -j DROP)
  command -v iptables >/dev/null || { kts_log "warning: no iptables; pod egress not blocked"; return 0; }
  if [ "$1" = -I ]; then
    iptables -C "${rule[@]}" 2>/dev/null || iptables -I "${rule[@]}" ||
      kts_log "warning: could not add the pod egress rule"
  else
    while iptables -D "${rule[@]}" 2>/dev/null; do :; done
  fi
}

# Removes every pod sandbox through the CRI (stop tears down its network and netns,
# remove deletes its containers). Needs node and @grpc/grpc-js from this repository;
# without them the ctr sweep below still kills everything, but CNI state may leak.
cri_remove_all_pods() {
  if ! command -v node >/dev/null || [ ! -d "$KTS_REPO_ROOT/node_modules/@grpc/grpc-js" ]; then
    kts_log "warning: node or @grpc/grpc-js missing; skipping CRI pod removal"
    return 0
  fi
  local proto
  proto=$(mktemp --suffix=.proto)
  # Only the three calls needed; unknown fields in replies are skipped by the decoder.
  cat >"$proto" <<'EOF'
syntax = "proto3";
package runtime.v1;
service RuntimeService {
  rpc ListPodSandbox(ListPodSandboxRequest) returns (ListPodSandboxResponse) {}
  rpc StopPodSandbox(StopPodSandboxRequest) returns (StopPodSandboxResponse) {}
  rpc RemovePodSandbox(RemovePodSandboxRequest) returns (RemovePodSandboxResponse) {}
}
message ListPodSandboxRequest {}
message PodSandbox { string id = 1; }
message ListPodSandboxResponse { repeated PodSandbox items = 1; }
message StopPodSandboxRequest { string pod_sandbox_id = 1; }
message StopPodSandboxResponse {}
message RemovePodSandboxRequest { string pod_sandbox_id = 1; }
message RemovePodSandboxResponse {}
EOF
  (cd "$KTS_REPO_ROOT" && timeout 120 node --input-type=module - "$CTR_SOCK" "$proto") <<'EOF' || kts_log "warning: CRI pod removal failed; falling back to the ctr sweep"
import { createRequire } from 'node:module';
const require = createRequire(process.cwd() + '/package.json');
const grpc = require('@grpc/grpc-js');
const loader = require('@grpc/proto-loader');
const [sock, proto] = process.argv.slice(2);
const def = grpc.loadPackageDefinition(loader.loadSync(proto, { keepCase: true }));
const client = new def.runtime.v1.RuntimeService('unix://' + sock, grpc.credentials.createInsecure());
const call = (m, req) => new Promise((ok, fail) =>
  client[m](req, { deadline: Date.now() + 30000 }, (e, r) => (e ? fail(e) : ok(r))));
let items;
try {
  items = (await call('ListPodSandbox', {})).items ?? [];
} catch (e) {
  console.error(`containerd.sh: ListPodSandbox: ${e.message}`);
  process.exit(1);
}
let failed = 0;
for (const { id } of items) {
  try {
    await call('StopPodSandbox', { pod_sandbox_id: id });
    await call('RemovePodSandbox', { pod_sandbox_id: id });
  } catch (e) {
    failed++;
    console.error(`pod sandbox ${id}: ${e.message}`);
  }
}
if (items.length) console.error(`containerd.sh: removed ${items.length - failed} of ${items.length} pod sandboxes`);
client.close();
process.exit(failed ? 1 : 0);
EOF
  rm -f "$proto"
}

# Kills and deletes whatever tasks and containers are left in every namespace.
ctr_sweep() {
  local ns id
  for ns in $(ctr_ namespaces ls -q 2>/dev/null); do
    for id in $(ctr_ -n "$ns" tasks ls -q 2>/dev/null); do
      ctr_ -n "$ns" tasks kill -a -s SIGKILL "$id" >/dev/null 2>&1 || true
    done
    for id in $(ctr_ -n "$ns" tasks ls -q 2>/dev/null); do
      ctr_ -n "$ns" tasks delete -f "$id" >/dev/null 2>&1 || true
    done
    for id in $(ctr_ -n "$ns" containers ls -q 2>/dev/null); do
      ctr_ -n "$ns" containers delete "$id" >/dev/null 2>&1 || true
    done
  done
}

# Pids of containerd-shim-runc-v2 processes that serve this containerd's socket.
our_shims() {
  local p
  for p in /proc/[0-9]*; do
    [ "$(cat "$p/comm" 2>/dev/null)" = containerd-shim ] || continue
    if tr '\0' '\n' <"$p/cmdline" 2>/dev/null | grep -qxF -- "$CTR_SOCK"; then
      echo "${p#/proc/}"
    fi
  done
}

# shim_socket PID: the socket a shim made in the fixed /run/containerd/s (named by the
# sha256 of "<containerd address>/<namespace>/<id>"); a killed shim leaves it behind.
shim_socket() {
  local ns="" id="" prev=""
  while IFS= read -r -d '' arg; do
    case "$prev" in -namespace) ns=$arg ;; -id) id=$arg ;; esac
    prev=$arg
  done <"/proc/$1/cmdline"
  [ -n "$ns" ] && [ -n "$id" ] || return 0
  echo "/run/containerd/s/$(printf '%s' "$CTR_SOCK/$ns/$id" | sha256sum | cut -d' ' -f1)"
}

# Mount points under this containerd's root and state (and runc root), deepest first.
our_mounts() {
  awk -v a="$CTR_ROOT/" -v b="$CTR_STATE/" -v c="$RUNC_ROOT/" \
    'index($5, a) == 1 || index($5, b) == 1 || index($5, c) == 1 {print $5}' /proc/self/mountinfo |
    sort -r
}

# True when pod sandboxes or tasks of this containerd still have state on disk.
left_behind() {
  local d
  for d in "$CTR_ROOT"/io.containerd.grpc.v1.cri/sandboxes/* "$CTR_STATE"/io.containerd.runtime.v2.task/*/*; do
    [ -e "$d" ] && return 0
  done
  return 1
}

cmd_stop() {
  local pid shims sockets mounts m ns id
  # A containerd that died left its pods in its metadata (and maybe live shims): bring
  # it back so the CRI tears their networks down instead of leaking netns and IPs.
  if ! running && left_behind; then
    kts_log "containerd is not running; starting it to remove what it left behind"
    (cmd_start) || kts_log "warning: could not start containerd; cleaning up without it"
  fi
  if running; then
    cri_remove_all_pods
    ctr_sweep
  fi
  kts_stop_daemon "$CTR_PID" containerd 20

  # Containers whose shim outlived containerd: kill them through runc, then the shims.
  if [ -d "$RUNC_ROOT" ]; then
    for ns in "$RUNC_ROOT"/*/; do
      [ -d "$ns" ] || continue
      for id in $(runc --root "$ns" list -q 2>/dev/null); do
        runc --root "$ns" delete -f "$id" >/dev/null 2>&1 || true
      done
    done
  fi
  shims=$(our_shims)
  if [ -n "$shims" ]; then
    kts_log "killing leftover shims: ${shims//$'\n'/ }"
    sockets=$(for pid in $shims; do shim_socket "$pid"; done)
    # shellcheck disable=SC2086
    kill -KILL $shims 2>/dev/null || true
    for pid in $shims; do
      while kts_pid_alive_pid "$pid"; do sleep 0.05; done
    done
    # shellcheck disable=SC2086
    rm -f $sockets
  fi

  mounts=$(our_mounts)
  for m in $mounts; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || kts_log "warning: could not unmount $m"
  done
  [ -z "$mounts" ] || kts_log "unmounted $(echo "$mounts" | wc -l) leftover mounts"
  rm -f "$CTR_SOCK" "$CTR_SOCK.ttrpc"
  # The bridge plugin creates it on the first pod; with no pods left it can go.
  if [ -d "/sys/class/net/$BRIDGE/bridge" ] && [ -z "$(ls "/sys/class/net/$BRIDGE/brif" 2>/dev/null)" ]; then
    ip link del "$BRIDGE" 2>/dev/null || true
  fi
  pod_egress_guard -D
  kts_log "containerd stopped"
}

cmd_status() {
  if running; then
    echo "containerd: running (pid $(cat "$CTR_PID"), unix://$CTR_SOCK, root $CTR_ROOT)"
  else
    echo "containerd: not running"
    return 3
  fi
}

cmd_env() {
  cat <<EOF
CONTAINER_RUNTIME_ENDPOINT=unix://$CTR_SOCK
KTS_CONTAINERD_SOCKET=$CTR_SOCK
KTS_NODE_DIR=$KTS_NODE_DIR
KTS_REGISTRY=$KTS_REGISTRY
KTS_PAUSE_IMAGE=$KTS_PAUSE_IMAGE
KTS_BUSYBOX_IMAGE=$KTS_BUSYBOX_IMAGE
KTS_BUSYBOX_LATEST_IMAGE=$KTS_BUSYBOX_LATEST_IMAGE
KTS_AUTH_REGISTRY=$KTS_AUTH_REGISTRY
KTS_AUTH_REGISTRY_USER=$KTS_AUTH_REGISTRY_USER
KTS_AUTH_REGISTRY_PASSWORD=$KTS_AUTH_REGISTRY_PASSWORD
KTS_PRIVATE_IMAGE=$KTS_PRIVATE_IMAGE
EOF
}

case "${1:-}" in
  start) kts_lock containerd; cmd_start ;;
  stop) kts_lock containerd; cmd_stop ;;
  status) cmd_status ;;
  env) cmd_env ;;
  *) echo "usage: $0 start|stop|status|env" >&2; exit 2 ;;
esac
