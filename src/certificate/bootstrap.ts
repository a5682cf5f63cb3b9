// TLS bootstrap (--bootstrap-kubeconfig), as upstream's kubelet does it before starting: when
// --kubeconfig is missing or its client certificate is unusable, a new ECDSA P-256 key and a
// CertificateSigningRequest for signer kubernetes.io/kube-apiserver-client-kubelet are sent
// with the bootstrap credentials; once approved and issued the certificate and key go to
// <certDir>/kubelet-client-<timestamp>.pem, kubelet-client-current.pem is pointed at it, and
// --kubeconfig is written to use that file.

import { X509Certificate } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { stringify } from 'yaml';
import { isAlreadyExists, loadKubeconfig, RestClient, type RestConfig } from '../client/index.js';
import { realClock, type Clock } from '../util/clock.js';
import { KubeletError } from '../util/errors.js';
import type { Logger } from '../util/log.js';
import { createCsrDer, csrPem, digestedName, newKey, type CsrSubject } from './csr.js';

export const CLIENT_SIGNER = 'kubernetes.io/kube-apiserver-client-kubelet';
/** Upstream's usages for an ECDSA client key (key encipherment only with RSA keys). */
export const CLIENT_USAGES = ['digital signature', 'client auth'];
export const CURRENT_CLIENT_PEM = 'kubelet-client-current.pem';
/** Upstream waits up to an hour for the request to be approved and issued. */
export const DEFAULT_BOOTSTRAP_TIMEOUT_MS = 3600_000;

const CSR_PATH = '/apis/certificates.k8s.io/v1/certificatesigningrequests';

export class BootstrapError extends KubeletError {
  constructor(message: string, opts?: { cause?: unknown }) {
    super('ERR_TLS_BOOTSTRAP', message, opts);
  }
}

export interface BootstrapOptions {
  kubeconfig: string;
  bootstrapKubeconfig: string;
  certDirectory: string;
  nodeName: string;
  log: Logger;
  clock?: Clock;
  timeoutMs?: number;
}

/** Why a kubeconfig's client credentials cannot be used, or undefined when they can. */
export function kubeconfigUnusable(file: string, now: number): string | undefined {
  if (!existsSync(file)) return 'it does not exist';
  let cfg: RestConfig;
  try {
    cfg = loadKubeconfig(file);
  } catch (err) {
    return (err as Error).message;
  }
  if (!cfg.certData) return undefined; // token or exec credentials: nothing to check here
  return certificateUnusable(cfg.certData, now);
}

function certificateUnusable(pem: string, now: number): string | undefined {
  try {
    const x = new X509Certificate(pem);
    if (Date.parse(x.validTo) <= now) return `its client certificate expired at ${new Date(x.validTo).toISOString()}`;
    if (Date.parse(x.validFrom) > now) return `its client certificate is not valid before ${new Date(x.validFrom).toISOString()}`;
    return undefined;
  } catch (err) {
    return `its client certificate cannot be parsed: ${(err as Error).message}`;
  }
}

/** `2006-01-02-15-04-05`, upstream's file timestamp. */
function stamp(ms: number): string {
  return new Date(ms).toISOString().slice(0, 19).replace('T', '-').replace(/:/g, '-');
}

/**
 * Writes cert+key as `<dir>/<prefix>-<timestamp>.pem` and swaps `<prefix>-current.pem` to it
 * (a new symlink renamed over the old one, so readers see the old or the new pair, never none).
 */
export function storePair(dir: string, prefix: string, certPem: string, keyPem: string, now: number): string {
  mkdirSync(dir, { recursive: true, mode: 0o755 });
  const base = `${prefix}-${stamp(now)}.pem`;
  const file = join(dir, base);
  writeFileSync(file, `${certPem.trimEnd()}\n${keyPem.trimEnd()}\n`, { mode: 0o600 });
  const current = join(dir, `${prefix}-current.pem`);
  const tmp = `${current}.updated`;
  rmSync(tmp, { force: true });
  symlinkSync(base, tmp);
  renameSync(tmp, current);
  return file;
}

/** The kubeconfig upstream writes after bootstrap: the bootstrap cluster, the current client pair. */
export function clientKubeconfig(boot: RestConfig, pemPath: string): string {
  const cluster: Record<string, unknown> = { server: boot.server };
  if (boot.caData) cluster['certificate-authority-data'] = Buffer.from(boot.caData).toString('base64');
  if (boot.insecureSkipTLSVerify) cluster['insecure-skip-tls-verify'] = true;
  if (boot.tlsServerName) cluster['tls-server-name'] = boot.tlsServerName;
  return stringify({
    apiVersion: 'v1', kind: 'Config',
    clusters: [{ cluster, name: 'default-cluster' }],
    contexts: [{ context: { cluster: 'default-cluster', namespace: 'default', user: 'default-auth' }, name: 'default-context' }],
    'current-context': 'default-context',
    preferences: {},
    users: [{ name: 'default-auth', user: { 'client-certificate': pemPath, 'client-key': pemPath } }],
  });
}

/**
 * Sends `subject`'s CSR and resolves with the issued certificate (PEM) once approved and
 * issued; rejects with upstream's wording when denied or failed, or at the deadline.
 */
export async function requestCertificate(client: RestClient, o: {
  subject: CsrSubject; signerName: string; usages: string[]; key: ReturnType<typeof newKey>;
  expirationSeconds?: number; timeoutMs: number; clock: Clock; log: Logger;
  /** A server-made name with this prefix (upstream's renewals: csr-) instead of the digested one (bootstrap). */
  generateName?: string;
  /** Ends the wait early (the kubelet stopping). */
  signal?: AbortSignal;
}): Promise<string> {
  const der = createCsrDer(o.subject, o.key.privateKey, o.key.publicKey);
  let name = digestedName(o.key.publicKey, o.subject, o.usages);
  const body = {
    apiVersion: 'certificates.k8s.io/v1', kind: 'CertificateSigningRequest', metadata: o.generateName ? { generateName: o.generateName } : { name },
    spec: {
      request: Buffer.from(csrPem(der)).toString('base64'), signerName: o.signerName, usages: o.usages,
      ...(o.expirationSeconds ? { expirationSeconds: o.expirationSeconds } : {}),
    },
  };
  try {
    const made = await client.create(CSR_PATH, body);
    if (o.generateName) name = String(made?.metadata?.name);
  } catch (err) {
    if (!isAlreadyExists(err)) throw new BootstrapError(`cannot create certificate signing request: ${(err as Error).message}`, { cause: err });
  }
  o.log.info('Waiting for the certificate to be approved and issued', { csr: name, signerName: o.signerName });
  const deadline = o.clock.now() + o.timeoutMs;
  const ac = new AbortController();
  const timer = o.clock.setTimeout(() => ac.abort(), o.timeoutMs);
  const onStop = () => ac.abort();
  o.signal?.addEventListener('abort', onStop, { once: true });
  if (o.signal?.aborted) ac.abort();
  try {
    for (;;) {
      const obj = await client.get(`${CSR_PATH}/${name}`, { signal: ac.signal });
      const done = issued(obj);
      if (done) return done;
      const res = await client.stream(CSR_PATH, {
        signal: ac.signal,
        query: { watch: 'true', fieldSelector: `metadata.name=${name}`, resourceVersion: obj.metadata.resourceVersion, timeoutSeconds: 300 },
      });
      let buf = '';
      for await (const chunk of res) {
        buf += String(chunk);
        let nl: number;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl).trim();
          buf = buf.slice(nl + 1);
          if (!line) continue;
          const ev = JSON.parse(line);
          if (ev.type === 'DELETED') throw new BootstrapError(`certificate signing request ${name} was deleted`);
          if (ev.type === 'ADDED' || ev.type === 'MODIFIED') {
            const cert = issued(ev.object);
            if (cert) {
              res.destroy();
              return cert;
            }
          }
        }
      }
      if (o.clock.now() >= deadline) break;
    }
  } catch (err) {
    if (err instanceof BootstrapError) throw err;
    if (!ac.signal.aborted) throw new BootstrapError(`cannot watch on the certificate signing request ${name}: ${(err as Error).message}`, { cause: err });
  } finally {
    timer.cancel();
    o.signal?.removeEventListener('abort', onStop);
    ac.abort();
  }
  if (o.signal?.aborted) throw new BootstrapError(`stopped while waiting for certificate signing request ${name}`);
  throw new BootstrapError(`timed out after ${Math.round(o.timeoutMs / 1000)}s waiting for certificate signing request ${name} to be approved and issued`);
}

function issued(obj: any): string | undefined {
  for (const c of obj?.status?.conditions ?? []) {
    if (c.type === 'Denied' && c.status !== 'False') throw new BootstrapError(`certificate signing request ${obj.metadata.name} is denied, reason: ${c.reason ?? ''}, message: ${c.message ?? ''}`);
    if (c.type === 'Failed' && c.status !== 'False') throw new BootstrapError(`certificate signing request ${obj.metadata.name} failed, reason: ${c.reason ?? ''}, message: ${c.message ?? ''}`);
  }
  const approved = (obj?.status?.conditions ?? []).some((c: any) => c.type === 'Approved' && c.status !== 'False');
  if (approved && obj.status.certificate) return Buffer.from(obj.status.certificate, 'base64').toString('utf8');
  return undefined;
}

/**
 * Upstream's LoadClientCert: nothing to do when --kubeconfig is usable; otherwise reuse a valid
 * kubelet-client-current.pem or get a new certificate through the bootstrap kubeconfig, then
 * write --kubeconfig. Throws BootstrapError (denied, failed, timed out, bad bootstrap kubeconfig).
 */
export async function bootstrapClientCertificate(o: BootstrapOptions): Promise<void> {
  const clock = o.clock ?? realClock;
  const why = kubeconfigUnusable(o.kubeconfig, clock.now());
  if (why === undefined) {
    o.log.info('Kubeconfig exists and is valid, skipping bootstrap', { path: o.kubeconfig });
    return;
  }
  o.log.info('Using the bootstrap kubeconfig to get a client certificate', { kubeconfig: o.kubeconfig, reason: why, bootstrapKubeconfig: o.bootstrapKubeconfig });
  let boot: RestConfig;
  try {
    boot = loadKubeconfig(o.bootstrapKubeconfig);
  } catch (err) {
    throw new BootstrapError(`--bootstrap-kubeconfig: ${(err as Error).message}`, { cause: err });
  }
  const certDir = resolve(o.certDirectory);
  const current = join(certDir, CURRENT_CLIENT_PEM);
  let pemPath: string | undefined;
  if (existsSync(current)) {
    const text = readFileSync(current, 'utf8');
    if (certificateUnusable(text, clock.now()) === undefined && /PRIVATE KEY-----/.test(text)) pemPath = current;
  }
  if (!pemPath) {
    const client = new RestClient(boot, { clock, timeoutMs: 30_000, userAgent: 'kubelet-ts' });
    const key = newKey();
    const cert = await requestCertificate(client, {
      subject: { commonName: `system:node:${o.nodeName}`, organizations: ['system:nodes'] },
      signerName: CLIENT_SIGNER, usages: CLIENT_USAGES, key, timeoutMs: o.timeoutMs ?? DEFAULT_BOOTSTRAP_TIMEOUT_MS, clock, log: o.log,
    });
    storePair(certDir, 'kubelet-client', cert, key.pem, clock.now());
    pemPath = current;
  }
  mkdirSync(dirname(resolve(o.kubeconfig)), { recursive: true });
  const tmp = `${o.kubeconfig}.tmp`;
  writeFileSync(tmp, clientKubeconfig(boot, pemPath), { mode: 0o600 });
  renameSync(tmp, o.kubeconfig);
  o.log.info('Wrote the kubeconfig with the bootstrapped client certificate', { kubeconfig: o.kubeconfig, certificate: pemPath });
}
