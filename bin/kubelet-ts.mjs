#!/usr/bin/env node
// Entry point: runs the compiled CLI (npm run build produces dist/).
import { main } from '../dist/src/cli.js';

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`kubelet-ts: ${err?.stack ?? err}\n`);
    process.exit(1);
  },
);
