#!/usr/bin/env bash
# Tries kubelet-ts as a node of a cluster on a machine that has none: starts the TEST API
# SERVER (a test double of kube-apiserver: in memory, no scheduler, no controllers; see
# test/fixtures/test-apiserver/README.md) and kubelet-ts joined to it on the containerd that
# setup-node.sh sets up, writes a kubeconfig for kubectl and prints the kubectl commands to
# try. Ctrl-C stops both; pods keep running, as with the kubelet.
# kubelet-ts trusts the cluster CA for client certificates (so kubectl logs, exec, port-forward
# and nodes/proxy reach 10250 as the API server), rotates its client certificate and asks the
# cluster for its serving certificate (serverTLSBootstrap), which the test double verifies; the
# serving certificate requests are approved here with kubectl, as an administrator would.
# Usage: try-cluster.sh [--join] [extra kubelet-ts flags]
#   --join: the node joins as with kubeadm join: a bootstrap token is created, kubelet-ts starts
#   with only a bootstrap kubeconfig, its CertificateSigningRequest is approved with kubectl,
#   and the node becomes Ready with the certificate it was issued.
# Environment: KTS_TRY_DIR (default: a new temp dir), KTS_API_PORT (default 6443).
set -euo pipefail
cd "$(dirname "$0")/.."
JOIN=
if [ "${1:-}" = "--join" ]; then JOIN=1; shift; fi

bash scripts/setup-node.sh
npm install --no-audit --no-fund
npm run build
eval "$(bash scripts/containerd.sh env)"

DIR=${KTS_TRY_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/kubelet-ts-cluster.XXXXXX")}
PORT=${KTS_API_PORT:-6443}
NODE=$(hostname | tr '[:upper:]' '[:lower:]')
mkdir -p "$DIR"

# --auto-bind: there is no scheduler, so the test double binds new pods to this node.
# --verify-kubelet-serving: the double checks 10250's certificate against the cluster CA
# (kube-apiserver --kubelet-certificate-authority); --csr-auto-approve-node-client: the node's own
# client certificate renewals are approved as kube-controller-manager's csrapproving does.
node dist/test/fixtures/test-apiserver/main.js --port "$PORT" --dir "$DIR" --node-name "$NODE" --auto-bind \
  --verify-kubelet-serving --csr-auto-approve-node-client \
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
  [ -s "$DIR/admin.kubeconfig" ] && [ -s "$DIR/kubelet.kubeconfig" ] && [ -s "$DIR/ca.crt" ] && break
  kill -0 "$API_PID" 2>/dev/null || { cat "$DIR/apiserver.log" >&2; echo "try-cluster.sh: the test API server did not start" >&2; exit 1; }
  sleep 0.2
done
[ -s "$DIR/admin.kubeconfig" ] || { echo "try-cluster.sh: no kubeconfig from the test API server in $DIR" >&2; exit 1; }

# The example config, and what only this cluster knows: its CA, as kubeadm points clientCAFile at it.
{
  cat examples/kubelet-config.yaml
  cat <<CFG
# Added by try-cluster.sh for this cluster:
authentication:
  x509:
    clientCAFile: $DIR/ca.crt
rotateCertificates: true
serverTLSBootstrap: true
CFG
} >"$DIR/kubelet-config.yaml"

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
  kubectl logs hello
  kubectl exec hello -- uname -a
  kubectl get --raw /api/v1/nodes/$NODE/proxy/healthz
  kubectl get csr

The node turns Ready once the runtime and PLEG are up; describe shows its conditions, capacity,
allocatable, events and lease (renewed every 10 s). The pod is bound to $NODE by the test double,
as there is no scheduler.

Logs: $DIR/apiserver.log. Ctrl-C stops kubelet-ts and the test API server.
MSG

# The node's certificates (kubelet-client-*.pem, kubelet-server-*.pem) belong to this cluster: kept in $DIR.
KUBECONFIG_FLAGS=(--kubeconfig "$DIR/kubelet.kubeconfig" --cert-dir "$DIR/pki")
if [ -n "$JOIN" ]; then
  # A bootstrap token as kubeadm makes one: Secret kube-system/bootstrap-token-<id>.
  TOKEN_ID=$(head -c 64 /dev/urandom | tr -dc 'a-z0-9' | head -c 6)
  TOKEN_SECRET=$(head -c 256 /dev/urandom | tr -dc 'a-z0-9' | head -c 16)
  ADMIN=(kubectl --kubeconfig "$DIR/admin.kubeconfig")
  "${ADMIN[@]}" -n kube-system create secret generic "bootstrap-token-$TOKEN_ID" \
    --type bootstrap.kubernetes.io/token --from-literal=token-id="$TOKEN_ID" --from-literal=token-secret="$TOKEN_SECRET" \
    --from-literal=usage-bootstrap-authentication=true --from-literal=usage-bootstrap-signing=true \
    --from-literal=auth-extra-groups=system:bootstrappers:kubeadm:default-node-token >/dev/null
  BOOT=(kubectl --kubeconfig "$DIR/bootstrap-kubelet.kubeconfig")
  "${BOOT[@]}" config set-cluster kubernetes --server "https://127.0.0.1:$PORT" --certificate-authority "$DIR/ca.crt" --embed-certs >/dev/null
  "${BOOT[@]}" config set-credentials tls-bootstrap-token-user --token "$TOKEN_ID.$TOKEN_SECRET" >/dev/null
  "${BOOT[@]}" config set-context tls-bootstrap-token-user@kubernetes --cluster kubernetes --user tls-bootstrap-token-user >/dev/null
  "${BOOT[@]}" config use-context tls-bootstrap-token-user@kubernetes >/dev/null
  rm -f "$DIR/node.kubeconfig"
  KUBECONFIG_FLAGS=(--bootstrap-kubeconfig "$DIR/bootstrap-kubelet.kubeconfig" --kubeconfig "$DIR/node.kubeconfig" --cert-dir "$DIR/pki")
  echo "Joining with bootstrap token $TOKEN_ID.<secret> (bootstrap kubeconfig $DIR/bootstrap-kubelet.kubeconfig)."
fi

# What an administrator does (kube-controller-manager approves neither a bootstrap token's first
# request without kubeadm's RBAC bindings nor any serving request): approve the node's pending
# requests, the bootstrap one with --join and its serving certificate requests, printing each.
(
  ADMIN=(kubectl --kubeconfig "$DIR/admin.kubeconfig")
  while kill -0 "$API_PID" 2>/dev/null; do
    "${ADMIN[@]}" get csr --no-headers -o custom-columns='NAME:.metadata.name,USER:.spec.username,CONDITION:.status.conditions[*].type' 2>/dev/null \
      | awk -v node="system:node:$NODE" '$3 == "<none>" && ($2 == node || $2 ~ /^system:bootstrap:/) {print $1}' \
      | while read -r csr; do
        echo "try-cluster.sh: kubectl certificate approve $csr"
        "${ADMIN[@]}" certificate approve "$csr" >/dev/null || true
      done
    sleep 2
  done
) &

node bin/kubelet-ts.mjs \
  --config "$DIR/kubelet-config.yaml" \
  "${KUBECONFIG_FLAGS[@]}" \
  --hostname-override "$NODE" \
  --container-runtime-endpoint "$CONTAINER_RUNTIME_ENDPOINT" \
  --root-dir /var/lib/kubelet-ts/kubelet "$@" &
KUBELET_PID=$!
wait "$KUBELET_PID"
