// Which cgroup driver the node uses (upstream KubeletCgroupDriverFromCRI): the runtime is asked
// through CRI RuntimeConfig; a runtime that predates the call (UNIMPLEMENTED, e.g. containerd
// 1.6), sets no linux section or does not answer (after upstream's 3 tries, 2 s apart) leaves the
// configured cgroupDriver in force. Upstream adopts the
// runtime's answer over the config; kubelet-ts refuses to start when the two differ, naming
// both, so a node never runs with a config that says otherwise than what it does.

import * as grpc from '@grpc/grpc-js';
import { CriError } from '../runtime/cri-errors.js';
import { CGROUP_DRIVER_CGROUPFS, CGROUP_DRIVER_SYSTEMD, type RuntimeConfigResponse } from '../runtime/runtime-config.js';
import { KubeletError } from '../util/errors.js';
import type { Logger } from '../util/log.js';
import type { CgroupDriverName } from './cgroup-name.js';

export class CgroupDriverError extends KubeletError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('ERR_CGROUP_DRIVER', message, options);
  }
}

export interface CgroupDriverOptions {
  cri: { runtimeConfig(): Promise<RuntimeConfigResponse> };
  /** cgroupDriver from the kubelet's configuration (file or --cgroup-driver). */
  configured: CgroupDriverName;
  featureGates: Readonly<Record<string, boolean>>;
  log: Logger;
  /** Tries before giving up on a runtime that fails otherwise than UNIMPLEMENTED (upstream: 3, 2 s apart). */
  attempts?: number;
  sleep?: (ms: number) => Promise<void>;
}

export interface CgroupDriverDecision {
  driver: CgroupDriverName;
  /** 'runtime': the runtime answered (and agrees); 'config': it could not tell. */
  source: 'runtime' | 'config';
}

export async function resolveCgroupDriver(o: CgroupDriverOptions): Promise<CgroupDriverDecision> {
  const fromConfig: CgroupDriverDecision = { driver: o.configured, source: 'config' };
  // GA since 1.34 and on by default since 1.31: off only when the gate is set false
  if (o.featureGates.KubeletCgroupDriverFromCRI === false) return fromConfig;
  const attempts = o.attempts ?? 3;
  const sleep = o.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  let answer: RuntimeConfigResponse | undefined;
  let lastErr: unknown;
  for (let i = 0; i < attempts && !answer; i++) {
    try {
      answer = await o.cri.runtimeConfig();
    } catch (err) {
      if (err instanceof CriError && err.grpcCode === grpc.status.UNIMPLEMENTED) {
        o.log.info('The container runtime does not implement CRI RuntimeConfig; using cgroupDriver from the kubelet configuration', { cgroupDriver: o.configured });
        return fromConfig;
      }
      lastErr = err;
      if (i + 1 < attempts) await sleep(2000);
    }
  }
  if (!answer) {
    // upstream gives up here; the issue asks for the config where the runtime does not answer
    const why = (lastErr as Error)?.message ?? String(lastErr);
    o.log.warn(`Could not ask the container runtime for its cgroup driver (CRI RuntimeConfig: ${why}); using cgroupDriver from the kubelet configuration`, { cgroupDriver: o.configured });
    return fromConfig;
  }
  if (!answer.linux) return fromConfig;
  let runtime: CgroupDriverName;
  if (answer.linux.cgroup_driver === CGROUP_DRIVER_SYSTEMD) runtime = 'systemd';
  else if (answer.linux.cgroup_driver === CGROUP_DRIVER_CGROUPFS) runtime = 'cgroupfs';
  else throw new CgroupDriverError(`runtime returned an unknown cgroup driver ${answer.linux.cgroup_driver}`);
  if (runtime !== o.configured) {
    throw new CgroupDriverError(
      `cgroupDriver mismatch: the kubelet configuration says "${o.configured}" but the container runtime uses "${runtime}" (CRI RuntimeConfig); set cgroupDriver (or --cgroup-driver) to "${runtime}" or change the runtime's cgroup driver`,
    );
  }
  o.log.info('Using cgroup driver setting received from the CRI runtime', { cgroupDriver: runtime });
  return { driver: runtime, source: 'runtime' };
}
