import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { evictableContainers } from '../../src/gc/container-gc.js';
import type { ContainerRuntimeStatus, RuntimePodStatus } from '../../src/runtime/types.js';

function c(id: string, name: string, state: ContainerRuntimeStatus['state'], createdAt: number): ContainerRuntimeStatus {
  return {
    id, containerID: `containerd://${id}`, name, state, createdAt, startedAt: createdAt, finishedAt: 0, exitCode: 0,
    image: '', imageRef: '', hash: '', restartCount: 0, reason: '', message: '', labels: {}, annotations: {},
  };
}

describe('container GC', () => {
  it('keeps the newest attempt and its predecessor per container name and evicts older dead ones', () => {
    const status: RuntimePodStatus = {
      uid: 'u', name: 'p', namespace: 'default', ips: [], sandboxStatuses: [], timestamp: 0,
      containerStatuses: [
        c('a3', 'a', 'running', 30), c('a2', 'a', 'exited', 20), c('a1', 'a', 'exited', 10), c('a0', 'a', 'exited', 5),
        c('b1', 'b', 'exited', 12), c('x', 'sidecar', 'created', 1),
      ],
    };
    assert.deepEqual(evictableContainers(status).map((x) => x.id).sort(), ['a0', 'a1']);
    // All dead, in backoff: the newest and the one before it stay.
    status.containerStatuses[0]!.state = 'exited';
    assert.deepEqual(evictableContainers(status).map((x) => x.id).sort(), ['a0', 'a1']);
    assert.deepEqual(evictableContainers(status, 0).map((x) => x.id).sort(), ['a0', 'a1']);
  });
});
