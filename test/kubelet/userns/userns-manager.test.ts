// Pods' user namespaces: the kubelet's ID range from synthetic account and subordinate-ID
// files, upstream's checks on it, allocation per pod (written to the pod's `userns` file),
// exhaustion, a restart that reads the files back, freeing, and the refusals.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Pod } from '../../../src/api/types.js';
import { getKubeletMappings, type SubIDFiles } from '../../../src/kubelet/userns/subids.js';
import { UsernsManager, type RuntimeHandlerSupport } from '../../../src/kubelet/userns/userns-manager.js';

async function tmp(t: { after(fn: () => Promise<void>): void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'userns-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** Account and subordinate-ID files with the given contents (undefined: the file does not exist). */
async function files(dir: string, c: { passwd?: string; group?: string; subuid?: string; subgid?: string }): Promise<SubIDFiles> {
  const f: SubIDFiles = { passwd: join(dir, 'passwd'), group: join(dir, 'group'), subuid: join(dir, 'subuid'), subgid: join(dir, 'subgid') };
  for (const k of ['passwd', 'group', 'subuid', 'subgid'] as const) if (c[k] !== undefined) await writeFile(f[k], c[k]!);
  return f;
}

const PASSWD = 'root:x:0:0:root:/root:/bin/sh\nkubelet:x:999:999::/nonexistent:/usr/sbin/nologin\n';
const GROUP = 'root:x:0:\nkubelet:x:999:\n';

test('the kubelet range: table of account and subordinate-ID files', async (t) => {
  const dir = await tmp(t);
  const rows: Array<{ name: string; files: Parameters<typeof files>[1]; idsPerPod?: number; gate?: boolean; want: { firstID: number; length: number; source: string } | RegExp }> = [
    { name: 'no kubelet user: every ID from idsPerPod up', files: { passwd: 'root:x:0:0::/:/bin/sh\n', subuid: 'kubelet:65536:65536\n', subgid: 'kubelet:65536:65536\n' }, want: { firstID: 65536, length: 2 ** 32 - 65536, source: 'default' } },
    { name: 'no kubelet user, idsPerPod 131072', files: {}, idsPerPod: 131072, want: { firstID: 131072, length: 2 ** 32 - 131072, source: 'default' } },
    { name: 'gate off: the default whatever the files say', files: { passwd: PASSWD, subuid: 'kubelet:x:y\n' }, gate: false, want: { firstID: 65536, length: 2 ** 32 - 65536, source: 'default' } },
    { name: 'one range by name', files: { passwd: PASSWD, group: GROUP, subuid: 'alice:100000:65536\nkubelet:655360:6553600\n', subgid: 'kubelet:655360:6553600\n' }, want: { firstID: 655360, length: 6553600, source: 'subids' } },
    { name: 'one range by numeric owner', files: { passwd: PASSWD, group: GROUP, subuid: '999:196608:7208960\n', subgid: '999:196608:7208960\n' }, want: { firstID: 196608, length: 7208960, source: 'subids' } },
    { name: 'user without entries', files: { passwd: PASSWD, group: GROUP, subuid: 'alice:100000:65536\n', subgid: 'kubelet:65536:65536\n' }, want: /error retrieving additional uids for user "kubelet"/ },
    { name: 'two ranges', files: { passwd: PASSWD, group: GROUP, subuid: 'kubelet:65536:65536\nkubelet:196608:65536\n', subgid: 'kubelet:65536:65536\nkubelet:196608:65536\n' }, want: /it must contain only one line/ },
    { name: 'UIDs and GIDs differ', files: { passwd: PASSWD, group: GROUP, subuid: 'kubelet:65536:65536\n', subgid: 'kubelet:131072:65536\n' }, want: /mismatched subuids and subgids for user "kubelet"/ },
    { name: 'a malformed entry for the user', files: { passwd: PASSWD, group: GROUP, subuid: 'kubelet:abc:65536\n', subgid: 'kubelet:65536:65536\n' }, want: /invalid line/ },
  ];
  for (const [i, row] of rows.entries()) {
    const sub = join(dir, String(i));
    await mkdir(sub);
    const f = await files(sub, row.files);
    const got = getKubeletMappings(row.idsPerPod ?? 65536, row.gate ?? true, f);
    if (row.want instanceof RegExp) await assert.rejects(got, row.want, row.name);
    else assert.deepEqual(await got, row.want, row.name);
  }
});

const SUPPORTED: RuntimeHandlerSupport[] = [{ name: '', supportsRecursiveReadOnlyMounts: false, supportsUserNamespaces: true }];

function pod(uid: string, hostUsers?: boolean): Pod {
  const spec: Pod['spec'] = { containers: [{ name: 'c', image: 'busybox' }] };
  if (hostUsers !== undefined) spec.hostUsers = hostUsers;
  return { metadata: { uid, name: `p-${uid}`, namespace: 'default' }, spec };
}

async function managerWith(dir: string, subuid: string, o: { maxPods?: number; idsPerPod?: number; handlers?: RuntimeHandlerSupport[] | undefined; gate?: boolean; random?: () => number } = {}): Promise<UsernsManager> {
  await mkdir(dir, { recursive: true });
  const f = await files(dir, { passwd: PASSWD, group: GROUP, subuid, subgid: subuid });
  return UsernsManager.create({
    rootDir: join(dir, 'root'), maxPods: o.maxPods ?? 2, idsPerPod: o.idsPerPod, gateEnabled: o.gate ?? true, files: f,
    runtimeHandlers: () => ('handlers' in o ? o.handlers : SUPPORTED), random: o.random ?? (() => 0),
  });
}

test('the range is checked as upstream: alignment, never ID 0, the multiple of idsPerPod, room for maxPods', async (t) => {
  const dir = await tmp(t);
  const rows: Array<[string, string, number, RegExp]> = [
    ['not aligned', 'kubelet:70000:655360\n', 2, /kubelet user assigned ID 70000 is not a multiple of 65536/],
    ['starting at 0', 'kubelet:0:655360\n', 2, /kubelet user assigned ID 0 must be greater or equal to 65536/],
    ['length not a multiple', 'kubelet:65536:100000\n', 1, /kubelet user assigned IDs length 100000 is not a multiple of 65536/],
    ['too few for maxPods', 'kubelet:65536:131072\n', 3, /kubelet user assigned IDs are not enough to support 3 pods/],
  ];
  for (const [i, [name, subuid, maxPods, want]] of rows.entries()) {
    const sub = join(dir, String(i));
    await mkdir(sub);
    await assert.rejects(managerWith(sub, subuid, { maxPods }), want, name);
  }
});

test('hostUsers: false gets its own range, written to <rootDir>/pods/<uid>/userns in upstream\'s shape', async (t) => {
  const dir = await tmp(t);
  const m = await managerWith(dir, 'kubelet:131072:196608\n', { maxPods: 3 });
  const a = await m.getOrCreateUserNamespaceMappings(pod('a', false), '');
  assert.deepEqual(a, { mode: 'POD', uids: [{ host_id: 131072, container_id: 0, length: 65536 }], gids: [{ host_id: 131072, container_id: 0, length: 65536 }] });
  const b = await m.getOrCreateUserNamespaceMappings(pod('b', false), '');
  assert.equal(b?.uids?.[0]?.host_id, 196608, 'a second pod gets the next free range');
  const file = JSON.parse(await readFile(join(dir, 'root', 'pods', 'a', 'userns'), 'utf8'));
  assert.deepEqual(file, { uidMappings: [{ containerId: 0, hostId: 131072, length: 65536 }], gidMappings: [{ containerId: 0, hostId: 131072, length: 65536 }] });
  // asked again (a resync, a container start), the same range
  assert.deepEqual(await m.getOrCreateUserNamespaceMappings(pod('a', false), ''), a);
  assert.deepEqual([...m.allocations()], [['a', 131072], ['b', 196608]]);
});

test('the ranges run out: the next pod fails with upstream\'s error and gets none', async (t) => {
  const dir = await tmp(t);
  const m = await managerWith(dir, 'kubelet:65536:131072\n', { maxPods: 2 });
  await m.getOrCreateUserNamespaceMappings(pod('a', false), '');
  await m.getOrCreateUserNamespaceMappings(pod('b', false), '');
  await assert.rejects(m.getOrCreateUserNamespaceMappings(pod('c', false), ''), /create user namespace: could not find an empty slot to allocate a user namespace/);
  await assert.rejects(stat(join(dir, 'root', 'pods', 'c', 'userns')), { code: 'ENOENT' });
  // freeing one makes room again
  await m.release('a');
  await assert.rejects(stat(join(dir, 'root', 'pods', 'a', 'userns')), { code: 'ENOENT' });
  assert.equal((await m.getOrCreateUserNamespaceMappings(pod('c', false), ''))?.uids?.[0]?.host_id, 65536);
});

test('a restart reads the pods\' files back: each pod keeps its range and no other pod gets it', async (t) => {
  const dir = await tmp(t);
  const subuid = 'kubelet:65536:196608\n';
  const first = await managerWith(dir, subuid, { maxPods: 3, random: () => 0.5 });
  const a = await first.getOrCreateUserNamespaceMappings(pod('a', false), '');
  assert.equal(a?.uids?.[0]?.host_id, 131072, 'the random start picks the middle slot');
  const restarted = await managerWith(dir, subuid, { maxPods: 3, random: () => 0.5 });
  assert.deepEqual([...restarted.allocations()], [['a', 131072]]);
  assert.deepEqual(await restarted.getOrCreateUserNamespaceMappings(pod('a', false), ''), a);
  // a new pod starting its search at the same slot skips the one read back
  assert.equal((await restarted.getOrCreateUserNamespaceMappings(pod('b', false), ''))?.uids?.[0]?.host_id, 196608);
});

test('a restart refuses a file it did not write (two pods on one range, a misaligned range)', async (t) => {
  const dir = await tmp(t);
  const subuid = 'kubelet:65536:196608\n';
  const write = async (uid: string, hostId: number) => {
    await mkdir(join(dir, 'root', 'pods', uid), { recursive: true });
    const m = { containerId: 0, hostId, length: 65536 };
    await writeFile(join(dir, 'root', 'pods', uid, 'userns'), JSON.stringify({ uidMappings: [m], gidMappings: [m] }));
  };
  await write('a', 65536);
  await write('b', 65536);
  await assert.rejects(managerWith(dir, subuid, { maxPods: 3 }), /record pod mappings for existing pod "b": range picked for pod "b" already taken/);
  await write('b', 70000);
  await assert.rejects(managerWith(dir, subuid, { maxPods: 3 }), /wrong user namespace offset specified 70000/);
});

test('cleanup frees the ranges of pods nobody knows and of pod directories that are gone', async (t) => {
  const dir = await tmp(t);
  const m = await managerWith(dir, 'kubelet:65536:196608\n', { maxPods: 3 });
  await m.getOrCreateUserNamespaceMappings(pod('a', false), '');
  await m.getOrCreateUserNamespaceMappings(pod('b', false), '');
  await m.getOrCreateUserNamespaceMappings(pod('c', false), '');
  await rm(join(dir, 'root', 'pods', 'c'), { recursive: true });
  await m.cleanupOrphanedPodUsernsAllocations(['a', 'c']);
  assert.deepEqual([...m.allocations().keys()], ['a'], 'b is known to nobody, c has no directory');
  await assert.rejects(stat(join(dir, 'root', 'pods', 'b', 'userns')), { code: 'ENOENT' });
});

test('what each pod is given: NODE, nothing, or a refusal naming why', async (t) => {
  const dir = await tmp(t);
  const subuid = 'kubelet:65536:131072\n';
  const on = await managerWith(join(dir), subuid);
  assert.deepEqual(await on.getOrCreateUserNamespaceMappings(pod('x'), ''), { mode: 'NODE' });
  assert.deepEqual(await on.getOrCreateUserNamespaceMappings(pod('x', true), ''), { mode: 'NODE' });
  const off = await managerWith(join(dir), subuid, { gate: false });
  assert.equal(await off.getOrCreateUserNamespaceMappings(pod('x'), ''), null);
  await assert.rejects(off.getOrCreateUserNamespaceMappings(pod('x', false), ''), /the feature gate "UserNamespacesSupport" is disabled: can't set spec.HostUsers/);
  await assert.rejects(off.getOrCreateUserNamespaceMappings(pod('x', true), ''), /the feature gate "UserNamespacesSupport" is disabled/);

  const rows: Array<[string, RuntimeHandlerSupport[] | undefined, string, string]> = [
    ['a runtime that reports no handler (containerd 1.6)', [], '', "can't set `spec.hostUsers: false`, runtime does not support user namespaces: the handler \"\" is not known"],
    ['no Status seen yet', undefined, '', "can't set `spec.hostUsers: false`, runtime does not support user namespaces: runtime handlers are not set"],
    ['the default handler without support', [{ name: '', supportsRecursiveReadOnlyMounts: true, supportsUserNamespaces: false }], '', "can't set `spec.hostUsers: false`, runtime does not support user namespaces"],
    ['a RuntimeClass handler without support', [{ name: 'kata', supportsRecursiveReadOnlyMounts: false, supportsUserNamespaces: false }, ...SUPPORTED], 'kata', "can't set `spec.hostUsers: false`, RuntimeClass handler \"kata\" does not support user namespaces"],
  ];
  for (const [i, [name, handlers, handler, message]] of rows.entries()) {
    const m = await managerWith(join(dir, String(i)), subuid, { handlers });
    await assert.rejects(m.getOrCreateUserNamespaceMappings(pod('y', false), handler), (err: Error) => err.message === message, name);
    assert.equal(m.allocations().size, 0, `${name}: nothing allocated`);
  }
});
