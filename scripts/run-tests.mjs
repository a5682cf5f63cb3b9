#!/usr/bin/env node
// Runs the compiled test suite with node's test runner: unit tests first, then the
// integration tests (which need root and a real containerd, started by scripts/ and
// stopped again at the end). NODE_BIN picks the node binary (CI runs Node 20 and 24).
// test/vm/ holds tests that run only inside the VM node (scripts/vm-node.sh test): they are
// never run here; the integration test vm-node.test.ts boots the node and runs them there.
//   node scripts/run-tests.mjs [--unit|--integration|--vm] [--no-vm] [filter...]
//   --vm     only the VM node test (integration/vm-node.test.js)
//   --no-vm  everything but it (the second Node leg of scripts/test.sh: the VM runs once)
//   --integration-subset  unit tests and the named integration subset below (the second Node leg)

import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const nodeBin = process.env.NODE_BIN || process.execPath;
const args = process.argv.slice(2);
const vmOnly = args.includes('--vm');
const noVm = args.includes('--no-vm');
// --integration-subset: of the integration tests, only this named set (the second Node leg of
// scripts/test.sh: every unit test, and these, which cover what differs between Node versions —
// the addon, gRPC to the runtime, the HTTP/TLS servers, streams, timers — within CI's time).
const INTEGRATION_SUBSET = [
  'cri-client', 'lifecycle', 'static-pods', 'cluster-pods', 'probes', 'stats', 'secure-port',
  'logs-streaming', 'oom-real', 'cgroup-fd-table-real',
];
const subset = args.includes('--integration-subset');
const only = vmOnly ? '--integration' : args.find((a) => a === '--unit' || a === '--integration');
const filters = args.filter((a) => !a.startsWith('--'));

function find(dir) {
  let out = [];
  for (const e of readdirSync(dir)) {
    const p = join(dir, e);
    if (statSync(p).isDirectory()) out = out.concat(find(p));
    else if (e.endsWith('.test.js')) out.push(p);
  }
  return out.sort();
}

const rel = (f) => relative(join(root, 'dist', 'test'), f);
const isVmNodeTest = (f) => rel(f) === join('integration', 'vm-node.test.js');
const all = find(join(root, 'dist', 'test'))
  .filter((f) => !rel(f).startsWith(`vm/`))
  .filter((f) => (vmOnly ? isVmNodeTest(f) : !noVm || !isVmNodeTest(f)))
  .filter((f) => !filters.length || filters.some((x) => f.includes(x)));
const isIntegration = (f) => rel(f).startsWith('integration');
if (subset) {
  const keep = new Set(INTEGRATION_SUBSET.map((n) => join('integration', `${n}.test.js`)));
  for (let i = all.length - 1; i >= 0; i--) if (isIntegration(all[i]) && !keep.has(rel(all[i]))) all.splice(i, 1);
}
const unit = all.filter((f) => !isIntegration(f));
const integration = all.filter(isIntegration);

function run(cmd, argv, opts = {}) {
  return new Promise((resolve) => {
    const child = spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'inherit'], cwd: root, ...opts });
    let out = '';
    child.stdout.on('data', (d) => { out += d; process.stdout.write(d); });
    child.on('close', (code) => resolve({ code: code ?? 1, out }));
  });
}

function counts(out) {
  const n = (k) => [...out.matchAll(new RegExp(`^\\S*\\s*${k} (\\d+)$`, 'gm'))].reduce((s, m) => s + Number(m[1]), 0);
  return { pass: n('pass'), fail: n('fail'), skipped: n('skipped') };
}

// Every kubelet-ts a test starts checks swap and the kernel tunables under this procfs root,
// never the host's /proc: it sets the tunables it finds wrong, as upstream, and the host's
// sysctls are not the tests' to change. It holds the host's values and no swap.
let fakeProcfs;
if (!process.env.KUBELET_TS_PROCFS_ROOT) {
  fakeProcfs = mkdtempSync(join(tmpdir(), 'kts-procfs-'));
  writeFileSync(join(fakeProcfs, 'swaps'), 'Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n');
  for (const name of ['vm/overcommit_memory', 'vm/panic_on_oom', 'kernel/panic', 'kernel/panic_on_oops', 'kernel/keys/root_maxkeys', 'kernel/keys/root_maxbytes']) {
    let value = '0';
    try { value = readFileSync(join('/proc/sys', name), 'utf8'); } catch { /* not on this kernel */ }
    mkdirSync(dirname(join(fakeProcfs, 'sys', name)), { recursive: true });
    writeFileSync(join(fakeProcfs, 'sys', name), value);
  }
  process.env.KUBELET_TS_PROCFS_ROOT = fakeProcfs;
}

const total = { pass: 0, fail: 0, skipped: 0 };
let failed = false;
const { stdout: version } = await new Promise((resolve) => {
  const c = spawn(nodeBin, ['--version']);
  let s = '';
  c.stdout.on('data', (d) => { s += d; });
  c.on('close', () => resolve({ stdout: s.trim() }));
});
console.log(`# kubelet-ts tests on node ${version}`);

async function suite(name, files, extra = []) {
  if (!files.length) return;
  console.log(`# ${name}: ${files.length} files`);
  const r = await run(nodeBin, ['--test', '--test-reporter=spec', ...extra, ...files]);
  const c = counts(r.out);
  total.pass += c.pass; total.fail += c.fail; total.skipped += c.skipped;
  if (r.code !== 0) failed = true;
}

if (only !== '--integration') await suite('unit tests', unit);
if (only !== '--unit' && integration.length) {
  if (process.getuid?.() !== 0) {
    console.error('# integration tests need root (they run a real containerd); run as root or use --unit');
    failed = true;
  } else {
    // Integration files share one containerd: run them one at a time.
    await suite('integration tests (real containerd)', integration, ['--test-concurrency=1']);
    if (!process.env.KTS_KEEP_RUNTIME) {
      await run('bash', [join(root, 'scripts', 'containerd.sh'), 'stop']);
      await run('bash', [join(root, 'scripts', 'registry.sh'), 'stop']);
      await run('bash', [join(root, 'scripts', 'registry.sh'), 'stop-auth']);
    }
  }
}
if (fakeProcfs) rmSync(fakeProcfs, { recursive: true, force: true });
console.log(`\ntests: ${total.pass} passed, ${total.fail} failed, ${total.skipped} skipped`);
process.exit(failed || total.fail > 0 ? 1 : 0);
