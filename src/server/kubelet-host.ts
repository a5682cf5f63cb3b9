// What the logs and streaming handlers read, built over the kubelet's pod and status managers
// and the CRI client (upstream: the server's HostInterface).
import type { Pod, PodStatus } from '../api/types.js';
import { isNotFound, type CriClient } from '../runtime/cri-client.js';
import { KUBERNETES_POD_UID_LABEL } from '../runtime/labels.js';
import type { Clock } from '../util/clock.js';
import type { Logger } from '../util/log.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { containerLogsHandler, runtimeContainerID, type ContainerLogsHost } from './container-logs.js';
import { attachRoute, execRoute, portForwardRoute, runHandler, type StreamingHost } from './streaming.js';
import { withMethods, type Handler } from './server.js';
import { ContainerLogPathError } from './errors.js';

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
        throw new ContainerLogPathError(id, `failed to get container status ${JSON.stringify(id)}: ${(err as Error).message}`, err);
      }
      if (!path) throw new ContainerLogPathError(id, `container ${JSON.stringify(id)} has no log path`);
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
      const cs = [...(status?.containerStatuses ?? []), ...(status?.initContainerStatuses ?? []), ...(status?.ephemeralContainerStatuses ?? [])].find((c) => c.name === name);
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

/**
 * The secure port's container routes (upstream's debugging handlers): /containerLogs/, /exec/,
 * /attach/, /portForward/ and /run/, as subtree routes with their upgrade handlers.
 */
export function containerRoutes(k: KubeletView, cri: HostCri, config: { streamingConnectionIdleTimeout: number }): Map<string, Handler> {
  const streaming = streamingHost(k, cri, config.streamingConnectionIdleTimeout);
  const routes = new Map<string, Handler>();
  routes.set('/containerLogs/', withMethods(['GET'], containerLogsHandler(containerLogsHost(k, cri))));
  for (const [path, route] of [['/exec/', execRoute(streaming)], ['/attach/', attachRoute(streaming)], ['/portForward/', portForwardRoute(streaming)]] as const) {
    const r = route;
    routes.set(path, Object.assign((req: IncomingMessage, res: ServerResponse, url: URL) => r.handle(req, res, url), {
      methods: r.methods,
      upgrade: (req: IncomingMessage, socket: Duplex, head: Buffer, url: URL) => r.upgrade(req, socket, head, url),
    }));
  }
  routes.set('/run/', withMethods(['POST'], runHandler(streaming)));
  return routes;
}
