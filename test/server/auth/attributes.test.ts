// Upstream's mapping of kubelet API paths to nodes subresources and of methods to verbs.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';

import { isSubpath, requestAttributes, subresourcesFor, verbFor } from '../../../src/server/auth/attributes.js';

describe('kubelet API authorization attributes', () => {
  it('maps methods to verbs; other methods have none', () => {
    assert.deepEqual(['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'].map(verbFor), ['get', 'create', 'update', 'patch', 'delete', '', '']);
  });

  it('isSubpath is the path itself or below it, never a longer name', () => {
    assert.equal(isSubpath('/stats', '/stats/'), true);
    assert.equal(isSubpath('/stats/summary', '/stats/'), true);
    assert.equal(isSubpath('/statsx', '/stats/'), false);
    assert.equal(isSubpath('/metrics/cadvisor', '/metrics'), true);
    assert.equal(isSubpath('/metricsz', '/metrics'), false);
  });

  it('fine-grained (the default): own subresources, with a proxy fallback for pods, healthz, configz', () => {
    const cases: Array<[string, string[]]> = [
      ['/stats/summary', ['stats']], ['/stats', ['stats']],
      ['/metrics', ['metrics']], ['/metrics/cadvisor', ['metrics']], ['/metrics/probes', ['metrics']], ['/metrics/resource', ['metrics']],
      ['/logs/', ['log']], ['/logs/syslog', ['log']],
      ['/spec/', ['spec']], ['/checkpoint/ns/pod/c', ['checkpoint']],
      ['/pods', ['pods', 'proxy']], ['/pods/', ['pods', 'proxy']], ['/runningpods/', ['pods', 'proxy']],
      ['/healthz', ['healthz', 'proxy']], ['/healthz/syncloop', ['healthz', 'proxy']],
      ['/configz', ['configz', 'proxy']],
      ['/containerLogs/ns/pod/c', ['proxy']], ['/exec/ns/pod/c', ['proxy']], ['/attach/ns/pod/c', ['proxy']],
      ['/portForward/ns/pod', ['proxy']], ['/run/ns/pod/c', ['proxy']], ['/debug/pprof/heap', ['proxy']], ['/', ['proxy']],
      ['/podsx', ['proxy']], ['/statsx', ['proxy']],
    ];
    for (const [path, subs] of cases) assert.deepEqual(subresourcesFor(path, true), subs, path);
  });

  it('with KubeletFineGrainedAuthz off: stats, metrics, log, spec, and proxy for everything else', () => {
    assert.deepEqual(subresourcesFor('/pods', false), ['proxy']);
    assert.deepEqual(subresourcesFor('/healthz', false), ['proxy']);
    assert.deepEqual(subresourcesFor('/configz', false), ['proxy']);
    assert.deepEqual(subresourcesFor('/checkpoint/a', false), ['proxy']);
    assert.deepEqual(subresourcesFor('/stats/summary', false), ['stats']);
    assert.deepEqual(subresourcesFor('/logs/x', false), ['log']);
  });

  it('the attributes name the node, core group v1, resource nodes, no namespace', () => {
    const user = { name: 'u', groups: ['g'] };
    assert.deepEqual(requestAttributes(user, 'POST', '/exec/a/b/c', 'node-a', true), [
      { user, verb: 'create', namespace: '', apiGroup: '', apiVersion: 'v1', resource: 'nodes', subresource: 'proxy', name: 'node-a', path: '/exec/a/b/c' },
    ]);
  });
});
