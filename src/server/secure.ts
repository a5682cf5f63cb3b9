// Assembling the secure port (10250): its TLS, its gate (authentication and authorization from
// the config, the webhooks through the kubelet's API client) and its routes as upstream installs
// them. The streaming routes (/containerLogs/, /exec/, /attach/, /portForward/, /run/) come from
// their own modules through `streaming`; with enableDebuggingHandlers off, those and the other
// debugging paths answer 405 "Debug endpoints are disabled." as upstream.

import type { Pod } from '../api/types.js';
import type { KubeletConfig } from '../config/index.js';
import type { RestClient } from '../client/rest.js';
import type { Clock } from '../util/clock.js';
import { setVerbosity, type Logger } from '../util/log.js';
import { alwaysAllow, apiAccessReviewer, webhookAuthorizer, type Authorizer } from './auth/authz.js';
import { apiTokenReviewer, unionAuthenticator, webhookTokenAuthenticator, x509Authenticator, type AuthenticatorMethod } from './auth/authn.js';
import { KubeletGate } from './auth/gate.js';
import { ServerAuthConfigError } from './errors.js';
import { cadvisorHandler, configzHandler, debugFlagsVerbosityHandler, profilingHandlers, runningPodsHandler, systemLogsHandler, type CadvisorSource } from './kubelet-handlers.js';
import { metricsHandler, withMethods, type Handler, type SecureServing } from './server.js';
import { servingTLS } from './tls.js';

/** What the gate needs of the API server: create (POST) of a review. */
export type ReviewClient = Pick<RestClient, 'create'>;

export interface GateInput {
  config: Pick<KubeletConfig, 'authentication' | 'authorization' | 'featureGates'>;
  nodeName: string;
  apiClient?: ReviewClient;
  clock: Clock;
  log: Logger;
}

/** The gate upstream's BuildAuth makes; webhooks without an API client are a config error. */
export function buildGate(input: GateInput): KubeletGate {
  const { config, apiClient, clock } = input;
  const methods: AuthenticatorMethod[] = [];
  if (config.authentication.x509.clientCAFile !== '') methods.push(x509Authenticator(config.authentication.x509.clientCAFile));
  if (config.authentication.webhook.enabled) {
    if (!apiClient) throw new ServerAuthConfigError('authentication.webhook.enabled', 'no API client (--kubeconfig) to send TokenReviews with');
    methods.push(webhookTokenAuthenticator(apiTokenReviewer(apiClient), clock, config.authentication.webhook.cacheTTL));
  }
  let authorizer: Authorizer;
  switch (config.authorization.mode) {
    case 'AlwaysAllow':
      authorizer = alwaysAllow;
      break;
    case 'Webhook':
      if (!apiClient) throw new ServerAuthConfigError('authorization.mode', 'Webhook needs an API client (--kubeconfig) to send SubjectAccessReviews with');
      authorizer = webhookAuthorizer(apiAccessReviewer(apiClient), clock, {
        authorizedMs: config.authorization.webhook.cacheAuthorizedTTL,
        unauthorizedMs: config.authorization.webhook.cacheUnauthorizedTTL,
      });
      break;
    default:
      throw new ServerAuthConfigError('authorization.mode', `unknown mode ${JSON.stringify(config.authorization.mode)}`);
  }
  return new KubeletGate({
    nodeName: input.nodeName,
    authenticator: unionAuthenticator(methods, config.authentication.anonymous.enabled),
    authorizer,
    fineGrained: config.featureGates.KubeletFineGrainedAuthz ?? true,
    log: input.log,
  });
}

export interface SecureRoutesInput {
  config: Pick<KubeletConfig, 'enableDebuggingHandlers' | 'enableSystemLogHandler' | 'enableProfilingHandler' | 'enableDebugFlagsHandler'> & KubeletConfig;
  clock: Clock;
  /** /stats/summary and /metrics/resource (src/stats/routes.ts). */
  statsRoutes: Map<string, Handler>;
  metrics: { metricsText(): string };
  probeMetrics?: { metricsText(): string };
  cadvisor: CadvisorSource;
  runningPods: () => Pod[] | Promise<Pod[]>;
  /** Handler modules for /containerLogs/, /exec/, /attach/, /portForward/, /run/. */
  streaming?: Map<string, Handler>;
  /** Where /logs/ reads (default /var/log). */
  systemLogRoot?: string;
}

const DEBUGGING_PATHS = ['/run/', '/exec/', '/attach/', '/portForward/', '/containerLogs/', '/runningpods/', '/debug/pprof/', '/logs/'];

export function secureRoutes(input: SecureRoutesInput): Map<string, Handler> {
  const { config } = input;
  const routes = new Map<string, Handler>(input.statsRoutes);
  routes.set('/metrics', metricsHandler(input.metrics));
  if (input.probeMetrics) routes.set('/metrics/probes', metricsHandler(input.probeMetrics));
  routes.set('/metrics/cadvisor', cadvisorHandler(input.cadvisor, input.clock));
  routes.set('/configz', configzHandler(config));
  if (!config.enableDebuggingHandlers) {
    const disabled = withMethods('any', (_req, res) => {
      const body = 'Debug endpoints are disabled.\n';
      res.writeHead(405, { 'Content-Type': 'text/plain; charset=utf-8', 'X-Content-Type-Options': 'nosniff', 'Content-Length': Buffer.byteLength(body) });
      res.end(body);
    });
    for (const p of DEBUGGING_PATHS) routes.set(p, disabled);
    return routes;
  }
  routes.set('/runningpods/', runningPodsHandler(input.runningPods));
  for (const [p, h] of input.streaming ?? []) routes.set(p, h);
  if (config.enableSystemLogHandler) routes.set('/logs/', systemLogsHandler(input.systemLogRoot));
  if (config.enableProfilingHandler) for (const [p, h] of profilingHandlers(input.clock)) routes.set(p, h);
  if (config.enableDebugFlagsHandler) routes.set('/debug/flags/v', debugFlagsVerbosityHandler(setVerbosity));
  return routes;
}

export interface SecureServingInput extends SecureRoutesInput, GateInput {
  config: KubeletConfig;
  certDirectory: string;
  hostname: string;
  /** serverTLSBootstrap: the serving certificate comes from the certificates API (no self-signed pair). */
  certificateUpdates?: SecureServing['certificateUpdates'];
}

/** Everything KubeletServer needs to serve 10250. */
export async function buildSecureServing(input: SecureServingInput): Promise<SecureServing> {
  const gate = buildGate(input);
  const tls = await servingTLS({
    config: input.config, certDirectory: input.certDirectory, hostname: input.hostname, clock: input.clock, log: input.log,
    certificateFromApi: input.certificateUpdates !== undefined,
  });
  return {
    address: input.config.address, port: input.config.port, tls: tls.options, gate, routes: secureRoutes(input),
    ...(input.certificateUpdates ? { certificateUpdates: input.certificateUpdates } : {}),
  };
}
