import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { RestClient } from '../../src/client/rest.js';
import { FakeClock } from '../../src/util/clock.js';
import { microTime, NodeLeaseController } from '../../src/nodestatus/lease.js';
import type { TestApiServer } from '../fixtures/test-apiserver/server.js';
import { TOKEN, nodeManifest, startServer } from '../test-apiserver/client.js';
import { quietLogger, settle, until } from '../client/drive.js';

const leasePath = '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases';

/** A fake clock that also records every wait asked of it. */
class RecordingClock extends FakeClock {
  readonly waits: number[] = [];

  override setTimeout(fn: () => void, ms: number) {
    this.waits.push(ms);
    return super.setTimeout(fn, ms);
  }
}

describe('node lease controller against the test API server (fake clock)', () => {
  let api: TestApiServer;
  let clock: RecordingClock;
  let client: RestClient;
  let ctl: AbortController;
  let running: Promise<void> | undefined;
  let lease: NodeLeaseController;

  beforeEach(async () => {
    clock = new RecordingClock(Date.parse('2026-01-01T00:00:00Z'));
    api = await startServer({ clock });
    client = new RestClient({ source: 'test', server: api.url, insecureSkipTLSVerify: false, token: TOKEN }, { clock });
    ctl = new AbortController();
    lease = new NodeLeaseController({ client, nodeName: 'n1', clock, log: quietLogger() });
  });

  afterEach(async () => {
    ctl.abort();
    await running;
    client.close();
    await api.stop();
  });

  const stored = () => api.get('leases', 'kube-node-lease', 'n1', 'coordination.k8s.io')!;
  // A renewal is over (and the next wait armed) once the controller counts it.
  const synced = (n: number) => until(clock, `renewal ${n} to finish`, () => lease.syncs >= n, 0);
  const leaseRequests = () => api.requests.filter((r) => r.path.startsWith(leasePath));
  const start = () => { running = lease.run(ctl.signal); };

  it('creates the lease held by the node for 40 s, owned by the Node, then renews it every 10 s', async () => {
    const node = api.create('nodes', undefined, nodeManifest('n1'));
    assert.equal(lease.renewIntervalMs, 10_000);
    start();
    const first = await until(clock, 'the lease', () => api.get('leases', 'kube-node-lease', 'n1', 'coordination.k8s.io'), 0);
    await synced(1);
    assert.deepEqual(first.spec, { holderIdentity: 'n1', leaseDurationSeconds: 40, renewTime: '2026-01-01T00:00:00.000000Z' });
    assert.deepEqual(first.metadata.ownerReferences, [{ apiVersion: 'v1', kind: 'Node', name: 'n1', uid: node.metadata.uid }]);
    await settle();
    const afterCreate = leaseRequests().length;
    for (let i = 1; i <= 6; i++) {
      clock.step(9_999);
      await settle();
      assert.equal(stored().spec.renewTime, microTime(Date.parse('2026-01-01T00:00:00Z') + (i - 1) * 10_000), 'not before the interval');
      clock.step(1);
      await synced(i + 1);
      assert.equal(stored().spec.renewTime, microTime(Date.parse('2026-01-01T00:00:00Z') + i * 10_000));
    }
    // One PUT per renewal from the lease last written: no GETs at rest.
    const renewals = leaseRequests().slice(afterCreate);
    assert.deepEqual(renewals.map((r) => `${r.method} ${r.code}`), Array(6).fill('PUT 200'));
  });

  it('retries a 409 (someone else wrote the lease) by fetching it again', async () => {
    start();
    await synced(1);
    // Another writer bumps the lease: the controller's copy is now stale.
    const cur = stored();
    api.registry.update(api.resource('leases', 'coordination.k8s.io'), 'kube-node-lease', 'n1', { ...cur, metadata: { ...cur.metadata, labels: { touched: 'yes' } } });
    const before = leaseRequests().length;
    clock.step(10_000);
    await synced(2);
    assert.equal(stored().spec.renewTime, microTime(clock.now()));
    assert.deepEqual(leaseRequests().slice(before).map((r) => `${r.method} ${r.code}`), ['PUT 409', 'GET 200', 'PUT 200']);
    assert.equal(stored().metadata.labels.touched, 'yes', 'the other writer’s change is kept');
  });

  it('backs off 200 ms doubling to 7 s while the lease cannot be read, then recovers', async () => {
    start();
    await synced(1);
    api.injectError({ method: 'PUT', path: '/leases/n1', count: 1, code: 500 });
    api.injectError({ method: 'GET', path: '/leases/n1', count: 8, code: 500 });
    const before = leaseRequests().length;
    clock.waits.length = 0;
    clock.step(10_000);
    const failedAt = clock.now();
    await until(clock, 'the renewal through the backoff', () => lease.syncs >= 2, 100);
    assert.deepEqual(leaseRequests().slice(before).map((r) => `${r.method} ${r.code}`),
      ['PUT 500', ...Array(8).fill('GET 500'), 'GET 200', 'PUT 200']);
    // The waits the controller asked for, request timeouts (one renew interval) left out.
    assert.deepEqual(clock.waits.filter((ms) => ms !== 10_000), [200, 400, 800, 1600, 3200, 6400, 7000, 7000]);
    const renewed = Date.parse(stored().spec.renewTime);
    assert.ok(renewed >= failedAt + 26_600 && renewed <= clock.now(), 'renewed once the lease could be read, not before');
  });

  it('gives up a renewal after 5 failed updates and tries again on the next interval', async () => {
    start();
    await synced(1);
    let repeated = 0;
    ctl.abort();
    await running;
    ctl = new AbortController();
    lease = new NodeLeaseController({ client, nodeName: 'n1', clock, log: quietLogger(), onRepeatedHeartbeatFailure: () => repeated++ });
    api.injectError({ method: 'PUT', path: '/leases/n1', count: 5, code: 500 });
    const before = leaseRequests().length;
    const failed = await lease.sync().then(() => undefined, (e) => e);
    assert.equal(failed?.code, 'ERR_NODE_LEASE');
    assert.deepEqual(leaseRequests().slice(before).map((r) => `${r.method} ${r.code}`), ['GET 200', ...Array(5).fill('PUT 500')]);
    assert.equal(repeated, 4);
    await lease.sync();
    assert.equal(stored().spec.renewTime, microTime(clock.now()));
  });
});
