// Machine facts for the node status, read as cadvisor reads them: cores and memory, huge page
// pools, machine-id, product_uuid, boot_id, the kernel release, PRETTY_NAME of os-release and
// the size of the filesystem holding the kubelet root dir. Paths hang off `root` for tests.

import { readFile, readdir, statfs } from 'node:fs/promises';
import { lookup } from 'node:dns/promises';
import { cpus, networkInterfaces, release, totalmem } from 'node:os';
import { isIP } from 'node:net';
import { join } from 'node:path';
import type { MachineInfo } from './setters.js';
import { swapTotalFromMeminfo } from './node-features.js';

export interface MachineInfoOptions {
  /** The kubelet root dir (--root-dir): ephemeral-storage is the size of its filesystem. */
  rootDir: string;
  /** Prefix of /etc, /proc and /sys (tests). */
  root?: string;
}

async function readTrimmed(path: string): Promise<string | undefined> {
  try {
    return (await readFile(path, 'utf8')).trim();
  } catch {
    return undefined;
  }
}

/** PRETTY_NAME of an os-release file's text, unquoted ("Linux" when absent, as cadvisor). */
export function osImageFromOsRelease(text: string | undefined): string {
  for (const line of (text ?? '').split('\n')) {
    const m = /^PRETTY_NAME=(.*)$/.exec(line.trim());
    if (m) return m[1]!.replace(/^(["'])(.*)\1$/, '$2');
  }
  return 'Linux';
}

/** MemTotal of /proc/meminfo in bytes. */
export function memTotalFromMeminfo(text: string | undefined): number | undefined {
  const m = /^MemTotal:\s+(\d+)\s*kB/m.exec(text ?? '');
  return m ? Number(m[1]) * 1024 : undefined;
}

async function hugePages(dir: string): Promise<MachineInfo['hugePages']> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return [];
  }
  const out: MachineInfo['hugePages'] = [];
  for (const n of names) {
    const m = /^hugepages-(\d+)kB$/.exec(n);
    if (!m) continue;
    const pages = Number(await readTrimmed(join(dir, n, 'nr_hugepages')) ?? '0');
    out.push({ pageSizeKiB: Number(m[1]), numPages: Number.isFinite(pages) ? pages : 0 });
  }
  return out.sort((a, b) => a.pageSizeKiB - b.pageSizeKiB);
}

export async function readMachineInfo(o: MachineInfoOptions): Promise<MachineInfo> {
  const r = o.root ?? '/';
  const [machineID, dbusID, systemUUID, bootID, osRelease, usrOsRelease, meminfo, pages] = await Promise.all([
    readTrimmed(join(r, 'etc/machine-id')), readTrimmed(join(r, 'var/lib/dbus/machine-id')),
    readTrimmed(join(r, 'sys/class/dmi/id/product_uuid')), readTrimmed(join(r, 'proc/sys/kernel/random/boot_id')),
    readTrimmed(join(r, 'etc/os-release')), readTrimmed(join(r, 'usr/lib/os-release')), readTrimmed(join(r, 'proc/meminfo')),
    hugePages(join(r, 'sys/kernel/mm/hugepages')),
  ]);
  let rootfsCapacityBytes: number | undefined;
  try {
    const s = await statfs(o.rootDir);
    rootfsCapacityBytes = s.blocks * s.bsize;
  } catch { /* no ephemeral-storage: Ready says the capacity is missing */ }
  const info: MachineInfo = {
    numCores: cpus().length,
    memoryCapacityBytes: memTotalFromMeminfo(meminfo) ?? totalmem(),
    hugePages: pages,
    machineID: machineID ?? dbusID ?? '',
    systemUUID: systemUUID ?? '',
    bootID: bootID ?? '',
    kernelVersion: release(),
    osImage: osImageFromOsRelease(osRelease ?? usrOsRelease),
  };
  if (rootfsCapacityBytes !== undefined) info.rootfsCapacityBytes = rootfsCapacityBytes;
  if (meminfo !== undefined) info.swapCapacityBytes = swapTotalFromMeminfo(meminfo);
  return info;
}

const usable = (ip: string) => !/^(127\.|169\.254\.|22[4-9]\.|23\d\.|::1$|fe80:|ff)/i.test(ip);

/**
 * Addresses the node name resolves to that belong to this host (upstream: DNS lookup of the
 * node name, validated against the host's interfaces), else the host's first usable address.
 */
export async function nodeIPCandidates(nodeName: string): Promise<string[]> {
  const own = Object.values(networkInterfaces()).flat().filter((a) => a && !a.internal).map((a) => a!.address).filter(usable);
  let resolved: string[] = [];
  try {
    resolved = (await lookup(nodeName, { all: true })).map((a) => a.address).filter((a) => isIP(a) && usable(a) && own.includes(a));
  } catch { /* not in DNS: fall back to the interfaces */ }
  return resolved.length ? resolved : own;
}
