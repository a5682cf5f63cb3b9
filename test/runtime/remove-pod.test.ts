// removePod (a pod deleted for good): every container and sandbox is removed; a sandbox
// killPod already stopped is not stopped again, one still ready is stopped first.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { RuntimeManager } from '../../src/runtime/runtime-manager.js';
import type { RuntimePodStatus, SandboxRuntimeStatus } from '../../src/runtime/types.js';
import { runtimeManagerOn } from '../kubelet/doubles.js';

function manager(calls: string[]): RuntimeManager {
  const record = (name: string) => async (id: string): Promise<void> => void calls.push(`${name} ${id}`);
  return runtimeManagerOn({ removeContainer: record('RemoveContainer'), stopPodSandbox: record('StopPodSandbox'), removePodSandbox: record('RemovePodSandbox') });
}

function sandbox(id: string, state: SandboxRuntimeStatus['state']): SandboxRuntimeStatus {
  return { id, state } as SandboxRuntimeStatus;
}

test('removePod removes the containers, then stops only the sandboxes still ready and removes them all', async () => {
  const calls: string[] = [];
  const status: RuntimePodStatus = {
    uid: 'u1', name: 'p', namespace: 'ns', ips: [], timestamp: 0,
    sandboxStatuses: [sandbox('sb-stopped', 'notready'), sandbox('sb-ready', 'ready')],
    containerStatuses: [{ id: 'c1' }, { id: 'c2' }] as RuntimePodStatus['containerStatuses'],
  };
  await manager(calls).removePod(status);
  assert.deepEqual(calls, [
    'RemoveContainer c1', 'RemoveContainer c2',
    'RemovePodSandbox sb-stopped',
    'StopPodSandbox sb-ready', 'RemovePodSandbox sb-ready',
  ]);
});
