#!/usr/bin/env node
// Runs every benchmark in turn (each prints its table and writes bench/results/<name>.json).
//   node scripts/run-bench.mjs [name...]     names: stats pleg oom soak probes density eviction api stats-vm
// With no name it runs all but soak, which takes a quarter of an hour (npm run bench:soak), and
// stats-vm, which boots the emulated VM node (npm run bench:stats-vm).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const benches = {
  stats: ['bench/stats.js', 'bench/stats-real.js'],
  pleg: ['bench/pleg.js'],
  oom: ['bench/oom.js'],
  soak: ['bench/soak.js'],
  probes: ['bench/probes.js'],
  api: ['bench/api.js'],
  density: ['bench/density.js'],
  eviction: ['bench/eviction.js'],
  'stats-vm': ['bench/stats-vm.js'],
};
const wanted = process.argv.slice(2).length ? process.argv.slice(2) : Object.keys(benches).filter((n) => n !== 'soak' && n !== 'stats-vm');
let failed = false;
for (const name of wanted) {
  for (const file of benches[name] ?? []) {
    const path = join(root, 'dist', file);
    if (!existsSync(path)) {
      console.error(`# ${name}: ${file} is not built`);
      failed = true;
      continue;
    }
    console.log(`\n# bench ${name}: ${file}`);
    const r = spawnSync(process.execPath, ['--expose-gc', path], { stdio: 'inherit', cwd: root });
    if (r.status !== 0) failed = true;
  }
}
process.exit(failed ? 1 : 0);
