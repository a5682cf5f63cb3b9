// Volumes, /etc/hosts, /etc/resolv.conf and termination messages on a real containerd: static
// pods run by the kubelet-ts CLI, checked from the host, through exec and through /pods.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Pod } from '../../src/api/types.js';
import { CriClient } from '../../src/runtime/cri-client.js';
import { DNSConfigurer } from '../../src/network/dns.js';
import { managedHostsFileContent } from '../../src/network/hosts.js';
import { ensureRuntime, type TestRuntime } from '../fixtures/runtime.js';
import { startKubelet, waitFor, type KubeletProcess } from '../fixtures/kubelet-process.js';

const WAIT = 90_000;
const LABEL = { test: 'volumes' };

function staticPod(name: string, spec: Record<string, unknown>): string {
  return JSON.stringify({ apiVersion: 'v1', kind: 'Pod', metadata: { name, labels: LABEL }, spec: { terminationGracePeriodSeconds: 1, ...spec } });
}

describe('volumes, hosts, DNS and termination messages on containerd', () => {
  let rt: TestRuntime;
  let cri: CriClient;
  let kubelet: KubeletProcess;
  let scratch: string;

  before(async () => {
    rt = await ensureRuntime();
    cri = new CriClient({ runtimeEndpoint: rt.endpoint, timeoutMs: 30_000 });
    scratch = await mkdtemp(join(tmpdir(), 'kts-vol-it-'));
    const config = join(scratch, 'kubelet.yaml');
    await writeFile(config, 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nclusterDNS: [10.96.0.10]\nclusterDomain: cluster.local\nauthentication: {webhook: {enabled: false}}\nauthorization: {mode: AlwaysAllow}\n');
    kubelet = await startKubelet({ endpoint: rt.endpoint, extraArgs: ['--config', config, '-v', '3'] });
  });

  after(async () => {
    for (const f of await readdir(kubelet.manifestDir)) await rm(join(kubelet.manifestDir, f), { force: true });
    await waitFor(async () => (await cri.listPodSandbox({ label_selector: LABEL })).length === 0, WAIT, 'pods to be removed').catch(() => undefined);
    await kubelet.stop();
    cri.close();
    await rm(scratch, { recursive: true, force: true });
  });

  const podNamed = async (name: string): Promise<Pod | undefined> =>
    (await kubelet.pods()).find((p) => p.metadata.name === `${name}-${kubelet.nodeName}`);
  const runningContainer = async (pod: Pod, name: string): Promise<string> => {
    const cs = await cri.listContainers({ label_selector: { 'io.kubernetes.pod.uid': pod.metadata.uid!, 'io.kubernetes.container.name': name } });
    const c = cs.find((x) => x.state === 'CONTAINER_RUNNING');
    assert.ok(c, `${name} runs`);
    return c.id;
  };
  const exec = async (id: string, script: string): Promise<string> => {
    const r = await cri.execSync(id, ['sh', '-c', script], 10);
    assert.equal(r.exit_code, 0, Buffer.from(r.stderr).toString());
    return Buffer.from(r.stdout).toString();
  };

  it('a hostPath DirectoryOrCreate directory keeps its files across a container restart (host network, node /etc/hosts)', async () => {
    const data = join(scratch, 'etcd-data', 'member');
    await writeFile(join(kubelet.manifestDir, 'hp.json'), staticPod('hp', {
      hostNetwork: true,
      volumes: [{ name: 'data', hostPath: { path: data, type: 'DirectoryOrCreate' } }],
      containers: [{
        name: 'app',
        image: rt.images.busybox,
        // the first run leaves a marker and fails; the second finds it and stays up
        command: ['sh', '-c', 'echo run >> /data/runs; if [ -f /data/marker ]; then trap "exit 0" TERM; while true; do sleep 1; done; fi; touch /data/marker; exit 1'],
        volumeMounts: [{ name: 'data', mountPath: '/data' }],
      }],
    }));
    const pod = await waitFor(async () => {
      const p = await podNamed('hp');
      const cs = p?.status?.containerStatuses?.[0];
      return cs?.restartCount === 1 && cs.state.running ? p : undefined;
    }, WAIT, 'hp to restart once and run');
    assert.ok((await stat(data)).isDirectory());
    assert.equal((await stat(data)).mode & 0o777, 0o755 & ~0o022);
    assert.equal(await readFile(join(data, 'runs'), 'utf8'), 'run\nrun\n');
    const id = await runningContainer(pod, 'app');
    const hosts = await exec(id, 'cat /etc/hosts');
    assert.equal(hosts, `# Kubernetes-managed hosts file (host network).\n${await readFile('/etc/hosts', 'utf8')}`);
  });

  it('an init container writes an emptyDir the app reads; downwardAPI files; /etc/hosts and /etc/resolv.conf as upstream writes them', async () => {
    const spec = {
      hostname: 'web',
      subdomain: 'sub',
      hostAliases: [{ ip: '10.1.2.3', hostnames: ['alias-one', 'alias-two'] }],
      dnsConfig: { options: [{ name: 'edns0' }] },
      volumes: [
        { name: 'content', emptyDir: {} },
        { name: 'info', downwardAPI: { items: [{ path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } }, { path: 'mem', resourceFieldRef: { containerName: 'app', resource: 'limits.memory', divisor: '1Mi' } }] } },
      ],
      initContainers: [{ name: 'init', image: rt.images.busybox, command: ['sh', '-c', 'echo hello-from-init > /work/index.html'], volumeMounts: [{ name: 'content', mountPath: '/work' }] }],
      containers: [{
        name: 'app',
        image: rt.images.busybox,
        command: ['sh', '-c', 'trap "exit 0" TERM; while true; do sleep 1; done'],
        resources: { limits: { memory: '48Mi' } },
        volumeMounts: [{ name: 'content', mountPath: '/srv', readOnly: true }, { name: 'info', mountPath: '/etc/podinfo' }],
      }],
    };
    await writeFile(join(kubelet.manifestDir, 'ed.json'), staticPod('ed', spec));
    const pod = await waitFor(async () => {
      const p = await podNamed('ed');
      return p?.status?.phase === 'Running' && p.status.containerStatuses?.[0]?.state.running ? p : undefined;
    }, WAIT, 'ed to run');
    const id = await runningContainer(pod, 'app');
    assert.equal(await exec(id, 'cat /srv/index.html'), 'hello-from-init\n');
    // read-only mount
    const ro = await cri.execSync(id, ['sh', '-c', 'echo x > /srv/other'], 10);
    assert.notEqual(ro.exit_code, 0);
    assert.equal(await exec(id, 'cat /etc/podinfo/labels'), 'test="volumes"');
    assert.equal(await exec(id, 'cat /etc/podinfo/mem'), '48');

    const podIP = pod.status?.podIP;
    assert.ok(podIP, 'the pod has an IP');
    assert.equal(await exec(id, 'cat /etc/hosts'), managedHostsFileContent({
      podIPs: (pod.status?.podIPs ?? []).map((p) => p.ip),
      hostname: 'web',
      hostDomainName: 'sub.default.svc.cluster.local',
      hostAliases: spec.hostAliases,
    }));

    const want = await new DNSConfigurer({ clusterDNS: ['10.96.0.10'], clusterDomain: 'cluster.local', resolvConf: '/etc/resolv.conf', nodeIPs: () => [] }).podDNS(pod);
    const resolv = (await exec(id, 'cat /etc/resolv.conf')).split('\n').filter(Boolean);
    assert.deepEqual(resolv, [`search ${want.searches!.join(' ')}`, 'nameserver 10.96.0.10', `options ${want.options!.join(' ')}`]);
    assert.deepEqual(want.options, ['ndots:5', 'edns0']);
    assert.equal(want.searches![0], 'default.svc.cluster.local');
  });

  it('a subPath escaping its volume through a symlink is refused: CreateContainerConfigError', async () => {
    await writeFile(join(kubelet.manifestDir, 'esc.json'), staticPod('esc', {
      volumes: [{ name: 'vol', emptyDir: {} }],
      initContainers: [{ name: 'init', image: rt.images.busybox, command: ['sh', '-c', 'ln -s / /vol/escape'], volumeMounts: [{ name: 'vol', mountPath: '/vol' }] }],
      containers: [{ name: 'app', image: rt.images.busybox, command: ['sleep', '3600'], volumeMounts: [{ name: 'vol', mountPath: '/host', subPath: 'escape' }] }],
    }));
    const pod = await waitFor(async () => {
      const p = await podNamed('esc');
      return p?.status?.containerStatuses?.[0]?.state.waiting?.reason === 'CreateContainerConfigError' ? p : undefined;
    }, WAIT, 'esc to be refused');
    assert.equal(pod.status!.containerStatuses![0]!.state.waiting!.message, 'failed to prepare subPath for volumeMount "vol" of container "app"');
    const cs = await cri.listContainers({ label_selector: { 'io.kubernetes.pod.uid': pod.metadata.uid!, 'io.kubernetes.container.name': 'app' } });
    assert.equal(cs.length, 0, 'no container was created');
  });

  it('a configMap volume in a standalone static pod is a FailedMount event naming the volume and the object and the pod waits in ContainerCreating', async () => {
    await writeFile(join(kubelet.manifestDir, 'cm.json'), staticPod('cm', {
      volumes: [{ name: 'cfg', configMap: { name: 'settings' } }],
      containers: [{ name: 'app', image: rt.images.busybox, command: ['sleep', '3600'], volumeMounts: [{ name: 'cfg', mountPath: '/cfg' }] }],
    }));
    await waitFor(async () => /Event occurred.*reason="FailedMount".*failed to process volumes=\[cfg\]: MountVolume.SetUp failed for volume \\"cfg\\" : configmap \\"default\/settings\\": not supported due to running kubelet in standalone mode/.test(kubelet.logs()), WAIT, 'the FailedMount event');
    const pod = await podNamed('cm');
    assert.equal(pod?.status?.phase, 'Pending');
    assert.equal(pod?.status?.containerStatuses?.[0]?.state.waiting?.reason, 'ContainerCreating');
    assert.equal((await cri.listPodSandbox({ label_selector: { 'io.kubernetes.pod.uid': pod!.metadata.uid! } })).length, 0, 'no sandbox before the volumes are set up');
  });

  it('a termination message and a FallbackToLogsOnError message reach the status', async () => {
    await writeFile(join(kubelet.manifestDir, 'tm.json'), staticPod('tm', {
      restartPolicy: 'Never',
      containers: [
        { name: 'file', image: rt.images.busybox, command: ['sh', '-c', 'printf "all done" > /dev/termination-log'] },
        { name: 'custom', image: rt.images.busybox, terminationMessagePath: '/tmp/why', command: ['sh', '-c', 'printf "custom path" > /tmp/why; exit 2'] },
        { name: 'logs', image: rt.images.busybox, terminationMessagePolicy: 'FallbackToLogsOnError', command: ['sh', '-c', 'echo first line; echo it broke; exit 3'] },
      ],
    }));
    const pod = await waitFor(async () => {
      const p = await podNamed('tm');
      return p?.status?.containerStatuses?.length === 3 && p.status.containerStatuses.every((c) => c.state.terminated) ? p : undefined;
    }, WAIT, 'tm containers to exit');
    const by = new Map(pod.status!.containerStatuses!.map((c) => [c.name, c.state.terminated!]));
    assert.equal(by.get('file')!.message, 'all done');
    assert.equal(by.get('custom')!.message, 'custom path');
    assert.equal(by.get('logs')!.message, 'first line\nit broke\n');
    assert.equal(by.get('logs')!.exitCode, 3);
  });

  it('a memory-backed emptyDir is a tmpfs capped at sizeLimit, unmounted and removed with the pod', async () => {
    await writeFile(join(kubelet.manifestDir, 'mem.json'), staticPod('mem', {
      volumes: [{ name: 'scratch', emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } }],
      containers: [{ name: 'app', image: rt.images.busybox, command: ['sh', '-c', 'trap "exit 0" TERM; while true; do sleep 1; done'], volumeMounts: [{ name: 'scratch', mountPath: '/scratch' }] }],
    }));
    const pod = await waitFor(async () => {
      const p = await podNamed('mem');
      return p?.status?.containerStatuses?.[0]?.state.running ? p : undefined;
    }, WAIT, 'mem to run');
    const dir = join(kubelet.rootDir, 'pods', pod.metadata.uid!, 'volumes', 'kubernetes.io~empty-dir', 'scratch');
    const mountinfo = async (): Promise<string> => readFile('/proc/self/mountinfo', 'utf8');
    assert.match(await mountinfo(), new RegExp(` ${dir.replace(/[.~]/g, '\\$&')} .* - tmpfs `));
    const id = await runningContainer(pod, 'app');
    assert.equal(await exec(id, 'df -k /scratch | tail -1 | awk \'{print $2}\''), '1024\n');
    const over = await cri.execSync(id, ['sh', '-c', 'dd if=/dev/zero of=/scratch/big bs=1024 count=2048'], 10);
    assert.notEqual(over.exit_code, 0, 'writing past sizeLimit fails');
    assert.match(Buffer.from(over.stderr).toString(), /No space left on device/);

    await rm(join(kubelet.manifestDir, 'mem.json'));
    const podDirectory = join(kubelet.rootDir, 'pods', pod.metadata.uid!);
    await waitFor(async () => !(await stat(podDirectory).then(() => true, () => false)), WAIT, 'the pod directory to be removed');
    assert.ok(!(await mountinfo()).includes(podDirectory), 'nothing stays mounted under the pod directory');
  });
});
