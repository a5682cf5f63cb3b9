// The real node: scripts/vm-node.sh boots Debian 12 under qemu (systemd PID 1, unified
// cgroup v2, containerd with SystemdCgroup) with this project shared in, runs the in-VM
// test set (dist/test/vm) there, and powers the node off. Every in-VM result comes back
// here as TAP and is replayed as a test of its own, so a failure inside is a failure here.
import { before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { ensureRuntime, repoRoot } from '../fixtures/runtime.js';

// Image build from scratch + boot + tests under emulation on 2 cores stays well inside this.
const LIMIT_MS = 40 * 60_000;

interface TapResult {
  /** Names of the enclosing suites and the test, outermost first. */
  path: string[];
  ok: boolean;
  directive: string;
  detail: string;
}

/** Parses node's TAP reporter output: "# Subtest: NAME" opens a level (four spaces deeper per
 * level), "ok N - NAME" / "not ok N - NAME" at the same indent closes it with its result. */
function parseTap(text: string): TapResult[] {
  const out: TapResult[] = [];
  const lines = text.split('\n');
  const open: { indent: number; name: string }[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const sub = /^(\s*)# Subtest: (.*)$/.exec(line);
    if (sub) {
      while (open.length && open[open.length - 1]!.indent >= sub[1]!.length) open.pop();
      open.push({ indent: sub[1]!.length, name: sub[2]! });
      continue;
    }
    const m = /^(\s*)(not ok|ok) \d+ - (.*?)(?: # (SKIP|TODO)\b.*)?$/.exec(line);
    if (!m) continue;
    const indent = m[1]!.length;
    let detail = '';
    if (m[2] === 'not ok') {
      const body: string[] = [];
      for (let j = i + 1; j < lines.length && !/^\s*(not ok|ok) \d+ - |^\s*# Subtest: /.test(lines[j]!) && body.length < 40; j++) body.push(lines[j]!);
      detail = body.join('\n');
    }
    const parents = open.filter((o) => o.indent < indent).map((o) => o.name);
    out.push({ path: [...parents, m[3]!], ok: m[2] === 'ok', directive: m[4] ?? '', detail });
    while (open.length && open[open.length - 1]!.indent >= indent) open.pop();
  }
  return out;
}

// The in-VM tests this file requires to have run and passed (others, added later to
// test/vm, are replayed too).
const REQUIRED = [
  'the VM node > runs systemd as PID 1',
  'the VM node > mounts unified cgroup v2 only, at /sys/fs/cgroup, with the cpu, memory, pids and io controllers',
  'containerd in the VM node (CRI, SystemdCgroup) > answers Version and Status, and its CRI config says SystemdCgroup = true for runc',
  'containerd in the VM node (CRI, SystemdCgroup) > runs a container as a systemd scope in the pod slice, with memory.max and MemoryMax set to its limit',
  'kubelet-ts standalone on the VM node (cgroupfs driver, cgroup v2) > runs a Guaranteed static pod whose v2 pod cgroup has memory.max = its limit',
];

describe('the VM node (qemu, systemd, cgroup v2)', () => {
  let results: TapResult[] = [];
  let code: number | null = null;
  let log = '';

  before(async () => {
    // The host's registries serve the test images the node pulls.
    await ensureRuntime();
    const child = spawn('bash', [join(repoRoot(), 'scripts', 'vm-node.sh'), 'test', '--tap'], {
      cwd: repoRoot(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let tap = '';
    child.stdout.on('data', (d: Buffer) => { tap += d; });
    // The in-VM spec report and the script's progress go to our stderr as they come.
    child.stderr.on('data', (d: Buffer) => { log += d; process.stderr.write(d); });
    const timer = setTimeout(() => child.kill('SIGTERM'), LIMIT_MS);
    code = await new Promise<number | null>((r) => child.on('close', (c) => r(c)));
    clearTimeout(timer);
    results = parseTap(tap);
  }, { timeout: LIMIT_MS + 60_000 });

  it('booted and reported which accelerator, kernel and boot time it used', () => {
    const ready = /node ready in (\d+)s \((tcg|kvm); kernel (\S+);/.exec(log);
    assert.ok(ready, `vm-node.sh reported the node ready:\n${log.slice(-3000)}`);
    assert.match(ready[3]!, /^6\.1\./);
  });

  it('ran the in-VM tests, all of them passed, none skipped', () => {
    assert.ok(results.length > 0, `TAP results came back from the node:\n${log.slice(-3000)}`);
    const names = new Set(results.map((r) => r.path.join(' > ')));
    for (const name of REQUIRED) assert.ok(names.has(name), `in-VM test ran: ${name}`);
    const failed = results.filter((r) => !r.ok).map((r) => `${r.path.join(' > ')}\n${r.detail}`);
    assert.deepEqual(failed, [], 'no in-VM test failed');
    assert.deepEqual(results.filter((r) => r.directive).map((r) => r.path.join(' > ')), [], 'no in-VM test skipped');
    assert.equal(code, 0, 'vm-node.sh test exited 0');
  });

  it('replays each in-VM result here', async (t) => {
    // Only the tests themselves (leaves), not the suites that group them.
    const leaves = results.filter((r) => !results.some((o) => o !== r && o.path.length > r.path.length && r.path.every((p, i) => o.path[i] === p)));
    assert.ok(leaves.length >= REQUIRED.length);
    for (const r of leaves) {
      await t.test(`in the VM: ${r.path.join(' > ')}`, () => {
        assert.ok(r.ok, r.detail);
        assert.equal(r.directive, '');
      });
    }
  });
});
