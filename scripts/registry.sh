#!/usr/bin/env bash
# Local image registry for the test node: Debian's docker-registry, bound to 127.0.0.1
# only, storage under the node dir.
# Usage: registry.sh start|stop|status
set -euo pipefail
KTS_SCRIPT_NAME=registry.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REGISTRY_DIR=$KTS_NODE_DIR/registry
REGISTRY_CONFIG=$REGISTRY_DIR/config.yml
REGISTRY_STORAGE=$REGISTRY_DIR/storage
REGISTRY_PID=$KTS_RUN_DIR/registry.pid
REGISTRY_LOG=$KTS_LOG_DIR/registry.log
REGISTRY_BIN=${KTS_REGISTRY_BIN:-docker-registry}

registry_answers() {
  [ "$(kts_http_status "$KTS_REGISTRY" /v2/)" = 200 ]
}

write_config() {
  # No auth, no TLS: it only listens on loopback. The health check of the storage
  # driver is off because it only adds periodic disk reads.
  kts_write_if_changed "$REGISTRY_CONFIG" <<EOF || true
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
  fields:
    service: kubelet-ts-registry
storage:
  filesystem:
    rootdirectory: $REGISTRY_STORAGE
  delete:
    enabled: true
  cache:
    blobdescriptor: inmemory
http:
  addr: $KTS_REGISTRY
  secret: kubelet-ts-local-registry
  headers:
    X-Content-Type-Options: [nosniff]
health:
  storagedriver:
    enabled: false
EOF
}

cmd_start() {
  if kts_pid_alive "$REGISTRY_PID" "${REGISTRY_BIN##*/}" && registry_answers; then
    kts_log "registry already running on $KTS_REGISTRY (pid $(cat "$REGISTRY_PID"))"
    return 0
  fi
  if kts_pid_alive "$REGISTRY_PID" "${REGISTRY_BIN##*/}"; then
    kts_log "registry (pid $(cat "$REGISTRY_PID")) does not answer on $KTS_REGISTRY; restarting it"
    kts_stop_daemon "$REGISTRY_PID" "${REGISTRY_BIN##*/}"
  fi
  command -v "$REGISTRY_BIN" >/dev/null || kts_die "$REGISTRY_BIN not found (install the docker-registry package)"
  # Something else (a distro-started registry, another node) may hold the port.
  if registry_answers || (exec 3<>"/dev/tcp/127.0.0.1/$KTS_REGISTRY_PORT") 2>/dev/null; then
    kts_die "port $KTS_REGISTRY_PORT on 127.0.0.1 is taken by another process; stop it or set KTS_REGISTRY_PORT"
  fi
  mkdir -p "$REGISTRY_STORAGE"
  write_config
  kts_start_daemon "$REGISTRY_PID" "$REGISTRY_LOG" "$REGISTRY_BIN" serve "$REGISTRY_CONFIG"
  kts_wait_ready "$REGISTRY_PID" "${REGISTRY_BIN##*/}" "$REGISTRY_LOG" registry_answers ||
    kts_die "registry failed to start"
  kts_log "registry running on $KTS_REGISTRY (pid $(cat "$REGISTRY_PID"), storage $REGISTRY_STORAGE)"
}

cmd_stop() {
  kts_stop_daemon "$REGISTRY_PID" "${REGISTRY_BIN##*/}"
  kts_log "registry stopped"
}

cmd_status() {
  if kts_pid_alive "$REGISTRY_PID" "${REGISTRY_BIN##*/}" && registry_answers; then
    echo "registry: running (pid $(cat "$REGISTRY_PID"), $KTS_REGISTRY, storage $REGISTRY_STORAGE)"
  else
    echo "registry: not running"
    return 3
  fi
}

case "${1:-}" in
  start) kts_lock registry; cmd_start ;;
  stop) kts_lock registry; cmd_stop ;;
  status) cmd_status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
