#!/usr/bin/env bash
# Sets up this Debian machine as a node (containerd, CNI, local registry and images; needs
# root), builds kubelet-ts, and runs it in standalone mode with the static pods in
# examples/static-pods. Stop it with Ctrl-C: the pods keep running, as with the kubelet.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup-node.sh
npm install --no-audit --no-fund
npm run build
eval "$(bash scripts/containerd.sh env)"

cat <<MSG
kubelet-ts is starting. In another shell:
  curl -s http://127.0.0.1:10255/pods | head -c 2000     # the static pods and their status
  curl -s http://127.0.0.1:10248/healthz?verbose          # ping; runtime, PLEG and sync loop trouble as warn: lines
MSG
exec node bin/kubelet-ts.mjs \
  --config examples/kubelet-config-standalone.yaml \
  --container-runtime-endpoint "$CONTAINER_RUNTIME_ENDPOINT" \
  --pod-manifest-path "$PWD/examples/static-pods" \
  --root-dir /var/lib/kubelet-ts/kubelet "$@"
