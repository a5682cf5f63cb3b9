# Shared helpers for the node setup scripts; sourced, never run.
# Every path the scripts use derives from three knobs so that a test machine can run
# several isolated nodes side by side.
# shellcheck disable=SC2034 # the variables are used by the scripts that source this

KTS_NODE_DIR=${KTS_NODE_DIR:-/var/lib/kubelet-ts/node}
KTS_RUN_DIR=${KTS_RUN_DIR:-/run/kubelet-ts}
KTS_REGISTRY_PORT=${KTS_REGISTRY_PORT:-5000}
# Seconds a daemon gets to answer after it was started.
KTS_START_TIMEOUT=${KTS_START_TIMEOUT:-30}

KTS_SCRIPTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KTS_REPO_ROOT=$(cd "$KTS_SCRIPTS_DIR/.." && pwd)

KTS_LOG_DIR=$KTS_NODE_DIR/logs
KTS_REGISTRY=127.0.0.1:$KTS_REGISTRY_PORT
# A second registry that requires authentication (htpasswd), for private image pulls.
KTS_AUTH_REGISTRY_PORT=${KTS_AUTH_REGISTRY_PORT:-5001}
KTS_AUTH_REGISTRY=127.0.0.1:$KTS_AUTH_REGISTRY_PORT
KTS_AUTH_REGISTRY_USER=${KTS_AUTH_REGISTRY_USER:-kts-puller}
KTS_AUTH_REGISTRY_PASSWORD=${KTS_AUTH_REGISTRY_PASSWORD:-kts-pull-password}

# Test images; the tags are the names tests use, the content is built locally.
KTS_PAUSE_IMAGE=$KTS_REGISTRY/kubelet-ts/pause:3.9
KTS_BUSYBOX_IMAGE=$KTS_REGISTRY/kubelet-ts/busybox:1.36
KTS_BUSYBOX_LATEST_IMAGE=$KTS_REGISTRY/kubelet-ts/busybox:latest
# The busybox test image, served only with credentials by the authenticating registry.
KTS_PRIVATE_IMAGE=$KTS_AUTH_REGISTRY/kubelet-ts/private-busybox:1.36

kts_log() { printf '%s: %s\n' "${KTS_SCRIPT_NAME:-kubelet-ts}" "$*" >&2; }
kts_die() { kts_log "error: $*"; exit 1; }

# kts_pid_alive_pid PID: true while PID runs; a zombie counts as gone (PID 1 in a
# container may be slow to reap the daemons it inherits).
kts_pid_alive_pid() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "${stat:0:1}" != Z ]
}

# kts_pid_alive PIDFILE NAME: true when the pid file names a live process whose
# command is NAME (guards against a stale pid reused by something else).
kts_pid_alive() {
  local pidfile=$1 name=$2 pid comm
  [ -s "$pidfile" ] || return 1
  pid=$(cat "$pidfile")
  [ -n "$pid" ] && kts_pid_alive_pid "$pid" || return 1
  comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
  [ "$comm" = "$name" ]
}

# kts_lock NAME: serializes concurrent runs (parallel test files all calling setup)
# on $KTS_RUN_DIR/NAME.lock, held on fd 9 until the script exits.
kts_lock() {
  mkdir -p "$KTS_RUN_DIR"
  exec 9>"$KTS_RUN_DIR/$1.lock"
  flock -w 300 9 || kts_die "timed out waiting for $KTS_RUN_DIR/$1.lock (another run still busy)"
}

# kts_log_tail LOGFILE: the end of a daemon log on stderr, long lines cut (containerd
# logs its whole CRI config on one line).
kts_log_tail() {
  tail -n 20 "$1" 2>/dev/null | cut -c1-400 >&2 || true
}

# kts_start_daemon PIDFILE LOGFILE CMD...: starts CMD detached from this shell
# (own session, stdin closed) so it outlives the caller; no systemd here.
kts_start_daemon() {
  local pidfile=$1 logfile=$2
  shift 2
  mkdir -p "$(dirname "$pidfile")" "$(dirname "$logfile")"
  printf '\n--- %s start: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >>"$logfile"
  # 3>&- ... 9>&-: the daemon must not inherit (and so hold forever) a lock descriptor,
  # kts_lock's (9) or that of a `flock FILE command` the script runs under (3 and up).
  setsid nohup "$@" </dev/null >>"$logfile" 2>&1 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- &
  echo $! >"$pidfile"
}

# kts_stop_daemon PIDFILE NAME [TIMEOUT]: SIGTERM, then SIGKILL after TIMEOUT seconds.
kts_stop_daemon() {
  local pidfile=$1 name=$2 timeout=${3:-10} pid i
  if kts_pid_alive "$pidfile" "$name"; then
    pid=$(cat "$pidfile")
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < timeout * 10; i++)); do
      kts_pid_alive_pid "$pid" || break
      sleep 0.1
    done
    if kts_pid_alive_pid "$pid"; then
      kts_log "$name (pid $pid) ignored SIGTERM for ${timeout}s; killing it"
      kill -KILL "$pid" 2>/dev/null || true
      sleep 0.2
    fi
  fi
  rm -f "$pidfile"
}

# kts_wait_ready PIDFILE NAME LOGFILE CHECK...: polls CHECK until it succeeds; fails
# with the log tail if the daemon dies or KTS_START_TIMEOUT passes.
kts_wait_ready() {
  local pidfile=$1 name=$2 logfile=$3 i
  shift 3
  for ((i = 0; i < KTS_START_TIMEOUT * 10; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    if ! kts_pid_alive "$pidfile" "$name"; then
      kts_log "error: $name exited during start-up; last lines of $logfile:"
      kts_log_tail "$logfile"
      return 1
    fi
    sleep 0.1
  done
  kts_log "error: $name did not answer within ${KTS_START_TIMEOUT}s; last lines of $logfile:"
  kts_log_tail "$logfile"
  return 1
}

# kts_http_get HOSTPORT PATH [ACCEPT]: a plain HTTP/1.0 GET over bash's /dev/tcp, so
# the scripts need no curl; prints the raw response (status line, headers, body).
kts_http_get() {
  local hostport=$1 path=$2 accept=${3:-*/*} host=${1%:*} port=${1##*:}
  (
    exec 3<>"/dev/tcp/$host/$port" || exit 1
    printf 'GET %s HTTP/1.0\r\nHost: %s\r\nAccept: %s\r\n\r\n' "$path" "$hostport" "$accept" >&3
    timeout 5 cat <&3
  )
}

# kts_http_status HOSTPORT PATH [ACCEPT]: prints just the numeric status code.
kts_http_status() {
  local resp
  resp=$(kts_http_get "$@" 2>/dev/null) || true
  resp=${resp%%$'\r'*}
  # shellcheck disable=SC2086 # split "HTTP/1.0 200 OK" into words
  set -- $resp
  printf '%s\n' "${2:-}"
}

# kts_write_if_changed FILE: writes stdin to FILE only when the content differs, so
# reruns leave mtimes alone; returns 0 when the file changed, 1 when it was equal.
kts_write_if_changed() {
  local file=$1 tmp
  mkdir -p "$(dirname "$file")"
  tmp=$(mktemp "$file.XXXXXX")
  cat >"$tmp"
  if [ -f "$file" ] && cmp -s "$tmp" "$file"; then
    rm -f "$tmp"
    return 1
  fi
  mv -f "$tmp" "$file"
  return 0
}
