// The allocation checkpoints in upstream's format (pkg/kubelet/allocation/state, 1.33):
// <rootDir>/allocated_pods_state (what the kubelet admitted) and <rootDir>/actuated_pods_state
// (what it last gave the runtime). Each file is the checkpoint manager's JSON
//   {"data":"<json of {allocationEntries: {<pod uid>: {<container>: ResourceRequirements}}}>","checksum":N}
// where N is checksum.New(data): FNV-32a over go-spew's "%#v" of the string, i.e. over
// "(string)" followed by the data bytes. The 1.34 payload ({"entries": {<uid>: {"ContainerResources": ...}}})
// is read too. Upstream refuses to start on a corrupt checkpoint ("please drain this node and
// delete ..."); kubelet-ts logs that and starts with no allocations, so pods are admitted afresh.

import { open, readFile, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import type { ResourceList, ResourceRequirements } from '../../api/types.js';
import { parseQuantity } from '../../api/quantity.js';
import { fnv32a, goJSONString } from '../../runtime/container-hash.js';
import { KubeletError } from '../../util/errors.js';

export const ALLOCATED_PODS_STATE_FILE = 'allocated_pods_state';
export const ACTUATED_PODS_STATE_FILE = 'actuated_pods_state';

/** Pod UID → container name → resources. */
export type PodResourceAllocation = Map<string, Map<string, ResourceRequirements>>;

export class CheckpointCorruptError extends KubeletError {
  constructor(readonly file: string, message: string) {
    super('ERR_CHECKPOINT_CORRUPT', `could not restore state from checkpoint: ${message}, please drain this node and delete pod resource information checkpoint file "${file}" before restarting Kubelet`);
  }
}

/** upstream checksum.New for a string: FNV-32a of go-spew's `%#v` rendering, `(string)` + the bytes. */
export function checkpointChecksum(data: string): number {
  return fnv32a(`(string)${data}`);
}

/** A quantity as Go's resource.Quantity marshals it (canonical form); a bad one is kept as given. */
function canonical(q: string | number): string {
  try {
    return parseQuantity(q).toString();
  } catch {
    return String(q);
  }
}

function resourceListJSON(list: ResourceList): string {
  return `{${Object.keys(list).sort().map((k) => `${goJSONString(k)}:${goJSONString(canonical(list[k]!))}`).join(',')}}`;
}

/** Go's json.Marshal of a v1.ResourceRequirements (limits, requests; empty ones omitted). */
function requirementsJSON(r: ResourceRequirements): string {
  const parts: string[] = [];
  if (r.limits && Object.keys(r.limits).length) parts.push(`"limits":${resourceListJSON(r.limits)}`);
  if (r.requests && Object.keys(r.requests).length) parts.push(`"requests":${resourceListJSON(r.requests)}`);
  return `{${parts.join(',')}}`;
}

/** The checkpoint's data string: json.Marshal of PodResourceAllocationInfo (map keys sorted, as Go). */
export function allocationData(entries: PodResourceAllocation): string {
  if (entries.size === 0) return '{}';
  const pods = [...entries.keys()].sort().map((uid) => {
    const ctrs = entries.get(uid)!;
    const body = [...ctrs.keys()].sort().map((name) => `${goJSONString(name)}:${requirementsJSON(ctrs.get(name)!)}`).join(',');
    return `${goJSONString(uid)}:{${body}}`;
  });
  return `{"allocationEntries":{${pods.join(',')}}}`;
}

/** The whole checkpoint file as upstream's checkpoint manager writes it. */
export function encodeCheckpoint(entries: PodResourceAllocation): string {
  const data = allocationData(entries);
  return `{"data":${goJSONString(data)},"checksum":${checkpointChecksum(data)}}`;
}

function toRequirements(v: unknown): ResourceRequirements {
  const out: ResourceRequirements = {};
  if (!v || typeof v !== 'object') return out;
  for (const key of ['limits', 'requests'] as const) {
    const list = (v as Record<string, unknown>)[key];
    if (!list || typeof list !== 'object') continue;
    const rl: ResourceList = {};
    for (const [name, q] of Object.entries(list as Record<string, unknown>)) if (typeof q === 'string' || typeof q === 'number') rl[name] = q;
    out[key] = rl;
  }
  return out;
}

/** Parses a checkpoint file's text; throws CheckpointCorruptError naming the file. */
export function decodeCheckpoint(file: string, text: string): PodResourceAllocation {
  let outer: unknown;
  try {
    outer = JSON.parse(text);
  } catch (err) {
    throw new CheckpointCorruptError(file, `invalid JSON: ${(err as Error).message}`);
  }
  const o = outer as { data?: unknown; checksum?: unknown };
  if (!o || typeof o !== 'object' || typeof o.data !== 'string' || typeof o.checksum !== 'number') {
    throw new CheckpointCorruptError(file, 'not a checkpoint (data and checksum expected)');
  }
  if (o.checksum !== checkpointChecksum(o.data)) throw new CheckpointCorruptError(file, 'checkpoint is corrupted');
  let payload: Record<string, unknown>;
  try {
    payload = JSON.parse(o.data) as Record<string, unknown>;
  } catch (err) {
    throw new CheckpointCorruptError(file, `invalid data: ${(err as Error).message}`);
  }
  const out: PodResourceAllocation = new Map();
  // 1.33: allocationEntries {uid: {container: requirements}}; 1.34: entries {uid: {ContainerResources: {...}}}
  const v133 = payload.allocationEntries;
  const v134 = payload.entries;
  if (v133 && typeof v133 === 'object') {
    for (const [uid, ctrs] of Object.entries(v133 as Record<string, unknown>)) {
      const m = new Map<string, ResourceRequirements>();
      for (const [name, r] of Object.entries((ctrs ?? {}) as Record<string, unknown>)) m.set(name, toRequirements(r));
      out.set(uid, m);
    }
  } else if (v134 && typeof v134 === 'object') {
    for (const [uid, info] of Object.entries(v134 as Record<string, unknown>)) {
      const m = new Map<string, ResourceRequirements>();
      const ctrs = (info as { ContainerResources?: Record<string, unknown> } | null)?.ContainerResources ?? {};
      for (const [name, r] of Object.entries(ctrs)) m.set(name, toRequirements(r));
      out.set(uid, m);
    }
  }
  return out;
}

/** Reads a checkpoint; a missing file is an empty allocation. */
export async function readCheckpoint(file: string): Promise<PodResourceAllocation> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return new Map();
    throw err;
  }
  return decodeCheckpoint(file, text);
}

let tmpSeq = 0;

/** Writes a checkpoint atomically (a temporary file beside it, fsync'd, then renamed), mode 0600; the root dir must exist. */
export async function writeCheckpoint(file: string, entries: PodResourceAllocation): Promise<void> {
  const tmp = join(dirname(file), `.${basename(file)}.${process.pid}.${++tmpSeq}.tmp`);
  const fh = await open(tmp, 'w', 0o600);
  try {
    await fh.writeFile(encodeCheckpoint(entries));
    await fh.sync();
  } finally {
    await fh.close();
  }
  try {
    await rename(tmp, file);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}
