// The node status patch, as upstream's PatchNodeStatus: a two-way strategic merge patch from
// the Node as read to the Node as computed, spec left out, sent to nodes/<name>/status.
// conditions and addresses merge by type; other lists are replaced whole. addresses are sent
// with `$patch: replace` when they changed (their merge key cannot express a reorder or removal).

import type { Node } from './types.js';

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

const mergeKeys: Record<string, string> = {
  'status.conditions': 'type',
  'status.addresses': 'type',
  'metadata.ownerReferences': 'uid',
};

export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => deepEqual(x, b[i]));
  if (isObj(a) && isObj(b)) {
    const ka = Object.keys(a).filter((k) => a[k] !== undefined);
    const kb = Object.keys(b).filter((k) => b[k] !== undefined);
    return ka.length === kb.length && ka.every((k) => deepEqual(a[k], b[k]));
  }
  return false;
}

function diffList(orig: unknown[], mod: unknown[], path: string, field: string, out: Obj): void {
  const key = mergeKeys[path];
  if (!key || !orig.every(isObj) || !mod.every(isObj)) {
    if (!deepEqual(orig, mod)) out[field] = mod;
    return;
  }
  const o = orig as Obj[];
  const m = mod as Obj[];
  const elements: Obj[] = [];
  for (const el of m) {
    const before = o.find((x) => deepEqual(x[key], el[key]));
    if (!before) elements.push(el);
    else {
      const d = diffMap(before, el, `${path}[]`);
      if (d) elements.push({ [key]: el[key], ...d });
    }
  }
  for (const el of o) if (!m.some((x) => deepEqual(x[key], el[key]))) elements.push({ [key]: el[key], $patch: 'delete' });
  const reordered = !deepEqual(o.map((x) => x[key]).filter((k) => m.some((y) => deepEqual(y[key], k))), m.map((x) => x[key]).filter((k) => o.some((y) => deepEqual(y[key], k))));
  if (elements.length === 0 && !reordered) return;
  out[`$setElementOrder/${field}`] = m.map((x) => ({ [key]: x[key] }));
  if (elements.length) out[field] = elements;
}

/** The strategic merge patch turning `orig` into `mod` (undefined when they are alike). */
export function diffMap(orig: Obj, mod: Obj, path = ''): Obj | undefined {
  const out: Obj = {};
  for (const [k, v] of Object.entries(mod)) {
    if (v === undefined) continue;
    const p = path ? `${path}.${k}` : k;
    const before = orig[k];
    if (before === undefined) out[k] = v;
    else if (isObj(before) && isObj(v)) {
      const d = diffMap(before, v, p);
      if (d) out[k] = d;
    } else if (Array.isArray(before) && Array.isArray(v)) diffList(before, v, p, k, out);
    else if (!deepEqual(before, v)) out[k] = v;
  }
  for (const k of Object.keys(orig)) if (orig[k] !== undefined && mod[k] === undefined) out[k] = null;
  return Object.keys(out).length ? out : undefined;
}

/** The patch for nodes/<name>/status from the Node as read to the Node as computed (undefined: nothing to send). */
export function nodeStatusPatch(original: Node, computed: Node): Obj | undefined {
  const before = original.status?.addresses ?? [];
  const after = computed.status?.addresses ?? [];
  const manualAddresses = before.length > 0 && !deepEqual(before, after);
  const target = structuredClone(computed) as Node;
  if (original.spec === undefined) delete target.spec;
  else target.spec = structuredClone(original.spec);
  if (manualAddresses) target.status = { ...target.status, addresses: structuredClone(before) };
  const patch = diffMap(original as unknown as Obj, target as unknown as Obj) ?? {};
  if (manualAddresses) {
    const status = (isObj(patch.status) ? patch.status : (patch.status = {})) as Obj;
    status.addresses = [...after, { $patch: 'replace' }];
  }
  return Object.keys(patch).length ? patch : undefined;
}
