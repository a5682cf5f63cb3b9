// Cgroup names under the two drivers: systemd's slice names, their escaping and expansion
// (upstream CgroupName.ToSystemd, libcontainer ExpandSlice), and cgroupfs paths.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  CgroupNameError,
  cgroupNameToCgroupfs,
  cgroupNameToPath,
  cgroupNameToSystemd,
  cgroupNameToSystemdUnit,
  containerCgroupPath,
  expandSlice,
  parseCgroupfsToCgroupName,
  parseSystemdToCgroupName,
  systemdScopePrefixOfRuntime,
} from '../../src/cm/cgroup-name.js';

describe('systemd cgroup names', () => {
  it('a pod name becomes nested slices, each dash of the UID escaped to "_" (upstream example)', () => {
    const name = ['kubepods', 'burstable', 'pod1234-abcd-5678-efgh'];
    assert.equal(cgroupNameToSystemdUnit(name), 'kubepods-burstable-pod1234_abcd_5678_efgh.slice');
    assert.equal(cgroupNameToSystemd(name), '/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_abcd_5678_efgh.slice');
    assert.equal(cgroupNameToCgroupfs(name), '/kubepods/burstable/pod1234-abcd-5678-efgh');
    assert.equal(cgroupNameToPath('systemd', ['kubepods']), '/kubepods.slice');
    assert.equal(cgroupNameToPath('cgroupfs', ['kubepods']), '/kubepods');
  });

  it('the root is "/" under both drivers ("-.slice" for systemd)', () => {
    assert.equal(cgroupNameToSystemdUnit([]), '-.slice');
    assert.equal(cgroupNameToSystemd([]), '/');
    assert.equal(expandSlice('-.slice'), '/');
    assert.equal(cgroupNameToCgroupfs([]), '/');
  });

  it('a cgroupRoot leads every name: "/custom" + kubepods → /custom.slice/custom-kubepods.slice', () => {
    const root = parseCgroupfsToCgroupName('/custom/');
    assert.deepEqual(root, ['custom']);
    assert.deepEqual(parseCgroupfsToCgroupName('/'), []);
    assert.equal(cgroupNameToSystemd([...root, 'kubepods']), '/custom.slice/custom-kubepods.slice');
  });

  it('expandSlice nests by the dash-separated prefix and refuses what libcontainer refuses', () => {
    assert.equal(expandSlice('a-b-c.slice'), '/a.slice/a-b.slice/a-b-c.slice');
    for (const bad of ['.slice', 'a.scope', 'a/b.slice', 'a--b.slice', '-a.slice', 'a-.slice']) {
      assert.throws(() => expandSlice(bad), CgroupNameError, bad);
    }
  });

  it('a component with "_" or "/" cannot be a slice part (the escape could not be undone)', () => {
    assert.throws(() => cgroupNameToSystemdUnit(['kubepods', 'pod_1']), /cannot be a slice part/);
    assert.throws(() => cgroupNameToSystemdUnit(['kubepods', 'a/b']), /cannot be a slice part/);
  });

  it('parses a slice back into its components, "_" back to "-"', () => {
    assert.deepEqual(parseSystemdToCgroupName('/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-poda_b.slice'), ['kubepods', 'besteffort', 'poda-b']);
    assert.deepEqual(parseSystemdToCgroupName('-.slice'), []);
    assert.throws(() => parseSystemdToCgroupName('/kubepods'), CgroupNameError);
  });

  it('a container is a runtime scope in its pod slice under systemd, a plain directory under cgroupfs', () => {
    assert.equal(systemdScopePrefixOfRuntime('containerd'), 'cri-containerd');
    assert.equal(systemdScopePrefixOfRuntime('cri-o'), 'crio');
    assert.equal(containerCgroupPath('systemd', '/kubepods.slice/kubepods-pod1.slice', 'abc'), '/kubepods.slice/kubepods-pod1.slice/cri-containerd-abc.scope');
    assert.equal(containerCgroupPath('systemd', '/p.slice', 'abc', 'crio'), '/p.slice/crio-abc.scope');
    assert.equal(containerCgroupPath('cgroupfs', '/kubepods/pod1', 'abc'), '/kubepods/pod1/abc');
  });
});
