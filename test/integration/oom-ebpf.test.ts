// The eBPF source's loading: present when this machine can build it, unloadable without
// privileges with the reason said, and loaded/unloaded without leaking.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { chmod, copyFile, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { defaultAddonPath } from '../../src/native.js';
import { collectingHandle, ebpfBuildExpected, realNative } from '../oom/helpers.js';

function addonPath(): string {
  const p = process.env.KTS_NATIVE_ADDON || defaultAddonPath();
  if (!p) throw new Error('no addon path');
  return p;
}

describe('eBPF OOM source', () => {
  it('is built in exactly when the build tools are here, else says why', async () => {
    const expected = await ebpfBuildExpected();
    const build = realNative().oomEbpfBuild();
    assert.equal(build.compiled, expected.expected, `addon eBPF build ${JSON.stringify(build)} vs tools ${JSON.stringify(expected)}`);
    if (!build.compiled) assert.match(build.reason ?? '', /^eBPF source not built: \S/);
  });

  it('loads and unloads repeatedly without leaking fds', async () => {
    const expected = await ebpfBuildExpected();
    const { handle } = collectingHandle(realNative());
    try {
      const before = (await readdir('/proc/self/fd')).length;
      for (let i = 0; i < 5; i++) {
        const r = handle.startEbpf();
        assert.equal(r.ok, expected.expected, JSON.stringify(r));
        assert.equal(handle.stats().ebpf, expected.expected);
        handle.stopEbpf();
        assert.equal(handle.stats().ebpf, false);
      }
      assert.equal((await readdir('/proc/self/fd')).length, before);
    } finally {
      handle.close();
    }
  });

  it('without privileges does not load, and says it needs root', async () => {
    const expected = await ebpfBuildExpected();
    // World-readable copies of the addon and of this node binary, so an unprivileged process
    // can run them wherever the tree (and a node from npm inside it) is checked out.
    const dir = await mkdtemp(join(tmpdir(), 'kts-oom-nobody-'));
    try {
      await chmod(dir, 0o755);
      const copy = join(dir, 'kubelet_ts_native.node');
      await copyFile(addonPath(), copy);
      await chmod(copy, 0o755);
      const node = join(dir, 'node');
      await copyFile(process.execPath, node);
      await chmod(node, 0o755);
      const script = 'const a = require(process.argv[1]); const h = new a.OomWatcherHandle(() => {}); process.stdout.write(JSON.stringify(h.startEbpf())); h.close();';
      const out = await new Promise<string>((resolve, reject) => {
        execFile(node, ['-e', script, copy], { uid: 65534, gid: 65534, cwd: '/' }, (err, stdout, stderr) => (err ? reject(new Error(`${err.message}: ${stderr}`)) : resolve(stdout)));
      });
      const r = JSON.parse(out) as { ok: boolean; reason?: string };
      assert.equal(r.ok, false);
      assert.match(r.reason ?? '', expected.expected ? /^not root \(needs CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN\)/ : /^eBPF source not built/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
