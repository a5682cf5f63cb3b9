// What the kubelet does to a pod read from a manifest file or URL (upstream
// pkg/kubelet/config/common.go applyDefaults): node-qualified name, content-derived UID,
// the config annotations, and the NoExecute toleration of file-sourced pods.
import { createHash } from 'node:crypto';
import type { Pod, Toleration } from '../api/types.js';

export const ConfigSourceAnnotationKey = 'kubernetes.io/config.source';
export const ConfigMirrorAnnotationKey = 'kubernetes.io/config.mirror';
export const ConfigFirstSeenAnnotationKey = 'kubernetes.io/config.seen';
export const ConfigHashAnnotationKey = 'kubernetes.io/config.hash';

/** Source names, as upstream's kubetypes.{FileSource,HTTPSource,ApiserverSource,AllSource}. */
export const FileSource = 'file';
export const HTTPSource = 'http';
export const ApiserverSource = 'api';
export const AllSource = '*';

export type StaticPodSource = typeof FileSource | typeof HTTPSource;

export interface StaticPodOrigin {
  source: StaticPodSource;
  /** The manifest file path, or the manifest URL. */
  location: string;
  nodeName: string;
}

/** `<name>-<nodename>`: unique among nodes, and the name of the mirror pod in the API. */
export function generatePodName(name: string, nodeName: string): string {
  return `${name}-${nodeName.toLowerCase()}`;
}

/** JSON with object keys sorted at every level and undefined members left out. */
export function canonicalJSON(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map((x) => (x === undefined ? null : sortKeys(x)));
  if (typeof v === 'object' && v !== null) {
    // no prototype: a `__proto__` key from a manifest stays a key, and is hashed like any other
    const out: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
    for (const k of Object.keys(v).sort()) {
      const x = (v as Record<string, unknown>)[k];
      if (x !== undefined) out[k] = sortKeys(x);
    }
    return out;
  }
  return v;
}

/**
 * The UID of a static pod: md5 (hex) of the defaulted pod, then of where it came from
 * (node and file path for a file, the URL for http), so the same manifest content in the same
 * place always yields the same UID and any edit yields a new one.
 */
export function computeStaticPodUID(pod: Pod, origin: StaticPodOrigin): string {
  const h = createHash('md5');
  h.update(canonicalJSON(pod));
  if (origin.source === FileSource) {
    h.update(`host:${origin.nodeName}`);
    h.update(`file:${origin.location}`);
  } else {
    h.update(`url:${origin.location}`);
  }
  return h.digest('hex');
}

/** Same key, operator, value and effect (unset and empty are the same), as upstream's MatchToleration. */
function matchToleration(a: Toleration, b: Toleration): boolean {
  return (
    (a.key ?? '') === (b.key ?? '') &&
    (a.operator ?? '') === (b.operator ?? '') &&
    (a.value ?? '') === (b.value ?? '') &&
    (a.effect ?? '') === (b.effect ?? '')
  );
}

function addOrUpdateToleration(pod: Pod, t: Toleration): void {
  const list = Array.isArray(pod.spec.tolerations) ? pod.spec.tolerations : [];
  const i = list.findIndex((x) => typeof x === 'object' && x !== null && matchToleration(x, t));
  if (i >= 0) list[i] = { ...t };
  else list.push({ ...t });
  pod.spec.tolerations = list;
}

/**
 * Turns an API-defaulted manifest pod into the kubelet's static pod, in place. The UID is
 * derived from the content only when the manifest gives none (upstream keeps a given UID).
 */
export function applyStaticPodDefaults(pod: Pod, origin: StaticPodOrigin): void {
  if (typeof pod.metadata !== 'object' || pod.metadata === null) pod.metadata = {};
  if (!pod.metadata.uid) pod.metadata.uid = computeStaticPodUID(pod, origin);
  // a nameless manifest keeps its empty name so validation says "Required" rather than "-node"
  if (typeof pod.metadata.name === 'string' && pod.metadata.name !== '') {
    pod.metadata.name = generatePodName(pod.metadata.name, origin.nodeName);
  }
  if (!pod.metadata.namespace) pod.metadata.namespace = 'default';
  if (typeof pod.spec === 'object' && pod.spec !== null) {
    pod.spec.nodeName = origin.nodeName;
    // static pods must survive node problems: tolerate every NoExecute taint
    if (origin.source === FileSource) addOrUpdateToleration(pod, { operator: 'Exists', effect: 'NoExecute' });
  }
  const annotations = typeof pod.metadata.annotations === 'object' && pod.metadata.annotations !== null ? pod.metadata.annotations : {};
  annotations[ConfigHashAnnotationKey] = pod.metadata.uid;
  annotations[ConfigSourceAnnotationKey] = origin.source;
  pod.metadata.annotations = annotations;
  pod.status = { ...(typeof pod.status === 'object' && pod.status !== null ? pod.status : {}), phase: 'Pending' };
}

/** The `kubernetes.io/config.source` of a pod: `file`, `http`, `api`; undefined when unset. */
export function getPodSource(pod: Pod): string | undefined {
  return pod.metadata?.annotations?.[ConfigSourceAnnotationKey];
}

/** A pod from a manifest file or URL (any source but the API server). */
export function isStaticPod(pod: Pod): boolean {
  const source = getPodSource(pod);
  return source !== undefined && source !== ApiserverSource;
}

/** The API server's copy of a static pod, created by the kubelet. */
export function isMirrorPod(pod: Pod): boolean {
  return pod.metadata?.annotations?.[ConfigMirrorAnnotationKey] !== undefined;
}

/** Go's time.RFC3339Nano rendering (fraction without trailing zeros), in UTC. */
export function formatRFC3339Nano(d: Date): string {
  const iso = d.toISOString(); // 2024-01-02T03:04:05.120Z
  const [base, frac = ''] = iso.slice(0, -1).split('.');
  const trimmed = frac.replace(/0+$/, '');
  return `${base}${trimmed ? '.' + trimmed : ''}Z`;
}
