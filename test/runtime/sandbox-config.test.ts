import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Container, Pod } from '../../src/api/types.js';
import { CreateContainerConfigError } from '../../src/runtime/env.js';
import { podCgroupResources, podLimits, podRequests } from '../../src/runtime/resources.js';
import {
  buildPodLogsDirectory,
  generatePodHostname,
  generatePodSandboxConfig,
  makePortMappings,
  namespacesForPod,
} from '../../src/runtime/sandbox-config.js';

const UID = '0f8e6a1c-2b3d-4e5f-8a9b-0c1d2e3f4a5b';
const DNS = { servers: ['10.96.0.10'], searches: ['prod.svc.cluster.local', 'svc.cluster.local'], options: ['ndots:5'] };

function webPod(): Pod {
  return {
    metadata: {
      name: 'web-0',
      namespace: 'prod',
      uid: UID,
      labels: { app: 'web' },
      annotations: { 'kubernetes.io/config.source': 'api', team: 'storefront' },
    },
    spec: {
      containers: [
        {
          name: 'web',
          image: 'nginx:1.25',
          ports: [
            { name: 'http', containerPort: 80, hostPort: 8080, protocol: 'TCP' },
            { name: 'dns', containerPort: 53, protocol: 'UDP' },
          ],
          resources: { requests: { cpu: '250m', memory: '64Mi' }, limits: { cpu: '500m', memory: '128Mi' } },
        },
        { name: 'metrics', image: 'exporter:2', resources: { requests: { cpu: '100m' } } },
      ],
      securityContext: {
        runAsUser: 1000,
        runAsGroup: 3000,
        fsGroup: 2000,
        supplementalGroups: [4000, 4001],
        sysctls: [{ name: 'net.ipv4.ip_local_port_range', value: '1024 65535' }],
      },
      terminationGracePeriodSeconds: 30,
    },
  };
}

const podLabels = {
  app: 'web',
  'io.kubernetes.pod.name': 'web-0',
  'io.kubernetes.pod.namespace': 'prod',
  'io.kubernetes.pod.uid': UID,
};

describe('generatePodSandboxConfig', () => {
  it('builds the full RunPodSandbox config of a pod-network pod', () => {
    const config = generatePodSandboxConfig(webPod(), 1, { cgroupParent: `/kubepods/burstable/pod${UID}`, podLogsDir: '/var/log/pods', dns: DNS });
    assert.deepEqual(config, {
      metadata: { name: 'web-0', namespace: 'prod', uid: UID, attempt: 1 },
      labels: podLabels,
      annotations: { 'kubernetes.io/config.source': 'api', team: 'storefront' },
      dns_config: DNS,
      hostname: 'web-0',
      log_directory: `/var/log/pods/prod_web-0_${UID}`,
      port_mappings: [
        { protocol: 'TCP', container_port: 80, host_port: 8080, host_ip: '' },
        { protocol: 'UDP', container_port: 53, host_port: 0, host_ip: '' },
      ],
      linux: {
        cgroup_parent: `/kubepods/burstable/pod${UID}`,
        security_context: {
          namespace_options: { network: 'POD', pid: 'CONTAINER', ipc: 'POD' },
          privileged: false,
          seccomp: { profile_type: 'RuntimeDefault' },
          run_as_user: { value: 1000 },
          run_as_group: { value: 3000 },
          supplemental_groups: [2000, 4000, 4001],
        },
        sysctls: { 'net.ipv4.ip_local_port_range': '1024 65535' },
        // requests 250m+100m → 358 shares; the only cpu limit 500m → 50 ms per 100 ms
        resources: { cpu_period: 100000, cpu_quota: 50000, cpu_shares: 358, memory_limit_in_bytes: 134217728 },
        overhead: {},
      },
    });
  });

  it('gives a host-network pod no hostname and the node network namespace', () => {
    const pod = webPod();
    pod.spec.hostNetwork = true;
    pod.spec.containers[0]!.ports = [{ name: 'http', containerPort: 8080, hostPort: 8080, protocol: 'TCP' }];
    const config = generatePodSandboxConfig(pod, 0, { cgroupParent: '/kubepods/burstable/podx', dns: DNS });
    assert.equal('hostname' in config, false);
    assert.deepEqual(config.dns_config, DNS);
    assert.deepEqual(config.linux?.security_context?.namespace_options, { network: 'NODE', pid: 'CONTAINER', ipc: 'POD' });
    assert.deepEqual(config.port_mappings, [{ protocol: 'TCP', container_port: 8080, host_port: 8080, host_ip: '' }]);
    assert.equal(config.metadata.attempt, 0);
    assert.equal(config.log_directory, `/var/log/pods/prod_web-0_${UID}`);
  });

  it('omits what the pod does not have: ports, dns, security context fields, sysctls', () => {
    const pod: Pod = { metadata: { name: 'p', namespace: 'default', uid: 'u' }, spec: { containers: [{ name: 'c', image: 'busybox' }] } };
    const config = generatePodSandboxConfig(pod, 0, { cgroupParent: '/kubepods/besteffort/podu', podLogsDir: '/logs' });
    assert.equal(config.port_mappings, undefined);
    assert.equal(config.dns_config, undefined);
    assert.equal(config.log_directory, '/logs/default_p_u');
    assert.deepEqual(config.linux, {
      cgroup_parent: '/kubepods/besteffort/podu',
      security_context: { namespace_options: { network: 'POD', pid: 'CONTAINER', ipc: 'POD' }, privileged: false, seccomp: { profile_type: 'RuntimeDefault' } },
      sysctls: {},
      resources: { cpu_period: 100000, cpu_quota: 0, cpu_shares: 2 },
      overhead: {},
    });
  });

  it('is privileged when any container, init ones included, is', () => {
    const pod = webPod();
    pod.spec.initContainers = [{ name: 'setup', image: 'busybox', securityContext: { privileged: true } }];
    assert.equal(generatePodSandboxConfig(pod, 0, { cgroupParent: '' }).linux?.security_context?.privileged, true);
  });

  it('carries the overhead separately from the pod resources', () => {
    const pod = webPod();
    pod.spec.overhead = { cpu: '250m', memory: '64Mi' };
    const linux = generatePodSandboxConfig(pod, 0, { cgroupParent: '' }).linux!;
    assert.deepEqual(linux.overhead, { cpu_period: 100000, cpu_quota: 25000, cpu_shares: 256, memory_limit_in_bytes: 67108864 });
    assert.deepEqual(linux.resources, { cpu_period: 100000, cpu_quota: 50000, cpu_shares: 358, memory_limit_in_bytes: 134217728 });
  });

  it('asks for memory.oom.group on cgroup v2 and drops quota when CFS quota is off', () => {
    const linux = generatePodSandboxConfig(webPod(), 0, { cgroupParent: '', cgroupV2Unified: true, cpuCFSQuota: false }).linux!;
    assert.deepEqual(linux.resources, { cpu_shares: 358, memory_limit_in_bytes: 134217728, unified: { 'memory.oom.group': '1' } });
  });
});

describe('namespacesForPod', () => {
  const cases: [string, Partial<Pod['spec']>, object][] = [
    ['default', {}, { network: 'POD', pid: 'CONTAINER', ipc: 'POD' }],
    ['hostNetwork', { hostNetwork: true }, { network: 'NODE', pid: 'CONTAINER', ipc: 'POD' }],
    ['hostPID', { hostPID: true }, { network: 'POD', pid: 'NODE', ipc: 'POD' }],
    ['shareProcessNamespace', { shareProcessNamespace: true }, { network: 'POD', pid: 'POD', ipc: 'POD' }],
    ['hostPID wins over shareProcessNamespace', { hostPID: true, shareProcessNamespace: true }, { network: 'POD', pid: 'NODE', ipc: 'POD' }],
    ['hostIPC', { hostIPC: true }, { network: 'POD', pid: 'CONTAINER', ipc: 'NODE' }],
  ];
  for (const [what, spec, want] of cases) {
    it(what, () => {
      const pod: Pod = { metadata: { name: 'p' }, spec: { containers: [], ...spec } };
      assert.deepEqual(namespacesForPod(pod), want);
    });
  }
});

describe('hostname', () => {
  it('uses spec.hostname over the pod name', () => {
    const pod = webPod();
    pod.spec.hostname = 'custom';
    assert.equal(generatePodSandboxConfig(pod, 0, { cgroupParent: '' }).hostname, 'custom');
  });

  it('cuts a long name to 63 characters without a trailing dash or dot', () => {
    const pod = webPod();
    pod.metadata.name = 'a'.repeat(61) + '-.bcdef';
    assert.equal(generatePodHostname(pod), 'a'.repeat(61));
  });

  it('is the FQDN with setHostnameAsFQDN, refused when longer than 64 characters', () => {
    const pod = webPod();
    pod.spec.subdomain = 'web';
    pod.spec.setHostnameAsFQDN = true;
    assert.equal(generatePodHostname(pod, 'cluster.local'), 'web-0.web.prod.svc.cluster.local');
    pod.spec.hostname = 'h'.repeat(40);
    assert.throws(() => generatePodHostname(pod, 'cluster.local'), (err) => err instanceof CreateContainerConfigError && /FQDN .* is too long/.test(err.message));
  });
});

describe('makePortMappings', () => {
  it('drops a repeated port within a container but not across containers', () => {
    const pod: Pod = {
      metadata: { name: 'p' },
      spec: {
        containers: [
          { name: 'a', ports: [{ name: 'http', containerPort: 80 }, { name: 'http', containerPort: 81 }, { containerPort: 90 }, { containerPort: 90 }] },
          { name: 'b', ports: [{ name: 'http', containerPort: 82, hostIP: '::1', hostPort: 9000 }] },
        ],
      },
    };
    assert.deepEqual(makePortMappings(pod), [
      { protocol: 'TCP', container_port: 80, host_port: 0, host_ip: '' },
      { protocol: 'TCP', container_port: 90, host_port: 0, host_ip: '' },
      { protocol: 'TCP', container_port: 82, host_port: 9000, host_ip: '::1' },
    ]);
  });

  it('builds the log directory name from namespace, name and uid', () => {
    assert.equal(buildPodLogsDirectory('/var/log/pods/', 'ns', 'n', 'u'), '/var/log/pods/ns_n_u');
  });
});

describe('pod cgroup resources', () => {
  function ctr(name: string, requests?: Record<string, string>, limits?: Record<string, string>, extra: Partial<Container> = {}): Container {
    const c: Container = { name, image: 'busybox', ...extra };
    if (requests || limits) c.resources = { ...(requests ? { requests } : {}), ...(limits ? { limits } : {}) };
    return c;
  }
  function pod(containers: Container[], initContainers?: Container[]): Pod {
    const p: Pod = { metadata: { name: 'p', uid: 'u' }, spec: { containers } };
    if (initContainers) p.spec.initContainers = initContainers;
    return p;
  }
  const g = (cpu: string, mem: string): [Record<string, string>, Record<string, string>] => [{ cpu, memory: mem }, { cpu, memory: mem }];

  it('Guaranteed: shares, quota, period and memory limit from the sums', () => {
    const r = podCgroupResources(pod([ctr('a', ...g('500m', '128Mi')), ctr('b', ...g('250m', '64Mi'))]));
    assert.deepEqual(r, {
      hugePageLimits: new Map(),
      cpuShares: 768,
      cpuQuotaUs: 75000,
      cpuPeriodUs: 100000,
      memoryLimitBytes: 201326592,
      cpuWeight: 30,
    });
  });

  it('Burstable: quota only when every container has a cpu limit, memory likewise', () => {
    const r = podCgroupResources(pod([ctr('a', { cpu: '200m', memory: '64Mi' }, { memory: '128Mi' }), ctr('b', { cpu: '100m' }, { cpu: '1', memory: '32Mi' })]));
    assert.equal(r.cpuShares, 307);
    assert.equal(r.cpuQuotaUs, undefined);
    assert.equal(r.cpuPeriodUs, undefined);
    assert.equal(r.memoryLimitBytes, 167772160);
  });

  it('BestEffort: the minimum shares only', () => {
    assert.deepEqual(podCgroupResources(pod([ctr('a')])), { hugePageLimits: new Map(), cpuShares: 2, cpuWeight: 1 });
  });

  it('takes init containers at their peak and adds sidecars to everything after them', () => {
    // regular 100m; sidecar 200m runs beside the 250m init container that follows it → 450m peak
    const p = pod([ctr('main', { cpu: '100m' })], [ctr('side', { cpu: '200m' }, undefined, { restartPolicy: 'Always' }), ctr('init', { cpu: '250m' })]);
    assert.equal(podRequests(p).get('cpu'), 450n);
    assert.equal(podCgroupResources(p).cpuShares, 460);
    const plainInit = pod([ctr('main', { cpu: '100m' })], [ctr('init', { cpu: '1' })]);
    assert.equal(podCgroupResources(plainInit).cpuShares, 1024);
  });

  it('includes overhead: in requests always, in limits only where a limit exists', () => {
    const p = pod([ctr('a', ...g('500m', '128Mi'))]);
    p.spec.overhead = { cpu: '100m', memory: '10Mi', 'ephemeral-storage': '1Gi' };
    const r = podCgroupResources(p);
    assert.equal(r.cpuShares, 614);
    assert.equal(r.cpuQuotaUs, 60000);
    assert.equal(r.memoryLimitBytes, 138 * 1024 * 1024);
    assert.equal(podLimits(p).has('ephemeral-storage'), false);
    assert.equal(podRequests(p).has('ephemeral-storage'), true);
    assert.equal(podRequests(p, { excludeOverhead: true }).get('cpu'), 500n);
  });

  it('leaves CPU unlimited (-1) when CFS quota enforcement is off, and honours a custom period', () => {
    const p = pod([ctr('a', ...g('500m', '128Mi'))]);
    assert.equal(podCgroupResources(p, { enforceCPULimits: false }).cpuQuotaUs, -1);
    const custom = podCgroupResources(p, { cpuPeriodUs: 50000 });
    assert.equal(custom.cpuQuotaUs, 25000);
    assert.equal(custom.cpuPeriodUs, 50000);
  });

  it('sums huge page requests per page size', () => {
    const p = pod([ctr('a', { cpu: '1', memory: '1Gi', 'hugepages-2Mi': '4Mi' }, { cpu: '1', memory: '1Gi', 'hugepages-2Mi': '4Mi' }), ctr('b', { 'hugepages-2Mi': '2Mi' })]);
    assert.deepEqual(podCgroupResources(p).hugePageLimits, new Map([[2097152, 6291456]]));
  });
});
