#!/usr/bin/env bash
# Local image registry for the test node: Debian's docker-registry, bound to 127.0.0.1
# only, storage under the node dir.
# The `-auth` commands run a second instance on KTS_AUTH_REGISTRY that requires htpasswd
# (bcrypt) authentication, for private image pulls; start-auth also copies the busybox test
# image into it as KTS_PRIVATE_IMAGE (the first registry and its images must be there).
# Usage: registry.sh start|stop|status|start-auth|stop-auth|status-auth
set -euo pipefail
KTS_SCRIPT_NAME=registry.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REGISTRY_BIN=${KTS_REGISTRY_BIN:-docker-registry}
AUTH=0
case "${1:-}" in *-auth) AUTH=1 ;; esac
if [ "$AUTH" = 1 ]; then
  NAME=registry-auth ADDR=$KTS_AUTH_REGISTRY PORT=$KTS_AUTH_REGISTRY_PORT READY_STATUS=401
else
  NAME=registry ADDR=$KTS_REGISTRY PORT=$KTS_REGISTRY_PORT READY_STATUS=200
fi
REGISTRY_DIR=$KTS_NODE_DIR/$NAME
REGISTRY_CONFIG=$REGISTRY_DIR/config.yml
REGISTRY_STORAGE=$REGISTRY_DIR/storage
REGISTRY_HTPASSWD=$REGISTRY_DIR/htpasswd
REGISTRY_PID=$KTS_RUN_DIR/$NAME.pid
REGISTRY_LOG=$KTS_LOG_DIR/$NAME.log

# The authenticating instance answers /v2/ with 401 until credentials are given.
registry_answers() {
  [ "$(kts_http_status "$ADDR" /v2/)" = "$READY_STATUS" ]
}

auth_section() {
  [ "$AUTH" = 1 ] || return 0
  cat <<EOF
auth:
  htpasswd:
    realm: kubelet-ts-private
    path: $REGISTRY_HTPASSWD
EOF
}

write_htpasswd() {
  command -v htpasswd >/dev/null || kts_die "htpasswd not found (install the apache2-utils package)"
  # bcrypt (-B): the only format the registry accepts. Rewritten only when the password changed.
  if [ -s "$REGISTRY_HTPASSWD" ] &&
    htpasswd -vb "$REGISTRY_HTPASSWD" "$KTS_AUTH_REGISTRY_USER" "$KTS_AUTH_REGISTRY_PASSWORD" >/dev/null 2>&1; then
    return 0
  fi
  htpasswd -Bbc "$REGISTRY_HTPASSWD.tmp" "$KTS_AUTH_REGISTRY_USER" "$KTS_AUTH_REGISTRY_PASSWORD" 2>/dev/null ||
    kts_die "htpasswd could not write $REGISTRY_HTPASSWD"
  mv "$REGISTRY_HTPASSWD.tmp" "$REGISTRY_HTPASSWD"
}

# seed_private_image: copies the busybox test image into the authenticating registry.
seed_private_image() {
  command -v skopeo >/dev/null || kts_die "skopeo not found (install the skopeo package)"
  local creds="$KTS_AUTH_REGISTRY_USER:$KTS_AUTH_REGISTRY_PASSWORD"
  if skopeo inspect --raw --tls-verify=false --creds "$creds" "docker://$KTS_PRIVATE_IMAGE" >/dev/null 2>&1; then
    return 0
  fi
  skopeo --insecure-policy copy --quiet --preserve-digests --src-tls-verify=false --dest-tls-verify=false \
    --dest-creds "$creds" "docker://$KTS_BUSYBOX_IMAGE" "docker://$KTS_PRIVATE_IMAGE" ||
    kts_die "copying $KTS_BUSYBOX_IMAGE to $KTS_PRIVATE_IMAGE failed (is the first registry up with its images?)"
  kts_log "pushed $KTS_PRIVATE_IMAGE"
}

write_config() {
  # No TLS: it only listens on loopback; no auth but on the -auth instance. The health check
  # of the storage driver is off because it only adds periodic disk reads.
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
  addr: $ADDR
  secret: kubelet-ts-local-registry
  headers:
    X-Content-Type-Options: [nosniff]
health:
  storagedriver:
    enabled: false
$(auth_section)
EOF
}

cmd_start() {
  if kts_pid_alive "$REGISTRY_PID" "${REGISTRY_BIN##*/}" && registry_answers; then
    kts_log "registry already running on $ADDR (pid $(cat "$REGISTRY_PID"))"
    return 0
  fi
  if kts_pid_alive "$REGISTRY_PID" "${REGISTRY_BIN##*/}"; then
    kts_log "registry (pid $(cat "$REGISTRY_PID")) does not answer on $ADDR; restarting it"
    kts_stop_daemon "$REGISTRY_PID" "${REGISTRY_BIN##*/}"
  fi
  command -v "$REGISTRY_BIN" >/dev/null || kts_die "$REGISTRY_BIN not found (install the docker-registry package)"
  # Something else (a distro-started registry, another node) may hold the port.
  if registry_answers || (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
    kts_die "port $PORT on 127.0.0.1 is taken by another process; stop it or set KTS_$([ "$AUTH" = 1 ] && echo AUTH_)REGISTRY_PORT"
  fi
  mkdir -p "$REGISTRY_STORAGE"
  [ "$AUTH" = 0 ] || write_htpasswd
  write_config
  kts_start_daemon "$REGISTRY_PID" "$REGISTRY_LOG" "$REGISTRY_BIN" serve "$REGISTRY_CONFIG"
  kts_wait_ready "$REGISTRY_PID" "${REGISTRY_BIN##*/}" "$REGISTRY_LOG" registry_answers ||
    kts_die "registry failed to start"
  kts_log "registry running on $ADDR (pid $(cat "$REGISTRY_PID"), storage $REGISTRY_STORAGE)"
}

cmd_stop() {
  kts_stop_daemon "$REGISTRY_PID" "${REGISTRY_BIN##*/}"
  kts_log "registry stopped"
}

cmd_status() {
  if kts_pid_alive "$REGISTRY_PID" "${REGISTRY_BIN##*/}" && registry_answers; then
    echo "registry: running (pid $(cat "$REGISTRY_PID"), $ADDR, storage $REGISTRY_STORAGE)"
  else
    echo "registry: not running"
    return 3
  fi
}

case "${1:-}" in
  start) kts_lock registry; cmd_start ;;
  stop) kts_lock registry; cmd_stop ;;
  status) cmd_status ;;
  start-auth) kts_lock "$NAME"; cmd_start; seed_private_image ;;
  stop-auth) kts_lock "$NAME"; cmd_stop ;;
  status-auth) cmd_status ;;
  *) echo "usage: $0 start|stop|status|start-auth|stop-auth|status-auth" >&2; exit 2 ;;
esac
