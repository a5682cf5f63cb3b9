// The ID range the kubelet hands out to pods' user namespaces (upstream getKubeletMappings):
// the subordinate UIDs and GIDs of the `kubelet` user, else (no such user) the default range,
// every ID from idsPerPod up. Upstream asks `getsubids`; kubelet-ts reads the files that tool
// reads with its files backend (/etc/subuid, /etc/subgid), matching an entry's owner by name or
// by the user's (group's) numeric ID as shadow's list_owner_ranges does.

import { readFile } from 'node:fs/promises';
import { KubeletError } from '../../util/errors.js';

/** upstream kubeletUser: the user whose subordinate IDs pods' user namespaces come from. */
export const KUBELET_USER = 'kubelet';

/** Where the account and subordinate-ID databases are (tests point them at synthetic files). */
export interface SubIDFiles {
  passwd: string;
  group: string;
  subuid: string;
  subgid: string;
}

export const DEFAULT_SUBID_FILES: SubIDFiles = { passwd: '/etc/passwd', group: '/etc/group', subuid: '/etc/subuid', subgid: '/etc/subgid' };

export interface KubeletMappings {
  /** The first host ID pods may be given. */
  firstID: number;
  /** How many IDs from firstID on. */
  length: number;
  /** Where they came from: the subordinate ranges, or the default (no `kubelet` user). */
  source: 'subids' | 'default';
}

export class SubIDError extends KubeletError {
  constructor(message: string) {
    super('ERR_USERNS_SUBIDS', message);
  }
}

const MAX_UINT32 = 2 ** 32 - 1;

async function readOptional(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** The numeric ID of `name` in a passwd- or group-format file (field 3), or undefined. */
export function lookupID(text: string | undefined, name: string): number | undefined {
  for (const line of (text ?? '').split('\n')) {
    const f = line.split(':');
    if (f[0] === name && f.length >= 3 && /^\d+$/.test(f[2]!)) return Number(f[2]);
  }
  return undefined;
}

/** The `start count` ranges of `owner` (by name or numeric ID) in a subuid/subgid file, in file order. */
export function ownerRanges(text: string | undefined, owner: string, ownerID: number | undefined): Array<{ start: number; count: number }> {
  const out: Array<{ start: number; count: number }> = [];
  for (const raw of (text ?? '').split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const f = line.split(':');
    if (f.length !== 3) continue;
    const who = f[0]!;
    if (who !== owner && (ownerID === undefined || who !== String(ownerID))) continue;
    if (!/^\d+$/.test(f[1]!) || !/^\d+$/.test(f[2]!)) throw new SubIDError(`invalid line ${JSON.stringify(raw)}`);
    out.push({ start: Number(f[1]), count: Number(f[2]) });
  }
  return out;
}

function rangesText(ranges: Array<{ start: number; count: number }>): string {
  return ranges.map((r, i) => `${i}: ${KUBELET_USER} ${r.start} ${r.count}`).join('\n');
}

/**
 * The kubelet's ID range for `idsPerPod` IDs per pod. Feature gate off or no `kubelet` user:
 * the default, [idsPerPod, 2^32). With the user: its one subordinate range, identical for
 * UIDs and GIDs, or an error (none, several, or UIDs and GIDs that differ), as upstream.
 */
export async function getKubeletMappings(idsPerPod: number, gateEnabled: boolean, files: SubIDFiles = DEFAULT_SUBID_FILES): Promise<KubeletMappings> {
  const fallback: KubeletMappings = { firstID: idsPerPod, length: 2 ** 32 - idsPerPod, source: 'default' };
  if (!gateEnabled) return fallback;
  const uid = lookupID(await readOptional(files.passwd), KUBELET_USER);
  if (uid === undefined) return fallback;
  const gid = lookupID(await readOptional(files.group), KUBELET_USER);
  const uids = ownerRanges(await readOptional(files.subuid), KUBELET_USER, uid);
  const gids = ownerRanges(await readOptional(files.subgid), KUBELET_USER, gid);
  if (uids.length === 0) throw new SubIDError(`error retrieving additional uids for user "${KUBELET_USER}": no entry in ${files.subuid}`);
  if (gids.length === 0) throw new SubIDError(`error retrieving additional gids for user "${KUBELET_USER}": no entry in ${files.subgid}`);
  if (rangesText(uids) !== rangesText(gids)) throw new SubIDError(`mismatched subuids and subgids for user "${KUBELET_USER}"`);
  if (uids.length !== 1) throw new SubIDError(`error parsing line ${JSON.stringify(`${rangesText(uids)}\n`)}: it must contain only one line`);
  const { start, count } = uids[0]!;
  if (start > MAX_UINT32 || count > MAX_UINT32) throw new SubIDError(`error parsing line ${JSON.stringify(`${rangesText(uids)}\n`)}: value out of range`);
  return { firstID: start, length: count, source: 'subids' };
}
