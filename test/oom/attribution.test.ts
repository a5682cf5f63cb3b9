import { describe, it } from 'node:test';
import assert from 'node:assert/strict';

import { isUnderKubepods, parsePodCgroupPath } from '../../src/oom/attribution.js';

const UID = '0d3f7a6c-1b2e-4c5d-9e8f-0123456789ab';
const CID = 'f'.repeat(64);

describe('parsePodCgroupPath', () => {
  it('reads cgroupfs paths of each QoS class, with and without a container', () => {
    assert.deepEqual(parsePodCgroupPath(`/kubepods/burstable/pod${UID}/${CID}`), { podUID: UID, containerID: CID });
    assert.deepEqual(parsePodCgroupPath(`/kubepods/besteffort/pod${UID}/${CID}`), { podUID: UID, containerID: CID });
    assert.deepEqual(parsePodCgroupPath(`/kubepods/pod${UID}/${CID}`), { podUID: UID, containerID: CID });
    assert.deepEqual(parsePodCgroupPath(`/kubepods/burstable/pod${UID}`), { podUID: UID });
    assert.deepEqual(parsePodCgroupPath(`/custom-root/kubepods/pod${UID}/${CID}`), { podUID: UID, containerID: CID });
  });

  it('reads systemd slice and scope names', () => {
    const u = UID.replace(/-/g, '_');
    assert.deepEqual(
      parsePodCgroupPath(`/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod${u}.slice/cri-containerd-${CID}.scope`),
      { podUID: UID, containerID: CID },
    );
    assert.deepEqual(parsePodCgroupPath(`/kubepods.slice/kubepods-pod${u}.slice`), { podUID: UID });
  });

  it('says nothing for paths outside pods or for QoS cgroups', () => {
    assert.equal(parsePodCgroupPath('/'), undefined);
    assert.equal(parsePodCgroupPath('/system.slice/containerd.service'), undefined);
    assert.equal(parsePodCgroupPath('/kubepods/burstable'), undefined);
  });
});

describe('isUnderKubepods', () => {
  it('tells the kubepods hierarchy from the rest', () => {
    assert.equal(isUnderKubepods('/kubepods'), true);
    assert.equal(isUnderKubepods('/kubepods/besteffort'), true);
    assert.equal(isUnderKubepods('/kubepods.slice/kubepods-besteffort.slice'), true);
    assert.equal(isUnderKubepods('/'), false);
    assert.equal(isUnderKubepods('/user.slice/kubepodsx'), false);
  });
});
