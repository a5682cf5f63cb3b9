#!/usr/bin/env bash
# Tries kubelet-ts as a node of a cluster on a machine that has none: starts the TEST API
# SERVER (a test double of kube-apiserver: in memory, no scheduler, no controllers; see
# test/fixtures/test-apiserver/README.md) and kubelet-ts joined to it on the containerd that
# setup-node.sh sets up, writes a kubeconfig for kubectl and prints the kubectl commands to
# try. Ctrl-C stops both; pods keep running, as with the kubelet.
# Usage: try-cluster.sh [extra kubelet-ts flags]
# Environment: KTS_TRY_DIR (default: a new temp dir), KTS_API_PORT (default 6443).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup-node.sh
npm install --no-audit --no-fund
npm run build
eval "$(bash scripts/containerd.sh env)"

DIR=${KTS_TRY_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/kubelet-ts-cluster.XXXXXX")}
PORT=${KTS_API_PORT:-6443}
NODE=$(hostname | tr '[:upper:]' '[:lower:]')
mkdir -p "$DIR"

# --auto-bind: there is no scheduler, so the test double binds new pods to this node.
node dist/test/fixtures/test-apiserver/main.js --port "$PORT" --dir "$DIR" --node-name "$NODE" --auto-bind \
  >"$DIR/apiserver.log" 2>&1 &
API_PID=$!
KUBELET_PID=
cleanup() {
  [ -z "$KUBELET_PID" ] || kill "$KUBELET_PID" 2>/dev/null || true
  kill "$API_PID" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap cleanup EXIT

for _ in $(seq 1 100); do
  [ -s "$DIR/admin.kubeconfig" ] && [ -s "$DIR/kubelet.kubeconfig" ] && break
  kill -0 "$API_PID" 2>/dev/null || { cat "$DIR/apiserver.log" >&2; echo "try-cluster.sh: the test API server did not start" >&2; exit 1; }
  sleep 0.2
done
[ -s "$DIR/admin.kubeconfig" ] || { echo "try-cluster.sh: no kubeconfig from the test API server in $DIR" >&2; exit 1; }

cat >"$DIR/pod.yaml" <<POD
apiVersion: v1
kind: Pod
metadata:
  name: hello
spec:
  containers:
  - name: hello
    image: $KTS_BUSYBOX_IMAGE
    command: ["sh", "-c", "echo hello from kubelet-ts; sleep 3600"]
POD

cat <<MSG
The API server is a TEST DOUBLE of kube-apiserver (in memory, for trying and testing; not a
real cluster), on https://127.0.0.1:$PORT. kubelet-ts joins it as node $NODE. In another shell:

  export KUBECONFIG=$DIR/admin.kubeconfig
  kubectl get nodes -o wide
  kubectl describe node $NODE
  kubectl get lease -n kube-node-lease
  kubectl apply -f $DIR/pod.yaml
  kubectl get pods -w

The node turns Ready once the runtime and PLEG are up; describe shows its conditions, capacity,
allocatable, events and lease (renewed every 10 s). The pod is bound to $NODE by the test double,
as there is no scheduler.

Logs: $DIR/apiserver.log. Ctrl-C stops kubelet-ts and the test API server.
MSG

node bin/kubelet-ts.mjs \
  --config examples/kubelet-config.yaml \
  --kubeconfig "$DIR/kubelet.kubeconfig" \
  --hostname-override "$NODE" \
  --container-runtime-endpoint "$CONTAINER_RUNTIME_ENDPOINT" \
  --root-dir /var/lib/kubelet-ts/kubelet "$@" &
KUBELET_PID=$!
wait "$KUBELET_PID"
