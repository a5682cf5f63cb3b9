// Resolves a container's probe against its pod (upstream: prober.runProbe): the host defaults
// to the pod IP, a port may name one of the container's ports, the timeout is timeoutSeconds.

import type { Container, Pod, PodStatus, Probe } from '../api/types.js';
import { podFullName } from '../api/types.js';
import { ProbeTargetError } from './errors.js';
import type { ProbeRequest } from './types.js';

/** The Kubernetes minor version kubelet-ts follows; probes identify as upstream's kubelet of it. */
export const KUBE_VERSION = { major: 1, minor: 30 };
/** upstream: the User-Agent of HTTP probes is `kube-probe/<major>.<minor>`. */
export const PROBE_USER_AGENT = `kube-probe/${KUBE_VERSION.major}.${KUBE_VERSION.minor}`;

/** upstream: findPortByName / extractPort: a number in range, or a named container port. */
export function resolvePort(pod: Pod, container: Container, port: number | string): number {
  let n: number | undefined;
  if (typeof port === 'number') n = port;
  else if (/^\d+$/.test(port)) n = Number(port);
  else n = container.ports?.find((p) => p.name === port)?.containerPort;
  if (n === undefined) throw new ProbeTargetError(podFullName(pod), container.name, `couldn't find port: ${port} in container's ports`);
  if (!Number.isInteger(n) || n <= 0 || n >= 65536) throw new ProbeTargetError(podFullName(pod), container.name, `invalid port number: ${n}`);
  return n;
}

function podIP(pod: Pod, container: Container, status: PodStatus | undefined): string {
  const ip = status?.podIP ?? status?.podIPs?.[0]?.ip;
  if (!ip) throw new ProbeTargetError(podFullName(pod), container.name, 'pod has no IP yet');
  return ip;
}

/** The request one run of `probe` sends; `containerID` is the CRI id (exec runs in it). */
export function probeRequest(pod: Pod, container: Container, probe: Probe, status: PodStatus | undefined, containerID: string): ProbeRequest {
  const timeoutMs = (probe.timeoutSeconds || 1) * 1000;
  if (probe.exec) return { kind: 'exec', containerID, command: probe.exec.command ?? [], timeoutMs };
  if (probe.httpGet) {
    const h = probe.httpGet;
    const headers: [string, string][] = (h.httpHeaders ?? []).map((x) => [x.name, x.value]);
    const has = (n: string): boolean => headers.some(([k]) => k.toLowerCase() === n);
    if (!has('user-agent')) headers.push(['User-Agent', PROBE_USER_AGENT]);
    if (!has('accept')) headers.push(['Accept', '*/*']);
    let path = h.path || '/';
    if (!path.startsWith('/')) path = `/${path}`;
    return {
      kind: 'http',
      scheme: h.scheme === 'HTTPS' ? 'HTTPS' : 'HTTP',
      host: h.host || podIP(pod, container, status),
      port: resolvePort(pod, container, h.port),
      path,
      headers,
      timeoutMs,
    };
  }
  if (probe.tcpSocket) {
    return { kind: 'tcp', host: probe.tcpSocket.host || podIP(pod, container, status), port: resolvePort(pod, container, probe.tcpSocket.port), timeoutMs };
  }
  if (probe.grpc) {
    return { kind: 'grpc', host: podIP(pod, container, status), port: resolvePort(pod, container, probe.grpc.port), service: probe.grpc.service ?? '', timeoutMs };
  }
  throw new ProbeTargetError(podFullName(pod), container.name, 'missing probe handler');
}
