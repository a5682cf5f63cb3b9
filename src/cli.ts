// The kubelet-ts command: parse flags and config, start the kubelet, stop on SIGTERM/SIGINT.
// A bad flag or config field exits non-zero before anything touches the runtime.

import { loadConfig, usage, ConfigError } from './config/index.js';
import { Kubelet } from './kubelet/kubelet.js';
import { KubeletServer } from './server/server.js';
import { loadNative } from './native.js';
import { StatsProvider } from './stats/provider.js';
import { statsRoutes } from './stats/routes.js';
import { metricsHandler } from './server/server.js';
import { rootLogger, setVerbosity } from './util/log.js';

export async function main(argv: string[]): Promise<number> {
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
  setVerbosity(flags.verbosity ?? 0);
  const log = rootLogger;
  for (const w of warnings) log.warn(w);

  const native = loadNative();
  if (!native.addon) {
    log.warn('Native addon unavailable; falling back', {
      reason: native.error,
      fallbacks: 'stats backend native -> fs; OOM watcher cgroup/ebpf -> off',
    });
  }

  const kubelet = new Kubelet({ config, flags, log });
  const stats = new StatsProvider({ host: kubelet, log });
  const server = new KubeletServer({
    routes: new Map([...statsRoutes(stats), ['/metrics', metricsHandler(kubelet.metrics)]]),
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
    await server.start();
  } catch (err) {
    log.error('Failed to start kubelet-ts', { err: (err as Error).message });
    stats.stop();
    await kubelet.stop().catch(() => undefined);
    await server.stop().catch(() => undefined);
    return 1;
  }

  return new Promise<number>((resolve) => {
    const shutdown = (signal: string): void => {
      log.info('Shutting down; pods keep running', { signal });
      stats.stop();
      void Promise.all([kubelet.stop(), server.stop()]).finally(() => resolve(0));
    };
    process.once('SIGTERM', () => shutdown('SIGTERM'));
    process.once('SIGINT', () => shutdown('SIGINT'));
  });
}
