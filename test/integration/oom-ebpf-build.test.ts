// A BPF object that fails to compile costs the eBPF source only: the addon still builds, its
// cgroup reader and OOM watcher work, and oomEbpfBuild() says why. Builds a copy of the addon
// with a compiler that fails (CLANG=/bin/false): needs the build toolchain and a minute.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, mkdtemp, rm, symlink } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

import { loadNative } from '../../src/native.js';
import type { NativeOomExports } from '../../src/oom/native-types.js';
import { FsCgroupReader } from '../../src/stats/cgroup-fs-reader.js';
import { createNativeCgroupReader } from '../../src/stats/cgroup-native-reader.js';
import { generateCgroupTree } from '../fixtures/cgroup-tree.js';
import { repoRoot } from '../fixtures/runtime.js';
import { ebpfBuildExpected } from '../oom/helpers.js';

describe('addon build with a failing BPF compile', () => {
  let dir: string;
  before(async () => { dir = await mkdtemp(join(tmpdir(), 'kts-bpf-fail-')); });
  after(async () => { await rm(dir, { recursive: true, force: true }); });

  it('still builds; the cgroup reader works and eBPF says it failed to compile', async (t) => {
    const tools = await ebpfBuildExpected();
    // Without the BPF tools the step is not even attempted (the plain path is the unit suite's).
    assert.ok(tools.expected, `this integration test needs the eBPF build tools: ${tools.reason}`);
    const root = repoRoot();
    await cp(join(root, 'native'), join(dir, 'native'), { recursive: true });
    await cp(join(root, 'binding.gyp'), join(dir, 'binding.gyp'));
    await cp(join(root, 'package.json'), join(dir, 'package.json'));
    await symlink(join(root, 'node_modules'), join(dir, 'node_modules'));
    const nodeGyp = createRequire(join(root, 'package.json')).resolve('node-gyp/bin/node-gyp.js');
    // This node's own headers (offline), as npm's nodedir setting gives them when set.
    const prefix = dirname(dirname(process.execPath));
    const nodedir = process.env.npm_config_nodedir || (existsSync(join(prefix, 'include', 'node', 'node_api.h')) ? prefix : undefined);
    const log = await new Promise<string>((resolve, reject) => {
      execFile(process.execPath, [nodeGyp, 'rebuild', ...(nodedir ? [`--nodedir=${nodedir}`] : [])], { cwd: dir, env: { ...process.env, CLANG: '/bin/false', KTS_DISABLE_EBPF: '' }, maxBuffer: 64 << 20, timeout: 600_000 },
        (err, stdout, stderr) => (err ? reject(new Error(`node-gyp rebuild failed: ${err.message}\n${stderr.slice(-4000)}`)) : resolve(stdout + stderr)));
    });
    t.diagnostic(log.split('\n').filter((l) => /build-bpf/.test(l)).join(' | '));
    assert.match(log, /build-bpf: BPF object failed to compile/);

    const loaded = loadNative({ path: join(dir, 'build', 'Release', 'kubelet_ts_native.node') });
    assert.ok(loaded.addon, loaded.error);
    const oom = loaded.addon as unknown as Required<NativeOomExports>;
    const build = oom.oomEbpfBuild();
    assert.equal(build.compiled, false);
    assert.match(build.reason ?? '', /^eBPF source not built: BPF object failed to compile: false exited with 1/);
    const h = new oom.OomWatcherHandle(() => {});
    try {
      const r = h.startEbpf();
      assert.equal(r.ok, false);
      assert.match(r.ok ? '' : r.reason, /failed to compile/);
    } finally {
      h.close();
    }

    const native = createNativeCgroupReader(loaded);
    assert.ok(native.reader, native.error);
    const tree = generateCgroupTree({ root: join(dir, 'cgroup'), version: 2, containers: 4 });
    const got = native.reader.readCgroupsSync(tree.refs);
    const want = await new FsCgroupReader({ concurrency: 2, clockTicksPerSecond: native.reader.clockTicks }).readCgroups(tree.refs);
    assert.deepEqual(got.values, want.values);
    assert.deepEqual(got.status, want.status);
  });
});
