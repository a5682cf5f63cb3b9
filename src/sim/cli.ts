// SIMULATION. `kubelet-ts sim-runtime`: serves a simulated CRI runtime on a unix socket for
// density benchmarks. It runs no containers. When started with an IPC channel (child_process
// fork) it also takes control messages, so a benchmark can change the churn rate, drop the
// event streams or read counters without restarting it.

import { appendFile, mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { KubeletError } from '../util/errors.js';
import { ChurnGenerator } from './churn.js';
import { SimCgroupTree } from './cgroup-tree.js';
import { SimRuntime, type SimContainer } from './sim-runtime.js';
import { startSimRuntimeServer, type SimEventShape, type SimRuntimeServer } from './server.js';

export const SIM_RUNTIME_USAGE = `Usage: kubelet-ts sim-runtime [flags]

Serves a SIMULATED CRI runtime (runtime.v1 over gRPC) on a unix socket. It holds sandboxes
and containers in memory and runs nothing; it exists for density benchmarks. Integration
tests of behaviour use a real runtime (containerd).

Flags:
  --socket PATH                unix socket to listen on (default /run/kubelet-ts-sim/runtime.sock)
  --containers N               containers to create at start, in running pods (default 0)
  --containers-per-pod K       containers per simulated pod (default 3)
  --exited-share F             share of containers with an exited previous attempt (default 0)
  --churn-events-per-sec N     container state changes per second (default 0)
  --churn-percent P            churn as percent of the containers per second (overrides the above)
  --event-shape status|metadata  GetContainerEvents messages as runtimes implementing it send
                               them (status: sandbox and container statuses, the default) or
                               with sandbox metadata only
  --cgroup-root DIR            keep a synthetic cgroup tree for running containers under DIR
  --cgroup-version 1|2         layout of that tree (default 2)
  --container-log-files        create a started container's log file, as a real runtime
                               does (the kubelet's log manager stats it every 10 s)
  --seed N                     seed for ids and names (default 1)
  -h, --help                   show this help
`;

export interface SimRuntimeFlags {
  socket: string;
  containers: number;
  containersPerPod: number;
  exitedShare: number;
  churnEventsPerSec: number;
  churnPercent?: number;
  cgroupRoot?: string;
  cgroupVersion: 1 | 2;
  seed: number;
  eventShape: SimEventShape;
  containerLogFiles?: boolean;
}

/** A bad flag of `kubelet-ts sim-runtime`; the message names the flag. */
export class SimRuntimeFlagError extends KubeletError {
  constructor(message: string) {
    super('ERR_SIM_RUNTIME_FLAG', message);
  }
}

/** Parses the flags (`--flag value` or `--flag=value`). */
export function parseSimRuntimeFlags(argv: readonly string[]): SimRuntimeFlags | 'help' {
  const f: SimRuntimeFlags = {
    socket: '/run/kubelet-ts-sim/runtime.sock',
    containers: 0,
    containersPerPod: 3,
    exitedShare: 0,
    churnEventsPerSec: 0,
    cgroupVersion: 2,
    seed: 1,
    eventShape: 'status',
  };
  const num = (flag: string, v: string, min: number): number => {
    const n = Number(v);
    if (v === '' || !Number.isFinite(n) || n < min) throw new SimRuntimeFlagError(`${flag}: expected a number >= ${min}, got ${JSON.stringify(v)}`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '-h' || arg === '--help') return 'help';
    if (!arg.startsWith('--')) throw new SimRuntimeFlagError(`unexpected argument ${JSON.stringify(arg)}`);
    const eq = arg.indexOf('=');
    const name = eq > 0 ? arg.slice(0, eq) : arg;
    const value = (): string => {
      if (eq > 0) return arg.slice(eq + 1);
      const v = argv[++i];
      if (v === undefined) throw new SimRuntimeFlagError(`${name} needs a value`);
      return v;
    };
    switch (name) {
      case '--socket': {
        const v = value();
        if (!v.startsWith('/')) throw new SimRuntimeFlagError(`--socket: must be an absolute path, got ${JSON.stringify(v)}`);
        f.socket = v;
        break;
      }
      case '--containers': f.containers = Math.floor(num(name, value(), 0)); break;
      case '--containers-per-pod': f.containersPerPod = Math.floor(num(name, value(), 1)); break;
      case '--exited-share': f.exitedShare = num(name, value(), 0); break;
      case '--churn-events-per-sec': f.churnEventsPerSec = num(name, value(), 0); break;
      case '--churn-percent': f.churnPercent = num(name, value(), 0); break;
      case '--cgroup-root': f.cgroupRoot = value(); break;
      case '--cgroup-version': {
        const v = value();
        if (v !== '1' && v !== '2') throw new SimRuntimeFlagError(`--cgroup-version: expected 1 or 2, got ${JSON.stringify(v)}`);
        f.cgroupVersion = Number(v) as 1 | 2;
        break;
      }
      case '--container-log-files': f.containerLogFiles = true; break;
      case '--seed': f.seed = Math.floor(num(name, value(), 0)); break;
      case '--event-shape': {
        const v = value();
        if (v !== 'status' && v !== 'metadata') throw new SimRuntimeFlagError(`--event-shape: expected status or metadata, got ${JSON.stringify(v)}`);
        f.eventShape = v;
        break;
      }
      default: throw new SimRuntimeFlagError(`unknown flag ${name}`);
    }
  }
  return f;
}

/** Control messages over the IPC channel, and their replies (same `cmd`). */
export type SimControlMessage =
  | { cmd: 'churn'; eventsPerSecond: number }
  | { cmd: 'stats' }
  | { cmd: 'drop-streams' }
  | { cmd: 'event-shape'; shape: SimEventShape }
  | { cmd: 'stop' };

export interface SimRuntimeHandle {
  server: SimRuntimeServer;
  churn: ChurnGenerator;
  cgroups?: SimCgroupTree;
  stop(): Promise<void>;
}

/** Builds, populates and serves a simulated runtime. */
export async function startSimRuntime(f: SimRuntimeFlags): Promise<SimRuntimeHandle> {
  const cgroups = f.cgroupRoot ? new SimCgroupTree({ root: f.cgroupRoot, version: f.cgroupVersion }) : undefined;
  const runtime = new SimRuntime({ seed: f.seed }, {
    onContainerStarted: (c, sb) => {
      cgroups?.add(sb.metadata.uid, c.id);
      // best effort, in the directory the kubelet made; a missing one is the kubelet's to report
      if (f.containerLogFiles && c.logPath) void appendFile(c.logPath, '').catch(() => undefined);
    },
    ...(cgroups ? { onContainerGone: (c: SimContainer) => cgroups.remove(c.id) } : {}),
  });
  runtime.populate({ containers: f.containers, containersPerPod: f.containersPerPod, exitedShare: f.exitedShare });
  await cgroups?.flush();
  await mkdir(dirname(f.socket), { recursive: true });
  const server = await startSimRuntimeServer({ runtime, socketPath: f.socket, eventShape: f.eventShape });
  const eventsPerSecond = f.churnPercent !== undefined ? (f.churnPercent / 100) * runtime.containers.size : f.churnEventsPerSec;
  const churn = new ChurnGenerator(runtime, { eventsPerSecond, containersPerPod: f.containersPerPod });
  churn.start();
  return {
    server,
    churn,
    cgroups,
    async stop(): Promise<void> {
      churn.stop();
      await server.close();
      await cgroups?.flush();
    },
  };
}

/** Entry of `kubelet-ts sim-runtime`; resolves with the exit code on SIGINT/SIGTERM (or an IPC stop). */
export async function simRuntimeMain(argv: readonly string[]): Promise<number> {
  let flags: SimRuntimeFlags | 'help';
  try {
    flags = parseSimRuntimeFlags(argv);
  } catch (err) {
    process.stderr.write(`kubelet-ts sim-runtime: ${(err as Error).message}\n\n${SIM_RUNTIME_USAGE}`);
    return 2;
  }
  if (flags === 'help') {
    process.stdout.write(SIM_RUNTIME_USAGE);
    return 0;
  }
  let handle: SimRuntimeHandle;
  try {
    handle = await startSimRuntime(flags);
  } catch (err) {
    process.stderr.write(`kubelet-ts sim-runtime: cannot start: ${(err as Error).message}\n`);
    return 1;
  }
  const counts = handle.server.runtime.counts();
  process.stderr.write(
    `kubelet-ts sim-runtime: SIMULATED CRI runtime serving ${handle.server.endpoint} ` +
      `(${counts.sandboxes} sandboxes, ${counts.containers} containers, churn ${handle.churn.rate.toFixed(1)} events/s)\n`,
  );
  // the simulator's own event-loop delay, reported with each `stats` (and reset): what its
  // event send times owe to its process not running (a loaded machine) rather than to its work
  const loopDelay = monitorEventLoopDelay({ resolution: 1 });
  loopDelay.enable();
  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = (): void => {
      if (stopping) return;
      stopping = true;
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      process.off('message', onMessage);
      loopDelay.disable();
      void handle.stop().then(() => resolve(0));
    };
    const onMessage = (m: SimControlMessage): void => {
      switch (m?.cmd) {
        case 'churn':
          handle.churn.setRate(m.eventsPerSecond);
          process.send?.({ cmd: 'churn', eventsPerSecond: m.eventsPerSecond });
          break;
        case 'stats':
          process.send?.({
            cmd: 'stats',
            counts: handle.server.runtime.counts(),
            churn: { ...handle.churn.stats },
            calls: Object.fromEntries(handle.server.calls),
            lastListBytes: { ...handle.server.lastListBytes },
            eventStreams: handle.server.eventStreams(),
            eventSendLagsMs: handle.server.takeEventSendLags(),
            loopDelayP99Ms: loopDelay.count ? loopDelay.percentile(99) / 1e6 : 0,
            loopDelayMaxMs: loopDelay.count ? loopDelay.max / 1e6 : 0,
            // the simulator process's CPU so far (user + system, ms): what serving calls cost it
            cpuMs: (process.cpuUsage().user + process.cpuUsage().system) / 1000,
          });
          loopDelay.reset();
          break;
        case 'drop-streams':
          handle.server.dropEventStreams();
          process.send?.({ cmd: 'drop-streams' });
          break;
        case 'event-shape':
          handle.server.eventShape = m.shape;
          process.send?.({ cmd: 'event-shape', shape: m.shape });
          break;
        case 'stop':
          stop();
          break;
      }
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
    if (process.send) {
      process.on('message', onMessage);
      process.send({ cmd: 'ready', endpoint: handle.server.endpoint, counts });
    }
  });
}
