import { describe, it } from 'node:test';
import assert from 'node:assert/strict';

import { crossCheckTerminatedReason, oomEventRecord } from '../../src/oom/events.js';
import { parseMemoryEvents, parseOomControl } from '../../src/oom/memory-events.js';
import type { OomEvent } from '../../src/oom/types.js';

const base: OomEvent = { source: 'ebpf', time: new Date(0), count: 1, scope: 'unknown', deliveredTimeNs: 0n };

describe('oomEventRecord', () => {
  it('records SystemOOM on the node with upstream wording for a victim outside pods', () => {
    assert.deepEqual(oomEventRecord({ ...base, scope: 'system', pid: 42, comm: 'java' }), {
      object: 'node',
      type: 'Warning',
      reason: 'SystemOOM',
      message: 'System OOM encountered, victim process: java, pid: 42',
    });
    assert.equal(oomEventRecord({ ...base, scope: 'system' })?.message, 'System OOM encountered');
  });

  it('records OOMKilling on the pod naming the container', () => {
    const r = oomEventRecord({ ...base, scope: 'container', podUID: 'u1', containerName: 'app', pid: 7, comm: 'sh' });
    assert.equal(r?.object, 'pod');
    assert.equal(r?.podUID, 'u1');
    assert.equal(r?.reason, 'OOMKilling');
    assert.match(r!.message, /container app, victim process: sh, pid: 7$/);
  });

  it('records nothing when the victim cannot be placed', () => {
    assert.equal(oomEventRecord({ ...base, scope: 'unknown' }), undefined);
  });
});

describe('crossCheckTerminatedReason', () => {
  it('keeps the runtime OOMKilled and says whether the watcher saw it', () => {
    assert.deepEqual(crossCheckTerminatedReason('OOMKilled', 137, 1), { reason: 'OOMKilled', agrees: true });
    assert.deepEqual(crossCheckTerminatedReason('OOMKilled', 137, 0), { reason: 'OOMKilled', agrees: false });
  });

  it('upgrades a SIGKILL exit the watcher saw as an OOM kill', () => {
    assert.deepEqual(crossCheckTerminatedReason('Error', 137, 2), { reason: 'OOMKilled', agrees: false });
    assert.deepEqual(crossCheckTerminatedReason('Error', 1, 2), { reason: 'Error', agrees: true });
    assert.deepEqual(crossCheckTerminatedReason('Completed', 0, 0), { reason: 'Completed', agrees: true });
  });
});

describe('memory.events / memory.oom_control parsing', () => {
  it('reads the counters', () => {
    assert.equal(parseMemoryEvents('low 0\nhigh 3\nmax 9\noom 2\noom_kill 1\noom_group_kill 0\n').get('oom_kill'), 1);
    assert.deepEqual(parseOomControl('oom_kill_disable 0\nunder_oom 1\noom_kill 4\n'), { oomKillDisable: false, underOom: true, oomKill: 4 });
    assert.deepEqual(parseOomControl('oom_kill_disable 1\nunder_oom 0\n'), { oomKillDisable: true, underOom: false });
  });
});
