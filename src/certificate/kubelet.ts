// The kubelet's two certificate managers, as upstream builds them: the client certificate
// (rotateCertificates: signer kubernetes.io/kube-apiserver-client-kubelet, kubelet-client-*.pem,
// every API connection switched to the new pair) and the serving certificate (serverTLSBootstrap
// with the RotateKubeletServerCertificate gate: signer kubernetes.io/kubelet-serving for the
// node's host names and addresses, kubelet-server-*.pem, the secure port's context swapped).

import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { ApiStatusError, loadKubeconfig, RestClient } from '../client/index.js';
import type { KubeletConfig } from '../config/index.js';
import type { Registry } from '../metrics/registry.js';
import type { NodeAddress } from '../nodestatus/types.js';
import { realClock, type Clock } from '../util/clock.js';
import type { Logger } from '../util/log.js';
import { CLIENT_SIGNER, CLIENT_USAGES } from './bootstrap.js';
import type { CsrSubject } from './csr.js';
import {
  CertificateManager, clientCertificateMetrics, parsePair, serverCertificateMetrics, SERVING_SIGNER, SERVING_USAGES,
  type CertificateManagerOptions, type CertPair,
} from './manager.js';

/** Test knobs: retry schedule and CSR wait (the defaults are upstream's). */
export type RetryTuning = Pick<CertificateManagerOptions, 'retryInitialMs' | 'retrySteps' | 'retryPollMs' | 'csrTimeoutMs'>;

/** serverTLSBootstrap is acted on only with the RotateKubeletServerCertificate gate (default true), as upstream. */
export function serverTLSBootstrapEnabled(config: Pick<KubeletConfig, 'serverTLSBootstrap' | 'featureGates'>): boolean {
  return config.serverTLSBootstrap && (config.featureGates.RotateKubeletServerCertificate ?? true);
}

export interface KubeletCertificates {
  manager: CertificateManager;
  registerMetrics(r: Registry): void;
}

/**
 * rotateCertificates: a manager of the API client's certificate (kubelet-client-current.pem
 * first, else the kubeconfig's pair). Its requests go with the current certificate while it is
 * valid, else with the bootstrap kubeconfig's credentials when there is one. A new pair is tried
 * on one request before the API client switches to it (and drops its connections, so watches
 * come back with it). Undefined when the kubeconfig has no client certificate.
 */
export function clientCertificates(o: {
  apiClient: RestClient; nodeName: string; certDirectory: string; bootstrapKubeconfig?: string;
  log: Logger; clock?: Clock; tuning?: RetryTuning;
}): KubeletCertificates | undefined {
  const rest = o.apiClient.config;
  if (!rest.certData || !rest.keyData) {
    o.log.warn('rotateCertificates: the kubeconfig authenticates without a client certificate; there is nothing to rotate', { kubeconfig: rest.source });
    return undefined;
  }
  const clock = o.clock ?? realClock;
  let bootstrap: RestClient | undefined;
  const metrics = clientCertificateMetrics();
  const manager: CertificateManager = new CertificateManager({
    name: 'client', signerName: CLIENT_SIGNER, usages: CLIENT_USAGES, certDirectory: o.certDirectory, prefix: 'kubelet-client',
    template: () => ({ commonName: `system:node:${o.nodeName}`, organizations: ['system:nodes'] }),
    initial: parsePair(rest.certData, rest.keyData),
    csrClient: (current) => {
      if ((current && current.notAfter > clock.now()) || !o.bootstrapKubeconfig) return o.apiClient;
      bootstrap ??= new RestClient(loadKubeconfig(o.bootstrapKubeconfig), { clock, timeoutMs: 30_000, userAgent: 'kubelet-ts' });
      return bootstrap;
    },
    verify: async (pair) => {
      const probe = new RestClient({ ...rest, certData: pair.certPem, keyData: pair.keyPem }, { clock, timeoutMs: 30_000, maxRetries: 0, userAgent: 'kubelet-ts' });
      try {
        await probe.get(`/api/v1/nodes/${encodeURIComponent(o.nodeName)}`);
      } catch (err) {
        // Authenticated is what is checked: anything but 401 shows the certificate is accepted.
        if (!(err instanceof ApiStatusError) || err.httpCode === 401) throw err;
      } finally {
        probe.close();
      }
    },
    onRotated: (pair) => o.apiClient.setClientCertificate(pair.certPem, pair.keyPem),
    clock, log: o.log, renewErrors: metrics.renewErrors, ...o.tuning,
  });
  const cur = manager.current();
  if (cur && cur.certPem !== rest.certData) {
    o.log.info('Using the rotated client certificate', { file: `${o.certDirectory}/kubelet-client-current.pem`, expiration: new Date(cur.notAfter).toISOString() });
    o.apiClient.setClientCertificate(cur.certPem, cur.keyPem);
  }
  return { manager, registerMetrics: (r) => metrics.register(r, manager) };
}

/** Upstream's addressesToHostnamesAndIPs: DNS names from Hostname/*DNS addresses, IPs from *IP ones, deduplicated. */
export function servingSubject(nodeName: string, addresses: NodeAddress[]): CsrSubject | undefined {
  const dnsNames: string[] = [];
  const ipAddresses: string[] = [];
  for (const a of addresses) {
    if (!a.address) continue;
    if (a.type === 'Hostname' || a.type === 'ExternalDNS' || a.type === 'InternalDNS') {
      if (!dnsNames.includes(a.address)) dnsNames.push(a.address);
    } else if ((a.type === 'InternalIP' || a.type === 'ExternalIP') && isIP(a.address) && !ipAddresses.includes(a.address)) {
      ipAddresses.push(a.address);
    }
  }
  if (dnsNames.length === 0 && ipAddresses.length === 0) return undefined;
  return { commonName: `system:node:${nodeName}`, organizations: ['system:nodes'], dnsNames, ipAddresses };
}

export interface ServingCertificates extends KubeletCertificates {
  /** Calls `apply` with the current pair (if any) and with each new one. */
  updates(apply: (pair: CertPair) => void): void;
}

/** serverTLSBootstrap: the serving certificate's manager (kubelet-server-current.pem, else tlsCertFile's pair). */
export function servingCertificates(o: {
  config: Pick<KubeletConfig, 'tlsCertFile' | 'tlsPrivateKeyFile'>; apiClient: RestClient; nodeName: string; certDirectory: string;
  addresses: () => NodeAddress[]; log: Logger; clock?: Clock; tuning?: RetryTuning;
}): ServingCertificates {
  const listeners: Array<(p: CertPair) => void> = [];
  const metrics = serverCertificateMetrics();
  let initial: CertPair | undefined;
  if (o.config.tlsCertFile !== '') {
    try {
      initial = parsePair(readFileSync(o.config.tlsCertFile, 'utf8'), readFileSync(o.config.tlsPrivateKeyFile, 'utf8'));
    } catch (err) {
      o.log.warn('Cannot use tlsCertFile as the first serving certificate', { file: o.config.tlsCertFile, err: (err as Error).message });
    }
  }
  const manager = new CertificateManager({
    name: 'server', signerName: SERVING_SIGNER, usages: SERVING_USAGES, certDirectory: o.certDirectory, prefix: 'kubelet-server',
    template: () => servingSubject(o.nodeName, o.addresses()),
    initial, csrClient: () => o.apiClient, templateCheckMs: 1000,
    onRotated: (pair) => { for (const l of listeners) l(pair); },
    clock: o.clock, log: o.log, renewErrors: metrics.renewErrors, rotationAge: metrics.rotationAge, ...o.tuning,
  });
  return {
    manager,
    registerMetrics: (r) => metrics.register(r, manager),
    updates(apply) {
      listeners.push(apply);
      const cur = manager.current();
      if (cur) apply(cur);
    },
  };
}

/**
 * Why the API client cannot start: its client certificate has expired (or is not valid yet) and
 * there is no bootstrap kubeconfig to get a new one. Undefined when it can.
 */
export function clientCertificateProblem(apiClient: RestClient, hasBootstrap: boolean, now: number): string | undefined {
  const rest = apiClient.config;
  if (!rest.certData || hasBootstrap) return undefined;
  let pair: CertPair;
  try {
    pair = parsePair(rest.certData, rest.keyData ?? rest.certData);
  } catch (err) {
    return `the client certificate of ${rest.source} cannot be read: ${(err as Error).message}`;
  }
  if (pair.notAfter <= now) return `the client certificate of ${rest.source} expired at ${new Date(pair.notAfter).toISOString()}, and there is no --bootstrap-kubeconfig to request a new one with`;
  if (pair.notBefore > now) return `the client certificate of ${rest.source} is not valid before ${new Date(pair.notBefore).toISOString()}`;
  return undefined;
}
