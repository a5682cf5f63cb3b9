// The kubelet-ts command: parse flags and config, build the kubelet's dependencies, start it,
// stop on SIGTERM/SIGINT within a bounded time (pods keep running); a second signal exits at
// once. A bad flag or config field exits non-zero before anything touches the runtime.

import { loadConfig, usage, ConfigError, validateStandaloneAuth } from './config/index.js';
import { insecureSettingWarnings } from './config/security.js';
import { Kubelet, nodeNameFrom } from './kubelet/kubelet.js';
import { buildDependencies } from './kubelet/dependencies.js';
import { KubeletServer } from './server/server.js';
import { loadNative } from './native.js';
import { startMallocTrim } from './malloc-trim.js';
import { StatsProvider } from './stats/provider.js';
import { statsRoutes } from './stats/routes.js';
import { setupNodeResources } from './kubelet/node-resources.js';
import { metricsHandler } from './server/server.js';
import { buildSecureServing } from './server/secure.js';
import { containerRoutes } from './server/kubelet-host.js';
import { join } from 'node:path';
import { rootLogger, setVerbosity } from './util/log.js';
import { realClock, realClockPendingTimers, type Clock } from './util/clock.js';
import { registerProcessMetrics } from './metrics/process-metrics.js';
import { registerComponentMetrics } from './metrics/kubelet-metrics.js';
import { collectCadvisorMetrics } from './stats/cadvisor-metrics.js';
import type { CadvisorSource } from './server/kubelet-handlers.js';
import { KUBELET_VERSION } from './kubelet/node-agent.js';
import { loadKubeconfig, RestClient } from './client/index.js';
import { bootstrapClientCertificate } from './certificate/bootstrap.js';
import { clientCertificateProblem, clientCertificates, serverTLSBootstrapEnabled, servingCertificates, type KubeletCertificates, type ServingCertificates } from './certificate/kubelet.js';
import { CONTENT_TYPE_PROTOBUF, type KubeletConfig, type KubeletFlags } from './config/index.js';
import type { Logger } from './util/log.js';
import { setupNode } from './kubelet/node-setup.js';
import { KUBERNETES_VERSION, parseVersionFlag, rawVersion } from './version.js';

/** The most a SIGTERM/SIGINT waits for an orderly stop before the process exits anyway. */
export const SHUTDOWN_DEADLINE_MS = 5_000;
/** The longest one API server call (retries included) may take before it is abandoned. */
export const API_CALL_TIMEOUT_MS = 60_000;

export interface MainOptions {
  /** Why the launcher could not apply the process-start settings (src/launch.ts), if it could not. */
  launchWarning?: string;
}

export async function main(argv: string[], opts: MainOptions = {}): Promise<number> {
  if (argv[0] === 'sim-runtime') {
    // A simulated CRI runtime for density benchmarks, not a kubelet.
    const { simRuntimeMain } = await import('./sim/cli.js');
    return simRuntimeMain(argv.slice(1));
  }
  let loaded;
  try {
    loaded = await loadConfig(argv);
  } catch (err) {
    const e = err as Error;
    process.stderr.write(`kubelet-ts: ${e.message}\n`);
    if (!(err instanceof ConfigError)) process.stderr.write(`Run 'kubelet-ts --help' for usage.\n`);
    return 1;
  }
  const { config, flags, warnings } = loaded;
  if (flags.help) {
    process.stdout.write(usage());
    return 0;
  }
  const versionRequest = parseVersionFlag(flags.version);
  if (versionRequest.print !== 'no') {
    // upstream's verflag: "Kubernetes v1.34.0", or the whole version.Info with =raw
    process.stdout.write(versionRequest.print === 'raw' ? `${rawVersion()}\n` : `Kubernetes ${KUBERNETES_VERSION}\n`);
    return 0;
  }
  try {
    // upstream refuses webhook authn/authz without an API server client, before starting anything
    validateStandaloneAuth(config, flags.kubeconfig, flags.configFile || undefined);
  } catch (err) {
    process.stderr.write(`kubelet-ts: ${(err as Error).message}\n`);
    return 1;
  }
  setVerbosity(flags.verbosity ?? 0);
  const log = rootLogger;
  for (const w of warnings) log.warn(w);
  for (const w of insecureSettingWarnings(config)) log.warn(w);
  if (opts.launchWarning) log.warn(opts.launchWarning);

  const native = loadNative();
  if (!native.addon) {
    log.warn('Native addon unavailable; falling back', {
      reason: native.error,
      fallbacks: 'stats backend native -> fs; OOM watcher cgroup/ebpf -> off; subPath volume mounts -> refused',
    });
  }

  if (flags.bootstrapKubeconfig !== undefined) {
    if (flags.kubeconfig === undefined) {
      log.error('Failed to run the TLS bootstrap', { err: '--bootstrap-kubeconfig needs --kubeconfig: the path where the kubeconfig it makes is written' });
      return 1;
    }
    try {
      await bootstrapClientCertificate({
        kubeconfig: flags.kubeconfig, bootstrapKubeconfig: flags.bootstrapKubeconfig,
        certDirectory: flags.certDirectory ?? join(flags.rootDir, 'pki'), nodeName: nodeNameFrom(flags.hostnameOverride), log,
      });
    } catch (err) {
      log.error('Failed to run the TLS bootstrap', { err: (err as Error).message });
      return 1;
    }
  }

  try {
    // swap, the process's oom_score_adj, the kernel tunables: before anything runs (upstream run/setupNode)
    await setupNode(config, log);
  } catch (err) {
    log.error('Failed to run Kubelet', { err: (err as Error).message });
    return 1;
  }

  let apiClient: RestClient | undefined;
  try {
    apiClient = apiClientFrom(config, flags, log);
  } catch (err) {
    // A kubeconfig error names the file and the field.
    log.error('Failed to load the kubeconfig', { err: (err as Error).message });
    return 1;
  }
  const certDirectory = flags.certDirectory ?? join(flags.rootDir, 'pki');
  let clientCerts: KubeletCertificates | undefined;
  try {
    if (apiClient && config.rotateCertificates) {
      clientCerts = clientCertificates({ apiClient, nodeName: nodeNameFrom(flags.hostnameOverride), certDirectory, bootstrapKubeconfig: flags.bootstrapKubeconfig, log });
    }
  } catch (err) {
    log.error('Failed to start the client certificate manager', { err: (err as Error).message });
    return 1;
  }
  const certProblem = apiClient && clientCertificateProblem(apiClient, flags.bootstrapKubeconfig !== undefined, Date.now());
  if (certProblem) {
    log.error('Failed to load the kubeconfig', { err: certProblem });
    return 1;
  }

  let deps;
  try {
    deps = await buildDependencies(config, flags, nodeNameFrom(flags.hostnameOverride), log, undefined, apiClient);
    if (apiClient) deps = { ...deps, apiClient };
  } catch (err) {
    log.error('Failed to start kubelet-ts', { err: (err as Error).message });
    return 1;
  }
  const kubelet = new Kubelet({ config, flags, deps });
  registerProcessMetrics(kubelet.metrics, { pendingTimers: realClockPendingTimers });
  clientCerts?.registerMetrics(kubelet.metrics);
  let servingCerts: ServingCertificates | undefined;
  if (config.enableServer && serverTLSBootstrapEnabled(config)) {
    if (!deps.apiClient) log.warn('serverTLSBootstrap needs --kubeconfig (an API server to ask); serving a self-signed certificate');
    else {
      servingCerts = servingCertificates({
        config, apiClient: deps.apiClient, nodeName: kubelet.nodeName, certDirectory,
        addresses: () => kubelet.nodeAgent?.status.lastObservedAddresses ?? [], log,
      });
      servingCerts.registerMetrics(kubelet.metrics);
    }
  }
  registerComponentMetrics(kubelet.metrics, { version: KUBELET_VERSION, featureGates: config.featureGates });
  const stats = new StatsProvider({
    host: {
      nodeName: kubelet.nodeName,
      config,
      flags,
      cri: deps.cri,
      clock: deps.clock,
      getPods: () => kubelet.getPods(),
      podCgroupName: (pod) => kubelet.podCgroupName(pod),
      containerCgroupName: (podPath, id) => kubelet.containerCgroupName(podPath, id),
      podsCgroupName: () => kubelet.podsCgroupName(),
    },
    log,
  });
  const cadvisor: CadvisorSource = {
    getSummary: () => stats.getSummary(),
    getPods: () => kubelet.getPods(),
    podCgroupName: (p) => kubelet.podCgroupName(p),
    collect: (nowMs) => collectCadvisorMetrics({
      getPods: () => kubelet.getPods(),
      podCgroupName: (p) => kubelet.podCgroupName(p),
      refFor: (path) => stats.cgroupRef(path),
      readCgroupPaths: (paths) => stats.readCgroupPaths(paths),
      memoryCapacityBytes: deps.memoryCapacityBytes,
    }, nowMs),
  };
  let secure;
  if (config.enableServer) {
    try {
      secure = await buildSecureServing({
        config,
        nodeName: kubelet.nodeName,
        hostname: kubelet.nodeName,
        certDirectory,
        apiClient: deps.apiClient,
        ...(servingCerts ? { certificateUpdates: (apply) => servingCerts.updates((p) => apply({ cert: p.certPem, key: p.keyPem })) } : {}),
        clock: deps.clock,
        log,
        statsRoutes: statsRoutes(stats),
        metrics: kubelet.metrics,
        probeMetrics: kubelet.probes?.metrics.registry,
        cadvisor,
        runningPods: () => kubelet.runningPods(),
        streaming: containerRoutes(kubelet, deps.cri, config),
      });
    } catch (err) {
      log.error('Failed to start kubelet-ts', { err: (err as Error).message });
      return 1;
    }
  }
  let resources;
  try {
    resources = await setupNodeResources({ config, flags, cri: deps.cri, clock: deps.clock, log, memoryCapacityBytes: deps.memoryCapacityBytes, kubelet, stats });
  } catch (err) {
    log.error('Failed to start kubelet-ts', { err: (err as Error).message });
    return 1;
  }
  const server = new KubeletServer({
    secure,
    routes: new Map([
      ...statsRoutes(stats),
      ['/metrics', metricsHandler(kubelet.metrics)],
      // upstream serves the prober's families on their own endpoint
      ...(kubelet.probes ? [['/metrics/probes', metricsHandler(kubelet.probes.metrics.registry)] as const] : []),
    ]),
    host: kubelet,
    log,
    healthzBindAddress: config.healthzBindAddress,
    healthzPort: config.healthzPort,
    address: config.address,
    readOnlyPort: config.readOnlyPort,
  });
  try {
    await kubelet.start();
    await stats.start();
    resources.start();
    await server.start();
    clientCerts?.manager.start();
    servingCerts?.manager.start();
  } catch (err) {
    log.error('Failed to start kubelet-ts', { err: (err as Error).message });
    stats.stop();
    resources.stop();
    await kubelet.stop().catch(() => undefined);
    await server.stop().catch(() => undefined);
    return 1;
  }

  const mallocTrim = startMallocTrim({ clock: deps.clock, addon: native.addon });
  return waitForShutdown(async () => {
    mallocTrim.stop();
    await Promise.all([clientCerts?.manager.stop(), servingCerts?.manager.stop()]);
    stats.stop();
    resources.stop();
    await Promise.all([kubelet.stop(), server.stop()]);
  }, log);
}

/**
 * The one API server client of the kubelet (--kubeconfig), limited to kubeAPIQPS/kubeAPIBurst;
 * undefined without --kubeconfig (standalone: static pods only). Throws KubeconfigError.
 */
export function apiClientFrom(config: Pick<KubeletConfig, 'kubeAPIQPS' | 'kubeAPIBurst' | 'contentType'>, flags: Pick<KubeletFlags, 'kubeconfig'>, log: Logger): RestClient | undefined {
  if (flags.kubeconfig === undefined) return undefined;
  const rest = loadKubeconfig(flags.kubeconfig);
  // kubelet-ts encodes only JSON, which every API server accepts for every kind: say so when protobuf is asked for.
  const wire = config.contentType === CONTENT_TYPE_PROTOBUF ? { contentType: config.contentType, spoken: 'application/json (protobuf is not implemented)' } : { contentType: config.contentType };
  log.info('Using the API server', { server: rest.server, kubeconfig: rest.source, qps: config.kubeAPIQPS, burst: config.kubeAPIBurst, ...wire });
  // kubeAPIQPS 0 means no client-side limit (RestClient: qps <= 0). Every call has a deadline
  // (watches excepted: they end on the server's timeout).
  return new RestClient(rest, { qps: config.kubeAPIQPS, burst: config.kubeAPIBurst, timeoutMs: API_CALL_TIMEOUT_MS, userAgent: 'kubelet-ts' });
}

/**
 * Resolves 0 after the first SIGTERM/SIGINT once `stop` finished, or after the deadline if it
 * did not; a second signal exits at once with 1 (as upstream's signal handler).
 */
export function waitForShutdown(stop: () => Promise<void>, log: typeof rootLogger, clock: Clock = realClock, deadlineMs = SHUTDOWN_DEADLINE_MS): Promise<number> {
  return new Promise<number>((resolve) => {
    let signalled = false;
    const finish = (): void => {
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
      resolve(0);
    };
    function onSignal(signal: NodeJS.Signals): void {
      if (signalled) {
        log.warn('Second signal; exiting now', { signal });
        process.exit(1);
      }
      signalled = true;
      log.info('Shutting down; pods keep running', { signal, deadlineMs });
      const deadline = clock.setTimeout(() => {
        log.warn('Shutdown did not finish in time; exiting anyway', { deadlineMs });
        finish();
      }, deadlineMs);
      // The deadline must fire even when nothing else keeps the process alive.
      deadline.ref?.();
      void stop()
        .catch((err) => log.error('Error while shutting down', { err: (err as Error).message }))
        .finally(() => {
          deadline.cancel();
          finish();
        });
    }
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  });
}
