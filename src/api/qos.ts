// Pod QoS class, computed the way upstream's v1 qos helper does (GetPodQOS / ComputePodQOS).
import { parseQuantity } from './quantity.js';
import type { Container, Pod, QOSClass, ResourceList } from './types.js';

/** Only these resources decide the QoS class; extended resources, storage, hugepages don't. */
const QOS_RESOURCES = ['cpu', 'memory'] as const;
type QOSResource = (typeof QOS_RESOURCES)[number];

function isQOSResource(name: string): name is QOSResource {
  return name === 'cpu' || name === 'memory';
}

/** Positive quantity in exact nano-units, or undefined when zero, negative or unparsable. */
function positiveAmount(q: string | number | undefined): bigint | undefined {
  if (q === undefined || q === null || q === '') return undefined;
  let m: bigint;
  try {
    // nano-units compare exactly, as upstream's Quantity.Cmp does
    m = parseQuantity(q).nanos;
  } catch {
    // validation rejects such pods upstream; treat the entry as absent rather than fail status
    return undefined;
  }
  return m > 0n ? m : undefined;
}

/**
 * Requests as the API server's defaulting leaves them: a resource with a limit but no
 * request gets the limit as its request (pods from files skip the API server, so do it here).
 */
function effectiveRequests(c: Container): ResourceList {
  const limits = c.resources?.limits ?? {};
  const requests: ResourceList = { ...(c.resources?.requests ?? {}) };
  for (const [name, value] of Object.entries(limits)) {
    if (!(name in requests)) requests[name] = value;
  }
  return requests;
}

/**
 * The QoS class from the pod's containers alone (upstream ComputePodQOS): BestEffort when no
 * container requests or limits cpu/memory; Guaranteed when every container (init ones too)
 * sets cpu and memory limits and the summed requests equal the summed limits; else Burstable.
 * Pod overhead is ignored.
 */
export function computePodQOS(pod: Pod): QOSClass {
  const requests = new Map<QOSResource, bigint>();
  const limits = new Map<QOSResource, bigint>();
  let isGuaranteed = true;
  const all = [...(pod.spec.containers ?? []), ...(pod.spec.initContainers ?? [])];
  for (const c of all) {
    for (const [name, q] of Object.entries(effectiveRequests(c))) {
      if (!isQOSResource(name)) continue;
      const m = positiveAmount(q);
      if (m !== undefined) requests.set(name, (requests.get(name) ?? 0n) + m);
    }
    const found = new Set<QOSResource>();
    for (const [name, q] of Object.entries(c.resources?.limits ?? {})) {
      if (!isQOSResource(name)) continue;
      const m = positiveAmount(q);
      if (m === undefined) continue;
      found.add(name);
      limits.set(name, (limits.get(name) ?? 0n) + m);
    }
    if (!QOS_RESOURCES.every((r) => found.has(r))) isGuaranteed = false;
  }
  if (requests.size === 0 && limits.size === 0) return 'BestEffort';
  if (isGuaranteed) {
    for (const [name, req] of requests) {
      if (limits.get(name) !== req) {
        isGuaranteed = false;
        break;
      }
    }
  }
  if (isGuaranteed && requests.size === limits.size) return 'Guaranteed';
  return 'Burstable';
}

/**
 * The pod's QoS class (upstream GetPodQOS): the one recorded in its status when the API
 * server already set it (it never changes for a pod), otherwise computed from the spec.
 */
export function getPodQOS(pod: Pod): QOSClass {
  const recorded = pod.status?.qosClass;
  if (recorded) return recorded;
  return computePodQOS(pod);
}
