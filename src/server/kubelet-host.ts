// What the logs and streaming handlers read, built over the kubelet's pod and status managers
// and the CRI client (upstream: the server's HostInterface).
import type { Pod, PodStatus } from '../api/types.js';
import { isNotFound, type CriClient } from '../runtime/cri-client.js';
import { KUBERNETES_POD_UID_LABEL } from '../runtime/labels.js';
import type { Clock } from '../util/clock.js';
import type { Logger } from '../util/log.js';
import { runtimeContainerID, type ContainerLogsHost } from './container-logs.js';
import type { StreamingHost } from './streaming.js';

export interface KubeletView {
  clock: Clock;
  log: Logger;
  podManager: { getPodByFullName(fullName: string): Pod | undefined };
  statusManager: { getPodStatus(uid: string): PodStatus | undefined };
}

export type HostCri = Pick<CriClient, 'containerStatus' | 'listPodSandbox' | 'exec' | 'attach' | 'portForward' | 'execSync'>;

export function containerLogsHost(k: KubeletView, cri: HostCri): ContainerLogsHost {
  return {
    clock: k.clock,
    getPodByName: (namespace, name) => k.podManager.getPodByFullName(`${namespace}/${name}`),
    getPodStatus: (uid) => k.statusManager.getPodStatus(uid),
    async containerLogPath(id) {
      let path: string | undefined;
      try {
        path = (await cri.containerStatus(id)).status?.log_path;
      } catch (err) {
        throw new Error(`failed to get container status ${JSON.stringify(id)}: ${(err as Error).message}`, { cause: err });
      }
      if (!path) throw new Error(`container ${JSON.stringify(id)} has no log path`);
      return path;
    },
    async isContainerRunning(id) {
      try {
        return (await cri.containerStatus(id)).status?.state === 'CONTAINER_RUNNING';
      } catch (err) {
        if (isNotFound(err)) return false;
        throw err;
      }
    },
  };
}

export function streamingHost(k: KubeletView, cri: HostCri, streamingConnectionIdleTimeoutMs: number): StreamingHost {
  return {
    clock: k.clock,
    log: k.log,
    streamingConnectionIdleTimeoutMs,
    getPodByName: (namespace, name) => k.podManager.getPodByFullName(`${namespace}/${name}`),
    findRunningContainer(pod, name) {
      const status = k.statusManager.getPodStatus(pod.metadata.uid ?? '') ?? pod.status;
      const cs = [...(status?.containerStatuses ?? []), ...(status?.initContainerStatuses ?? [])].find((c) => c.name === name);
      return cs?.state?.running && cs.containerID ? runtimeContainerID(cs.containerID) : undefined;
    },
    async podSandboxID(pod) {
      const items = await cri.listPodSandbox({ label_selector: { [KUBERNETES_POD_UID_LABEL]: pod.metadata.uid ?? '' }, state: { state: 'SANDBOX_READY' } });
      const newest = [...items].sort((a, b) => Number(BigInt(b.created_at) - BigInt(a.created_at)))[0];
      return newest?.id;
    },
    cri,
  };
}
