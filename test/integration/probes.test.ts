// Probes on real containerd (busybox httpd and sh): a failing liveness probe restarts the
// container with upstream's message; readiness flips Ready both ways; a startup probe holds
// liveness back and then releases it; exec probes pass, fail and time out; /metrics/probes;
// SIGTERM ends kubelet-ts with probes in flight.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ContainerStatus, Pod } from '../../src/api/types.js';
import { CriClient } from '../../src/runtime/cri-client.js';
import { ensureRuntime, type TestRuntime } from '../fixtures/runtime.js';
import { freePort, startKubelet, waitFor, type KubeletProcess } from '../fixtures/kubelet-process.js';

const WAIT = 90_000;
const LOOP = 'trap "exit 0" TERM; while true; do sleep 1; done';

describe('probes on a real runtime', () => {
  let rt: TestRuntime;
  let cri: CriClient;
  let manifestDir: string;
  let kubelet: KubeletProcess;
  let restartedRoot: string | undefined;

  before(async () => {
    rt = await ensureRuntime();
    cri = new CriClient({ runtimeEndpoint: rt.endpoint, timeoutMs: 30_000 });
    manifestDir = await mkdtemp(join(tmpdir(), 'kts-probes-manifests-'));
    const readyPort = await freePort();
    const pod = (name: string, containers: unknown[]) => JSON.stringify({
      apiVersion: 'v1', kind: 'Pod',
      metadata: { name, labels: { test: 'probes' } },
      spec: { hostNetwork: true, terminationGracePeriodSeconds: 2, containers },
    });
    const img = rt.images.busybox;
    // Liveness against a port nothing listens on: killed and restarted.
    await writeFile(join(manifestDir, 'live.json'), pod('live', [{
      name: 'main', image: img, command: ['sh', '-c', LOOP],
      livenessProbe: { tcpSocket: { port: await freePort() }, periodSeconds: 1, failureThreshold: 2, terminationGracePeriodSeconds: 1 },
    }]));
    // httpd serves /ready for 8 s, then 404 for 8 s, and so on.
    await writeFile(join(manifestDir, 'ready.json'), pod('ready', [{
      name: 'web', image: img,
      command: ['sh', '-c', `mkdir -p /www; httpd -p ${readyPort} -h /www; trap "exit 0" TERM; while true; do echo ok > /www/ready; sleep 8; rm -f /www/ready; sleep 8; done`],
      ports: [{ name: 'http', containerPort: readyPort }],
      readinessProbe: { httpGet: { port: 'http', path: '/ready' }, periodSeconds: 1, failureThreshold: 1 },
    }]));
    // Started after 8 s; liveness always fails but only counts once started.
    await writeFile(join(manifestDir, 'startup.json'), pod('startup', [{
      name: 'main', image: img, command: ['sh', '-c', `rm -f /tmp/started; (sleep 8; touch /tmp/started) & ${LOOP}`],
      startupProbe: { exec: { command: ['test', '-f', '/tmp/started'] }, periodSeconds: 1, failureThreshold: 60 },
      livenessProbe: { exec: { command: ['sh', '-c', 'exit 3'] }, periodSeconds: 1, failureThreshold: 1 },
    }]));
    await writeFile(join(manifestDir, 'exec.json'), pod('exec', [
      { name: 'quick', image: img, command: ['sh', '-c', LOOP], readinessProbe: { exec: { command: ['true'] }, periodSeconds: 1 } },
      { name: 'slow', image: img, command: ['sh', '-c', LOOP], readinessProbe: { exec: { command: ['sleep', '5'] }, periodSeconds: 2, timeoutSeconds: 1 } },
    ]));
    kubelet = await startKubelet({ endpoint: rt.endpoint, manifestDir, extraArgs: ['-v', '3'] }); // probe events are logged at -v 3
  });

  after(async () => {
    for (const f of await readdir(manifestDir)) await rm(join(manifestDir, f), { force: true });
    await waitFor(async () => (await cri.listPodSandbox({ label_selector: { test: 'probes' } })).length === 0, WAIT, 'pods to be removed').catch(() => undefined);
    await kubelet.stop();
    await rm(manifestDir, { recursive: true, force: true });
    if (restartedRoot) await rm(restartedRoot, { recursive: true, force: true });
    cri.close();
  });

  const get = async (name: string): Promise<Pod | undefined> =>
    (await kubelet.pods()).find((p) => p.metadata.name === `${name}-${kubelet.nodeName}`);
  const ctr = (p: Pod | undefined, name: string): ContainerStatus | undefined => p?.status?.containerStatuses?.find((c) => c.name === name);
  const cond = (p: Pod | undefined, type: string): string | undefined => p?.status?.conditions?.find((c) => c.type === type)?.status;

  it('a failing liveness probe restarts the container with upstream\'s message', async () => {
    const p = await waitFor(async () => { const x = await get('live'); return (ctr(x, 'main')?.restartCount ?? 0) >= 1 ? x : undefined; }, WAIT, 'live to be restarted');
    assert.ok(ctr(p, 'main')!.restartCount >= 1);
    assert.match(kubelet.logs(), /Container main failed liveness probe, will be restarted/);
    assert.match(kubelet.logs(), /Liveness probe failed: dial tcp [^ ]+: connect: connection refused/);
  });

  it('readiness flips Ready both ways', async () => {
    await waitFor(async () => cond(await get('ready'), 'Ready') === 'True', WAIT, 'ready to become Ready');
    const p = await get('ready');
    assert.equal(cond(p, 'ContainersReady'), 'True');
    assert.equal(ctr(p, 'web')!.ready, true);
    await waitFor(async () => cond(await get('ready'), 'Ready') === 'False', WAIT, 'ready to become not Ready');
    assert.equal(ctr(await get('ready'), 'web')!.ready, false);
    assert.match(kubelet.logs(), /Readiness probe failed: HTTP probe failed with statuscode: 404/);
    await waitFor(async () => cond(await get('ready'), 'Ready') === 'True', WAIT, 'ready to become Ready again');
    assert.equal(ctr(await get('ready'), 'web')!.restartCount, 0, 'readiness never restarts');
  });

  it('a startup probe holds liveness back, then releases it', async () => {
    await waitFor(async () => (ctr(await get('startup'), 'main')?.restartCount ?? 0) >= 1, WAIT, 'liveness to restart it once started');
    const logs = kubelet.logs();
    const firstLiveness = logs.indexOf('exited with 3');
    assert.ok(firstLiveness > 0, 'the liveness probe ran once the container started');
    // About 8 s of startup failures came first; the failing liveness probe did not run meanwhile.
    const startupFailures = logs.slice(0, firstLiveness).split('Startup probe failed').length - 1;
    assert.ok(startupFailures >= 5, `startup failures before liveness ran: ${startupFailures}`);
    assert.match(logs, /Container main failed liveness probe, will be restarted/);
  });

  it('exec probes pass, fail and time out', async () => {
    const p = await waitFor(async () => { const x = await get('exec'); return ctr(x, 'quick')?.ready ? x : undefined; }, WAIT, 'quick to be ready');
    assert.equal(ctr(p, 'slow')!.ready, false);
    assert.equal(cond(p, 'Ready'), 'False');
    await waitFor(async () => /Readiness probe failed: command \[\\?"sleep\\?",\\?"5\\?"\] timed out/.test(kubelet.logs()), 30_000, 'the exec timeout to be reported');
    const text = await (await fetch(`http://127.0.0.1:${kubelet.readOnlyPort}/metrics/probes`)).text();
    assert.match(text, /prober_probe_total\{container="quick",[^}]*probe_type="Readiness",result="successful"\} [1-9]/);
    assert.match(text, /prober_probe_total\{container="slow",[^}]*probe_type="Readiness",result="failed"\} [1-9]/);
  });

  it('SIGTERM with probes running ends kubelet-ts with code 0 (pods keep running)', async () => {
    const { child, rootDir } = kubelet;
    const exited = new Promise<[number | null, NodeJS.Signals | null]>((r) => child.once('exit', (c, s) => r([c, s])));
    child.kill('SIGTERM');
    // The limit only bounds a hang; a second signal would exit with 1, so it is never sent here.
    const hang = setTimeout(() => child.kill('SIGKILL'), 30_000);
    const [code, signal] = await exited;
    clearTimeout(hang);
    assert.equal(signal, null, 'kubelet-ts had to be killed');
    assert.equal(code, 0);
    assert.doesNotMatch(kubelet.logs(), /Second signal/);
    assert.ok((await cri.listPodSandbox({ label_selector: { test: 'probes' } })).length >= 4, 'pods keep running');
    // A kubelet-ts on the same root and manifests cleans the pods up afterwards.
    kubelet = await startKubelet({ endpoint: rt.endpoint, manifestDir, rootDir, extraArgs: ['-v', '3'] });
    restartedRoot = rootDir;
  });
});
