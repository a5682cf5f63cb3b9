// Validation of core/v1 pods (after defaulting), the part of upstream's ValidatePodCreate that
// decides whether a kubelet can run a pod read from a manifest. Field paths and messages follow
// upstream's field.Error formatting: `spec.containers[0].image: Required value`.
import { PodFields } from './pod-schema.js';
import { parseQuantity, type Quantity } from './quantity.js';
import { checkTypes } from './typecheck.js';
import type { Pod } from './types.js';

export interface FieldError {
  /** Path of the offending field, e.g. `spec.containers[0].image`. */
  field: string;
  message: string;
}

type Obj = Record<string, unknown>;

function isObject(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function show(v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') return String(v);
  if (v === undefined || v === null) return 'null';
  return JSON.stringify(v);
}

const DNS1123_LABEL_FMT = '[a-z0-9]([-a-z0-9]*[a-z0-9])?';
const DNS1123_LABEL = new RegExp(`^${DNS1123_LABEL_FMT}$`);
const DNS1123_SUBDOMAIN_FMT = `${DNS1123_LABEL_FMT}(\\.${DNS1123_LABEL_FMT})*`;
const DNS1123_SUBDOMAIN = new RegExp(`^${DNS1123_SUBDOMAIN_FMT}$`);
const QUALIFIED_NAME_PART = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const ENV_VAR_NAME_FMT = '[-._a-zA-Z][-._a-zA-Z0-9]*';
const ENV_VAR_NAME = new RegExp(`^${ENV_VAR_NAME_FMT}$`);
const IANA_SVC_NAME = /^[-a-z0-9]+$/;

/** Problems with `value` as an RFC 1123 label (≤63 chars); empty when valid. */
export function isDNS1123Label(value: string): string[] {
  const errs: string[] = [];
  if (value.length > 63) errs.push('must be no more than 63 characters');
  if (!DNS1123_LABEL.test(value)) {
    errs.push(
      "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end " +
        `with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '${DNS1123_LABEL_FMT}')`,
    );
  }
  return errs;
}

/** Problems with `value` as an RFC 1123 subdomain (≤253 chars); empty when valid. */
export function isDNS1123Subdomain(value: string): string[] {
  const errs: string[] = [];
  if (value.length > 253) errs.push('must be no more than 253 characters');
  if (!DNS1123_SUBDOMAIN.test(value)) {
    errs.push(
      "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start " +
        `and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '${DNS1123_SUBDOMAIN_FMT}')`,
    );
  }
  return errs;
}

// A pod UID names directories (`<rootDir>/pods/<uid>`, the pod log directory) and the pod
// cgroup (`pod<uid>`, `...-pod<uid>.slice` with systemd), so a UID given in a manifest must be
// one safe token: letters, digits and '-', starting and ending alphanumeric, at most 128
// characters. UUIDs (the API server's) and upstream's static-pod content hashes (hex) pass;
// '/', '.', '_' (the systemd driver's escape for '-') and anything else do not.
const POD_UID_FMT = '[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?';
const POD_UID = new RegExp(`^${POD_UID_FMT}$`);
export const MaxPodUIDLength = 128;

/** Problems with `value` as a pod UID; empty when valid. */
export function isValidPodUID(value: string): string[] {
  const errs: string[] = [];
  if (value.length > MaxPodUIDLength) errs.push(`must be no more than ${MaxPodUIDLength} characters`);
  if (!POD_UID.test(value)) {
    errs.push(
      "a pod UID must consist of alphanumeric characters or '-', and must start and end with an alphanumeric character " +
        `(e.g. a UUID, regex used for validation is '${POD_UID_FMT}')`,
    );
  }
  return errs;
}

/**
 * The allocation-free check behind podIdentityErrors, for hot paths (the PLEG sees every new
 * container): lengths first, so a hostile megabyte label costs nothing.
 */
export function isValidPodIdentity(uid: string, namespace: string, name: string, containerName?: string): boolean {
  return (
    uid.length > 0 && uid.length <= MaxPodUIDLength && POD_UID.test(uid) &&
    namespace.length > 0 && namespace.length <= 63 && DNS1123_LABEL.test(namespace) &&
    name.length > 0 && name.length <= 253 && DNS1123_SUBDOMAIN.test(name) &&
    (containerName === undefined || (containerName.length > 0 && containerName.length <= 63 && DNS1123_LABEL.test(containerName)))
  );
}

/**
 * Problems with a pod identity read from outside the API (runtime labels, a pod cgroup):
 * the UID as above, the namespace a DNS-1123 label, the name a DNS-1123 subdomain, and the
 * container name (when given) a DNS-1123 label. Empty when all are valid.
 */
export function podIdentityErrors(id: { uid: string; namespace: string; name: string; containerName?: string }): FieldError[] {
  const out: FieldError[] = [];
  const check = (field: string, v: unknown, fn: (s: string) => string[]): void => {
    if (typeof v !== 'string' || v === '') {
      out.push({ field, message: 'Required value' });
      return;
    }
    for (const m of fn(v)) out.push({ field, message: `Invalid value: ${show(v)}: ${m}` });
  };
  check('uid', id.uid, isValidPodUID);
  check('namespace', id.namespace, isDNS1123Label);
  check('name', id.name, isDNS1123Subdomain);
  if (id.containerName !== undefined) check('containerName', id.containerName, isDNS1123Label);
  return out;
}

/** Problems with `value` as a qualified name (`[prefix/]name`, e.g. a label key). */
export function isQualifiedName(value: string): string[] {
  const parts = value.split('/');
  let name = value;
  const errs: string[] = [];
  if (parts.length === 2) {
    const prefix = parts[0]!;
    name = parts[1]!;
    if (prefix.length === 0) errs.push('prefix part must be non-empty');
    else errs.push(...isDNS1123Subdomain(prefix).map((m) => `prefix part ${m}`));
  } else if (parts.length > 2) {
    return ["a qualified name must consist of alphanumeric characters, '-', '_' or '.', with an optional DNS subdomain prefix and '/'"];
  }
  if (name.length === 0) errs.push('name part must be non-empty');
  else if (name.length > 63) errs.push('name part must be no more than 63 characters');
  if (name.length > 0 && !QUALIFIED_NAME_PART.test(name)) {
    errs.push(
      "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
    );
  }
  return errs;
}

/** Problems with `value` as an environment variable name. */
export function isEnvVarName(value: string): string[] {
  if (ENV_VAR_NAME.test(value)) return [];
  return [
    "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not " +
      `start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex used for validation is '${ENV_VAR_NAME_FMT}')`,
  ];
}

/** Problems with `value` as an IANA service name (a named port). */
export function isValidPortName(value: string): string[] {
  const errs: string[] = [];
  if (value.length > 15) errs.push('must be no more than 15 characters');
  if (!IANA_SVC_NAME.test(value)) errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)");
  if (value.includes('--')) errs.push("must not contain consecutive hyphens");
  if (!/[a-z]/.test(value)) errs.push('must contain at least one letter (a-z)');
  if (value.startsWith('-') || value.endsWith('-')) errs.push('must not begin or end with a hyphen');
  return errs;
}

function isPortNumber(v: unknown): boolean {
  return typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= 65535;
}

const PORT_RANGE_MSG = 'must be between 1 and 65535, inclusive';

class Errors {
  readonly list: FieldError[] = [];
  add(field: string, message: string): void {
    this.list.push({ field, message });
  }
  required(field: string, detail = ''): void {
    this.add(field, detail ? `Required value: ${detail}` : 'Required value');
  }
  invalid(field: string, value: unknown, detail: string): void {
    this.add(field, `Invalid value: ${show(value)}: ${detail}`);
  }
  duplicate(field: string, value: unknown): void {
    this.add(field, `Duplicate value: ${show(value)}`);
  }
  notFound(field: string, value: unknown): void {
    this.add(field, `Not found: ${show(value)}`);
  }
  notSupported(field: string, value: unknown, supported: readonly string[]): void {
    this.add(field, `Unsupported value: ${show(value)}: supported values: ${supported.map((s) => JSON.stringify(s)).join(', ')}`);
  }
  forbidden(field: string, detail: string): void {
    this.add(field, `Forbidden: ${detail}`);
  }
  /** Required non-empty string; returns it when present. */
  string(field: string, v: unknown): string | undefined {
    if (v === undefined || v === null || v === '') {
      this.required(field);
      return undefined;
    }
    if (typeof v !== 'string') {
      this.invalid(field, v, 'must be a string');
      return undefined;
    }
    return v;
  }
  /** An optional list; reports a non-list and returns [] for it. */
  list_(field: string, v: unknown): unknown[] {
    if (v === undefined || v === null) return [];
    if (!Array.isArray(v)) {
      this.invalid(field, v, 'must be a list');
      return [];
    }
    return v;
  }
  nonNegative(field: string, v: unknown): void {
    if (v === undefined || v === null) return;
    if (typeof v !== 'number' || !Number.isInteger(v)) this.invalid(field, v, 'must be an integer');
    else if (v < 0) this.invalid(field, v, 'must be greater than or equal to 0');
  }
}

const RESTART_POLICIES = ['Always', 'OnFailure', 'Never'] as const;
const DNS_POLICIES = ['ClusterFirstWithHostNet', 'ClusterFirst', 'Default', 'None'] as const;
const PULL_POLICIES = ['Always', 'IfNotPresent', 'Never'] as const;
const TERMINATION_MESSAGE_POLICIES = ['File', 'FallbackToLogsOnError'] as const;
const PROTOCOLS = ['TCP', 'UDP', 'SCTP'] as const;
const URI_SCHEMES = ['HTTP', 'HTTPS'] as const;
const HOST_PATH_TYPES = ['', 'DirectoryOrCreate', 'Directory', 'FileOrCreate', 'File', 'Socket', 'CharDevice', 'BlockDevice'] as const;
const TOLERATION_OPERATORS = ['Equal', 'Exists'] as const;
const TAINT_EFFECTS = ['NoSchedule', 'PreferNoSchedule', 'NoExecute'] as const;
const PROBE_HANDLERS = ['exec', 'httpGet', 'tcpSocket', 'grpc'] as const;
const LIFECYCLE_HANDLERS = ['exec', 'httpGet', 'tcpSocket', 'sleep'] as const;
const ENV_SOURCES = ['fieldRef', 'resourceFieldRef', 'configMapKeyRef', 'secretKeyRef'] as const;
const STANDARD_CONTAINER_RESOURCES = new Set(['cpu', 'memory', 'ephemeral-storage']);

function present(v: unknown): boolean {
  return v !== undefined && v !== null;
}

function validateNameAndLabels(errs: Errors, meta: Obj): void {
  const uid = meta.uid;
  if (present(uid) && uid !== '') {
    if (typeof uid !== 'string') errs.invalid('metadata.uid', uid, 'must be a string');
    else for (const m of isValidPodUID(uid)) errs.invalid('metadata.uid', uid, m);
  }
  const name = meta.name;
  if (name === undefined || name === null || name === '') {
    errs.required('metadata.name', 'name or generateName is required');
  } else if (typeof name !== 'string') {
    errs.invalid('metadata.name', name, 'must be a string');
  } else {
    for (const m of isDNS1123Subdomain(name)) errs.invalid('metadata.name', name, m);
  }
  const ns = meta.namespace;
  if (ns === undefined || ns === null || ns === '') {
    errs.required('metadata.namespace');
  } else if (typeof ns !== 'string') {
    errs.invalid('metadata.namespace', ns, 'must be a string');
  } else {
    for (const m of isDNS1123Label(ns)) errs.invalid('metadata.namespace', ns, m);
  }
  for (const key of ['labels', 'annotations'] as const) {
    const map = meta[key];
    if (!present(map)) continue;
    if (!isObject(map)) {
      errs.invalid(`metadata.${key}`, map, 'must be a map of string keys to string values');
      continue;
    }
    for (const [k, v] of Object.entries(map)) {
      for (const m of isQualifiedName(k)) errs.invalid(`metadata.${key}`, k, m);
      if (typeof v !== 'string') {
        errs.invalid(`metadata.${key}[${k}]`, v, 'must be a string');
      } else if (key === 'labels') {
        if (v.length > 63) errs.invalid(`metadata.labels[${k}]`, v, 'must be no more than 63 characters');
        if (!LABEL_VALUE.test(v)) {
          errs.invalid(
            `metadata.labels[${k}]`,
            v,
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
          );
        }
      }
    }
  }
}

interface VolumeInfo {
  names: Set<string>;
}

function validateVolumes(errs: Errors, volumes: unknown[]): VolumeInfo {
  const names = new Set<string>();
  volumes.forEach((v, i) => {
    const path = `spec.volumes[${i}]`;
    if (!isObject(v)) {
      errs.invalid(path, v, 'must be an object');
      return;
    }
    const name = errs.string(`${path}.name`, v.name);
    if (name !== undefined) {
      for (const m of isDNS1123Label(name)) errs.invalid(`${path}.name`, name, m);
      if (names.has(name)) errs.duplicate(`${path}.name`, name);
      else names.add(name);
    }
    const sources = Object.keys(v).filter((k) => k !== 'name' && present(v[k]));
    if (sources.length === 0) errs.required(path, 'must specify a volume type');
    for (const extra of sources.slice(1)) errs.forbidden(`${path}.${extra}`, 'may not specify more than 1 volume type');
    if (isObject(v.hostPath)) {
      errs.string(`${path}.hostPath.path`, v.hostPath.path);
      const t = v.hostPath.type ?? '';
      if (!(HOST_PATH_TYPES as readonly unknown[]).includes(t)) errs.notSupported(`${path}.hostPath.type`, t, HOST_PATH_TYPES);
    }
    if (isObject(v.emptyDir) && present(v.emptyDir.sizeLimit)) {
      validateQuantity(errs, `${path}.emptyDir.sizeLimit`, v.emptyDir.sizeLimit);
    }
    if (isObject(v.secret) && !present(v.secret.secretName)) errs.required(`${path}.secret.secretName`);
    for (const key of ['secret', 'configMap', 'downwardAPI', 'projected']) {
      const src = v[key];
      if (!isObject(src) || !present(src.defaultMode)) continue;
      const mode = src.defaultMode;
      if (typeof mode !== 'number' || !Number.isInteger(mode) || mode < 0 || mode > 0o777) {
        errs.invalid(`${path}.${key}.defaultMode`, mode, 'must be a number between 0 and 0777 (octal), both inclusive');
      }
    }
  });
  return { names };
}

/** Parses a quantity, reporting a bad or negative one. */
function validateQuantity(errs: Errors, field: string, q: unknown): Quantity | undefined {
  if (typeof q !== 'string' && typeof q !== 'number') {
    errs.invalid(field, q, 'must be a quantity (a string or a number)');
    return undefined;
  }
  let parsed: Quantity;
  try {
    parsed = parseQuantity(q);
  } catch (e) {
    errs.invalid(field, q, e instanceof Error ? e.message : 'must be a valid quantity');
    return undefined;
  }
  if (parsed.sign() < 0) {
    errs.invalid(field, q, 'must be greater than or equal to 0');
    return undefined;
  }
  return parsed;
}

function isHugePages(name: string): boolean {
  return name.startsWith('hugepages-');
}

/** Extended resources: a qualified name with a domain other than kubernetes.io. */
function isExtendedResourceName(name: string): boolean {
  if (!name.includes('/') || name.startsWith('requests.')) return false;
  const domain = name.split('/')[0]!;
  if (domain === 'kubernetes.io' || domain.endsWith('.kubernetes.io')) return false;
  return isQualifiedName(name).length === 0;
}

function validateResources(errs: Errors, path: string, resources: unknown): void {
  if (!present(resources)) return;
  if (!isObject(resources)) {
    errs.invalid(path, resources, 'must be an object');
    return;
  }
  const parsed: Record<'limits' | 'requests', Map<string, { raw: unknown; q: Quantity }>> = {
    limits: new Map(),
    requests: new Map(),
  };
  for (const kind of ['limits', 'requests'] as const) {
    const list = resources[kind];
    if (!present(list)) continue;
    if (!isObject(list)) {
      errs.invalid(`${path}.${kind}`, list, 'must be a map of resource names to quantities');
      continue;
    }
    for (const [name, q] of Object.entries(list)) {
      const field = `${path}.${kind}[${name}]`;
      if (!STANDARD_CONTAINER_RESOURCES.has(name) && !isHugePages(name) && !isExtendedResourceName(name)) {
        errs.invalid(field, name, 'must be a standard resource for containers');
        continue;
      }
      const quantity = validateQuantity(errs, field, q);
      if (quantity !== undefined) parsed[kind].set(name, { raw: q, q: quantity });
    }
  }
  for (const [name, req] of parsed.requests) {
    const limit = parsed.limits.get(name);
    const field = `${path}.requests[${name}]`;
    if (isExtendedResourceName(name)) {
      // extended resources cannot be overcommitted
      if (!limit || limit.q.cmp(req.q) !== 0) {
        errs.invalid(field, req.raw, `must be equal to ${name} limit of ${limit ? String(limit.raw) : '0'}`);
      }
      if (req.q.nanos % 1_000_000_000n !== 0n) errs.invalid(field, req.raw, 'must be an integer');
      continue;
    }
    if (limit && req.q.cmp(limit.q) > 0) {
      errs.invalid(field, req.raw, `must be less than or equal to ${name} limit of ${String(limit.raw)}`);
    }
  }
  for (const name of parsed.limits.keys()) {
    if (isExtendedResourceName(name) && !parsed.requests.has(name) && !present((resources.requests as Obj | undefined)?.[name])) {
      errs.invalid(`${path}.requests[${name}]`, null, `must be equal to ${name} limit of ${String(parsed.limits.get(name)!.raw)}`);
    }
  }
}

function validatePortOrName(errs: Errors, field: string, port: unknown): void {
  if (typeof port === 'number') {
    if (!isPortNumber(port)) errs.invalid(field, port, PORT_RANGE_MSG);
  } else if (typeof port === 'string' && port !== '') {
    for (const m of isValidPortName(port)) errs.invalid(field, port, m);
  } else {
    errs.required(field);
  }
}

function handlerKinds(h: Obj, kinds: readonly string[]): string[] {
  return kinds.filter((k) => present(h[k]));
}

function validateHandler(errs: Errors, path: string, h: Obj, kinds: readonly string[]): void {
  const set = handlerKinds(h, kinds);
  if (set.length === 0) {
    errs.required(path, 'must specify a handler type');
    return;
  }
  for (const extra of set.slice(1)) errs.forbidden(`${path}.${extra}`, 'may not specify more than 1 handler type');
  if (isObject(h.exec)) {
    if (!Array.isArray(h.exec.command) || h.exec.command.length === 0) errs.required(`${path}.exec.command`);
  }
  if (isObject(h.httpGet)) {
    validatePortOrName(errs, `${path}.httpGet.port`, h.httpGet.port);
    const scheme = h.httpGet.scheme;
    if (present(scheme) && !(URI_SCHEMES as readonly unknown[]).includes(scheme)) {
      errs.notSupported(`${path}.httpGet.scheme`, scheme, URI_SCHEMES);
    }
  }
  if (isObject(h.tcpSocket)) validatePortOrName(errs, `${path}.tcpSocket.port`, h.tcpSocket.port);
  if (isObject(h.grpc) && !isPortNumber(h.grpc.port)) errs.invalid(`${path}.grpc.port`, h.grpc.port, PORT_RANGE_MSG);
  if (isObject(h.sleep)) errs.nonNegative(`${path}.sleep.seconds`, h.sleep.seconds);
  for (const k of set) if (!isObject(h[k])) errs.invalid(`${path}.${k}`, h[k], 'must be an object');
}

function validateProbe(errs: Errors, path: string, probe: unknown, kind: 'liveness' | 'readiness' | 'startup'): void {
  if (!isObject(probe)) {
    errs.invalid(path, probe, 'must be an object');
    return;
  }
  validateHandler(errs, path, probe, PROBE_HANDLERS);
  for (const f of ['initialDelaySeconds', 'timeoutSeconds', 'periodSeconds', 'successThreshold', 'failureThreshold']) {
    errs.nonNegative(`${path}.${f}`, probe[f]);
  }
  // liveness and startup results are binary: one success is enough
  if (kind !== 'readiness' && typeof probe.successThreshold === 'number' && probe.successThreshold !== 1) {
    errs.invalid(`${path}.successThreshold`, probe.successThreshold, 'must be 1');
  }
  if (kind === 'readiness' && present(probe.terminationGracePeriodSeconds)) {
    errs.invalid(`${path}.terminationGracePeriodSeconds`, probe.terminationGracePeriodSeconds, 'must not be set for readinessProbes');
  }
  const tgp = probe.terminationGracePeriodSeconds;
  if (present(tgp) && (typeof tgp !== 'number' || !Number.isInteger(tgp) || tgp <= 0)) {
    errs.invalid(`${path}.terminationGracePeriodSeconds`, tgp, 'must be greater than 0');
  }
}

interface ContainerContext {
  volumes: VolumeInfo;
  hostNetwork: boolean;
  /** All container names seen so far (init first, then regular). */
  names: Set<string>;
}

function validateContainer(errs: Errors, path: string, c: unknown, init: boolean, ctx: ContainerContext): void {
  if (!isObject(c)) {
    errs.invalid(path, c, 'must be an object');
    return;
  }
  const name = errs.string(`${path}.name`, c.name);
  if (name !== undefined) {
    for (const m of isDNS1123Label(name)) errs.invalid(`${path}.name`, name, m);
    if (ctx.names.has(name)) errs.duplicate(`${path}.name`, name);
    else ctx.names.add(name);
  }
  const image = errs.string(`${path}.image`, c.image);
  if (image !== undefined && image.trim() !== image) {
    errs.invalid(`${path}.image`, image, 'must not have leading or trailing whitespace');
  }
  if (present(c.imagePullPolicy) && !(PULL_POLICIES as readonly unknown[]).includes(c.imagePullPolicy)) {
    errs.notSupported(`${path}.imagePullPolicy`, c.imagePullPolicy, PULL_POLICIES);
  }
  if (present(c.terminationMessagePolicy) && !(TERMINATION_MESSAGE_POLICIES as readonly unknown[]).includes(c.terminationMessagePolicy)) {
    errs.notSupported(`${path}.terminationMessagePolicy`, c.terminationMessagePolicy, TERMINATION_MESSAGE_POLICIES);
  }
  for (const f of ['command', 'args'] as const) {
    const list = errs.list_(`${path}.${f}`, c[f]);
    list.forEach((a, i) => {
      if (typeof a !== 'string') errs.invalid(`${path}.${f}[${i}]`, a, 'must be a string');
    });
  }

  // restartPolicy on a container is how an init container becomes a sidecar; nothing else
  let restartable = false;
  if (present(c.restartPolicy)) {
    if (!init) errs.forbidden(`${path}.restartPolicy`, 'may not be set for non-init containers');
    else if (c.restartPolicy !== 'Always') errs.notSupported(`${path}.restartPolicy`, c.restartPolicy, ['Always']);
    else restartable = true;
  }

  const portNames = new Set<string>();
  errs.list_(`${path}.ports`, c.ports).forEach((p, i) => {
    const pp = `${path}.ports[${i}]`;
    if (!isObject(p)) {
      errs.invalid(pp, p, 'must be an object');
      return;
    }
    if (!present(p.containerPort)) errs.required(`${pp}.containerPort`);
    else if (!isPortNumber(p.containerPort)) errs.invalid(`${pp}.containerPort`, p.containerPort, PORT_RANGE_MSG);
    if (present(p.hostPort) && p.hostPort !== 0 && !isPortNumber(p.hostPort)) errs.invalid(`${pp}.hostPort`, p.hostPort, PORT_RANGE_MSG);
    if (ctx.hostNetwork && present(p.hostPort) && p.hostPort !== p.containerPort) {
      errs.invalid(`${pp}.hostPort`, p.hostPort, 'must match `containerPort` when `hostNetwork` is true');
    }
    if (present(p.protocol) && !(PROTOCOLS as readonly unknown[]).includes(p.protocol)) {
      errs.notSupported(`${pp}.protocol`, p.protocol, PROTOCOLS);
    }
    if (present(p.name) && p.name !== '') {
      if (typeof p.name !== 'string') errs.invalid(`${pp}.name`, p.name, 'must be a string');
      else {
        for (const m of isValidPortName(p.name)) errs.invalid(`${pp}.name`, p.name, m);
        if (portNames.has(p.name)) errs.duplicate(`${pp}.name`, p.name);
        else portNames.add(p.name);
      }
    }
  });

  errs.list_(`${path}.env`, c.env).forEach((e, i) => {
    const ep = `${path}.env[${i}]`;
    if (!isObject(e)) {
      errs.invalid(ep, e, 'must be an object');
      return;
    }
    const envName = errs.string(`${ep}.name`, e.name);
    if (envName !== undefined) for (const m of isEnvVarName(envName)) errs.invalid(`${ep}.name`, envName, m);
    if (present(e.valueFrom)) {
      if (!isObject(e.valueFrom)) {
        errs.invalid(`${ep}.valueFrom`, e.valueFrom, 'must be an object');
        return;
      }
      const kinds = handlerKinds(e.valueFrom, ENV_SOURCES);
      if (kinds.length === 0) {
        errs.invalid(`${ep}.valueFrom`, '', 'must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`');
      } else if (kinds.length > 1) {
        errs.invalid(`${ep}.valueFrom`, '', 'may not have more than one field specified at a time');
      }
      if (typeof e.value === 'string' && e.value !== '') {
        errs.invalid(`${ep}.valueFrom`, '', 'may not be specified when `value` is not empty');
      }
      if (isObject(e.valueFrom.fieldRef)) errs.string(`${ep}.valueFrom.fieldRef.fieldPath`, e.valueFrom.fieldRef.fieldPath);
      if (isObject(e.valueFrom.resourceFieldRef)) errs.string(`${ep}.valueFrom.resourceFieldRef.resource`, e.valueFrom.resourceFieldRef.resource);
      for (const k of ['configMapKeyRef', 'secretKeyRef'] as const) {
        const ref = e.valueFrom[k];
        if (isObject(ref)) errs.string(`${ep}.valueFrom.${k}.key`, ref.key);
      }
    } else if (present(e.value) && typeof e.value !== 'string') {
      errs.invalid(`${ep}.value`, e.value, 'must be a string');
    }
  });

  validateResources(errs, `${path}.resources`, c.resources);

  const mountPaths = new Set<string>();
  errs.list_(`${path}.volumeMounts`, c.volumeMounts).forEach((m, i) => {
    const mp = `${path}.volumeMounts[${i}]`;
    if (!isObject(m)) {
      errs.invalid(mp, m, 'must be an object');
      return;
    }
    const vname = errs.string(`${mp}.name`, m.name);
    if (vname !== undefined && !ctx.volumes.names.has(vname)) errs.notFound(`${mp}.name`, vname);
    const mountPath = errs.string(`${mp}.mountPath`, m.mountPath);
    if (mountPath !== undefined) {
      if (mountPaths.has(mountPath)) errs.invalid(`${mp}.mountPath`, mountPath, 'must be unique');
      else mountPaths.add(mountPath);
    }
    if (typeof m.subPath === 'string' && m.subPath !== '') {
      if (m.subPath.startsWith('/')) errs.invalid(`${mp}.subPath`, m.subPath, 'must be a relative path');
      if (m.subPath.split('/').includes('..')) errs.invalid(`${mp}.subPath`, m.subPath, "must not contain '..'");
    }
  });

  const probes = [
    ['livenessProbe', 'liveness'],
    ['readinessProbe', 'readiness'],
    ['startupProbe', 'startup'],
  ] as const;
  if (init && !restartable) {
    // a run-to-completion init container has nothing to probe and no lifecycle
    for (const f of ['lifecycle', 'livenessProbe', 'readinessProbe', 'startupProbe'] as const) {
      if (present(c[f])) errs.forbidden(`${path}.${f}`, 'may not be set for init containers without restartPolicy=Always');
    }
  } else {
    for (const [f, kind] of probes) if (present(c[f])) validateProbe(errs, `${path}.${f}`, c[f], kind);
    if (present(c.lifecycle)) {
      if (!isObject(c.lifecycle)) errs.invalid(`${path}.lifecycle`, c.lifecycle, 'must be an object');
      else {
        for (const hook of ['postStart', 'preStop'] as const) {
          const h = c.lifecycle[hook];
          if (!present(h)) continue;
          if (!isObject(h)) errs.invalid(`${path}.lifecycle.${hook}`, h, 'must be an object');
          else validateHandler(errs, `${path}.lifecycle.${hook}`, h, LIFECYCLE_HANDLERS);
        }
      }
    }
  }
}

/** Host ports must not collide between containers running at the same time. */
function validateHostPorts(errs: Errors, group: { path: string; container: unknown }[]): void {
  const ipsByKey = new Map<string, Set<string>>();
  for (const { path, container } of group) {
    if (!isObject(container) || !Array.isArray(container.ports)) continue;
    container.ports.forEach((p, pi) => {
      if (!isObject(p) || typeof p.hostPort !== 'number' || p.hostPort === 0) return;
      const key = `${typeof p.protocol === 'string' ? p.protocol : 'TCP'}/${p.hostPort}`;
      const ip = typeof p.hostIP === 'string' ? p.hostIP : '';
      const ips = ipsByKey.get(key) ?? new Set<string>();
      // an unset host IP binds every address, so it collides with any other binding of the port
      if (ips.has(ip) || (ips.size > 0 && (ip === '' || ips.has('')))) errs.duplicate(`${path}.ports[${pi}].hostPort`, key);
      ips.add(ip);
      ipsByKey.set(key, ips);
    });
  }
}

function validateTolerations(errs: Errors, list: unknown[]): void {
  list.forEach((t, i) => {
    const tp = `spec.tolerations[${i}]`;
    if (!isObject(t)) {
      errs.invalid(tp, t, 'must be an object');
      return;
    }
    const op = t.operator ?? 'Equal';
    if (!(TOLERATION_OPERATORS as readonly unknown[]).includes(op)) errs.notSupported(`${tp}.operator`, op, TOLERATION_OPERATORS);
    if (op === 'Exists' && typeof t.value === 'string' && t.value !== '') {
      errs.invalid(`${tp}.operator`, t.value, 'value must be empty when `operator` is \'Exists\'');
    }
    if ((t.key === undefined || t.key === '') && op !== 'Exists') {
      errs.invalid(`${tp}.operator`, op, 'operator must be Exists when `key` is empty, which means "match all values and all keys"');
    }
    if (present(t.effect) && t.effect !== '' && !(TAINT_EFFECTS as readonly unknown[]).includes(t.effect)) {
      errs.notSupported(`${tp}.effect`, t.effect, TAINT_EFFECTS);
    }
    if (present(t.tolerationSeconds) && t.effect !== 'NoExecute') {
      errs.invalid(`${tp}.effect`, t.effect ?? '', "effect must be 'NoExecute' when `tolerationSeconds` is set");
    }
  });
}

/**
 * Type-checks a decoded core/v1 Pod as decoding into upstream's Go structs would: an empty
 * result means every known field has its API type. Known fields set to null are removed.
 */
export function checkPodTypes(pod: unknown): FieldError[] {
  return checkTypes(pod, PodFields);
}

/**
 * Validates a defaulted core/v1 Pod; an empty result means a kubelet can run it. A pod with
 * fields of the wrong type gets only the type errors (nothing else can be judged on it).
 */
export function validatePod(pod: Pod): FieldError[] {
  const errs = new Errors();
  const p = pod as unknown;
  if (!isObject(p)) {
    errs.invalid('', p, 'must be an object');
    return errs.list;
  }
  const typeErrors = checkPodTypes(p);
  if (typeErrors.length > 0) return typeErrors;
  if (!isObject(p.metadata)) errs.required('metadata');
  else validateNameAndLabels(errs, p.metadata);
  const spec = p.spec;
  if (!isObject(spec)) {
    errs.required('spec');
    return errs.list;
  }

  const volumes = validateVolumes(errs, errs.list_('spec.volumes', spec.volumes));
  const hostNetwork = spec.hostNetwork === true;
  const ctx: ContainerContext = { volumes, hostNetwork, names: new Set() };

  const initContainers = errs.list_('spec.initContainers', spec.initContainers);
  initContainers.forEach((c, i) => validateContainer(errs, `spec.initContainers[${i}]`, c, true, ctx));
  const containers = errs.list_('spec.containers', spec.containers);
  if (containers.length === 0 && (spec.containers === undefined || Array.isArray(spec.containers))) errs.required('spec.containers');
  containers.forEach((c, i) => validateContainer(errs, `spec.containers[${i}]`, c, false, ctx));
  // regular containers run together; each init container runs alone
  validateHostPorts(errs, containers.map((c, i) => ({ path: `spec.containers[${i}]`, container: c })));
  initContainers.forEach((c, i) => validateHostPorts(errs, [{ path: `spec.initContainers[${i}]`, container: c }]));

  const restartPolicy = spec.restartPolicy;
  if (!present(restartPolicy) || restartPolicy === '') errs.required('spec.restartPolicy');
  else if (!(RESTART_POLICIES as readonly unknown[]).includes(restartPolicy)) {
    errs.notSupported('spec.restartPolicy', restartPolicy, RESTART_POLICIES);
  }
  const dnsPolicy = spec.dnsPolicy;
  if (present(dnsPolicy) && dnsPolicy !== '' && !(DNS_POLICIES as readonly unknown[]).includes(dnsPolicy)) {
    errs.notSupported('spec.dnsPolicy', dnsPolicy, DNS_POLICIES);
  }
  if (dnsPolicy === 'None') {
    const ns = isObject(spec.dnsConfig) ? spec.dnsConfig.nameservers : undefined;
    if (!Array.isArray(ns) || ns.length === 0) {
      errs.required('spec.dnsConfig.nameservers', 'must provide at least one DNS nameserver when DNSPolicy is None');
    }
  }
  errs.nonNegative('spec.terminationGracePeriodSeconds', spec.terminationGracePeriodSeconds);
  const ads = spec.activeDeadlineSeconds;
  if (present(ads) && (typeof ads !== 'number' || !Number.isInteger(ads) || ads < 1 || ads > 2147483647)) {
    errs.invalid('spec.activeDeadlineSeconds', ads, 'must be between 1 and 2147483647, inclusive');
  }
  for (const f of ['hostname', 'subdomain'] as const) {
    const v = spec[f];
    if (typeof v === 'string' && v !== '') for (const m of isDNS1123Label(v)) errs.invalid(`spec.${f}`, v, m);
  }
  validateTolerations(errs, errs.list_('spec.tolerations', spec.tolerations));
  return errs.list;
}
