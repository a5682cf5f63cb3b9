// Termination messages (upstream getTerminationMessage / readLastStringFromContainerLogs in
// kuberuntime_container.go): after a container exits, the last 4096 bytes of the file the
// container wrote at terminationMessagePath (found through the container's mounts); with
// FallbackToLogsOnError and a failed exit, when that file is empty or absent, the head of the
// last 80 lines of its CRI log, cut at 2048 bytes.

import { chmod, mkdir, open, writeFile } from 'node:fs/promises';
import { posix } from 'node:path';
import { buildContainerLogsPath, podContainerDir } from './container-config.js';
import * as labels from './labels.js';
import { buildPodLogsDirectory } from './sandbox-config.js';
import type { RuntimePodStatus } from './types.js';

/** upstream kubecontainer.MaxContainerTerminationMessageLength. */
export const MAX_CONTAINER_TERMINATION_MESSAGE_LENGTH = 4096;
/** upstream kubecontainer.MaxPodTerminationMessageLogLength: the budget shared by the pod's containers. */
export const MAX_POD_TERMINATION_MESSAGE_LENGTH = 12 * 1024;
/** upstream MaxContainerTerminationMessageLogLines / MaxContainerTerminationMessageLogLength. */
export const MAX_TERMINATION_MESSAGE_LOG_LINES = 80;
export const MAX_TERMINATION_MESSAGE_LOG_LENGTH = 2048;

/** The last `max` bytes of a file (upstream tail.ReadAtMost). */
export async function readAtMost(path: string, max: number): Promise<Buffer> {
  const fh = await open(path, 'r');
  try {
    const { size } = await fh.stat();
    const start = Math.max(0, size - max);
    const buf = Buffer.alloc(size - start);
    const { bytesRead } = await fh.read(buf, 0, buf.length, start);
    return buf.subarray(0, bytesRead);
  } finally {
    await fh.close();
  }
}

/**
 * The content of a CRI-format log (`<time> <stream> <P|F> <text>`): partial lines joined, the
 * last `lines` lines kept, then at most `limitBytes` bytes from their start.
 */
export function tailCriLog(text: string, lines: number, limitBytes: number): string {
  const out: string[] = [];
  let partial = '';
  for (const raw of text.split('\n')) {
    if (raw === '') continue;
    const m = /^\S+ (?:stdout|stderr) ([PF]) ?(.*)$/.exec(raw);
    if (!m) continue;
    if (m[1] === 'P') {
      partial += m[2];
      continue;
    }
    out.push(`${partial}${m[2]}\n`);
    partial = '';
  }
  if (partial) out.push(partial);
  const joined = Buffer.from(out.slice(-lines).join(''));
  return joined.subarray(0, limitBytes).toString('utf8');
}

/** The log file's tail, read from at most the last 80 lines' worth of bytes we may need. */
export async function readLastStringFromContainerLogs(logPath: string): Promise<string> {
  try {
    // each log line carries ~40 bytes of framing; 1 MiB is ample for 80 lines of interest
    const data = await readAtMost(logPath, 1024 * 1024);
    return tailCriLog(data.toString('utf8'), MAX_TERMINATION_MESSAGE_LOG_LINES, MAX_TERMINATION_MESSAGE_LOG_LENGTH);
  } catch (err) {
    return `Error on reading termination message from logs: ${(err as Error).message}`;
  }
}

/** The host file of one container instance's termination message: one per attempt, so the kubelet finds it again from the status alone. */
export function terminationMessageFile(containerDir: string, restartCount: number): string {
  return posix.join(containerDir, `termination-log.${restartCount}`);
}

/** Creates the (empty, world-writable) termination-message file of attempt `restartCount`; returns its path. */
export async function createTerminationMessageFileFor(containerDir: string, restartCount: number): Promise<string> {
  await mkdir(containerDir, { recursive: true, mode: 0o750 });
  const file = terminationMessageFile(containerDir, restartCount);
  await writeFile(file, '', { mode: 0o666 });
  // the mode given to open(2) is masked by the umask; the container user must be able to write
  await chmod(file, 0o666);
  return file;
}

/**
 * The termination message of an exited container, '' when there is none: the host file
 * (absent when the container has no terminationMessagePath), else with `fallbackToLogs` (the
 * FallbackToLogsOnError policy and a failed exit) the log's tail.
 */
export async function getTerminationMessage(hostFile: string | undefined, logPath: string, fallbackToLogs: boolean): Promise<string> {
  let checkLogs = fallbackToLogs;
  let message = '';
  if (hostFile) {
    try {
      const data = await readAtMost(hostFile, MAX_CONTAINER_TERMINATION_MESSAGE_LENGTH);
      message = data.toString('utf8');
      checkLogs = fallbackToLogs && data.length === 0;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
        return `Error on reading termination log ${hostFile}: ${(err as Error).message}`;
      }
    }
  }
  if (checkLogs && logPath) message = await readLastStringFromContainerLogs(logPath);
  return message;
}

export interface TerminationMessageDirs {
  rootDir: string;
  podLogsDir: string;
}

/**
 * The pod's runtime status with each exited container's termination message appended to its
 * exit message, as upstream's getContainerStatuses does. Read from the kubelet's own files
 * (whatever produced the status: a relist, an event, a status read).
 */
export async function withTerminationMessages(rs: RuntimePodStatus, namespace: string, name: string, dirs: TerminationMessageDirs): Promise<RuntimePodStatus> {
  if (!rs.containerStatuses.some((c) => c.state === 'exited')) return rs;
  const containerStatuses = await Promise.all(rs.containerStatuses.map(async (cs) => {
    if (cs.state !== 'exited') return cs;
    const info = labels.getContainerInfoFromLabels(cs.labels ?? {}, cs.annotations ?? {});
    // a container that could not even start has no log worth reading
    const fallbackToLogs = info.terminationMessagePolicy === 'FallbackToLogsOnError' && cs.exitCode !== 0 && cs.reason !== 'ContainerCannotRun';
    const hostFile = info.terminationMessagePath ? terminationMessageFile(podContainerDir(dirs.rootDir, rs.uid, cs.name), cs.restartCount) : undefined;
    const logPath = posix.join(buildPodLogsDirectory(dirs.podLogsDir, namespace, name, rs.uid), buildContainerLogsPath(cs.name, cs.restartCount));
    const message = await getTerminationMessage(hostFile, logPath, fallbackToLogs);
    if (!message) return cs;
    return { ...cs, message: cs.message ? `${cs.message}: ${message}` : message };
  }));
  return { ...rs, containerStatuses };
}

/** Each container's share of the pod's termination-message budget (upstream normalizeStatus). */
export function terminationMessageBudget(containerCount: number): number {
  return containerCount > 0 ? Math.floor(MAX_POD_TERMINATION_MESSAGE_LENGTH / containerCount) : MAX_POD_TERMINATION_MESSAGE_LENGTH;
}
