#!/usr/bin/env bash
# A real node to test on: Debian 12 booted under qemu with systemd as PID 1 and unified
# cgroup v2, containerd (SystemdCgroup = true) and this project shared in, driven from
# this machine through a small command agent (scripts/vm-agent.mjs) on a forwarded port.
# This machine's own cgroups, routes and packet filter are not touched: the node has
# its own kernel, and qemu's user-mode network (restricted) lets it reach only the agent
# port forwarded in and the local test registries forwarded out.
#
# Usage: vm-node.sh COMMAND [options]
#   build [--force]      build the image unless the cached one is current (vm-image.sh)
#   start [options]      build if needed, boot the node, wait until the agent answers
#       --project DIR    the project tree to share in (default: this repository); shared
#                        read-only at the same path, with symlinked top-level dirs
#                        (node_modules) shared at their real paths
#       --node BIN       the node binary the VM runs (default: the node on PATH, or NODE_BIN)
#       --mem MB         memory (default 2048)   --cpus N   vCPUs (default 2)
#       --accel auto|tcg|kvm   auto: KVM when the CPU offers vmx/svm and /dev/kvm opens,
#                        falling back to TCG if the kernel does not come up; else TCG
#       --wait SECS      wait that long for another VM to stop (default 900; one VM at a time)
#   run [--cwd DIR] [-e NAME=VAL]... [--timeout SECS] [-i] -- CMD [ARG...]
#                        run CMD in the node (cwd: the project), print its stdout and
#                        stderr here, exit with its exit code; -i forwards our stdin
#   stop                 power the node off (kills qemu if it does not stop in 60 s)
#   status               exit 0 and describe the running node, 3 if none runs
#   console              print the node's serial console log
#   test [--tap] [start options] [-- FILTER...]
#                        start, run the in-VM test set (dist/test/vm/*.test.js; FILTER
#                        picks files by substring) inside, stop; exit with its result;
#                        --tap: TAP on stdout, the spec report on stderr
# Environment: KTS_VM_DIR (default /var/lib/kubelet-ts/vm: cached images, run state),
# KTS_VM_LOCK (default /tmp/kts-vm.lock), KTS_VM_BOOT_TIMEOUT (seconds, default 600).
set -euo pipefail
KTS_SCRIPT_NAME=vm-node.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

VM_DIR=${KTS_VM_DIR:-/var/lib/kubelet-ts/vm}
VM_LOCK=${KTS_VM_LOCK:-/tmp/kts-vm.lock}
STATE=$VM_DIR/run
SHARE=$STATE/share
BOOT_TIMEOUT=${KTS_VM_BOOT_TIMEOUT:-600}
AGENT=$KTS_SCRIPTS_DIR/vm-agent.mjs
GUEST_AGENT_PORT=7000

usage() { sed -n '2,31p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

host_node() {
  local n=${NODE_BIN:-}
  [ -n "$n" ] || n=$(command -v node || true)
  [ -n "$n" ] && [ -x "$n" ] || kts_die "node not found (put it on PATH or set NODE_BIN)"
  echo "$n"
}

# image_key: the cached image is current while vm-image.sh (which holds the package list
# and the whole node configuration) is unchanged.
image_key() { sha256sum "$KTS_SCRIPTS_DIR/vm-image.sh" | cut -c1-16; }
image_dir() { echo "$VM_DIR/image-$(image_key)"; }

cmd_build() {
  local force=0 dir t
  [ "${1:-}" = --force ] && force=1
  dir=$(image_dir)
  mkdir -p "$VM_DIR"
  exec 7>"$VM_DIR/build.lock"
  flock -w 1800 7 || kts_die "timed out waiting for another image build ($VM_DIR/build.lock)"
  if [ "$force" = 0 ] && [ -f "$dir/initrd.cpio" ] && [ -f "$dir/vmlinuz" ]; then
    kts_log "image $dir is current (kernel $(cat "$dir/kernel-release"), built in $(cat "$dir/build-seconds")s)"
    exec 7>&-
    return 0
  fi
  t=$SECONDS
  KTS_VM_CACHE_DIR=$VM_DIR/cache bash "$KTS_SCRIPTS_DIR/vm-image.sh" "$dir"
  # Older images (another vm-image.sh) are of no further use.
  find "$VM_DIR" -mindepth 1 -maxdepth 1 -type d -name 'image-*' ! -path "$dir" ! -name '*.tmp' -exec rm -rf {} +
  kts_log "build: done in $((SECONDS - t))s"
  exec 7>&-
}

qemu_alive() {
  local pid
  pid=$(cat "$STATE/qemu.pid" 2>/dev/null) || return 1
  [ -n "$pid" ] && kts_pid_alive_pid "$pid" && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = qemu-system-x86 ]
}

# agent SUBCOMMAND [ARGS...]: the host side of vm-agent.mjs against the running node.
agent() {
  local sub=$1
  shift
  node_for_host "$AGENT" "$sub" --port "$(cat "$STATE/port")" --token-file "$STATE/token" "$@"
}
# The host side of the agent runs on whatever node runs here.
node_for_host() { "$(host_node)" "$@"; }

agent_ping() { agent ping >/dev/null 2>&1; }

# free_port: a TCP port on 127.0.0.1 nothing listens on (qemu binds it; a race with
# another program is reported by qemu and retried by the caller).
free_port() {
  node_for_host -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

# prepare_share PROJECT NODE: the control share (agent, setup, node, token, env) and
# the list of project directories to mount in the guest.
prepare_share() {
  local project=$1 node=$2 tag=0 entry real
  rm -rf "$SHARE"
  mkdir -p "$SHARE/bin"
  # A hard link when possible (same filesystem), else a copy: qemu shares a directory.
  ln "$node" "$SHARE/bin/node" 2>/dev/null || cp "$node" "$SHARE/bin/node"
  cp "$AGENT" "$SHARE/vm-agent.mjs"
  cp "$KTS_SCRIPTS_DIR/vm-guest-setup.sh" "$SHARE/guest-setup.sh"
  head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$STATE/token"
  chmod 0600 "$STATE/token"
  cp "$STATE/token" "$SHARE/token"
  chmod 0700 "$SHARE"
  {
    echo "PATH=$SHARE_GUEST/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    echo "KTS_VM=1"
    echo "KTS_REPO_ROOT=$project"
    echo "KTS_REGISTRY=127.0.0.1:5000"
    echo "KTS_PAUSE_IMAGE=127.0.0.1:5000/kubelet-ts/pause:3.9"
    echo "KTS_BUSYBOX_IMAGE=127.0.0.1:5000/kubelet-ts/busybox:1.36"
    echo "KTS_BUSYBOX_LATEST_IMAGE=127.0.0.1:5000/kubelet-ts/busybox:latest"
    echo "CONTAINER_RUNTIME_ENDPOINT=unix:///run/containerd/containerd.sock"
  } >"$SHARE/env"
  # 9p shares: TAG HOSTPATH GUESTPATH OPTIONS; the project read-only at its own path, and
  # each top-level symlink of it that leaves the tree (node_modules) at its real path.
  : >"$STATE/shares"
  echo "p$tag $project $project ro" >>"$STATE/shares"
  for entry in "$project"/*; do
    [ -L "$entry" ] || continue
    real=$(readlink -f "$entry") || continue
    [ -d "$real" ] || continue
    case "$real/" in "$project"/*) continue ;; esac
    tag=$((tag + 1))
    echo "p$tag $real $real ro" >>"$STATE/shares"
  done
  awk '{print $1, $3, $4}' "$STATE/shares" >"$SHARE/mounts"
}
SHARE_GUEST=/run/kts-host

# kvm_usable: a CPU with hardware virtualisation and a /dev/kvm we can open.
kvm_usable() {
  grep -qwE 'vmx|svm' /proc/cpuinfo && [ -r /dev/kvm ] && [ -w /dev/kvm ]
}

# launch ACCEL MEM CPUS PORT: starts qemu detached; its pid in $STATE/qemu.pid. The lock
# descriptor (fd 8) is inherited on purpose: the lock is held as long as qemu runs.
launch() {
  local accel=$1 mem=$2 cpus=$3 port=$4 image cpu fsdevs=() tag host guest opts
  image=$(image_dir)
  case "$accel" in
    kvm) cpu=host ;;
    # max: every feature TCG emulates (node's V8 wants more than qemu64's SSE3).
    tcg) cpu=max ;;
  esac
  while read -r tag host guest opts; do
    fsdevs+=(-fsdev "local,id=$tag,path=$host,security_model=none,readonly=on"
      -device "virtio-9p-pci,fsdev=$tag,mount_tag=$tag")
  done <"$STATE/shares"
  fsdevs+=(-fsdev "local,id=kts-host,path=$SHARE,security_model=none,readonly=on"
    -device "virtio-9p-pci,fsdev=kts-host,mount_tag=kts-host")
  local relay
  relay="$(host_node) $AGENT relay 127.0.0.1"
  : >"$STATE/console.log"
  printf '%s\n' "$accel" >"$STATE/accel"
  setsid qemu-system-x86_64 \
    -name kts-vm-node -nodefaults -no-user-config -display none -no-reboot \
    -accel "$accel" -cpu "$cpu" -m "$mem" -smp "$cpus" \
    -kernel "$image/vmlinuz" -initrd "$image/initrd.cpio" \
    -append "console=ttyS0 rdinit=/kts-init panic=-1 mitigations=off loglevel=4 systemd.show_status=true systemd.journald.forward_to_console=1" \
    -serial "file:$STATE/console.log" \
    -netdev "user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:$port-10.0.2.15:$GUEST_AGENT_PORT,guestfwd=tcp:10.0.2.100:5000-cmd:$relay $KTS_REGISTRY_PORT,guestfwd=tcp:10.0.2.100:5001-cmd:$relay $KTS_AUTH_REGISTRY_PORT" \
    -device virtio-net-pci,netdev=n0 \
    "${fsdevs[@]}" \
    </dev/null >"$STATE/qemu.log" 2>&1 9>&- &
  echo $! >"$STATE/qemu.pid"
  echo "$port" >"$STATE/port"
}

# wait_ready SECONDS: until the agent answers; false if qemu exits or time runs out.
wait_ready() {
  local limit=$1 start=$SECONDS
  while ((SECONDS - start < limit)); do
    qemu_alive || return 1
    agent_ping && return 0
    sleep 1
  done
  return 1
}

# kernel_started SECONDS: the console shows the kernel ran (under a hanging KVM it stays
# silent after the firmware).
kernel_started() {
  local limit=$1 start=$SECONDS
  while ((SECONDS - start < limit)); do
    qemu_alive || return 1
    grep -aq 'Linux version\|systemd\[1\]\|Welcome to' "$STATE/console.log" 2>/dev/null && return 0
    sleep 1
  done
  return 1
}

kill_qemu() {
  local pid i
  pid=$(cat "$STATE/qemu.pid" 2>/dev/null) || return 0
  qemu_alive || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do qemu_alive || return 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
}

cmd_start() {
  local project=$KTS_REPO_ROOT node="" mem=2048 cpus=2 accel=auto wait=900 port t0 tries
  while [ $# -gt 0 ]; do
    case "$1" in
      --project) project=${2:?--project needs a directory}; shift 2 ;;
      --node) node=${2:?--node needs a binary}; shift 2 ;;
      --mem) mem=${2:?}; shift 2 ;;
      --cpus) cpus=${2:?}; shift 2 ;;
      --accel) accel=${2:?}; shift 2 ;;
      --wait) wait=${2:?}; shift 2 ;;
      *) kts_die "start: unknown option $1" ;;
    esac
  done
  [ -d "$project" ] || kts_die "--project $project is not a directory"
  project=$(cd "$project" && pwd -P)
  [ -f "$project/package.json" ] || kts_die "--project $project has no package.json"
  [ -n "$node" ] || node=$(host_node)
  [ -x "$node" ] || kts_die "--node $node is not executable"
  case "$accel" in auto | tcg | kvm) ;; *) kts_die "--accel must be auto, tcg or kvm (got $accel)" ;; esac
  [[ "$mem" =~ ^[0-9]+$ ]] || kts_die "--mem must be MB (got $mem)"
  [[ "$cpus" =~ ^[0-9]+$ ]] || kts_die "--cpus must be a number (got $cpus)"
  command -v qemu-system-x86_64 >/dev/null || kts_die "qemu-system-x86_64 not found (scripts/setup-node.sh --packages-only installs qemu-system-x86)"

  cmd_build

  # One VM at a time on this machine: the lock is held by qemu itself (fd 8 inherited).
  exec 8>"$VM_LOCK"
  if ! flock -n 8; then
    kts_log "another VM node runs ($(cat "$STATE/owner" 2>/dev/null || echo unknown)); waiting up to ${wait}s for $VM_LOCK"
    flock -w "$wait" 8 || kts_die "another VM node still runs after ${wait}s (lock $VM_LOCK; scripts/vm-node.sh stop ends it)"
  fi
  mkdir -p "$STATE"
  kill_qemu
  rm -f "$STATE"/{qemu.pid,port,ready-seconds,accel}
  prepare_share "$project" "$node"
  echo "pid $$ project $project since $(date -u +%H:%M:%SZ)" >"$STATE/owner"

  if [ "$accel" = auto ]; then
    if kvm_usable; then accel=kvm; else accel=tcg; fi
  fi
  t0=$SECONDS
  for tries in 1 2 3; do
    port=$(free_port)
    launch "$accel" "$mem" "$cpus" "$port"
    sleep 1
    if ! qemu_alive && grep -q 'host forwarding rule\|Could not set up host forwarding' "$STATE/qemu.log"; then
      continue # the port was taken meanwhile: another one
    fi
    break
  done
  if [ "$accel" = kvm ] && ! kernel_started 30; then
    kts_log "KVM: the kernel did not come up within 30s; using TCG (software emulation)"
    kill_qemu
    accel=tcg
    t0=$SECONDS
    launch tcg "$mem" "$cpus" "$port"
  fi
  kts_log "booting the node ($accel, ${mem} MB, $cpus vCPUs, agent on 127.0.0.1:$port)"
  if ! wait_ready "$BOOT_TIMEOUT"; then
    kts_log "error: the node did not answer within ${BOOT_TIMEOUT}s; qemu log and end of the console:"
    cat "$STATE/qemu.log" >&2 || true
    tail -n 40 "$STATE/console.log" >&2 || true
    kill_qemu
    exit 1
  fi
  echo $((SECONDS - t0)) >"$STATE/ready-seconds"
  exec 8>&-
  kts_log "node ready in $((SECONDS - t0))s ($accel; kernel $(cat "$(image_dir)/kernel-release"); project $project)"
}

cmd_run() {
  local cwd="" args=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --) shift; break ;;
      --cwd) cwd=${2:?}; args+=(--cwd "$2"); shift 2 ;;
      -e | --env) args+=(--env "${2:?}"); shift 2 ;;
      --timeout) args+=(--timeout "${2:?}"); shift 2 ;;
      -i | --stdin) args+=(-i); shift ;;
      *) break ;;
    esac
  done
  [ $# -gt 0 ] || kts_die "run: no command (vm-node.sh run [--cwd DIR] [-e N=V] [--timeout S] [-i] -- CMD ...)"
  qemu_alive || kts_die "no VM node runs (scripts/vm-node.sh start)"
  [ -n "$cwd" ] || args+=(--cwd "$(awk '$1 == "p0" {print $3}' "$STATE/shares")")
  local rc=0
  agent run "${args[@]}" -- "$@" || rc=$?
  return "$rc"
}

cmd_stop() {
  local i
  if ! qemu_alive; then
    rm -f "$STATE/qemu.pid"
    kts_log "no VM node runs"
    return 0
  fi
  # Power off from inside (systemd stops the units); qemu exits with -no-reboot.
  if timeout 20 "$(host_node)" "$AGENT" run --port "$(cat "$STATE/port")" --token-file "$STATE/token" --timeout 10 -- systemctl --no-block poweroff >/dev/null 2>&1; then
    for ((i = 0; i < 600; i++)); do qemu_alive || break; sleep 0.1; done
  fi
  if qemu_alive; then
    kts_log "the node did not power off (or its agent did not answer); killing qemu"
    kill_qemu
  fi
  rm -f "$STATE/qemu.pid" "$STATE/owner"
  kts_log "node stopped"
}

cmd_status() {
  if qemu_alive && agent_ping; then
    echo "VM node running: $(cat "$STATE/owner" 2>/dev/null); accel $(cat "$STATE/accel"); agent 127.0.0.1:$(cat "$STATE/port"); ready in $(cat "$STATE/ready-seconds" 2>/dev/null || echo ?)s"
    return 0
  fi
  qemu_alive && { echo "VM node booting (qemu pid $(cat "$STATE/qemu.pid"))"; return 0; }
  echo "no VM node runs"
  return 3
}

cmd_test() {
  local start_args=() filters=() rc=0 t reporters=(--test-reporter=spec)
  while [ $# -gt 0 ]; do
    case "$1" in
      --) shift; filters=("$@"); break ;;
      --tap) reporters=(--test-reporter=tap --test-reporter-destination=stdout
        --test-reporter=spec --test-reporter-destination=stderr); shift ;;
      *) start_args+=("$1"); shift ;;
    esac
  done
  t=$SECONDS
  cmd_start "${start_args[@]}"
  trap 'cmd_stop' EXIT
  local files
  files=$(cmd_run -- sh -c 'ls dist/test/vm/*.test.js 2>/dev/null' || true)
  if [ ${#filters[@]} -gt 0 ]; then
    files=$(printf '%s\n' "$files" | grep -F "$(printf '%s\n' "${filters[@]}")" || true)
  fi
  [ -n "$files" ] || kts_die "no in-VM test files (dist/test/vm/*.test.js${filters[*]:+ matching ${filters[*]}}); build the project first"
  local tt=$SECONDS
  # shellcheck disable=SC2086 # one file per word
  cmd_run --timeout 1800 -- node --test --test-concurrency=1 "${reporters[@]}" $files || rc=$?
  kts_log "in-VM tests: exit $rc in $((SECONDS - tt))s (boot $(cat "$STATE/ready-seconds")s, $(cat "$STATE/accel"); total $((SECONDS - t))s)"
  return "$rc"
}

[ $# -gt 0 ] || { usage; exit 2; }
command=$1
shift
case "$command" in
  build) [ "$(id -u)" = 0 ] || kts_die "must run as root"; cmd_build "$@" ;;
  start) [ "$(id -u)" = 0 ] || kts_die "must run as root"; cmd_start "$@" ;;
  run) cmd_run "$@" ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  console) cat "$STATE/console.log" ;;
  test) [ "$(id -u)" = 0 ] || kts_die "must run as root"; cmd_test "$@" ;;
  -h | --help | help) usage ;;
  *) kts_die "unknown command $command (build, start, run, stop, status, console, test)" ;;
esac
