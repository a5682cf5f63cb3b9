// status.runtimeHandlers: the runtime's handlers from its last ready CRI Status, as upstream's
// RuntimeHandlers setter reports them (name "" for the default, both features always set).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RestClient } from '../../src/client/rest.js';
import { NodeStatusManager } from '../../src/nodestatus/status-manager.js';
import { setRuntimeHandlers, type NodeRuntimeHandlerInfo } from '../../src/nodestatus/setters.js';
import type { Node } from '../../src/nodestatus/types.js';
import { FakeClock } from '../../src/util/clock.js';
import { quietLogger } from '../client/drive.js';
import { FakeSource } from './doubles.js';

const HANDLERS: NodeRuntimeHandlerInfo[] = [
  { name: '', supportsRecursiveReadOnlyMounts: true, supportsUserNamespaces: true },
  { name: 'runc', supportsRecursiveReadOnlyMounts: true, supportsUserNamespaces: false },
];

test('setRuntimeHandlers: the handlers with their features; none reported leaves the field out; both gates off leave it alone', () => {
  const node: Node = { metadata: { name: 'n1' }, status: {} };
  setRuntimeHandlers(node, HANDLERS);
  assert.deepEqual(node.status!.runtimeHandlers, [
    { name: '', features: { recursiveReadOnlyMounts: true, userNamespaces: true } },
    { name: 'runc', features: { recursiveReadOnlyMounts: true, userNamespaces: false } },
  ]);
  assert.ok(JSON.stringify(node.status).includes('"name":""'), 'the default handler is named "" on the wire');
  const off: Node = { metadata: { name: 'n1' }, status: { runtimeHandlers: ['kept'] } };
  setRuntimeHandlers(off, HANDLERS, { recursiveReadOnlyMounts: false, userNamespaces: false });
  assert.deepEqual(off.status!.runtimeHandlers, ['kept']);
  setRuntimeHandlers(node, []);
  assert.equal('runtimeHandlers' in node.status!, false, 'a runtime reporting no handler (containerd 1.6)');
  setRuntimeHandlers(node, undefined);
  assert.equal('runtimeHandlers' in node.status!, false, 'no Status seen yet');
});

test('the node status carries the handlers its source reports', async () => {
  const source = new FakeSource() as FakeSource & { runtimeHandlers(): NodeRuntimeHandlerInfo[] | undefined };
  let handlers: NodeRuntimeHandlerInfo[] | undefined = HANDLERS;
  source.runtimeHandlers = () => handlers;
  const client = new RestClient({ server: 'https://127.0.0.1:1' } as ConstructorParameters<typeof RestClient>[0], { clock: new FakeClock(), qps: 0 });
  try {
    const m = new NodeStatusManager({ client, clock: new FakeClock(), nodeName: 'n1', hostname: 'n1', source, kubeletVersion: 'v0', kubeletPort: 10250, nodeIPs: ['10.0.0.5'], log: quietLogger() });
    const node: Node = { metadata: { name: 'n1' } };
    await m.setNodeStatus(node);
    assert.deepEqual(node.status!.runtimeHandlers, [
      { name: '', features: { recursiveReadOnlyMounts: true, userNamespaces: true } },
      { name: 'runc', features: { recursiveReadOnlyMounts: true, userNamespaces: false } },
    ]);
    handlers = [];
    await m.setNodeStatus(node);
    assert.equal(node.status!.runtimeHandlers, undefined);
  } finally {
    client.close();
  }
});
