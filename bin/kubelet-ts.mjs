#!/usr/bin/env node
// Entry point: re-executes node in place with the agent's process-start settings when they are
// missing (dist/src/launch.js), then runs the compiled CLI (npm run build produces dist/).
import { fileURLToPath } from 'node:url';
import { relaunchWithRuntimeSettings } from '../dist/src/launch.js';

const args = process.argv.slice(2);
const launch = relaunchWithRuntimeSettings({ script: fileURLToPath(import.meta.url), args });
const { main } = await import('../dist/src/cli.js');

main(args, { launchWarning: launch.reason }).then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`kubelet-ts: ${err?.stack ?? err}\n`);
    process.exit(1);
  },
);
