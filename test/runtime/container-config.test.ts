import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { Container, Pod } from '../../src/api/types.js';
import { hashContainer, resourcesHash } from '../../src/runtime/container-hash.js';
import {
  buildContainerLogsPath,
  containerLogsDirectory,
  createTerminationMessageFile,
  CreateContainerConfigError,
  DEFAULT_MASKED_PATHS,
  DEFAULT_READONLY_PATHS,
  generateContainerConfig,
  generateContainerSecurityContext,
  podContainerDir,
  type ContainerConfigOptions,
} from '../../src/runtime/container-config.js';
import {
  calculateLinuxResources,
  generateLinuxContainerResources,
  getContainerOOMScoreAdjust,
  getHugepageLimitsFromResources,
  hugePageUnitSizeFromByteSize,
  milliCPUToQuota,
  milliCPUToShares,
} from '../../src/runtime/resources.js';
import { parseQuantity } from '../../src/api/quantity.js';

const UID = '5d6e7f80-91a2-4b3c-8d4e-5f6071829304';
const GiB = 1024 * 1024 * 1024;
const MEMORY_CAPACITY = 8 * GiB;
const TERMINATION_FILE = `/var/lib/kubelet/pods/${UID}/containers/api/0a1b2c3d`;

function apiContainer(): Container {
  return {
    name: 'api',
    image: 'registry.local/shop/api:2.1',
    command: ['/bin/api'],
    args: ['--listen=$(POD_IP):$(PORT)', '--log=$(LEVEL)', '--memory-mib=$(MEM)'],
    workingDir: '/srv',
    ports: [{ name: 'http', containerPort: 8080, protocol: 'TCP' }],
    env: [
      { name: 'PORT', value: '8080' },
      { name: 'POD_IP', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'status.podIP' } } },
      { name: 'MEM', valueFrom: { resourceFieldRef: { resource: 'limits.memory', divisor: '1Mi' } } },
    ],
    resources: { requests: { cpu: '250m', memory: '256Mi' }, limits: { cpu: '1', memory: '512Mi' } },
    securityContext: {
      capabilities: { add: ['NET_BIND_SERVICE'], drop: ['ALL'] },
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      runAsNonRoot: true,
    },
    lifecycle: { preStop: { exec: { command: ['/bin/drain'] } } },
    terminationMessagePath: '/dev/termination-log',
    terminationMessagePolicy: 'File',
  };
}

function apiPod(): Pod {
  return {
    metadata: { name: 'api-0', namespace: 'shop', uid: UID, labels: { app: 'api' }, annotations: { 'kubernetes.io/config.source': 'api' } },
    spec: {
      nodeName: 'node-a',
      containers: [apiContainer()],
      securityContext: { runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000 },
      terminationGracePeriodSeconds: 60,
    },
  };
}

function opts(over: Partial<ContainerConfigOptions> = {}): ContainerConfigOptions {
  return {
    podIPs: ['10.244.1.5'],
    hostIPs: ['192.168.1.20'],
    nodeName: 'node-a',
    imageRef: 'sha256:4f2c1d0e9b8a7f6e5d4c3b2a19081716151413121110090807060504030201ff',
    memoryCapacityBytes: MEMORY_CAPACITY,
    ...over,
  };
}

function configError(message: string | RegExp): (err: unknown) => boolean {
  return (err) => {
    assert.ok(err instanceof CreateContainerConfigError, `not a CreateContainerConfigError: ${String(err)}`);
    assert.equal(err.code, 'CreateContainerConfigError');
    if (typeof message === 'string') assert.equal(err.message, message);
    else assert.match(err.message, message);
    return true;
  };
}

describe('CPU and memory math', () => {
  const shares: [number, number][] = [[0, 2], [1, 2], [2, 2], [3, 3], [100, 102], [250, 256], [1000, 1024], [256000, 262144], [300000, 262144]];
  for (const [milli, want] of shares) {
    it(`milliCPUToShares(${milli}) = ${want}`, () => assert.equal(milliCPUToShares(milli), want));
  }
  const quotas: [number, number, number][] = [[0, 100000, 0], [1, 100000, 1000], [10, 100000, 1000], [11, 100000, 1100], [250, 100000, 25000], [1500, 100000, 150000], [250, 50000, 12500]];
  for (const [milli, period, want] of quotas) {
    it(`milliCPUToQuota(${milli}, ${period}) = ${want}`, () => assert.equal(milliCPUToQuota(milli, period), want));
  }

  it('takes shares from the limit when no cpu request is given, but not from an explicit zero request', () => {
    assert.equal(calculateLinuxResources(undefined, parseQuantity('500m'), undefined).cpu_shares, 512);
    assert.equal(calculateLinuxResources(parseQuantity(0), parseQuantity('500m'), undefined).cpu_shares, 2);
  });

  it('sets the memory limit only when there is one, rounding up to whole bytes', () => {
    assert.equal(calculateLinuxResources(undefined, undefined, undefined).memory_limit_in_bytes, undefined);
    assert.equal(calculateLinuxResources(undefined, undefined, parseQuantity('1.5Ki')).memory_limit_in_bytes, 1536);
    assert.equal(calculateLinuxResources(undefined, undefined, parseQuantity('1500m')).memory_limit_in_bytes, 2);
  });

  it('sends no swap beyond the memory limit when a swap controller exists (cgroup v1)', () => {
    const c = apiContainer();
    const r = generateLinuxContainerResources(apiPod(), c, { memoryCapacityBytes: MEMORY_CAPACITY, swapControllerAvailable: true });
    assert.equal(r.memory_swap_limit_in_bytes, 536870912);
    const v2 = generateLinuxContainerResources(apiPod(), c, { memoryCapacityBytes: MEMORY_CAPACITY, swapControllerAvailable: true, cgroupV2Unified: true });
    assert.deepEqual(v2.unified, { 'memory.oom.group': '1', 'memory.swap.max': '0' });
  });

  it('limits every node huge page size, to 0 unless the container asks', () => {
    assert.deepEqual(
      getHugepageLimitsFromResources({ limits: { 'hugepages-2Mi': '4Mi' }, requests: { 'hugepages-2Mi': '2Mi', 'hugepages-1Gi': '1Gi' } }, ['2MB', '1GB', '64KB']),
      [
        { page_size: '2MB', limit: 4194304 },
        { page_size: '1GB', limit: 1073741824 },
        { page_size: '64KB', limit: 0 },
      ],
    );
    assert.equal(hugePageUnitSizeFromByteSize(2097152n), '2MB');
    assert.equal(hugePageUnitSizeFromByteSize(65536n), '64KB');
    assert.equal(hugePageUnitSizeFromByteSize(1000n), '1000B');
    assert.equal(hugePageUnitSizeFromByteSize(3000n), undefined);
  });
});

describe('oom_score_adj', () => {
  const cap = 4 * GiB;
  function burstable(memoryRequest?: string): { pod: Pod; c: Container } {
    const c: Container = { name: 'c', resources: { requests: { cpu: '100m', ...(memoryRequest ? { memory: memoryRequest } : {}) } } };
    return { pod: { metadata: { name: 'p' }, spec: { containers: [c] } }, c };
  }

  it('is -997 for Guaranteed and 1000 for BestEffort', () => {
    const g: Container = { name: 'g', resources: { requests: { cpu: '1', memory: '1Gi' }, limits: { cpu: '1', memory: '1Gi' } } };
    assert.equal(getContainerOOMScoreAdjust({ metadata: {}, spec: { containers: [g] } }, g, cap), -997);
    const b: Container = { name: 'b' };
    assert.equal(getContainerOOMScoreAdjust({ metadata: {}, spec: { containers: [b] } }, b, cap), 1000);
  });

  const cases: [string | undefined, number][] = [
    ['1Gi', 750], // 1000 - 1000 * 1/4
    ['256Mi', 938], // 1000 - 62.5, truncated
    [undefined, 999], // no memory request: just below BestEffort
    ['1Mi', 999], // rounds to 1000: kept below BestEffort
    ['4Gi', 3], // the whole node: kept above Guaranteed
    ['8Gi', 3],
  ];
  for (const [req, want] of cases) {
    it(`is ${want} for a Burstable container requesting ${req ?? 'no memory'} of 4Gi`, () => {
      const { pod, c } = burstable(req);
      assert.equal(getContainerOOMScoreAdjust(pod, c, cap), want);
    });
  }

  it('is -997 for a node-critical static pod whatever its QoS', () => {
    const c: Container = { name: 'c' };
    const pod: Pod = { metadata: { annotations: { 'kubernetes.io/config.source': 'file' } }, spec: { containers: [c], priorityClassName: 'system-node-critical' } };
    assert.equal(getContainerOOMScoreAdjust(pod, c, cap), -997);
    delete pod.spec.priorityClassName;
    assert.equal(getContainerOOMScoreAdjust(pod, c, cap), 1000);
  });

  it('never ranks a sidecar above the smallest regular container', () => {
    const side: Container = { name: 'side', restartPolicy: 'Always', resources: { requests: { memory: '64Mi' } } };
    const pod: Pod = {
      metadata: {},
      spec: {
        initContainers: [side],
        containers: [{ name: 'a', resources: { requests: { memory: '1Gi' } } }, { name: 'b', resources: { requests: { memory: '512Mi' } } }],
      },
    };
    assert.equal(getContainerOOMScoreAdjust(pod, side, cap), 875);
  });
});

describe('generateContainerConfig', () => {
  it('builds the full CreateContainer config of a pod-network container', () => {
    const pod = apiPod();
    const c = pod.spec.containers[0]!;
    const volume = { container_path: '/data', host_path: `/var/lib/kubelet/pods/${UID}/volumes/kubernetes.io~empty-dir/data` };
    const config = generateContainerConfig(pod, c, 2, opts({ mounts: [volume], terminationMessageHostPath: TERMINATION_FILE }));
    assert.deepEqual(config, {
      metadata: { name: 'api', attempt: 2 },
      image: { image: 'sha256:4f2c1d0e9b8a7f6e5d4c3b2a19081716151413121110090807060504030201ff' },
      command: ['/bin/api'],
      args: ['--listen=10.244.1.5:8080', '--log=$(LEVEL)', '--memory-mib=512'],
      working_dir: '/srv',
      envs: [
        { key: 'PORT', value: '8080' },
        { key: 'POD_IP', value: '10.244.1.5' },
        { key: 'MEM', value: '512' },
      ],
      mounts: [volume, { host_path: TERMINATION_FILE, container_path: '/dev/termination-log' }],
      labels: {
        'io.kubernetes.pod.name': 'api-0',
        'io.kubernetes.pod.namespace': 'shop',
        'io.kubernetes.pod.uid': UID,
        'io.kubernetes.container.name': 'api',
      },
      annotations: {
        'io.kubernetes.container.hash': hashContainer(c),
        'kubelet-ts.io/resources-hash': resourcesHash(c),
        'io.kubernetes.container.restartCount': '2',
        'io.kubernetes.container.terminationMessagePath': '/dev/termination-log',
        'io.kubernetes.container.terminationMessagePolicy': 'File',
        'io.kubernetes.pod.terminationGracePeriod': '60',
        'io.kubernetes.container.preStopHandler': '{"exec":{"command":["/bin/drain"]}}',
        'io.kubernetes.container.ports': '[{"name":"http","containerPort":8080,"protocol":"TCP"}]',
      },
      log_path: 'api/2.log',
      stdin: false,
      stdin_once: false,
      tty: false,
      linux: {
        resources: {
          cpu_period: 100000,
          cpu_quota: 100000,
          cpu_shares: 256,
          memory_limit_in_bytes: 536870912,
          // Burstable: 1000 - 1000 * 256Mi / 8Gi = 968.75, truncated
          oom_score_adj: 969,
        },
        security_context: {
          capabilities: { add_capabilities: ['NET_BIND_SERVICE'], drop_capabilities: ['ALL'] },
          privileged: false,
          readonly_rootfs: true,
          run_as_user: { value: 1000 },
          run_as_group: { value: 1000 },
          seccomp: { profile_type: 'Unconfined' },
          namespace_options: { network: 'POD', pid: 'CONTAINER', ipc: 'POD' },
          supplemental_groups: [1000],
          no_new_privs: true,
          masked_paths: [...DEFAULT_MASKED_PATHS],
          readonly_paths: [...DEFAULT_READONLY_PATHS],
        },
      },
    });
  });

  it('builds a host-network container: node network namespace, host IP as pod IP', () => {
    const pod = apiPod();
    pod.spec.hostNetwork = true;
    pod.spec.containers[0]!.ports = [{ name: 'http', containerPort: 8080, hostPort: 8080, protocol: 'TCP' }];
    const config = generateContainerConfig(pod, pod.spec.containers[0]!, 0, opts({ podIPs: ['192.168.1.20'] }));
    assert.deepEqual(config.linux?.security_context?.namespace_options, { network: 'NODE', pid: 'CONTAINER', ipc: 'POD' });
    assert.deepEqual(config.args, ['--listen=192.168.1.20:8080', '--log=$(LEVEL)', '--memory-mib=512']);
    assert.equal(config.metadata.attempt, 0);
    assert.equal(config.log_path, 'api/0.log');
    assert.equal(config.annotations!['io.kubernetes.container.ports'], '[{"name":"http","hostPort":8080,"containerPort":8080,"protocol":"TCP"}]');
    assert.equal(config.mounts, undefined);
  });

  it('leaves out command, args, working dir and mounts the container does not have', () => {
    const c: Container = { name: 'plain', image: 'busybox' };
    const pod: Pod = { metadata: { name: 'p', namespace: 'default', uid: 'u' }, spec: { containers: [c] } };
    const config = generateContainerConfig(pod, c, 0, opts({ terminationMessageHostPath: '/tmp/x' }));
    for (const key of ['command', 'args', 'working_dir', 'mounts'] as const) assert.equal(config[key], undefined, key);
    assert.deepEqual(config.envs, []);
    assert.deepEqual(config.linux?.resources, { cpu_period: 100000, cpu_quota: 0, cpu_shares: 2, oom_score_adj: 1000 });
    assert.deepEqual(config.linux?.security_context, {
      privileged: false,
      readonly_rootfs: false,
      run_as_username: '',
      seccomp: { profile_type: 'Unconfined' },
      namespace_options: { network: 'POD', pid: 'CONTAINER', ipc: 'POD' },
      no_new_privs: false,
      masked_paths: [...DEFAULT_MASKED_PATHS],
      readonly_paths: [...DEFAULT_READONLY_PATHS],
    });
  });

  it('passes stdin, stdinOnce and tty through', () => {
    const c: Container = { name: 'sh', image: 'busybox', stdin: true, stdinOnce: true, tty: true };
    const pod: Pod = { metadata: { name: 'p', namespace: 'default', uid: 'u' }, spec: { containers: [c] } };
    const config = generateContainerConfig(pod, c, 0, opts());
    assert.deepEqual([config.stdin, config.stdin_once, config.tty], [true, true, true]);
  });

  it('fails with CreateContainerConfigError when the environment cannot be built', () => {
    const pod = apiPod();
    const c = pod.spec.containers[0]!;
    c.env!.push({ name: 'DB', valueFrom: { secretKeyRef: { name: 'db-creds', key: 'url' } } });
    assert.throws(() => generateContainerConfig(pod, c, 0, opts()), configError('secret "db-creds" not found'));
  });
});

describe('container security context', () => {
  function sc(pod: Pod, c: Container, o: Partial<ContainerConfigOptions> = {}) {
    return generateContainerSecurityContext(pod, c, o);
  }
  function podWith(c: Container, spec: Partial<Pod['spec']> = {}): Pod {
    return { metadata: { name: 'p', namespace: 'ns', uid: 'u' }, spec: { containers: [c], ...spec } };
  }

  it('follows the pod for the PID namespace: CONTAINER, POD when shared, NODE with hostPID', () => {
    const c: Container = { name: 'c' };
    assert.equal(sc(podWith(c), c).namespace_options?.pid, 'CONTAINER');
    assert.equal(sc(podWith(c, { shareProcessNamespace: true }), c).namespace_options?.pid, 'POD');
    assert.equal(sc(podWith(c, { hostPID: true }), c).namespace_options?.pid, 'NODE');
    assert.equal(sc(podWith(c, { hostIPC: true }), c).namespace_options?.ipc, 'NODE');
  });

  it('marks privileged and keeps the default masked paths (the runtime drops them for privileged)', () => {
    const c: Container = { name: 'c', securityContext: { privileged: true } };
    const s = sc(podWith(c), c);
    assert.equal(s.privileged, true);
    assert.deepEqual(s.masked_paths, [...DEFAULT_MASKED_PATHS]);
  });

  it('unmasks /proc with procMount Unmasked in a user namespace (hostUsers: false)', () => {
    const c: Container = { name: 'c', securityContext: { procMount: 'Unmasked' } };
    const s = sc(podWith(c, { hostUsers: false } as Partial<Pod['spec']>), c);
    assert.deepEqual([s.masked_paths, s.readonly_paths], [[], []]);
  });

  it('sets no_new_privs only for an explicit allowPrivilegeEscalation: false', () => {
    const unset: Container = { name: 'c' };
    const allowed: Container = { name: 'c', securityContext: { allowPrivilegeEscalation: true } };
    const denied: Container = { name: 'c', securityContext: { allowPrivilegeEscalation: false } };
    assert.deepEqual([sc(podWith(unset), unset).no_new_privs, sc(podWith(allowed), allowed).no_new_privs, sc(podWith(denied), denied).no_new_privs], [false, false, true]);
  });

  it('takes the container user over the pod user, the image user when neither is set', () => {
    const own: Container = { name: 'c', securityContext: { runAsUser: 2000 } };
    assert.deepEqual(sc(podWith(own, { securityContext: { runAsUser: 1000 } }), own).run_as_user, { value: 2000 });
    const none: Container = { name: 'c' };
    const byUid = sc(podWith(none), none, { imageUser: { uid: 65534 } });
    assert.deepEqual([byUid.run_as_user, byUid.run_as_username], [{ value: 65534 }, '']);
    const byName = sc(podWith(none), none, { imageUser: { username: 'nobody' } });
    assert.deepEqual([byName.run_as_user, byName.run_as_username], [undefined, 'nobody']);
  });

  it('picks the seccomp profile: container, then pod, then the kubelet default', () => {
    const local: Container = { name: 'c', securityContext: { seccompProfile: { type: 'Localhost', localhostProfile: 'profiles/audit.json' } } };
    assert.deepEqual(sc(podWith(local, { securityContext: { seccompProfile: { type: 'RuntimeDefault' } } }), local).seccomp, {
      profile_type: 'Localhost',
      localhost_ref: '/var/lib/kubelet/seccomp/profiles/audit.json',
    });
    const plain: Container = { name: 'c' };
    assert.deepEqual(sc(podWith(plain, { securityContext: { seccompProfile: { type: 'RuntimeDefault' } } }), plain).seccomp, { profile_type: 'RuntimeDefault' });
    assert.deepEqual(sc(podWith(plain), plain, { seccompDefault: true }).seccomp, { profile_type: 'RuntimeDefault' });
    const broken: Container = { name: 'c', securityContext: { seccompProfile: { type: 'Localhost' } } };
    assert.throws(() => sc(podWith(broken), broken), configError('localhostProfile must be set if seccompProfile type is Localhost.'));
  });

  it('refuses to run as root under runAsNonRoot, with upstream messages', () => {
    const desc = `(pod: "api-0_shop(${UID})", container: api)`;
    const pod = apiPod();
    const c = pod.spec.containers[0]!;
    c.securityContext!.runAsUser = 0;
    assert.throws(() => generateContainerConfig(pod, c, 0, opts()), configError(`container's runAsUser breaks non-root policy ${desc}`));
    delete c.securityContext!.runAsUser;
    delete pod.spec.securityContext!.runAsUser;
    assert.throws(() => generateContainerConfig(pod, c, 0, opts({ imageUser: { uid: 0 } })), configError(`container has runAsNonRoot and image will run as root ${desc}`));
    assert.throws(
      () => generateContainerConfig(pod, c, 0, opts({ imageUser: { username: 'app' } })),
      configError(`container has runAsNonRoot and image has non-numeric user (app), cannot verify user is non-root ${desc}`),
    );
    assert.doesNotThrow(() => generateContainerConfig(pod, c, 0, opts({ imageUser: { uid: 1001 } })));
  });
});

describe('paths', () => {
  it('names log files and directories as upstream', () => {
    assert.equal(buildContainerLogsPath('api', 3), 'api/3.log');
    assert.equal(containerLogsDirectory(apiPod(), apiContainer()), `/var/log/pods/shop_api-0_${UID}/api`);
    assert.equal(podContainerDir('/var/lib/kubelet', UID, 'api'), `/var/lib/kubelet/pods/${UID}/containers/api`);
  });

  it('creates a fresh world-writable termination message file per call', async () => {
    const root = await mkdtemp(join(tmpdir(), 'kts-term-'));
    try {
      const dir = podContainerDir(root, UID, 'api');
      const a = await createTerminationMessageFile(dir);
      const b = await createTerminationMessageFile(dir);
      assert.notEqual(a, b);
      assert.match(a, /\/[0-9a-f]{8}$/);
      assert.equal((await stat(a)).mode & 0o777, 0o666);
      assert.equal(await readFile(a, 'utf8'), '');
      assert.equal((await readdir(dir)).length, 2);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});
