import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { stringify } from 'yaml';
import { ExecCredentialError, KubeconfigError, isApiStatus } from '../../src/client/errors.js';
import { loadKubeconfig, parseKubeconfig } from '../../src/client/kubeconfig.js';
import { RestClient } from '../../src/client/rest.js';
import { FakeClock } from '../../src/util/clock.js';
import { TestApiServer } from '../fixtures/test-apiserver/server.js';

const b64 = (s: string) => Buffer.from(s).toString('base64');

function config(cluster: Record<string, unknown>, user: Record<string, unknown> | undefined, extra: Record<string, unknown> = {}): string {
  return stringify({
    apiVersion: 'v1', kind: 'Config',
    clusters: [{ name: 'c', cluster }],
    users: user ? [{ name: 'u', user }] : [],
    contexts: [{ name: 'ctx', context: { cluster: 'c', ...(user ? { user: 'u' } : {}) } }],
    'current-context': 'ctx',
    ...extra,
  });
}

describe('kubeconfig against the test API server (TLS)', () => {
  let api: TestApiServer;
  let dir: string;
  before(async () => {
    api = new TestApiServer({ tls: true });
    await api.start();
    dir = mkdtempSync(join(tmpdir(), 'kts-kubeconfig-'));
  });
  after(async () => {
    await api.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const lastUser = () => api.requests.at(-1)?.user;

  it('authenticates with a bearer token (embedded CA)', async () => {
    const file = join(dir, 'token.kubeconfig');
    writeFileSync(file, api.kubeconfigFor('alice', ['devs']));
    const c = new RestClient(loadKubeconfig(file));
    const ns = await c.get('/api/v1/namespaces/default');
    assert.equal(ns.metadata.name, 'default');
    assert.equal(lastUser(), 'alice');
    c.close();
  });

  it('authenticates with a client certificate (embedded data)', async () => {
    const file = join(dir, 'cert.kubeconfig');
    writeFileSync(file, api.kubeconfigFor('system:node:n1', ['system:nodes'], 'cert'));
    const cfg = loadKubeconfig(file);
    assert.ok(cfg.certData && cfg.keyData && !cfg.token);
    const c = new RestClient(cfg);
    await c.get('/api/v1/nodes');
    assert.equal(lastUser(), 'system:node:n1');
    c.close();
  });

  it('reads certificate-authority, client-certificate, client-key and tokenFile relative to the kubeconfig', async () => {
    const kp = api.issueClientCert('bob');
    writeFileSync(join(dir, 'ca.crt'), api.ca!.cert);
    writeFileSync(join(dir, 'bob.crt'), kp.cert);
    writeFileSync(join(dir, 'bob.key'), kp.key);
    const file = join(dir, 'files.kubeconfig');
    writeFileSync(file, config({ server: api.url, 'certificate-authority': 'ca.crt' }, { 'client-certificate': 'bob.crt', 'client-key': 'bob.key' }));
    const c = new RestClient(loadKubeconfig(file));
    await c.get('/api/v1/nodes');
    assert.equal(lastUser(), 'bob');
    c.close();

    api.addToken('carol-token', 'carol');
    writeFileSync(join(dir, 'carol.token'), 'carol-token\n');
    const tf = join(dir, 'tokenfile.kubeconfig');
    writeFileSync(tf, config({ server: api.url, 'certificate-authority': 'ca.crt' }, { tokenFile: 'carol.token' }));
    const cfg = loadKubeconfig(tf);
    assert.equal(cfg.tokenFile, join(dir, 'carol.token'));
    const c2 = new RestClient(cfg);
    await c2.get('/api/v1/nodes');
    assert.equal(lastUser(), 'carol');
    c2.close();
  });

  it('refuses an unknown CA, and skips verification only when insecure-skip-tls-verify says so', async () => {
    api.addToken('dave-token', 'dave');
    const strict = new RestClient(parseKubeconfig(config({ server: api.url }, { token: 'dave-token' }), 'strict.kubeconfig'), { maxRetries: 0 });
    await assert.rejects(strict.get('/api/v1/nodes'), (e: any) => e.code === 'ERR_API_CONNECTION');
    strict.close();
    const loose = new RestClient(parseKubeconfig(config({ server: api.url, 'insecure-skip-tls-verify': true }, { token: 'dave-token' }), 'loose.kubeconfig'));
    await loose.get('/api/v1/nodes');
    assert.equal(lastUser(), 'dave');
    loose.close();
  });

  it('answers a wrong token with an Unauthorized error', async () => {
    const c = new RestClient(parseKubeconfig(config({ server: api.url, 'certificate-authority-data': b64(api.ca!.cert) }, { token: 'wrong' }), 'bad.kubeconfig'));
    await assert.rejects(c.get('/api/v1/nodes'), (e: any) => isApiStatus(e, 'Unauthorized') && e.httpCode === 401);
    c.close();
  });

  describe('exec credential plugins', () => {
    // A plugin as a tiny node script: counts its runs, records the ExecCredential it was given.
    function plugin(name: string, body: string): string {
      const script = join(dir, `${name}.mjs`);
      writeFileSync(script, `import { appendFileSync } from 'node:fs';\n` +
        `const info = JSON.parse(process.env.KUBERNETES_EXEC_INFO);\n` +
        `appendFileSync(${JSON.stringify(join(dir, `${name}.runs`))}, JSON.stringify(info) + '\\n');\n${body}\n`);
      chmodSync(script, 0o755);
      return script;
    }
    const runs = (name: string) => readFileSync(join(dir, `${name}.runs`), 'utf8').trim().split('\n').map((l) => JSON.parse(l));

    it('v1 token plugin: cached until expirationTimestamp, run again after it', async () => {
      api.addToken('exec-token', 'exec-user');
      const clock = new FakeClock(Date.parse('2026-01-01T00:00:00Z'));
      const script = plugin('tok', `console.log(JSON.stringify({ apiVersion: info.apiVersion, kind: 'ExecCredential', status: { token: 'exec-token', expirationTimestamp: '2026-01-01T00:10:00Z' } }));`);
      const file = join(dir, 'exec.kubeconfig');
      writeFileSync(file, config({ server: api.url, 'certificate-authority-data': b64(api.ca!.cert) }, {
        exec: { apiVersion: 'client.authentication.k8s.io/v1', command: process.execPath, args: [script], interactiveMode: 'Never', provideClusterInfo: true, env: [{ name: 'X', value: 'y' }] },
      }));
      const c = new RestClient(loadKubeconfig(file), { clock });
      await c.get('/api/v1/nodes');
      await c.get('/api/v1/nodes');
      assert.equal(lastUser(), 'exec-user');
      assert.equal(runs('tok').length, 1);
      const info = runs('tok')[0];
      assert.deepEqual([info.kind, info.apiVersion, info.spec.interactive, info.spec.cluster.server], ['ExecCredential', 'client.authentication.k8s.io/v1', false, api.url]);
      assert.match(Buffer.from(info.spec.cluster['certificate-authority-data'], 'base64').toString(), /BEGIN CERTIFICATE/);
      clock.step(10 * 60_000);
      await c.get('/api/v1/nodes');
      assert.equal(runs('tok').length, 2);
      c.close();
    });

    it('v1beta1 plugin answering a client certificate', async () => {
      const kp = api.issueClientCert('exec-cert-user');
      const script = plugin('cert', `console.log(JSON.stringify({ apiVersion: 'client.authentication.k8s.io/v1beta1', kind: 'ExecCredential', status: { clientCertificateData: ${JSON.stringify(kp.cert)}, clientKeyData: ${JSON.stringify(kp.key)} } }));`);
      const cfg = parseKubeconfig(config({ server: api.url, 'certificate-authority-data': b64(api.ca!.cert) }, {
        exec: { apiVersion: 'client.authentication.k8s.io/v1beta1', command: process.execPath, args: [script] },
      }), join(dir, 'beta.kubeconfig'));
      assert.equal(cfg.exec?.interactiveMode, 'IfAvailable');
      const c = new RestClient(cfg);
      await c.get('/api/v1/nodes');
      assert.equal(lastUser(), 'exec-cert-user');
      assert.equal(runs('cert')[0].spec.cluster, undefined);
      c.close();
    });

    it('asks the plugin again after a 401 (a revoked token)', async () => {
      const script = plugin('rot', `import { readFileSync } from 'node:fs';\nconst n = readFileSync(${JSON.stringify(join(dir, 'rot.runs'))}, 'utf8').trim().split('\\n').length;\n` +
        `console.log(JSON.stringify({ apiVersion: info.apiVersion, kind: 'ExecCredential', status: { token: 'rot-' + n } }));`);
      api.addToken('rot-2', 'rotated');
      const c = new RestClient(parseKubeconfig(config({ server: api.url, 'certificate-authority-data': b64(api.ca!.cert) }, {
        exec: { apiVersion: 'client.authentication.k8s.io/v1', command: process.execPath, args: [script], interactiveMode: 'Never' },
      }), 'rot.kubeconfig'));
      await c.get('/api/v1/nodes');
      assert.equal(lastUser(), 'rotated');
      assert.equal(runs('rot').length, 2);
      c.close();
    });

    it('names the plugin and its stderr when it fails, and rejects a wrong answer', async () => {
      const failing = plugin('fail', `console.error('no credentials for you'); process.exit(3);`);
      const c = new RestClient(parseKubeconfig(config({ server: api.url, 'certificate-authority-data': b64(api.ca!.cert) }, {
        exec: { apiVersion: 'client.authentication.k8s.io/v1', command: process.execPath, args: [failing], interactiveMode: 'Never' },
      }), 'fail.kubeconfig'));
      await assert.rejects(c.get('/api/v1/nodes'), (e: any) => e instanceof ExecCredentialError && /exited with 3: no credentials for you/.test(e.message));
      const wrong = plugin('wrong', `console.log(JSON.stringify({ apiVersion: 'client.authentication.k8s.io/v1beta1', kind: 'ExecCredential', status: { token: 't' } }));`);
      const c2 = new RestClient(parseKubeconfig(config({ server: api.url, 'certificate-authority-data': b64(api.ca!.cert) }, {
        exec: { apiVersion: 'client.authentication.k8s.io/v1', command: process.execPath, args: [wrong], interactiveMode: 'Never' },
      }), 'wrong.kubeconfig'));
      await assert.rejects(c2.get('/api/v1/nodes'), /answered apiVersion "client.authentication.k8s.io\/v1beta1", the kubeconfig asked for client.authentication.k8s.io\/v1/);
      const missing = new RestClient(parseKubeconfig(config({ server: api.url }, {
        exec: { apiVersion: 'client.authentication.k8s.io/v1', command: join(dir, 'no-such-plugin'), interactiveMode: 'Never', installHint: 'install it from the vendor' },
      }), 'missing.kubeconfig'));
      await assert.rejects(missing.get('/api/v1/nodes'), /cannot run: ENOENT; install it from the vendor/);
      for (const x of [c, c2, missing]) x.close();
    });
  });
});

describe('kubeconfig: malformed and unsupported files are named by file and field', () => {
  const server = 'https://127.0.0.1:6443';
  const bad = (text: string, code: string, field: RegExp | undefined, msg: RegExp) => {
    assert.throws(() => parseKubeconfig(text, '/etc/kubernetes/kubelet.conf'), (e: any) => {
      assert.ok(e instanceof KubeconfigError, String(e));
      assert.equal(e.code, code);
      assert.ok(e.message.startsWith('kubeconfig /etc/kubernetes/kubelet.conf'), e.message);
      if (field) assert.match(e.field ?? '', field);
      assert.match(e.message, msg);
      return true;
    });
  };

  it('not YAML, not a map, wrong kind', () => {
    bad('clusters: [\n', 'ERR_KUBECONFIG', undefined, /not valid YAML/);
    bad('', 'ERR_KUBECONFIG', undefined, /is not a map/);
    bad(stringify({ kind: 'Pod' }), 'ERR_KUBECONFIG', /^kind$/, /must be Config/);
  });

  it('missing current-context, an undefined context, cluster or user', () => {
    bad(config({ server }, undefined, { 'current-context': '' }), 'ERR_KUBECONFIG', /current-context/, /not set/);
    bad(config({ server }, undefined, { 'current-context': 'nope' }), 'ERR_KUBECONFIG', /current-context/, /context "nope" is not defined in contexts/);
    bad(config({ server }, undefined, { contexts: [{ name: 'ctx', context: { cluster: 'other', user: 'u' } }] }), 'ERR_KUBECONFIG', /contexts\[name=ctx\]\.context\.cluster/, /cluster "other" is not defined/);
    bad(config({ server }, undefined, { contexts: [{ name: 'ctx', context: { cluster: 'c', user: 'ghost' } }] }), 'ERR_KUBECONFIG', /context\.user/, /user "ghost" is not defined/);
  });

  it('server, base64 data, certificate without key, PEM content, field types', () => {
    bad(config({}, undefined), 'ERR_KUBECONFIG', /clusters\[name=c\]\.cluster\.server/, /is required/);
    bad(config({ server: 'ftp://x' }, undefined), 'ERR_KUBECONFIG', /server/, /scheme ftp: is not http or https/);
    bad(config({ server, 'certificate-authority-data': '-----BEGIN CERTIFICATE-----' }, undefined), 'ERR_KUBECONFIG', /certificate-authority-data/, /not valid base64/);
    bad(config({ server, 'certificate-authority-data': b64('hello') }, undefined), 'ERR_KUBECONFIG', /certificate-authority-data/, /holds no PEM certificate/);
    bad(config({ server }, { 'client-certificate-data': b64('-----BEGIN CERTIFICATE-----\n') }), 'ERR_KUBECONFIG', /users\[name=u\]\.user\.client-key/, /needs both certificate and key/);
    bad(config({ server }, { 'client-certificate': '/nonexistent/c.crt', 'client-key': '/nonexistent/c.key' }), 'ERR_KUBECONFIG', /client-certificate/, /cannot read \/nonexistent\/c.crt: ENOENT/);
    bad(config({ server, 'insecure-skip-tls-verify': 'yes' }, undefined), 'ERR_KUBECONFIG', /insecure-skip-tls-verify/, /true or false/);
    bad(config({ server }, { token: 5 }), 'ERR_KUBECONFIG', /user\.token/, /must be a string/);
    bad(config({ server }, { tokne: 'x' }), 'ERR_KUBECONFIG', /user\.tokne/, /not a known field/);
  });

  it('auth-provider, impersonation, proxy-url and old exec versions: not implemented, by name', () => {
    bad(config({ server }, { 'auth-provider': { name: 'gcp', config: {} } }), 'ERR_KUBECONFIG_NOT_IMPLEMENTED', /auth-provider/, /auth provider "gcp" is not implemented/);
    bad(config({ server }, { as: 'admin' }), 'ERR_KUBECONFIG_NOT_IMPLEMENTED', /user\.as$/, /impersonation/);
    bad(config({ server, 'proxy-url': 'http://proxy:3128' }, undefined), 'ERR_KUBECONFIG_NOT_IMPLEMENTED', /proxy-url/, /not implemented/);
    bad(config({ server }, { exec: { apiVersion: 'client.authentication.k8s.io/v1alpha1', command: 'x' } }), 'ERR_KUBECONFIG_NOT_IMPLEMENTED', /exec\.apiVersion/, /v1alpha1" is not supported/);
    bad(config({ server }, { exec: { apiVersion: 'client.authentication.k8s.io/v1', command: 'x' } }), 'ERR_KUBECONFIG', /exec\.interactiveMode/, /is required/);
    bad(config({ server }, { exec: { apiVersion: 'client.authentication.k8s.io/v1', command: 'x', interactiveMode: 'Always' } }), 'ERR_KUBECONFIG', /exec\.interactiveMode/, /needs a terminal/);
    bad(config({ server }, { exec: { apiVersion: 'client.authentication.k8s.io/v1', interactiveMode: 'Never' } }), 'ERR_KUBECONFIG', /exec\.command/, /is required/);
  });

  it('a missing file is named', () => {
    assert.throws(() => loadKubeconfig('/nonexistent/kubelet.conf'), /kubeconfig \/nonexistent\/kubelet.conf: cannot read: ENOENT/);
  });

  it('picks the named context over current-context, and keeps its namespace', () => {
    const text = stringify({
      clusters: [{ name: 'a', cluster: { server: 'https://a:6443/' } }, { name: 'b', cluster: { server: 'http://b:8080' } }],
      users: [{ name: 'u', user: { token: 't' } }],
      contexts: [{ name: 'one', context: { cluster: 'a', user: 'u' } }, { name: 'two', context: { cluster: 'b', user: 'u', namespace: 'kube-system' } }],
      'current-context': 'one',
    });
    assert.equal(parseKubeconfig(text, 'k').server, 'https://a:6443');
    const exec = (command: string) => parseKubeconfig(config({ server: 'https://a' }, { exec: { apiVersion: 'client.authentication.k8s.io/v1', command, interactiveMode: 'Never' } }), '/etc/kubernetes/kubelet.conf').exec?.command;
    assert.deepEqual([exec('./bin/plugin'), exec('plugin'), exec('/opt/plugin')], ['/etc/kubernetes/bin/plugin', 'plugin', '/opt/plugin']);
    const two = parseKubeconfig(text, 'k', { context: 'two' });
    assert.deepEqual([two.server, two.namespace, two.token], ['http://b:8080', 'kube-system', 't']);
  });
});
