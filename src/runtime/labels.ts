// The labels and annotations the kubelet puts on CRI sandboxes and containers, and the parsers
// that read them back (upstream: pkg/kubelet/kuberuntime/labels.go and pkg/kubelet/types).
// They are how a restarted kubelet-ts adopts what is already running: the keys and the JSON
// shapes must stay exactly upstream's.

import type { Container, ContainerPort, LifecycleHandler, Pod } from '../api/types.js';
import { isValidPodIdentity, podIdentityErrors } from '../api/validation.js';
import { hashContainer, RESOURCES_HASH_ANNOTATION, resourcesHash } from './container-hash.js';

// Labels (pkg/kubelet/types/labels.go): selectable, so the runtime can filter on them.
export const KUBERNETES_POD_NAME_LABEL = 'io.kubernetes.pod.name';
export const KUBERNETES_POD_NAMESPACE_LABEL = 'io.kubernetes.pod.namespace';
export const KUBERNETES_POD_UID_LABEL = 'io.kubernetes.pod.uid';
export const KUBERNETES_CONTAINER_NAME_LABEL = 'io.kubernetes.container.name';

// Annotations (kuberuntime/labels.go): the rest of what the kubelet needs to know later.
export const POD_DELETION_GRACE_PERIOD_LABEL = 'io.kubernetes.pod.deletionGracePeriod';
export const POD_TERMINATION_GRACE_PERIOD_LABEL = 'io.kubernetes.pod.terminationGracePeriod';
export const CONTAINER_HASH_LABEL = 'io.kubernetes.container.hash';
export const CONTAINER_RESTART_COUNT_LABEL = 'io.kubernetes.container.restartCount';
export const CONTAINER_TERMINATION_MESSAGE_PATH_LABEL = 'io.kubernetes.container.terminationMessagePath';
export const CONTAINER_TERMINATION_MESSAGE_POLICY_LABEL = 'io.kubernetes.container.terminationMessagePolicy';
export const CONTAINER_PRE_STOP_HANDLER_LABEL = 'io.kubernetes.container.preStopHandler';
export const CONTAINER_PORTS_LABEL = 'io.kubernetes.container.ports';

/** What a sandbox's labels say (upstream labeledPodSandboxInfo). */
export interface LabeledPodSandboxInfo {
  /** The pod's own labels, without the kubelet's io.kubernetes.pod.* ones. */
  labels: Record<string, string>;
  podName: string;
  podNamespace: string;
  podUID: string;
}

/** What a sandbox's annotations say (upstream annotatedPodSandboxInfo). */
export interface AnnotatedPodSandboxInfo {
  annotations: Record<string, string>;
}

/** What a container's labels say (upstream labeledContainerInfo). */
export interface LabeledContainerInfo {
  containerName: string;
  podName: string;
  podNamespace: string;
  podUID: string;
}

/** What a container's annotations say (upstream annotatedContainerInfo). */
export interface AnnotatedContainerInfo {
  /** Spec hash in hex as written ('' when absent). */
  hash: string;
  /** undefined when absent or not an integer (upstream reads 0 then). */
  restartCount: number | undefined;
  podDeletionGracePeriod: number | undefined;
  podTerminationGracePeriod: number | undefined;
  terminationMessagePath: string;
  terminationMessagePolicy: string;
  preStopHandler: LifecycleHandler | undefined;
  containerPorts: ContainerPort[] | undefined;
}

export type ContainerInfo = LabeledContainerInfo & AnnotatedContainerInfo;

/** Sandbox labels: the pod's labels plus its name, namespace and uid (which win on conflict). */
export function newPodLabels(pod: Pod): Record<string, string> {
  const labels: Record<string, string> = { ...(pod.metadata.labels ?? {}) };
  labels[KUBERNETES_POD_NAME_LABEL] = pod.metadata.name ?? '';
  labels[KUBERNETES_POD_NAMESPACE_LABEL] = pod.metadata.namespace ?? '';
  labels[KUBERNETES_POD_UID_LABEL] = pod.metadata.uid ?? '';
  return labels;
}

/** Sandbox annotations: the pod's annotations, as they are (kubernetes.io/config.* included). */
export function newPodAnnotations(pod: Pod): Record<string, string> {
  return { ...(pod.metadata.annotations ?? {}) };
}

/** Container labels: only the identifying four; the pod's labels stay on the sandbox. */
export function newContainerLabels(container: Container, pod: Pod): Record<string, string> {
  return {
    [KUBERNETES_POD_NAME_LABEL]: pod.metadata.name ?? '',
    [KUBERNETES_POD_NAMESPACE_LABEL]: pod.metadata.namespace ?? '',
    [KUBERNETES_POD_UID_LABEL]: pod.metadata.uid ?? '',
    [KUBERNETES_CONTAINER_NAME_LABEL]: container.name,
  };
}

/**
 * Container annotations: spec hash, restart count, termination message settings, grace
 * periods, and the preStop handler and ports as JSON (so a kill needs no pod spec).
 */
export function newContainerAnnotations(
  container: Container,
  pod: Pod,
  restartCount: number,
  extra?: Record<string, string>,
): Record<string, string> {
  // Extra annotations (upstream: device plugins') go first so the kubelet's own always win.
  const annotations: Record<string, string> = { ...(extra ?? {}) };
  annotations[CONTAINER_HASH_LABEL] = hashContainer(container);
  annotations[RESOURCES_HASH_ANNOTATION] = resourcesHash(container);
  annotations[CONTAINER_RESTART_COUNT_LABEL] = String(Math.trunc(restartCount));
  annotations[CONTAINER_TERMINATION_MESSAGE_PATH_LABEL] = container.terminationMessagePath ?? '';
  annotations[CONTAINER_TERMINATION_MESSAGE_POLICY_LABEL] = container.terminationMessagePolicy ?? '';
  if (isInteger(pod.metadata.deletionGracePeriodSeconds)) {
    annotations[POD_DELETION_GRACE_PERIOD_LABEL] = String(pod.metadata.deletionGracePeriodSeconds);
  }
  if (isInteger(pod.spec.terminationGracePeriodSeconds)) {
    annotations[POD_TERMINATION_GRACE_PERIOD_LABEL] = String(pod.spec.terminationGracePeriodSeconds);
  }
  const preStop = container.lifecycle?.preStop;
  if (preStop) annotations[CONTAINER_PRE_STOP_HANDLER_LABEL] = JSON.stringify(marshalLifecycleHandler(preStop));
  if (container.ports && container.ports.length > 0) {
    annotations[CONTAINER_PORTS_LABEL] = JSON.stringify(container.ports.map(marshalContainerPort));
  }
  return annotations;
}

/** Reads a sandbox's labels back (upstream getPodSandboxInfoFromLabels). */
export function getPodSandboxInfoFromLabels(labels: Record<string, string> | undefined): LabeledPodSandboxInfo {
  const l = labels ?? {};
  const own: Record<string, string> = {};
  for (const [k, v] of Object.entries(l)) {
    if (k !== KUBERNETES_POD_NAME_LABEL && k !== KUBERNETES_POD_NAMESPACE_LABEL && k !== KUBERNETES_POD_UID_LABEL) own[k] = v;
  }
  return {
    labels: own,
    podName: l[KUBERNETES_POD_NAME_LABEL] ?? '',
    podNamespace: l[KUBERNETES_POD_NAMESPACE_LABEL] ?? '',
    podUID: l[KUBERNETES_POD_UID_LABEL] ?? '',
  };
}

const IDENTITY_LABEL: Record<string, string> = {
  uid: KUBERNETES_POD_UID_LABEL,
  namespace: KUBERNETES_POD_NAMESPACE_LABEL,
  name: KUBERNETES_POD_NAME_LABEL,
  containerName: KUBERNETES_CONTAINER_NAME_LABEL,
};

/**
 * Why the pod identity read back from a sandbox's or container's labels is not one kubelet-ts
 * could have written (UID, namespace, name and container name as the API validates them), or
 * undefined when it is. Such an object is not ours: it is skipped, and its labels never name a
 * directory, a cgroup or a log path.
 */
export function labeledPodIdentityError(uid: string, name: string, namespace: string, containerName?: string): string | undefined {
  if (isValidPodIdentity(uid, namespace, name, containerName)) return undefined;
  const errs = podIdentityErrors({ uid, name, namespace, ...(containerName !== undefined ? { containerName } : {}) });
  if (errs.length === 0) return undefined;
  return errs.map((e) => `label ${IDENTITY_LABEL[e.field] ?? e.field}: ${e.message}`).join('; ');
}

/** Reads a sandbox's annotations back (upstream getPodSandboxInfoFromAnnotations). */
export function getPodSandboxInfoFromAnnotations(annotations: Record<string, string> | undefined): AnnotatedPodSandboxInfo {
  return { annotations: { ...(annotations ?? {}) } };
}

/**
 * Reads a container's labels back (upstream getContainerInfoFromLabels); given the
 * annotations too, also what they say, in one record.
 */
export function getContainerInfoFromLabels(labels: Record<string, string> | undefined): LabeledContainerInfo;
export function getContainerInfoFromLabels(
  labels: Record<string, string> | undefined,
  annotations: Record<string, string> | undefined,
): ContainerInfo;
export function getContainerInfoFromLabels(
  labels: Record<string, string> | undefined,
  annotations?: Record<string, string>,
): LabeledContainerInfo | ContainerInfo {
  const l = labels ?? {};
  const labeled: LabeledContainerInfo = {
    containerName: l[KUBERNETES_CONTAINER_NAME_LABEL] ?? '',
    podName: l[KUBERNETES_POD_NAME_LABEL] ?? '',
    podNamespace: l[KUBERNETES_POD_NAMESPACE_LABEL] ?? '',
    podUID: l[KUBERNETES_POD_UID_LABEL] ?? '',
  };
  if (arguments.length < 2) return labeled;
  return { ...labeled, ...getContainerInfoFromAnnotations(annotations) };
}

/**
 * Reads a container's annotations back (upstream getContainerInfoFromAnnotations). A value that
 * does not parse reads as absent, as upstream logs and moves on.
 */
export function getContainerInfoFromAnnotations(annotations: Record<string, string> | undefined): AnnotatedContainerInfo {
  const a = annotations ?? {};
  return {
    hash: a[CONTAINER_HASH_LABEL] ?? '',
    restartCount: parseIntLabel(a[CONTAINER_RESTART_COUNT_LABEL]),
    podDeletionGracePeriod: parseIntLabel(a[POD_DELETION_GRACE_PERIOD_LABEL]),
    podTerminationGracePeriod: parseIntLabel(a[POD_TERMINATION_GRACE_PERIOD_LABEL]),
    terminationMessagePath: a[CONTAINER_TERMINATION_MESSAGE_PATH_LABEL] ?? '',
    terminationMessagePolicy: a[CONTAINER_TERMINATION_MESSAGE_POLICY_LABEL] ?? '',
    preStopHandler: parseJSONLabel<LifecycleHandler>(a[CONTAINER_PRE_STOP_HANDLER_LABEL], isPlainObject),
    containerPorts: parseJSONLabel<ContainerPort[]>(a[CONTAINER_PORTS_LABEL], Array.isArray),
  };
}

function isInteger(v: unknown): v is number {
  return typeof v === 'number' && Number.isInteger(v);
}

function parseIntLabel(v: string | undefined): number | undefined {
  if (v === undefined || !/^[+-]?\d+$/.test(v)) return undefined;
  const n = Number(v);
  return Number.isSafeInteger(n) ? n : undefined;
}

function isPlainObject(v: unknown): boolean {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function parseJSONLabel<T>(v: string | undefined, check: (x: unknown) => boolean): T | undefined {
  if (v === undefined) return undefined;
  try {
    const parsed: unknown = JSON.parse(v);
    return check(parsed) ? (parsed as T) : undefined;
  } catch {
    return undefined;
  }
}

// Go's encoding/json writes struct fields in declaration order and drops omitempty zero
// values; these encoders do the same so the annotation text is byte-for-byte upstream's.

type JSONObject = Record<string, unknown>;

function setIf(o: JSONObject, key: string, v: unknown): void {
  if (v === undefined || v === null || v === '' || v === 0 || v === false) return;
  if (Array.isArray(v) && v.length === 0) return;
  o[key] = v;
}

/** v1.ContainerPort as Go marshals it: name, hostPort, containerPort, protocol, hostIP. */
export function marshalContainerPort(p: ContainerPort): JSONObject {
  const o: JSONObject = {};
  setIf(o, 'name', p.name);
  setIf(o, 'hostPort', p.hostPort);
  o.containerPort = p.containerPort ?? 0;
  setIf(o, 'protocol', p.protocol);
  setIf(o, 'hostIP', p.hostIP);
  return o;
}

/** v1.LifecycleHandler as Go marshals it: exec, httpGet, tcpSocket, sleep. */
export function marshalLifecycleHandler(h: LifecycleHandler): JSONObject {
  const o: JSONObject = {};
  if (h.exec) {
    const exec: JSONObject = {};
    setIf(exec, 'command', h.exec.command);
    o.exec = exec;
  }
  if (h.httpGet) {
    const g = h.httpGet;
    const httpGet: JSONObject = {};
    setIf(httpGet, 'path', g.path);
    httpGet.port = g.port;
    setIf(httpGet, 'host', g.host);
    setIf(httpGet, 'scheme', g.scheme);
    if (g.httpHeaders && g.httpHeaders.length > 0) {
      httpGet.httpHeaders = g.httpHeaders.map((x) => ({ name: x.name, value: x.value }));
    }
    o.httpGet = httpGet;
  }
  if (h.tcpSocket) {
    const tcpSocket: JSONObject = { port: h.tcpSocket.port };
    setIf(tcpSocket, 'host', h.tcpSocket.host);
    o.tcpSocket = tcpSocket;
  }
  if (h.sleep) o.sleep = { seconds: h.sleep.seconds ?? 0 };
  return o;
}
