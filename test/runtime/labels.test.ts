import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Container, Pod } from '../../src/api/types.js';
import { hashContainer, resourcesHash } from '../../src/runtime/container-hash.js';
import {
  CONTAINER_HASH_LABEL,
  CONTAINER_PORTS_LABEL,
  CONTAINER_PRE_STOP_HANDLER_LABEL,
  CONTAINER_RESTART_COUNT_LABEL,
  getContainerInfoFromAnnotations,
  getContainerInfoFromLabels,
  getPodSandboxInfoFromAnnotations,
  getPodSandboxInfoFromLabels,
  labeledPodIdentityError,
  newContainerAnnotations,
  newContainerLabels,
  newPodAnnotations,
  newPodLabels,
  POD_DELETION_GRACE_PERIOD_LABEL,
  POD_TERMINATION_GRACE_PERIOD_LABEL,
} from '../../src/runtime/labels.js';

function webContainer(): Container {
  return {
    name: 'web',
    image: 'nginx:1.25',
    ports: [
      { name: 'http', containerPort: 80, hostPort: 8080, protocol: 'TCP' },
      { containerPort: 9090, protocol: 'UDP', hostIP: '10.0.0.1' },
    ],
    lifecycle: { preStop: { httpGet: { path: '/stop', port: 8080, scheme: 'HTTP' } } },
    terminationMessagePath: '/dev/termination-log',
    terminationMessagePolicy: 'File',
  };
}

function webPod(): Pod {
  return {
    metadata: {
      name: 'web-0',
      namespace: 'prod',
      uid: '6a1f3c52-1c0e-4a8a-9f0e-0d8e7c1b2a30',
      labels: { app: 'web', tier: 'front' },
      annotations: { 'kubernetes.io/config.source': 'file', 'kubernetes.io/config.seen': '2024-01-01T00:00:00Z' },
    },
    spec: { containers: [webContainer()], terminationGracePeriodSeconds: 45 },
  };
}

describe('sandbox labels and annotations', () => {
  it('carry the pod labels plus name, namespace and uid', () => {
    assert.deepEqual(newPodLabels(webPod()), {
      app: 'web',
      tier: 'front',
      'io.kubernetes.pod.name': 'web-0',
      'io.kubernetes.pod.namespace': 'prod',
      'io.kubernetes.pod.uid': '6a1f3c52-1c0e-4a8a-9f0e-0d8e7c1b2a30',
    });
  });

  it("let the kubelet's keys win over a pod label of the same name", () => {
    const pod = webPod();
    pod.metadata.labels = { 'io.kubernetes.pod.name': 'spoofed' };
    assert.equal(newPodLabels(pod)['io.kubernetes.pod.name'], 'web-0');
  });

  it('annotations are the pod annotations, config.source included, as a copy', () => {
    const pod = webPod();
    const a = newPodAnnotations(pod);
    assert.deepEqual(a, pod.metadata.annotations);
    a.extra = 'x';
    assert.equal(pod.metadata.annotations!.extra, undefined);
  });

  it('round-trip: only the pod labels come back as labels', () => {
    const info = getPodSandboxInfoFromLabels(newPodLabels(webPod()));
    assert.deepEqual(info, {
      labels: { app: 'web', tier: 'front' },
      podName: 'web-0',
      podNamespace: 'prod',
      podUID: '6a1f3c52-1c0e-4a8a-9f0e-0d8e7c1b2a30',
    });
    assert.deepEqual(getPodSandboxInfoFromAnnotations(newPodAnnotations(webPod())).annotations, webPod().metadata.annotations);
  });

  it('missing labels read as empty strings', () => {
    assert.deepEqual(getPodSandboxInfoFromLabels(undefined), { labels: {}, podName: '', podNamespace: '', podUID: '' });
  });
});

describe('container labels', () => {
  it('are exactly the four identifying keys', () => {
    assert.deepEqual(newContainerLabels(webContainer(), webPod()), {
      'io.kubernetes.pod.name': 'web-0',
      'io.kubernetes.pod.namespace': 'prod',
      'io.kubernetes.pod.uid': '6a1f3c52-1c0e-4a8a-9f0e-0d8e7c1b2a30',
      'io.kubernetes.container.name': 'web',
    });
  });

  it('read back with the labels only', () => {
    const info = getContainerInfoFromLabels(newContainerLabels(webContainer(), webPod()));
    assert.deepEqual(info, {
      containerName: 'web',
      podName: 'web-0',
      podNamespace: 'prod',
      podUID: '6a1f3c52-1c0e-4a8a-9f0e-0d8e7c1b2a30',
    });
  });
});

describe('container annotations', () => {
  it('hold hash, restart count, termination settings, grace period, preStop and ports in upstream JSON', () => {
    const c = webContainer();
    const a = newContainerAnnotations(c, webPod(), 3);
    assert.deepEqual(a, {
      'io.kubernetes.container.hash': hashContainer(c),
      'kubelet-ts.io/resources-hash': resourcesHash(c),
      'io.kubernetes.container.restartCount': '3',
      'io.kubernetes.container.terminationMessagePath': '/dev/termination-log',
      'io.kubernetes.container.terminationMessagePolicy': 'File',
      'io.kubernetes.pod.terminationGracePeriod': '45',
      'io.kubernetes.container.preStopHandler': '{"httpGet":{"path":"/stop","port":8080,"scheme":"HTTP"}}',
      'io.kubernetes.container.ports':
        '[{"name":"http","hostPort":8080,"containerPort":80,"protocol":"TCP"},{"containerPort":9090,"protocol":"UDP","hostIP":"10.0.0.1"}]',
    });
  });

  it('write JSON fields in Go struct order whatever the object key order', () => {
    const c: Container = {
      name: 'x',
      ports: [{ protocol: 'TCP', containerPort: 80, name: 'p' }],
      lifecycle: { preStop: { exec: { command: ['sh', '-c', 'sleep 1'] } } },
    };
    const a = newContainerAnnotations(c, webPod(), 0);
    assert.equal(a[CONTAINER_PORTS_LABEL], '[{"name":"p","containerPort":80,"protocol":"TCP"}]');
    assert.equal(a[CONTAINER_PRE_STOP_HANDLER_LABEL], '{"exec":{"command":["sh","-c","sleep 1"]}}');
  });

  it('leave out preStop, ports and grace periods the pod does not have; deletion grace period when set', () => {
    const pod = webPod();
    delete pod.spec.terminationGracePeriodSeconds;
    pod.metadata.deletionGracePeriodSeconds = 0;
    const a = newContainerAnnotations({ name: 'bare' }, pod, 0);
    assert.equal(a[CONTAINER_PRE_STOP_HANDLER_LABEL], undefined);
    assert.equal(a[CONTAINER_PORTS_LABEL], undefined);
    assert.equal(a[POD_TERMINATION_GRACE_PERIOD_LABEL], undefined);
    assert.equal(a[POD_DELETION_GRACE_PERIOD_LABEL], '0');
    assert.equal(a['io.kubernetes.container.terminationMessagePath'], '');
  });

  it("put extra annotations first and never let them override the kubelet's", () => {
    const a = newContainerAnnotations(webContainer(), webPod(), 1, { 'device.plugin/x': 'y', [CONTAINER_RESTART_COUNT_LABEL]: '99' });
    assert.equal(a['device.plugin/x'], 'y');
    assert.equal(a[CONTAINER_RESTART_COUNT_LABEL], '1');
  });

  it('round-trip through the parsers to the same values', () => {
    const c = webContainer();
    const pod = webPod();
    pod.metadata.deletionGracePeriodSeconds = 30;
    const info = getContainerInfoFromLabels(newContainerLabels(c, pod), newContainerAnnotations(c, pod, 7));
    assert.deepEqual(info, {
      containerName: 'web',
      podName: 'web-0',
      podNamespace: 'prod',
      podUID: '6a1f3c52-1c0e-4a8a-9f0e-0d8e7c1b2a30',
      hash: hashContainer(c),
      restartCount: 7,
      podDeletionGracePeriod: 30,
      podTerminationGracePeriod: 45,
      terminationMessagePath: '/dev/termination-log',
      terminationMessagePolicy: 'File',
      preStopHandler: { httpGet: { path: '/stop', port: 8080, scheme: 'HTTP' } },
      containerPorts: [
        { name: 'http', hostPort: 8080, containerPort: 80, protocol: 'TCP' },
        { containerPort: 9090, protocol: 'UDP', hostIP: '10.0.0.1' },
      ],
    });
  });

  it('parse malformed or missing values as absent', () => {
    const info = getContainerInfoFromAnnotations({
      [CONTAINER_HASH_LABEL]: 'abc',
      [CONTAINER_RESTART_COUNT_LABEL]: 'three',
      [POD_TERMINATION_GRACE_PERIOD_LABEL]: '1.5',
      [CONTAINER_PRE_STOP_HANDLER_LABEL]: '{not json',
      [CONTAINER_PORTS_LABEL]: '{"containerPort":80}',
    });
    assert.equal(info.hash, 'abc');
    assert.equal(info.restartCount, undefined);
    assert.equal(info.podTerminationGracePeriod, undefined);
    assert.equal(info.preStopHandler, undefined);
    assert.equal(info.containerPorts, undefined);
    const empty = getContainerInfoFromAnnotations(undefined);
    assert.equal(empty.hash, '');
    assert.equal(empty.restartCount, undefined);
    assert.equal(empty.podDeletionGracePeriod, undefined);
  });
});

describe('pod identity read back from labels', () => {
  it('accepts what newContainerLabels writes for a valid pod', () => {
    const info = getContainerInfoFromLabels(newContainerLabels(webContainer(), webPod()));
    assert.equal(labeledPodIdentityError(info.podUID, info.podName, info.podNamespace, info.containerName), undefined);
    const sb = getPodSandboxInfoFromLabels(newPodLabels(webPod()));
    assert.equal(labeledPodIdentityError(sb.podUID, sb.podName, sb.podNamespace), undefined);
  });

  it('names the label of every identity a kubelet could not have written', () => {
    const uid = '6a1f3c52-1c0e-4a8a-9f0e-0d8e7c1b2a30';
    assert.match(labeledPodIdentityError('../../victim', 'web-0', 'prod')!, /^label io\.kubernetes\.pod\.uid: Invalid value: "\.\.\/\.\.\/victim"/);
    assert.match(labeledPodIdentityError(uid, 'web-0', '..')!, /^label io\.kubernetes\.pod\.namespace: /);
    assert.match(labeledPodIdentityError(uid, '../etc', 'prod')!, /^label io\.kubernetes\.pod\.name: /);
    assert.match(labeledPodIdentityError(uid, 'web-0', 'prod', 'a/b')!, /^label io\.kubernetes\.container\.name: /);
    assert.match(labeledPodIdentityError('', 'web-0', 'prod')!, /io\.kubernetes\.pod\.uid: Required value/);
    const all = labeledPodIdentityError('a_b', 'A', '', '..')!;
    assert.equal(all.split('; ').length, 4, all);
  });
});
