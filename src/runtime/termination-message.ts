// Termination messages (upstream getTerminationMessage / readLastStringFromContainerLogs in
// kuberuntime_container.go): after a container exits, the last 4096 bytes of the file the
// container wrote at terminationMessagePath (found through the container's mounts); with
// FallbackToLogsOnError and a failed exit, when that file is empty or absent, the head of the
// last 80 lines of its CRI log, cut at 2048 bytes.

import { open } from 'node:fs/promises';
import type * as cri from './cri-types.js';

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

/**
 * The termination message of an exited container, '' when there is none. `fallbackToLogs` is
 * the policy FallbackToLogsOnError with a non-zero exit.
 */
export async function getTerminationMessage(status: Pick<cri.ContainerStatus, 'mounts' | 'log_path'>, terminationMessagePath: string, fallbackToLogs: boolean): Promise<string> {
  let checkLogs = fallbackToLogs;
  let message = '';
  const mount = terminationMessagePath ? (status.mounts ?? []).find((m) => m.container_path === terminationMessagePath) : undefined;
  if (mount) {
    try {
      const data = await readAtMost(mount.host_path, MAX_CONTAINER_TERMINATION_MESSAGE_LENGTH);
      message = data.toString('utf8');
      checkLogs = fallbackToLogs && data.length === 0;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
        return `Error on reading termination log ${mount.host_path}: ${(err as Error).message}`;
      }
    }
  }
  if (checkLogs && status.log_path) message = await readLastStringFromContainerLogs(status.log_path);
  return message;
}

/** Each container's share of the pod's termination-message budget (upstream normalizeStatus). */
export function terminationMessageBudget(containerCount: number): number {
  return containerCount > 0 ? Math.floor(MAX_POD_TERMINATION_MESSAGE_LENGTH / containerCount) : MAX_POD_TERMINATION_MESSAGE_LENGTH;
}
