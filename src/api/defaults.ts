// The API server's defaulting of core/v1 pods (SetDefaults_Pod, SetDefaults_PodSpec and the
// per-field SetDefaults_* of pkg/apis/core/v1), applied to pods that never passed through an
// API server: static pods read from a manifest directory or a manifest URL.
import type { Container, HTTPGetAction, LifecycleHandler, Pod, Probe, PullPolicy, Volume } from './types.js';

export const DefaultTerminationGracePeriodSeconds = 30;
export const DefaultSchedulerName = 'default-scheduler';
export const TerminationMessagePathDefault = '/dev/termination-log';
export const DefaultImageTag = 'latest';
/** 0644: the default mode of secret, configMap, downwardAPI and projected volume files. */
export const DefaultVolumeFileMode = 0o644;
export const DefaultServiceAccountTokenExpirationSeconds = 3600;

// The distribution reference grammar (docker/distribution reference), enough to find tag and digest.
const PATH_COMPONENT = '[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*';
const DOMAIN_COMPONENT = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
const DOMAIN = `(?:${DOMAIN_COMPONENT}(?:\\.${DOMAIN_COMPONENT})*|\\[[0-9a-fA-F:.]+\\])(?::[0-9]+)?`;
const NAME = `(?:${DOMAIN}/)?${PATH_COMPONENT}(?:/${PATH_COMPONENT})*`;
const TAG = '[\\w][\\w.-]{0,127}';
const DIGEST = '[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}';
const REFERENCE = new RegExp(`^(${NAME})(?::(${TAG}))?(?:@(${DIGEST}))?$`);

export interface ImageReference {
  name: string;
  /** The tag; `latest` when the reference has neither tag nor digest. */
  tag: string;
  digest: string;
}

/**
 * Splits an image reference the way upstream's parsers.ParseImageName does: a reference without
 * tag and digest gets the `latest` tag. Returns undefined for a reference that does not parse.
 */
export function parseImageReference(image: string): ImageReference | undefined {
  const m = REFERENCE.exec(image);
  if (!m) return undefined;
  const name = m[1]!;
  const tag = m[2] ?? '';
  const digest = m[3] ?? '';
  // the domain part may hold upper case; the repository path may not (checked by the grammar)
  if (name.length > 255) return undefined;
  return { name, tag: tag === '' && digest === '' ? DefaultImageTag : tag, digest };
}

/** `Always` for a `:latest` (or untagged, undigested) image, else `IfNotPresent`. */
export function defaultImagePullPolicy(image: string | undefined): PullPolicy {
  // an unparsable image gets IfNotPresent, as upstream ignores the parse error here
  const ref = typeof image === 'string' ? parseImageReference(image) : undefined;
  return ref?.tag === DefaultImageTag ? 'Always' : 'IfNotPresent';
}

type Obj = Record<string, unknown>;

function isObject(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function objects<T>(v: unknown): T[] {
  return Array.isArray(v) ? (v.filter(isObject) as T[]) : [];
}

function defaultHTTPGet(h: unknown): void {
  if (!isObject(h)) return;
  const a = h as unknown as HTTPGetAction;
  if (a.path === undefined || a.path === '') a.path = '/';
  if (a.scheme === undefined || (a.scheme as string) === '') a.scheme = 'HTTP';
}

function defaultProbe(p: unknown): void {
  if (!isObject(p)) return;
  const probe = p as Probe;
  // zero means unset for these int32 fields in the Go API
  if (!probe.timeoutSeconds) probe.timeoutSeconds = 1;
  if (!probe.periodSeconds) probe.periodSeconds = 10;
  if (!probe.successThreshold) probe.successThreshold = 1;
  if (!probe.failureThreshold) probe.failureThreshold = 3;
  defaultHTTPGet(probe.httpGet);
}

function defaultLifecycleHandler(h: unknown): void {
  if (!isObject(h)) return;
  defaultHTTPGet((h as LifecycleHandler).httpGet);
}

function defaultFieldRef(ref: unknown): void {
  if (isObject(ref) && (ref.apiVersion === undefined || ref.apiVersion === '')) ref.apiVersion = 'v1';
}

function defaultContainer(c: Container, hostNetwork: boolean): void {
  if (c.imagePullPolicy === undefined || (c.imagePullPolicy as string) === '') {
    c.imagePullPolicy = defaultImagePullPolicy(c.image);
  }
  if (c.terminationMessagePath === undefined || c.terminationMessagePath === '') {
    c.terminationMessagePath = TerminationMessagePathDefault;
  }
  if (c.terminationMessagePolicy === undefined || (c.terminationMessagePolicy as string) === '') {
    c.terminationMessagePolicy = 'File';
  }
  for (const port of objects<NonNullable<Container['ports']>[number]>(c.ports)) {
    if (port.protocol === undefined || (port.protocol as string) === '') port.protocol = 'TCP';
    // with host networking a container port is a host port
    if (hostNetwork && !port.hostPort) port.hostPort = port.containerPort;
  }
  for (const env of objects<NonNullable<Container['env']>[number]>(c.env)) {
    if (isObject(env.valueFrom)) defaultFieldRef(env.valueFrom.fieldRef);
  }
  // requests default to limits for resources that have a limit but no request (Pods only)
  if (isObject(c.resources) && isObject(c.resources.limits)) {
    const requests = isObject(c.resources.requests) ? c.resources.requests : (c.resources.requests = {});
    for (const [name, value] of Object.entries(c.resources.limits)) {
      if (!(name in requests)) requests[name] = value;
    }
  }
  defaultProbe(c.livenessProbe);
  defaultProbe(c.readinessProbe);
  defaultProbe(c.startupProbe);
  if (isObject(c.lifecycle)) {
    defaultLifecycleHandler(c.lifecycle.postStart);
    defaultLifecycleHandler(c.lifecycle.preStop);
  }
}

const VOLUME_SOURCE_KEYS_IGNORED = new Set(['name']);

function defaultDownwardAPIItems(items: unknown): void {
  for (const item of objects<Obj>(items)) defaultFieldRef(item.fieldRef);
}

function defaultVolume(v: Volume): void {
  // a volume naming no source at all is an emptyDir
  const hasSource = Object.keys(v).some((k) => !VOLUME_SOURCE_KEYS_IGNORED.has(k) && v[k] !== undefined && v[k] !== null);
  if (!hasSource) v.emptyDir = {};
  if (isObject(v.hostPath) && v.hostPath.type === undefined) v.hostPath.type = '';
  for (const key of ['secret', 'configMap', 'downwardAPI', 'projected'] as const) {
    const src = v[key];
    if (isObject(src) && src.defaultMode === undefined) src.defaultMode = DefaultVolumeFileMode;
  }
  if (isObject(v.downwardAPI)) defaultDownwardAPIItems(v.downwardAPI.items);
  if (isObject(v.projected)) {
    for (const s of objects<Obj>(v.projected.sources)) {
      if (isObject(s.downwardAPI)) defaultDownwardAPIItems(s.downwardAPI.items);
      if (isObject(s.serviceAccountToken) && s.serviceAccountToken.expirationSeconds === undefined) {
        s.serviceAccountToken.expirationSeconds = DefaultServiceAccountTokenExpirationSeconds;
      }
    }
  }
}

/**
 * Applies the API server's defaults to a core/v1 Pod in place. Tolerates malformed input
 * (validation reports it); never throws.
 */
export function applyPodDefaults(pod: Pod): void {
  if (!isObject(pod)) return;
  // the namespace is not an API default: static pods get 'default' in applyStaticPodDefaults
  if (!isObject(pod.spec)) return;
  const spec = pod.spec;
  if (spec.dnsPolicy === undefined || spec.dnsPolicy === '') spec.dnsPolicy = 'ClusterFirst';
  if (spec.restartPolicy === undefined || (spec.restartPolicy as string) === '') spec.restartPolicy = 'Always';
  if (spec.securityContext === undefined || spec.securityContext === null) spec.securityContext = {};
  if (spec.terminationGracePeriodSeconds === undefined || spec.terminationGracePeriodSeconds === null) {
    spec.terminationGracePeriodSeconds = DefaultTerminationGracePeriodSeconds;
  }
  if (spec.schedulerName === undefined || spec.schedulerName === '') spec.schedulerName = DefaultSchedulerName;
  if (spec.enableServiceLinks === undefined || spec.enableServiceLinks === null) spec.enableServiceLinks = true;
  const hostNetwork = spec.hostNetwork === true;
  for (const c of objects<Container>(spec.initContainers)) defaultContainer(c, hostNetwork);
  for (const c of objects<Container>(spec.containers)) defaultContainer(c, hostNetwork);
  for (const v of objects<Volume>(spec.volumes)) defaultVolume(v);
}
