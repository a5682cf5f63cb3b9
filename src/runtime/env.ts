// A container's environment as the kubelet builds it (upstream: Kubelet.makeEnvironmentVariables
// in pkg/kubelet/kubelet_pods.go, the $(VAR) expansion in third_party/forked/golang/expansion,
// and the downward-API field/resource helpers). Every failure here is a
// CreateContainerConfigError: the container waits with that reason and the error's message.

import { isIPv4, isIPv6 } from 'node:net';
import type { Container, EnvVar, ObjectFieldSelector, Pod, ResourceFieldSelector, ResourceList } from '../api/types.js';
import { parseQuantity, type Quantity } from '../api/quantity.js';
import { KubeletError } from '../util/errors.js';

/** Why a container's config could not be made; the waiting reason is this error's code. */
export class CreateContainerConfigError extends KubeletError {
  declare readonly code: 'CreateContainerConfigError';
  constructor(message: string, options?: { cause?: unknown }) {
    super('CreateContainerConfigError', message, options);
  }
}

/** Looks a ConfigMap's or Secret's data up; undefined means "not found". Secret values decoded. */
export type KeyValueSource = (namespace: string, name: string) => Record<string, string> | undefined;

export interface EnvironmentContext {
  nodeName: string;
  /** The node's IPs, primary first (status.hostIP / status.hostIPs). */
  hostIPs: string[];
  /** The pod's IPs (for host-network pods, the host's IPs). */
  podIPs: string[];
  /** Used when the pod spec names none. */
  serviceAccountName?: string;
  /** Node allocatable: what limits.cpu/memory/ephemeral-storage read when the container sets none. */
  nodeAllocatable?: ResourceList;
  /** ConfigMap data lookup; without one every ConfigMap reads as not found. */
  getConfigMap?: KeyValueSource;
  /** Secret data lookup (decoded values); without one every Secret reads as not found. */
  getSecret?: KeyValueSource;
}

export interface EnvKeyValue {
  key: string;
  value: string;
}

/** Keys an envFrom source held that are not valid variable names (upstream skips them with an event). */
export interface InvalidEnvFromKeys {
  kind: 'ConfigMap' | 'Secret';
  name: string;
  keys: string[];
}

export interface EnvironmentResult {
  /** In order: envFrom keys first, then env entries in declaration order (a redefinition keeps its first place). */
  envs: EnvKeyValue[];
  /** For the InvalidEnvironmentVariableNames warning event. */
  invalidKeys: InvalidEnvFromKeys[];
}

const ENV_VAR_NAME = /^[-._a-zA-Z][-._a-zA-Z0-9]*$/;

/**
 * Builds the container's environment: envFrom (ConfigMaps, Secrets, with prefix), then env:
 * literal values with $(VAR) expansion against what is defined so far, downward-API fieldRef
 * and resourceFieldRef, configMapKeyRef and secretKeyRef. A missing non-optional reference
 * throws CreateContainerConfigError with upstream's message; an optional one is skipped.
 * Service links (enableServiceLinks) add nothing: kubelet-ts has no Service list yet.
 */
export function makeEnvironment(pod: Pod, container: Container, ctx: EnvironmentContext): EnvironmentResult {
  const namespace = pod.metadata.namespace ?? '';
  const tmpEnv = new Map<string, string>();
  const invalidKeys: InvalidEnvFromKeys[] = [];
  const configMaps = new Map<string, Record<string, string>>();
  const secrets = new Map<string, Record<string, string>>();

  const lookup = (kind: 'configmap' | 'secret', name: string): Record<string, string> | undefined => {
    const cache = kind === 'configmap' ? configMaps : secrets;
    const cached = cache.get(name);
    if (cached) return cached;
    const source = kind === 'configmap' ? ctx.getConfigMap : ctx.getSecret;
    const data = source?.(namespace, name);
    if (data) cache.set(name, data);
    return data;
  };

  // envFrom first, so env can override what it brought in
  for (const envFrom of container.envFrom ?? []) {
    const ref = envFrom.configMapRef ?? envFrom.secretRef;
    if (!ref) continue;
    const kind = envFrom.configMapRef ? 'configmap' : 'secret';
    const name = ref.name ?? '';
    const data = lookup(kind, name);
    if (!data) {
      if (ref.optional === true) continue;
      throw notFound(kind, name);
    }
    const invalid: string[] = [];
    for (const [k0, v] of Object.entries(data)) {
      const k = envFrom.prefix ? envFrom.prefix + k0 : k0;
      if (!ENV_VAR_NAME.test(k)) {
        invalid.push(k);
        continue;
      }
      tmpEnv.set(k, v);
    }
    if (invalid.length > 0) {
      invalidKeys.push({ kind: kind === 'configmap' ? 'ConfigMap' : 'Secret', name, keys: invalid.sort() });
    }
  }

  const mapping = mappingFuncFor(tmpEnv);
  for (const envVar of container.env ?? []) {
    const value = resolveEnvVar(envVar, pod, container, ctx, mapping, lookup);
    if (value === undefined) continue; // optional reference that is missing
    tmpEnv.set(envVar.name, value);
  }

  const envs: EnvKeyValue[] = [];
  for (const [key, value] of tmpEnv) envs.push({ key, value });
  return { envs, invalidKeys };
}

function resolveEnvVar(
  envVar: EnvVar,
  pod: Pod,
  container: Container,
  ctx: EnvironmentContext,
  mapping: (name: string) => string,
  lookup: (kind: 'configmap' | 'secret', name: string) => Record<string, string> | undefined,
): string | undefined {
  if (envVar.value !== undefined && envVar.value !== '') return expand(envVar.value, mapping);
  const from = envVar.valueFrom;
  if (!from) return '';
  if (from.fieldRef) return podFieldSelectorRuntimeValue(from.fieldRef, pod, ctx);
  if (from.resourceFieldRef) {
    return containerResourceRuntimeValue(from.resourceFieldRef, pod, container, ctx.nodeAllocatable);
  }
  const keyRef = from.configMapKeyRef ?? from.secretKeyRef;
  if (keyRef) {
    const kind = from.configMapKeyRef ? 'configmap' : 'secret';
    const name = keyRef.name ?? '';
    const optional = keyRef.optional === true;
    const data = lookup(kind, name);
    if (!data) {
      if (optional) return undefined;
      throw notFound(kind, name);
    }
    if (!Object.prototype.hasOwnProperty.call(data, keyRef.key)) {
      if (optional) return undefined;
      const what = kind === 'configmap' ? 'ConfigMap' : 'Secret';
      throw new CreateContainerConfigError(`couldn't find key ${keyRef.key} in ${what} ${pod.metadata.namespace ?? ''}/${name}`);
    }
    return data[keyRef.key]!;
  }
  return '';
}

function notFound(kind: 'configmap' | 'secret', name: string): CreateContainerConfigError {
  // the API's NotFound text for the kubelet's configmap/secret managers
  return new CreateContainerConfigError(`${kind} ${JSON.stringify(name)} not found`);
}

// ---- $(VAR) expansion ----

/** A lookup that leaves an unknown reference as written: `$(NAME)`. */
export function mappingFuncFor(...contexts: ReadonlyMap<string, string>[]): (name: string) => string {
  return (name) => {
    for (const vars of contexts) {
      const v = vars.get(name);
      if (v !== undefined) return v;
    }
    return `$(${name})`;
  };
}

/**
 * Expands `$(VAR)` references: `$$` is an escaped `$`, an unknown or unterminated reference
 * stays as written, a `$` followed by anything else stays as is.
 */
export function expand(input: string, mapping: (name: string) => string): string {
  let out = '';
  let checkpoint = 0;
  for (let cursor = 0; cursor < input.length; cursor++) {
    if (input[cursor] !== '$' || cursor + 1 >= input.length) continue;
    out += input.slice(checkpoint, cursor);
    const next = input[cursor + 1];
    let advance = 1;
    if (next === '$') {
      out += '$';
    } else if (next === '(') {
      const close = input.indexOf(')', cursor + 2);
      if (close >= 0) {
        out += mapping(input.slice(cursor + 2, close));
        advance = close - cursor;
      } else {
        out += '$(';
      }
    } else {
      out += '$' + next;
    }
    cursor += advance;
    checkpoint = cursor + 1;
  }
  return out + input.slice(checkpoint);
}

/** Expands $(VAR) in the container's command and args against its environment (upstream ExpandContainerCommandAndArgs). */
export function expandCommand(container: Container, envs: readonly EnvKeyValue[]): { command?: string[]; args?: string[] } {
  const vars = new Map<string, string>();
  for (const e of envs) vars.set(e.key, e.value);
  const mapping = mappingFuncFor(vars);
  const result: { command?: string[]; args?: string[] } = {};
  if (container.command && container.command.length > 0) result.command = container.command.map((c) => expand(c, mapping));
  if (container.args && container.args.length > 0) result.args = container.args.map((a) => expand(a, mapping));
  return result;
}

// ---- downward API: fieldRef ----

/** Splits `metadata.labels['key']` into path and subscript (upstream SplitMaybeSubscriptedPath). */
export function splitMaybeSubscriptedPath(fieldPath: string): { path: string; subscript: string; ok: boolean } {
  if (!fieldPath.endsWith("']")) return { path: fieldPath, subscript: '', ok: false };
  const s = fieldPath.slice(0, -2);
  const i = s.indexOf("['");
  if (i <= 0) return { path: fieldPath, subscript: '', ok: false };
  return { path: s.slice(0, i), subscript: s.slice(i + 2), ok: true };
}

const SUPPORTED_POD_FIELDS = new Set([
  'metadata.annotations',
  'metadata.labels',
  'metadata.name',
  'metadata.namespace',
  'metadata.uid',
  'spec.nodeName',
  'spec.restartPolicy',
  'spec.serviceAccountName',
  'spec.schedulerName',
  'status.phase',
  'status.hostIP',
  'status.hostIPs',
  'status.podIP',
  'status.podIPs',
]);

/** Upstream ConvertDownwardAPIFieldLabel: checks the version and the field, maps spec.host. */
function convertDownwardAPIFieldLabel(version: string, label: string): string {
  if (version !== 'v1') throw new CreateContainerConfigError(`unsupported pod version: ${version}`);
  const split = splitMaybeSubscriptedPath(label);
  if (split.ok) {
    if (split.path === 'metadata.annotations' || split.path === 'metadata.labels') return label;
    throw new CreateContainerConfigError(`field label does not support subscript: ${label}`);
  }
  if (SUPPORTED_POD_FIELDS.has(label)) return label;
  if (label === 'spec.host') return 'spec.nodeName';
  throw new CreateContainerConfigError(`field label not supported: ${label}`);
}

/** Pod IPs ordered as the node's primary family first, one per family (upstream sortPodIPs). */
export function sortPodIPs(podIPs: readonly string[], hostIPs: readonly string[]): string[] {
  const v6First = hostIPs.length > 0 && isIPv6(hostIPs[0]!);
  const primary = v6First ? isIPv6 : isIPv4;
  const secondary = v6First ? isIPv4 : isIPv6;
  const ips: string[] = [];
  const p = podIPs.find((ip) => primary(ip));
  if (p !== undefined) ips.push(p);
  const s = podIPs.find((ip) => secondary(ip));
  if (s !== undefined) ips.push(s);
  return ips;
}

/** The value of a downward-API fieldRef for this pod (upstream podFieldSelectorRuntimeValue). */
export function podFieldSelectorRuntimeValue(
  fs: ObjectFieldSelector,
  pod: Pod,
  ctx: Pick<EnvironmentContext, 'nodeName' | 'hostIPs' | 'podIPs' | 'serviceAccountName'>,
): string {
  const fieldPath = convertDownwardAPIFieldLabel(fs.apiVersion || 'v1', fs.fieldPath);
  const podIPs = sortPodIPs(ctx.podIPs, ctx.hostIPs);
  switch (fieldPath) {
    case 'spec.nodeName':
      return pod.spec.nodeName || ctx.nodeName;
    case 'spec.serviceAccountName':
      return pod.spec.serviceAccountName || ctx.serviceAccountName || '';
    case 'status.hostIP':
      if (ctx.hostIPs.length === 0) throw new CreateContainerConfigError('host IP unknown; known addresses: []');
      return ctx.hostIPs[0]!;
    case 'status.hostIPs':
      if (ctx.hostIPs.length === 0) throw new CreateContainerConfigError('host IP unknown; known addresses: []');
      return ctx.hostIPs.join(',');
    case 'status.podIP':
      return podIPs[0] ?? '';
    case 'status.podIPs':
      return podIPs.join(',');
  }
  return extractFieldPathAsString(pod, fieldPath);
}

// Label keys: optional DNS-subdomain prefix and a name of at most 63 characters.
const QUALIFIED_NAME_PART = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

function isQualifiedName(v: string): boolean {
  const parts = v.split('/');
  let name = v;
  if (parts.length === 2) {
    const prefix = parts[0]!;
    if (prefix.length === 0 || prefix.length > 253 || !DNS1123_SUBDOMAIN.test(prefix)) return false;
    name = parts[1]!;
  } else if (parts.length !== 1) {
    return false;
  }
  return name.length > 0 && name.length <= 63 && QUALIFIED_NAME_PART.test(name);
}

/** Upstream fieldpath.ExtractFieldPathAsString for the metadata fields. */
function extractFieldPathAsString(pod: Pod, fieldPath: string): string {
  const split = splitMaybeSubscriptedPath(fieldPath);
  if (split.ok) {
    const { path, subscript } = split;
    if (path === 'metadata.annotations') {
      if (!isQualifiedName(subscript.toLowerCase())) {
        throw new CreateContainerConfigError(`invalid key subscript in ${fieldPath}: ${subscript} is not a qualified name`);
      }
      return pod.metadata.annotations?.[subscript] ?? '';
    }
    if (path === 'metadata.labels') {
      if (!isQualifiedName(subscript)) {
        throw new CreateContainerConfigError(`invalid key subscript in ${fieldPath}: ${subscript} is not a qualified name`);
      }
      return pod.metadata.labels?.[subscript] ?? '';
    }
    throw new CreateContainerConfigError(`fieldPath ${JSON.stringify(fieldPath)} does not support subscript`);
  }
  switch (fieldPath) {
    case 'metadata.annotations':
      return formatMap(pod.metadata.annotations ?? {});
    case 'metadata.labels':
      return formatMap(pod.metadata.labels ?? {});
    case 'metadata.name':
      return pod.metadata.name ?? '';
    case 'metadata.namespace':
      return pod.metadata.namespace ?? '';
    case 'metadata.uid':
      return pod.metadata.uid ?? '';
  }
  throw new CreateContainerConfigError(`unsupported fieldPath: ${fieldPath}`);
}

/** `k="v"` lines, keys sorted, values quoted as Go's %q does (upstream FormatMap). */
export function formatMap(m: Record<string, string>): string {
  return Object.keys(m)
    .sort()
    .map((k) => `${k}=${goQuote(m[k]!)}`)
    .join('\n');
}

/** Go's strconv.Quote for the common cases: escapes quotes, backslashes and control characters. */
export function goQuote(s: string): string {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    switch (ch) {
      case '"': out += '\\"'; continue;
      case '\\': out += '\\\\'; continue;
      case '\x07': out += '\\a'; continue;
      case '\b': out += '\\b'; continue;
      case '\f': out += '\\f'; continue;
      case '\n': out += '\\n'; continue;
      case '\r': out += '\\r'; continue;
      case '\t': out += '\\t'; continue;
      case '\v': out += '\\v'; continue;
    }
    if (c < 0x20 || c === 0x7f) out += `\\x${c.toString(16).padStart(2, '0')}`;
    else out += ch;
  }
  return out + '"';
}

// ---- downward API: resourceFieldRef ----

/** Limits a container reads through the downward API: its own, else node allocatable (upstream MergeContainerResourceLimits). */
function limitsWithAllocatable(container: Container, allocatable: ResourceList | undefined): ResourceList {
  const limits: ResourceList = { ...(container.resources?.limits ?? {}) };
  for (const name of ['cpu', 'memory', 'ephemeral-storage']) {
    const q = limits[name];
    const unset = q === undefined || quantityOrZero(q).nanos === 0n;
    if (unset && allocatable && allocatable[name] !== undefined) limits[name] = allocatable[name]!;
  }
  return limits;
}

function quantityOrZero(q: string | number | undefined): Quantity {
  if (q === undefined || q === '') return parseQuantity(0);
  try {
    return parseQuantity(q);
  } catch {
    throw new CreateContainerConfigError(`invalid quantity ${JSON.stringify(String(q))}`);
  }
}

function divideCeil(amount: bigint, divisor: bigint, what: string): string {
  if (divisor === 0n) throw new CreateContainerConfigError(`invalid divisor for ${what}: must be greater than zero`);
  // upstream divides as float64 then takes the ceiling
  return String(Math.ceil(Number(amount) / Number(divisor)));
}

const HUGEPAGES_PREFIX = 'hugepages-';

/**
 * The value of a downward-API resourceFieldRef (upstream containerResourceRuntimeValue):
 * cpu in divisor millis rounded up, memory/storage/hugepages in divisor units rounded up;
 * limits of cpu/memory/ephemeral-storage default to node allocatable.
 */
export function containerResourceRuntimeValue(
  fs: ResourceFieldSelector,
  pod: Pod,
  container: Container,
  nodeAllocatable?: ResourceList,
): string {
  let target = container;
  if (fs.containerName) {
    const found = [...(pod.spec.containers ?? []), ...(pod.spec.initContainers ?? [])].find((c) => c.name === fs.containerName);
    if (!found) {
      throw new CreateContainerConfigError(`container ${fs.containerName} not found`);
    }
    target = found;
  }
  const divisorQ = fs.divisor === undefined || fs.divisor === '' ? undefined : quantityOrZero(fs.divisor);
  const divisor = divisorQ && divisorQ.nanos !== 0n ? divisorQ : parseQuantity(1);
  const limits = limitsWithAllocatable(target, nodeAllocatable);
  const requests = target.resources?.requests ?? {};

  const dot = fs.resource.indexOf('.');
  const scope = dot > 0 ? fs.resource.slice(0, dot) : '';
  const name = dot > 0 ? fs.resource.slice(dot + 1) : '';
  const list = scope === 'limits' ? limits : scope === 'requests' ? requests : undefined;
  if (list && name === 'cpu') {
    return divideCeil(quantityOrZero(list.cpu).milliValueBig(), divisor.milliValueBig(), fs.resource);
  }
  if (list && (name === 'memory' || name === 'ephemeral-storage' || name.startsWith(HUGEPAGES_PREFIX))) {
    return divideCeil(quantityOrZero(list[name]).valueBig(), divisor.valueBig(), fs.resource);
  }
  throw new CreateContainerConfigError(`unsupported container resource : ${fs.resource}`);
}
