// The exec case of bench:probes: exec probes against real containers, measured on their own.
// N busybox pods (host network) on the project's containerd, each container with an exec
// readiness probe (`cat /tmp/healthy`) at a 1 s period, driven by the real ProbeManager and the
// real runner (CRI ExecSync, on the main thread). Reports the window's schedule slots run per second, start
// jitter, main-thread event-loop delay p99 (the excess over the sampling timer's period, and the
// raw interval p99, as bench/probes.ts), this process's CPU per probe, and the CPU per probe
// of containerd and its shims (utime + stime + reaped children: runc and the exec'd process,
// from /proc; every containerd on the machine, so run it under the integration lock).
// Needs root and the runtime (test/fixtures/runtime.js); skips with a printed reason otherwise.

import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { Pod } from '../src/api/types.js';
import { discoverCgroupMounts } from '../src/cgroups/index.js';
import { PodContainerManager } from '../src/cm/pod-container-manager.js';
import { ProbeManager } from '../src/prober/manager.js';
import { createProbeRunner } from '../src/prober/runner.js';
import { containerLogsDirectory, generateContainerConfig } from '../src/runtime/container-config.js';
import { CriClient } from '../src/runtime/cri-client.js';
import { KUBERNETES_POD_NAMESPACE_LABEL } from '../src/runtime/labels.js';
import { generatePodSandboxConfig } from '../src/runtime/sandbox-config.js';
import { realClock } from '../src/util/clock.js';
import { createLogger } from '../src/util/log.js';
import { ensureRuntime, type TestRuntime } from '../test/fixtures/runtime.js';
import { countingRunner, ELD_RESOLUTION_MS, eldOf, percentile, procCpuSeconds, runningStatus, silentLog } from './probes-util.js';

const NAMESPACE = 'kts-bench-probes';
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function pool<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) await fn(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/** CPU seconds of every containerd and containerd-shim process, with the children they reaped. */
function runtimeCpuSeconds(): number {
  let s = 0;
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    let comm = '';
    try { comm = readFileSync(`/proc/${pid}/comm`, 'utf8').trim(); } catch { continue; }
    if (comm === 'containerd' || comm.startsWith('containerd-shim')) s += procCpuSeconds(`/proc/${pid}/stat`, true);
  }
  return s;
}

function execPod(i: number, image: string): Pod {
  return {
    metadata: { name: `probe-exec-${String(i).padStart(3, '0')}`, namespace: NAMESPACE, uid: randomUUID() },
    spec: {
      hostNetwork: true,
      terminationGracePeriodSeconds: 0,
      containers: [{
        name: 'main', image, imagePullPolicy: 'IfNotPresent',
        command: ['sh', '-c', 'touch /tmp/healthy; exec sleep 3600'],
        readinessProbe: { exec: { command: ['cat', '/tmp/healthy'] }, periodSeconds: 1, timeoutSeconds: 1 },
      }],
    },
  } as Pod;
}

/** Removes what a crashed run left: sandboxes of the benchmark's namespace. */
async function removeLeftovers(cri: CriClient): Promise<number> {
  const left = await cri.listPodSandbox({ label_selector: { [KUBERNETES_POD_NAMESPACE_LABEL]: NAMESPACE } });
  await pool(left, 8, async (s) => {
    for (const c of await cri.listContainers({ pod_sandbox_id: s.id })) {
      await cri.stopContainer(c.id, 0).catch(() => undefined);
      await cri.removeContainer(c.id).catch(() => undefined);
    }
    await cri.stopPodSandbox(s.id).catch(() => undefined);
    await cri.removePodSandbox(s.id).catch(() => undefined);
  });
  return left.length;
}

export async function execCase(n: number, seconds: number): Promise<object[] | undefined> {
  if (process.getuid?.() !== 0) {
    console.log('exec: skipped: not root (the runtime needs root)');
    return undefined;
  }
  let rt: TestRuntime;
  try {
    rt = await ensureRuntime();
  } catch (err) {
    console.log(`exec: skipped: the runtime did not come up: ${(err as Error).message.split('\n')[0]}`);
    return undefined;
  }
  const cri = new CriClient({ runtimeEndpoint: rt.endpoint, timeoutMs: 120_000 });
  const cgroups = new PodContainerManager({ mounts: await discoverCgroupMounts(), cgroupRoot: '', log: createLogger() });
  const logsDir = mkdtempSync(path.join(os.tmpdir(), 'kts-probes-logs-'));
  const made: { pod: Pod; sandboxId: string; containerId: string }[] = [];
  try {
    const stale = await removeLeftovers(cri);
    if (stale) console.log(`exec: removed ${stale} sandboxes left by an earlier run`);
    const imageRef = (await cri.pullImage(rt.images.busybox)).image_ref;
    const pods = Array.from({ length: n }, (_, i) => execPod(i, rt.images.busybox));
    await pool(pods, 8, async (pod) => {
      const cgroupParent = await cgroups.ensureExists(pod);
      const sandboxConfig = generatePodSandboxConfig(pod, 0, { cgroupParent, podLogsDir: logsDir });
      const { pod_sandbox_id: sandboxId } = await cri.runPodSandbox(sandboxConfig);
      const c = pod.spec.containers[0]!;
      mkdirSync(containerLogsDirectory(pod, c, logsDir), { recursive: true });
      const config = generateContainerConfig(pod, c, 0, { podIPs: [], hostIPs: ['127.0.0.1'], nodeName: os.hostname(), imageRef, podLogsDir: logsDir, memoryCapacityBytes: os.totalmem() });
      const { container_id: containerId } = await cri.createContainer(sandboxId, config, sandboxConfig);
      await cri.startContainer(containerId);
      made.push({ pod, sandboxId, containerId });
    });
    // the containers' shells touch the file first
    await sleep(1000);
    const statuses = new Map(made.map((m) => [m.pod.metadata.uid!, runningStatus(m.pod, [m.containerId])]));
    const runner = countingRunner(createProbeRunner({ cri }));
    const manager = new ProbeManager({
      clock: realClock, log: silentLog, runner, podStatus: (uid) => statuses.get(uid), recordEvent: () => {},
      onProbeStart: (_t, late) => runner.onProbeStart(late),
    });
    for (const m of made) manager.addPod(m.pod);
    await sleep(2000);
    const eld = monitorEventLoopDelay({ resolution: ELD_RESOLUTION_MS });
    runner.windowStart = Date.now();
    runner.windowMs = seconds * 1000;
  runner.counting = true;
    const start = performance.now();
    const cpu0 = process.cpuUsage();
    const rt0 = runtimeCpuSeconds();
    eld.enable();
    await sleep(seconds * 1000);
    eld.disable();
    runner.counting = false;
    const wall = (performance.now() - start) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const runtimeS = runtimeCpuSeconds() - rt0;
    // slots of the window that start late, after it, still count (up to a period late)
    await sleep(1000);
    manager.stop();
    await runner.close();
    const started = runner.started;
    const done = runner.ok + runner.failed;
    const kubeletMs = ((cpu.user + cpu.system) / 1e3) / Math.max(1, done);
    const runtimeMs = (runtimeS * 1e3) / Math.max(1, done);
    const r = {
      rate: started / seconds, completed: done / wall, p50: percentile(runner.jitter, 50), p99: percentile(runner.jitter, 99), eld: eldOf(eld).p99, eldInterval: eldOf(eld).intervalP99,
      kubeletCores: (cpu.user + cpu.system) / 1e6 / wall, runtimeCores: runtimeS / wall,
    };
    console.log(`exec: pods=${n} (busybox, exec readiness probe \`cat /tmp/healthy\` at 1 s) seconds=${seconds} load: ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
    console.log('exec  started/s done/s jitter_p50 jitter_p99 eld_p99 (interval) | cpu ms per probe: kubelet-side containerd+shims | cores: kubelet-side runtime | ok failed');
    console.log(`exec  ${r.rate.toFixed(1).padStart(9)} ${r.completed.toFixed(1).padStart(6)} ${r.p50.toFixed(1).padStart(10)} ${r.p99.toFixed(1).padStart(10)} ${r.eld.toFixed(2).padStart(7)} (${r.eldInterval.toFixed(2)}) | ${kubeletMs.toFixed(2).padStart(30)} ${runtimeMs.toFixed(2).padStart(15)} | ${r.kubeletCores.toFixed(3).padStart(20)} ${r.runtimeCores.toFixed(3).padStart(7)} | ${runner.ok} ${runner.failed}`);
    return [
      { case: 'exec', metric: 'pods', value: n, unit: 'pods' },
      { case: 'exec', metric: 'probe_rate', value: r.rate, unit: 'probes/s' },
      { case: 'exec', metric: 'completed_rate', value: r.completed, unit: 'probes/s' },
      { case: 'exec', metric: 'jitter_p50', value: r.p50, unit: 'ms' },
      { case: 'exec', metric: 'jitter_p99', value: r.p99, unit: 'ms' },
      { case: 'exec', metric: 'eld_p99', value: r.eld, unit: 'ms' },
      { case: 'exec', metric: 'eld_interval_p99', value: r.eldInterval, unit: 'ms' },
      { case: 'exec', metric: 'kubelet_cpu_per_probe', value: kubeletMs, unit: 'ms' },
      { case: 'exec', metric: 'runtime_cpu_per_probe', value: runtimeMs, unit: 'ms' },
      { case: 'exec', metric: 'failed', value: runner.failed, unit: 'probes' },
    ];
  } finally {
    await pool(made, 8, async ({ pod, sandboxId, containerId }) => {
      await cri.stopContainer(containerId, 0).catch(() => undefined);
      await cri.stopPodSandbox(sandboxId).catch(() => undefined);
      await cri.removeContainer(containerId).catch(() => undefined);
      await cri.removePodSandbox(sandboxId).catch(() => undefined);
      await cgroups.remove(cgroups.podCgroupName(pod)).catch(() => undefined);
    });
    cri.close();
    rmSync(logsDir, { recursive: true, force: true });
  }
}
