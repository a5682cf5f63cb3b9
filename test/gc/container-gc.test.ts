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

import { containersToEvict, garbageCollectContainers, sandboxesToEvict, type GCContainer, type GCPodState, type GCSandbox } from '../../src/gc/container-gc.js';

function gcc(id: string, podUID: string, name: string, createdAt: number, running = false, sandboxID?: string): GCContainer {
  return { id, podUID, name, createdAt, running, sandboxID };
}

const state = (removed: string[] = [], terminated: string[] = []): GCPodState => ({
  shouldPodContentBeRemoved: (uid) => removed.includes(uid),
  shouldPodRuntimeBeRemoved: (uid) => removed.includes(uid) || terminated.includes(uid),
});

describe('node-level container GC (upstream policy)', () => {
  const policy = { minAgeMs: 0, maxPerPodContainer: 1, maxContainers: -1 };

  it('keeps one dead container per (pod, name) and never a running one', () => {
    const cs = [gcc('a3', 'p', 'a', 30, true), gcc('a2', 'p', 'a', 20), gcc('a1', 'p', 'a', 10), gcc('b1', 'p', 'b', 5)];
    assert.deepEqual(containersToEvict(cs, policy, 100, state(), true, false), ['a1']);
  });

  it('honours minAge, maxContainers (even share, then oldest) and removes every dead container of a removed pod', () => {
    const cs = [gcc('x2', 'q', 'x', 20), gcc('x1', 'q', 'x', 10), gcc('y1', 'r', 'y', 15), gcc('z1', 's', 'z', 95)];
    assert.deepEqual(containersToEvict(cs, { ...policy, minAgeMs: 10 }, 100, state(), true, false), ['x1']);
    assert.deepEqual(containersToEvict(cs, { minAgeMs: 0, maxPerPodContainer: -1, maxContainers: 2 }, 100, state(), true, false).sort(), ['x1', 'y1']);
    assert.deepEqual(containersToEvict(cs, policy, 100, state(['q']), true, false).sort(), ['x1', 'x2']);
    // not before every source has been seen
    assert.deepEqual(containersToEvict(cs, policy, 100, state(['q']), false, false), ['x1']);
    // eviction's reclaim: terminated pods' containers go too
    assert.deepEqual(containersToEvict(cs, policy, 100, state([], ['r']), true, true).sort(), ['x1', 'y1']);
  });

  it('removes dead sandboxes without containers: all of a removed pod, else all but the newest', () => {
    const sb = (id: string, podUID: string, createdAt: number, ready = false): GCSandbox => ({ id, podUID, podName: podUID, podNamespace: 'default', ready, createdAt });
    const sandboxes = [sb('s3', 'p', 30, true), sb('s2', 'p', 20), sb('s1', 'p', 10), sb('t1', 'gone', 5), sb('u2', 'u', 9), sb('u1', 'u', 8)];
    const containers = [gcc('c', 'u', 'c', 1, false, 'u1')];
    assert.deepEqual(sandboxesToEvict(sandboxes, containers, state(['gone']), false).sort(), ['s1', 's2', 't1']);
  });

  it('one pass removes containers, sandboxes and the log directories of removed pods', async () => {
    const removed: string[] = [];
    const r = await garbageCollectContainers({
      runtime: {
        listContainers: async () => [gcc('c1', 'gone', 'c', 1, false, 's1'), gcc('c2', 'live', 'c', 2, true, 's2')],
        listSandboxes: async () => [{ id: 's1', podUID: 'gone', podName: 'g', podNamespace: 'default', ready: false, createdAt: 1 }],
        removeContainer: async (id) => void removed.push(`container ${id}`),
        removeSandbox: async (id) => void removed.push(`sandbox ${id}`),
        listPodLogDirs: async () => new Map([['/logs/default_g_gone', 'gone'], ['/logs/default_l_live', 'live']]),
        removePodLogDir: async (dir) => void removed.push(`logs ${dir}`),
      },
      state: state(['gone']),
      allSourcesReady: () => true,
      now: () => 100,
      log: { info: () => undefined, warn: () => undefined },
    });
    assert.deepEqual(removed, ['container c1', 'sandbox s1', 'logs /logs/default_g_gone']);
    assert.deepEqual(r, { containers: ['c1'], sandboxes: ['s1'], logDirs: ['/logs/default_g_gone'] });
  });
});
