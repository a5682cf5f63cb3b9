// A certificate manager, as upstream's client-go certificate manager: it holds the current
// pair (<certDir>/<prefix>-current.pem, else the configured files), renews it at a jittered
// 70–90% of its lifetime with a fresh key through a CertificateSigningRequest, writes
// <prefix>-<timestamp>.pem and swaps <prefix>-current.pem atomically, and only then hands the
// new pair to its user (the API client, or the secure port). A renewal that fails (the API
// server away, a denied or failed request, a certificate that does not work) counts one renew
// error, keeps the current pair and is retried with backoff (2 s doubling, 5 tries), then every
// 32 s, as upstream.

import { X509Certificate } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RestClient } from '../client/index.js';
import { Counter, Gauge, Histogram, type Registry } from '../metrics/registry.js';
import { jitter } from '../util/backoff.js';
import { KubeletError } from '../util/errors.js';
import { realClock, type Clock, type Timer } from '../util/clock.js';
import type { Logger } from '../util/log.js';
import { requestCertificate, storePair } from './bootstrap.js';
import { newKey, type CsrSubject } from './csr.js';
import { nextRotationDeadline } from './schedule.js';

export const SERVING_SIGNER = 'kubernetes.io/kubelet-serving';
/** Upstream's serving usages for an ECDSA key (RSA keys add key encipherment). */
export const SERVING_USAGES = ['digital signature', 'server auth'];
/** Upstream's certificateWaitTimeout: how long one renewal waits for its request to be issued. */
export const CERTIFICATE_WAIT_TIMEOUT_MS = 15 * 60_000;
/** The longest single wait (node's timers take at most 2^31-1 ms); longer ones are taken in steps. */
const MAX_TIMER_MS = 3600_000;

export class CertificateError extends KubeletError {
  constructor(message: string) {
    super('ERR_CERTIFICATE', message);
  }
}

export interface CertPair {
  certPem: string;
  keyPem: string;
  notBefore: number;
  notAfter: number;
}

/** Cert and key from PEM text (both blocks in one text, or given apart). Throws on bad input. */
export function parsePair(certPem: string, keyPem: string = certPem): CertPair {
  const certs = certPem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g);
  const key = keyPem.match(/-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]+?-----END [A-Z ]*PRIVATE KEY-----/);
  if (!certs) throw new CertificateError('no PEM CERTIFICATE block');
  if (!key) throw new CertificateError('no PEM PRIVATE KEY block');
  const x = new X509Certificate(certs[0]!);
  return { certPem: `${certs.join('\n')}\n`, keyPem: `${key[0]}\n`, notBefore: Date.parse(x.validFrom), notAfter: Date.parse(x.validTo) };
}

export interface CertificateManagerOptions {
  /** 'client' or 'server', for logs. */
  name: string;
  signerName: string;
  usages: string[];
  /** The request's subject and names; undefined while there is nothing to ask for (no node addresses yet). */
  template: () => CsrSubject | undefined;
  certDirectory: string;
  /** kubelet-client or kubelet-server. */
  prefix: string;
  /** The pair used when <prefix>-current.pem is missing or unusable (the kubeconfig's, tlsCertFile's). */
  initial?: CertPair;
  /** The client that sends the request (may depend on whether the current pair still works). */
  csrClient: (current: CertPair | undefined) => RestClient;
  /** Checks that a new pair works before it is used; a throw keeps the current pair. */
  verify?: (pair: CertPair) => Promise<void>;
  /** Called with each new pair once stored. */
  onRotated: (pair: CertPair, previous: CertPair | undefined) => void;
  clock?: Clock;
  log: Logger;
  random?: () => number;
  csrTimeoutMs?: number;
  /** Retry schedule after a failed renewal (upstream: 2 s doubling, 5 tries, then every 32 s). */
  retryInitialMs?: number;
  retrySteps?: number;
  retryPollMs?: number;
  renewErrors?: Counter;
  rotationAge?: Histogram;
  /**
   * Renew early when the current certificate no longer matches the template (the node's
   * addresses changed), checked every this many ms (upstream: every second); unset: never.
   */
  templateCheckMs?: number;
}

/** One spelling per address (node prints IPv6 SANs uncompressed, upper case). */
function canonicalIp(ip: string): string {
  return ip.includes(':') ? new URL(`http://[${ip}]/`).hostname : ip;
}

/** Whether `pem`'s subject and names are what `t` asks for (upstream's certSatisfiesTemplate). */
export function certificateSatisfies(pem: string, t: CsrSubject): boolean {
  const x = new X509Certificate(pem);
  const subject = x.subject.split('\n');
  if (!subject.includes(`CN=${t.commonName}`)) return false;
  const orgs = subject.filter((l) => l.startsWith('O=')).map((l) => l.slice(2)).sort();
  if (JSON.stringify(orgs) !== JSON.stringify([...(t.organizations ?? [])].sort())) return false;
  const names = (x.subjectAltName ?? '').split(', ').filter(Boolean);
  const dns = names.filter((n) => n.startsWith('DNS:')).map((n) => n.slice(4)).sort();
  const ips = names.filter((n) => n.startsWith('IP Address:')).map((n) => canonicalIp(n.slice(11))).sort();
  const wantIps = (t.ipAddresses ?? []).map(canonicalIp).sort();
  return JSON.stringify(dns) === JSON.stringify([...(t.dnsNames ?? [])].sort()) && JSON.stringify(ips) === JSON.stringify(wantIps);
}

export class CertificateManager {
  private cur: CertPair | undefined;
  private timer: Timer | undefined;
  private wake: (() => void) | undefined;
  private stopped = true;
  private stopping = new AbortController();
  private renewedFor: string | undefined;
  private loop: Promise<void> | undefined;
  private readonly clock: Clock;

  constructor(private readonly o: CertificateManagerOptions) {
    this.clock = o.clock ?? realClock;
    this.cur = this.load() ?? o.initial;
  }

  /** The pair in use; undefined before the first is issued. */
  current(): CertPair | undefined {
    return this.cur;
  }

  /** Seconds until the current certificate expires (negative once expired); +Inf without one, as upstream. */
  ttlSeconds(): number {
    return this.cur ? (this.cur.notAfter - this.clock.now()) / 1000 : Number.POSITIVE_INFINITY;
  }

  private load(): CertPair | undefined {
    const file = join(this.o.certDirectory, `${this.o.prefix}-current.pem`);
    if (!existsSync(file)) return undefined;
    try {
      return parsePair(readFileSync(file, 'utf8'));
    } catch (err) {
      this.o.log.warn('Ignoring an unusable certificate file', { certificate: this.o.name, file, err: (err as Error).message });
      return undefined;
    }
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.stopping = new AbortController();
    this.o.log.info('Certificate rotation is enabled', { certificate: this.o.name, signerName: this.o.signerName, ...this.describe() });
    this.loop = this.run().catch((err) => this.o.log.error('Certificate rotation stopped', { certificate: this.o.name, err: (err as Error).message }));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.stopping.abort();
    this.timer?.cancel();
    this.wake?.();
    await this.loop;
  }

  private describe(): Record<string, unknown> {
    if (!this.cur) return { current: 'none' };
    return { expiration: new Date(this.cur.notAfter).toISOString() };
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      if (this.stopped) return resolve();
      this.wake = resolve;
      this.timer = this.clock.setTimeout(() => resolve(), Math.max(0, ms));
    });
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      const c = this.cur;
      const deadline = c ? nextRotationDeadline(c.notBefore, c.notAfter, this.o.random) : this.clock.now();
      if (deadline > this.clock.now()) {
        this.o.log.info('Waiting to rotate the certificate', { certificate: this.o.name, deadline: new Date(deadline).toISOString(), ...this.describe() });
        // In steps: a timer longer than 2^31-1 ms fires at once (a year's certificate is renewed after ~9 months).
        const step = this.o.templateCheckMs ?? MAX_TIMER_MS;
        while (!this.stopped && this.clock.now() < deadline && !this.templateChanged()) await this.sleep(Math.min(deadline - this.clock.now(), step));
        if (this.stopped) return;
      }
      let delay = this.o.retryInitialMs ?? 2_000;
      let ok = false;
      for (let i = 0; i < (this.o.retrySteps ?? 5) && !this.stopped; i++) {
        if ((ok = await this.rotate())) break;
        await this.sleep(jitter(delay, 0.1, this.o.random));
        delay *= 2;
      }
      if (!ok && !this.stopped) {
        this.o.log.error('Reached backoff limit, still unable to rotate certs', { certificate: this.o.name });
        while (!this.stopped && !(ok = await this.rotate())) await this.sleep(this.o.retryPollMs ?? 32_000);
      }
    }
  }

  private templateChanged(): boolean {
    if (this.o.templateCheckMs === undefined || !this.cur) return false;
    const t = this.o.template();
    if (!t || certificateSatisfies(this.cur.certPem, t)) return false;
    // Once per template: a signer that leaves out some names must not cause a renewal every second.
    const key = JSON.stringify(t);
    if (this.renewedFor === key) return false;
    this.renewedFor = key;
    this.o.log.info('Certificate template changed, rotating', { certificate: this.o.name });
    return true;
  }

  /** One renewal: true when a new pair was issued, checked, stored and handed over. */
  async rotate(): Promise<boolean> {
    const subject = this.o.template();
    if (!subject) {
      this.o.log.v(2).info('No certificate template yet (no node addresses); will retry', { certificate: this.o.name });
      return false;
    }
    const previous = this.cur;
    const key = newKey();
    let pair: CertPair;
    try {
      const pem = await requestCertificate(this.o.csrClient(previous), {
        subject, signerName: this.o.signerName, usages: this.o.usages, key, generateName: 'csr-', signal: this.stopping.signal,
        timeoutMs: this.o.csrTimeoutMs ?? CERTIFICATE_WAIT_TIMEOUT_MS, clock: this.clock, log: this.o.log,
      });
      pair = parsePair(pem, key.pem);
    } catch (err) {
      if (this.stopped) return false;
      this.o.renewErrors?.inc();
      this.o.log.error('Failed while requesting a signed certificate from the control plane', { certificate: this.o.name, err: (err as Error).message });
      return false;
    }
    if (this.o.verify) {
      try {
        await this.o.verify(pair);
      } catch (err) {
        this.o.renewErrors?.inc();
        this.o.log.error('The new certificate does not work; keeping the current one', { certificate: this.o.name, err: (err as Error).message });
        return false;
      }
    }
    let file: string;
    try {
      file = storePair(this.o.certDirectory, this.o.prefix, pair.certPem, pair.keyPem, this.clock.now());
    } catch (err) {
      this.o.renewErrors?.inc();
      this.o.log.error('Cannot store the new certificate; keeping the current one', { certificate: this.o.name, err: (err as Error).message });
      return false;
    }
    this.cur = pair;
    if (previous) this.o.rotationAge?.observe((this.clock.now() - previous.notBefore) / 1000);
    this.o.log.info('Rotated the certificate', { certificate: this.o.name, file, expiration: new Date(pair.notAfter).toISOString() });
    this.o.onRotated(pair, previous);
    return true;
  }
}

/** Upstream's client certificate families (kubelet_certificate_manager_client_*). */
export function clientCertificateMetrics(): { renewErrors: Counter; register: (r: Registry, m: CertificateManager) => void } {
  const renewErrors = new Counter({ name: 'kubelet_certificate_manager_client_expiration_renew_errors', help: 'Counter of certificate renewal errors.' });
  return {
    renewErrors,
    register(r, m) {
      r.register(renewErrors);
      r.register(new Gauge({
        name: 'kubelet_certificate_manager_client_ttl_seconds',
        help: 'Gauge of the TTL (time-to-live) of the Kubelet\'s client certificate. The value is in seconds until certificate expiry (negative if already expired). If client certificate is invalid or unused, the value will be +INF.',
        collect: () => m.ttlSeconds(),
      }));
    },
  };
}

/** Upstream's serving certificate families (kubelet_server_expiration_renew_errors, kubelet_certificate_manager_server_*). */
export function serverCertificateMetrics(): { renewErrors: Counter; rotationAge: Histogram; register: (r: Registry, m: CertificateManager) => void } {
  const renewErrors = new Counter({ name: 'kubelet_server_expiration_renew_errors', help: 'Counter of certificate renewal errors.' });
  const rotationAge = new Histogram({
    name: 'kubelet_certificate_manager_server_rotation_seconds',
    help: 'Histogram of the number of seconds the previous certificate lived before being rotated.',
    // 1 minute, 1 hour, 4 hours, 1 day, 1 week, 1 month, 3 months, 6 months, 1 year, 4 years
    buckets: [60, 3600, 14400, 86400, 604800, 2592000, 7776000, 15552000, 31104000, 124416000],
  });
  return {
    renewErrors,
    rotationAge,
    register(r, m) {
      r.register(renewErrors);
      r.register(rotationAge);
      r.register(new Gauge({
        name: 'kubelet_certificate_manager_server_ttl_seconds',
        help: 'Gauge of the shortest TTL (time-to-live) of the Kubelet\'s serving certificate. The value is in seconds until certificate expiry (negative if already expired). If serving certificate is invalid or unused, the value will be +INF.',
        collect: () => m.ttlSeconds(),
      }));
    },
  };
}
