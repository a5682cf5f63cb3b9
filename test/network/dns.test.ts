// Pod DNS config generation, table-driven after upstream's dns_test.go cases.

import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { Pod } from '../../src/api/types.js';
import { DNSConfigurer, fitSearchLimits, MAX_RESOLV_CONF_BYTES, parseResolvConf, readResolvConfFile, type DNSConfigurerOptions } from '../../src/network/dns.js';

const HOST_RESOLV = 'nameserver 192.168.0.10\nnameserver 192.168.0.11 # comment\nsearch corp.example. lab.example\noptions timeout:2 rotate\n';

function pod(spec: Partial<Pod['spec']> = {}): Pod {
  return { metadata: { name: 'web', namespace: 'prod', uid: 'u1' }, spec: { containers: [], ...spec } } as Pod;
}

function configurer(o: Partial<DNSConfigurerOptions> = {}, events: string[] = []): DNSConfigurer {
  return new DNSConfigurer({
    clusterDNS: ['10.96.0.10'],
    clusterDomain: 'cluster.local',
    resolvConf: '/etc/resolv.conf',
    nodeIPs: () => ['192.168.0.2'],
    readFile: async () => HOST_RESOLV,
    event: (_p, reason, message) => void events.push(`${reason}: ${message}`),
    ...o,
  });
}

describe('parseResolvConf', () => {
  it('reads nameservers, the search line (trailing dots dropped) and options, skipping comments', () => {
    assert.deepEqual(parseResolvConf(HOST_RESOLV + '; another comment\n#nameserver 9.9.9.9\n'), {
      servers: ['192.168.0.10', '192.168.0.11'],
      searches: ['corp.example', 'lab.example'],
      options: ['timeout:2', 'rotate'],
    });
  });
});

describe('pod DNS', () => {
  const cases: { name: string; spec: Partial<Pod['spec']>; opts?: Partial<DNSConfigurerOptions>; want: { servers: string[]; searches: string[]; options: string[] } }[] = [
    {
      name: 'ClusterFirst: cluster DNS, cluster search domains then the host\'s, ndots:5',
      spec: { dnsPolicy: 'ClusterFirst' },
      want: { servers: ['10.96.0.10'], searches: ['prod.svc.cluster.local', 'svc.cluster.local', 'cluster.local', 'corp.example', 'lab.example'], options: ['ndots:5'] },
    },
    {
      name: 'unset policy is ClusterFirst',
      spec: {},
      want: { servers: ['10.96.0.10'], searches: ['prod.svc.cluster.local', 'svc.cluster.local', 'cluster.local', 'corp.example', 'lab.example'], options: ['ndots:5'] },
    },
    {
      name: 'ClusterFirst on the host network falls back to the host\'s resolver',
      spec: { dnsPolicy: 'ClusterFirst', hostNetwork: true },
      want: { servers: ['192.168.0.10', '192.168.0.11'], searches: ['corp.example', 'lab.example'], options: ['timeout:2', 'rotate'] },
    },
    {
      name: 'ClusterFirstWithHostNet on the host network uses cluster DNS',
      spec: { dnsPolicy: 'ClusterFirstWithHostNet', hostNetwork: true },
      want: { servers: ['10.96.0.10'], searches: ['prod.svc.cluster.local', 'svc.cluster.local', 'cluster.local', 'corp.example', 'lab.example'], options: ['ndots:5'] },
    },
    {
      name: 'Default: the host\'s resolver',
      spec: { dnsPolicy: 'Default' },
      want: { servers: ['192.168.0.10', '192.168.0.11'], searches: ['corp.example', 'lab.example'], options: ['timeout:2', 'rotate'] },
    },
    {
      name: 'Default with resolvConf "": the node\'s loopback resolver and no search',
      spec: { dnsPolicy: 'Default' },
      opts: { resolvConf: '' },
      want: { servers: ['127.0.0.1'], searches: ['.'], options: [] },
    },
    {
      name: 'None with dnsConfig: only what the pod says',
      spec: { dnsPolicy: 'None', dnsConfig: { nameservers: ['1.1.1.1'], searches: ['my.dns.search.suffix'], options: [{ name: 'ndots', value: '2' }, { name: 'edns0' }] } },
      want: { servers: ['1.1.1.1'], searches: ['my.dns.search.suffix'], options: ['ndots:2', 'edns0'] },
    },
    {
      name: 'ClusterFirst with dnsConfig: merged, duplicates dropped, the pod\'s option wins',
      spec: { dnsConfig: { nameservers: ['10.96.0.10', '8.8.8.8'], searches: ['cluster.local', 'extra'], options: [{ name: 'ndots', value: '1' }] } },
      want: { servers: ['10.96.0.10', '8.8.8.8'], searches: ['prod.svc.cluster.local', 'svc.cluster.local', 'cluster.local', 'corp.example', 'lab.example', 'extra'], options: ['ndots:1'] },
    },
    {
      name: 'no clusterDomain: the host search list alone',
      spec: {},
      opts: { clusterDomain: '' },
      want: { servers: ['10.96.0.10'], searches: ['corp.example', 'lab.example'], options: ['ndots:5'] },
    },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      assert.deepEqual(await configurer(c.opts).podDNS(pod(c.spec)), c.want);
    });
  }

  it('ClusterFirst without clusterDNS falls back to Default with a MissingClusterDNS event', async () => {
    const events: string[] = [];
    const got = await configurer({ clusterDNS: [] }, events).podDNS(pod());
    assert.deepEqual(got.servers, ['192.168.0.10', '192.168.0.11']);
    assert.equal(events.length, 1);
    assert.match(events[0]!, /^MissingClusterDNS: pod: "web_prod\(u1\)". kubelet does not have ClusterDNS IP configured and cannot create Pod using "ClusterFirst" policy. Falling back to "Default" policy.$/);
  });

  it('keeps 3 nameservers and says so', async () => {
    const events: string[] = [];
    const got = await configurer({}, events).podDNS(pod({ dnsPolicy: 'None', dnsConfig: { nameservers: ['1.1.1.1', '2.2.2.2', '3.3.3.3', '4.4.4.4'] } }));
    assert.deepEqual(got.servers, ['1.1.1.1', '2.2.2.2', '3.3.3.3']);
    assert.deepEqual(events, ['DNSConfigForming: Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: 1.1.1.1 2.2.2.2 3.3.3.3']);
  });

  it('an unreadable resolv.conf is an error naming the file', async () => {
    await assert.rejects(configurer({ readFile: async () => { throw new Error('ENOENT'); } }).podDNS(pod({ dnsPolicy: 'Default' })), /\/etc\/resolv.conf: cannot read the resolver config/);
  });
});

describe('search line limits (upstream formDNSSearchFitsLimits)', () => {
  const d = (n: number, len: number): string[] => Array.from({ length: n }, (_, i) => `${String(i).padStart(2, '0')}${'a'.repeat(len - 2)}`);
  const cases: { name: string; in: string[]; kept: number; exceeded: boolean }[] = [
    { name: '32 short domains fit', in: d(32, 10), kept: 32, exceeded: false },
    { name: '33 domains: the 33rd goes', in: d(33, 10), kept: 32, exceeded: true },
    { name: 'a 2048-character line fits', in: d(8, 255).map((s) => s.slice(0, 253)).slice(0, 8).concat([]), kept: 8, exceeded: false },
    { name: 'a line over 2048 characters loses domains from the end', in: d(20, 200), kept: 10, exceeded: true },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const got = fitSearchLimits(c.in);
      assert.equal(got.kept.length, c.kept);
      assert.equal(got.exceeded, c.exceeded);
      assert.deepEqual(got.kept, c.in.slice(0, c.kept));
      assert.ok(got.kept.join(' ').length <= 2048);
    });
  }

  it('drops a domain over 253 characters and keeps the others in order', () => {
    const long = 'x'.repeat(254);
    assert.deepEqual(fitSearchLimits(['a', long, 'b']), { kept: ['a', 'b'], exceeded: true });
  });
});

describe('host resolv.conf limits (upstream CheckLimitsForResolvConf)', () => {
  const withSearch = (domains: string[], o: Partial<DNSConfigurerOptions> = {}) => configurer({ readFile: async () => `nameserver 1.1.1.1\nsearch ${domains.join(' ')}\n`, ...o });
  const names = (n: number, len = 10): string[] => Array.from({ length: n }, (_, i) => `${String(i).padStart(2, '0')}${'d'.repeat(len - 2)}`);

  it('leaves 29 domains to the host when clusterDomain is set, 32 otherwise', async () => {
    assert.equal(await withSearch(names(29)).checkLimitsForResolvConf(), undefined);
    assert.equal(await withSearch(names(30)).checkLimitsForResolvConf(), "Resolv.conf file '/etc/resolv.conf' contains search line consisting of more than 29 domains!");
    assert.equal(await withSearch(names(30), { clusterDomain: '' }).checkLimitsForResolvConf(), undefined);
  });

  it('warns about a domain over 253 characters and a search line over 2048', async () => {
    assert.equal(await withSearch(['a'.repeat(254)]).checkLimitsForResolvConf(), "Resolv.conf file '/etc/resolv.conf' contains a search path which length is more than allowed 253 chars!");
    assert.equal(await withSearch(names(10, 250)).checkLimitsForResolvConf(), "Resolv.conf file '/etc/resolv.conf' contains search line which length is more than allowed 2048 chars!");
  });

  it('an empty resolvConf checks nothing and gives host-DNS pods the node\'s loopback resolver', async () => {
    const c = configurer({ resolvConf: '', readFile: async () => { throw new Error('must not be read'); } });
    assert.equal(await c.checkLimitsForResolvConf(), undefined);
    assert.deepEqual(await c.podDNS(pod({ dnsPolicy: 'Default' })), { servers: ['127.0.0.1'], searches: ['.'], options: [] });
  });

  it('refuses a resolver config over 10 MiB, naming the file', async () => {
    const big = configurer({ readFile: async () => `search a\n${'#'.repeat(10 * 1024 * 1024)}` });
    await assert.rejects(big.podDNS(pod({ dnsPolicy: 'Default' })), /\/etc\/resolv.conf: the resolver config is larger than 10485760 bytes/);
    assert.match((await big.checkLimitsForResolvConf())!, /larger than 10485760 bytes/);
  });
});

describe('reading the host resolv.conf from disk', () => {
  const withFile = async (content: string, fn: (file: string) => Promise<void>): Promise<void> => {
    const dir = await mkdtemp(join(tmpdir(), 'kts-dns-'));
    try {
      const file = join(dir, 'resolv.conf');
      await writeFile(file, content);
      await fn(file);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  };

  it('allocates for what the file holds, not the 10 MiB cap (it is read on every pod sync)', async () => {
    await withFile(HOST_RESOLV, async (file) => {
      const sizes: number[] = [];
      const { alloc, allocUnsafe, allocUnsafeSlow } = Buffer;
      Buffer.alloc = ((n: number, ...rest: never[]) => (sizes.push(n), alloc.call(Buffer, n, ...rest))) as typeof Buffer.alloc;
      Buffer.allocUnsafe = ((n: number) => (sizes.push(n), allocUnsafe.call(Buffer, n))) as typeof Buffer.allocUnsafe;
      Buffer.allocUnsafeSlow = ((n: number) => (sizes.push(n), allocUnsafeSlow.call(Buffer, n))) as typeof Buffer.allocUnsafeSlow;
      let text;
      try {
        text = await readResolvConfFile(file);
      } finally {
        Object.assign(Buffer, { alloc, allocUnsafe, allocUnsafeSlow });
      }
      assert.equal(text, HOST_RESOLV);
      assert.ok(Math.max(0, ...sizes) <= 64 * 1024, `allocated ${Math.max(...sizes)} bytes for a ${HOST_RESOLV.length}-byte file`);
    });
  });

  it('reads a file of many chunks whole', async () => {
    const content = HOST_RESOLV + `# ${'x'.repeat(100_000)}\nsearch far.example\n`;
    await withFile(content, async (file) => {
      assert.equal(await readResolvConfFile(file), content);
      const c = configurer({ resolvConf: file, readFile: undefined });
      assert.deepEqual((await c.podDNS(pod({ dnsPolicy: 'Default' }))).searches, ['far.example']);
    });
  });

  it('an unchanged resolv.conf is read once, not on every pod sync; a changed one is read again', async () => {
    await withFile(HOST_RESOLV, async (file) => {
      const c = configurer({ resolvConf: file, readFile: undefined });
      for (let i = 0; i < 3; i++) assert.deepEqual((await c.podDNS(pod({ dnsPolicy: 'Default' }))).servers, ['192.168.0.10', '192.168.0.11']);
      assert.equal(c.resolvConfReads, 1);
      // what a pod's config is built from is a copy: changing it does not reach the next pod
      (await c.podDNS(pod({ dnsPolicy: 'Default' }))).servers!.push('10.0.0.1');
      assert.deepEqual((await c.podDNS(pod({ dnsPolicy: 'Default' }))).servers, ['192.168.0.10', '192.168.0.11']);
      await writeFile(file, 'nameserver 10.1.1.1\n');
      assert.deepEqual((await c.podDNS(pod({ dnsPolicy: 'Default' }))).servers, ['10.1.1.1']);
      assert.equal(c.resolvConfReads, 2);
    });
  });

  it('stops one byte past the cap, and the configurer refuses the file', async () => {
    await withFile('#'.repeat(MAX_RESOLV_CONF_BYTES + 5000), async (file) => {
      assert.equal((await readResolvConfFile(file)).length, MAX_RESOLV_CONF_BYTES + 1);
      const c = configurer({ resolvConf: file, readFile: undefined });
      await assert.rejects(c.podDNS(pod({ dnsPolicy: 'Default' })), /the resolver config is larger than 10485760 bytes/);
    });
  });
});
