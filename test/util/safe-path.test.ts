import { test } from 'node:test';
import assert from 'node:assert/strict';
import { confinedJoin, podDir, PathEscapeError } from '../../src/util/safe-path.js';
import { isKubeletError } from '../../src/util/errors.js';

test('confinedJoin keeps plain components under the root', () => {
  assert.equal(confinedJoin('/var/lib/kubelet', 'pods', 'abc-123'), '/var/lib/kubelet/pods/abc-123');
  assert.equal(podDir('/var/lib/kubelet/', 'u1'), '/var/lib/kubelet/pods/u1');
});

test('confinedJoin refuses components that leave the root', () => {
  for (const bad of ['..', '.', '../../victim', 'a/b', '', 'x\0y', '/etc', 'a'.repeat(256)]) {
    assert.throws(() => podDir('/var/lib/kubelet', bad), (e: unknown) => e instanceof PathEscapeError && isKubeletError(e, 'ERR_PATH_ESCAPE'), `component ${JSON.stringify(bad)}`);
  }
  assert.throws(() => confinedJoin('relative/root', 'x'), PathEscapeError);
});

test('confinedJoin counts a component in bytes, as NAME_MAX does', () => {
  // 100 characters of a 3-byte script: 300 bytes, too long for one file name
  assert.throws(() => podDir('/var/lib/kubelet', 'ü'.repeat(100) + '€'.repeat(100)), PathEscapeError);
  assert.equal(podDir('/var/lib/kubelet', '€'.repeat(85)), `/var/lib/kubelet/pods/${'€'.repeat(85)}`);
});

test('confinedJoin gives what posix.resolve gives, for normal and unnormalized roots', async () => {
  const { posix } = await import('node:path');
  const roots = ['/', '/var/lib/kubelet', '/var/lib/kubelet/', '//var//lib/./kubelet', '/var/lib/../lib/kubelet', '/a/.', '/a/..', '/a/b/.hidden', '/a/..b', '/a/b..'];
  for (const root of roots) {
    for (const comps of [[], ['pods'], ['pods', 'u1'], ['ns_name_uid', 'c', '0.log'], ['.x', '..y']]) {
      assert.equal(confinedJoin(root, ...comps), posix.resolve(root, ...comps), `${root} + ${comps.join(',')}`);
    }
  }
});
