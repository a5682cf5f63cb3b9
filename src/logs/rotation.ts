// Container log rotation (upstream: the container log manager): every monitor interval, each
// running container's live log over containerLogMaxSize is renamed to `<log>.<timestamp>` and the
// runtime told to reopen it (CRI ReopenContainerLog); older rotations are gzip'd (the newest
// stays plain, as the runtime may still be writing it until the reopen lands), and at most
// containerLogMaxFiles files (live one included) are kept. Every timer runs on the injected Clock.
import { createReadStream, createWriteStream } from 'node:fs';
import { readdir, rename, rm, stat, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import type { Clock, Timer } from '../util/clock.js';
import { errorMessage } from '../util/errors.js';
import type { Logger } from '../util/log.js';
import { statBatch } from '../util/stat-batch.js';
import { LogRotationError } from './errors.js';
import { COMPRESS_SUFFIX, TMP_SUFFIX, rotationStamp } from './files.js';

/** The CRI calls rotation makes (shapes of the CRI client's; the runtime layer imports this folder). */
export interface LogRotationRuntime {
  listContainers(filter?: { state?: { state: 'CONTAINER_RUNNING' } } | null): Promise<{ id: string }[]>;
  containerStatus(id: string): Promise<{ status: { log_path?: string } | null }>;
  reopenContainerLog(id: string): Promise<void>;
}

export interface LogRotationPolicy {
  /** containerLogMaxSize in bytes. */
  maxSizeBytes: number;
  /** containerLogMaxFiles: the live file and its rotations. */
  maxFiles: number;
}

export interface ContainerLogManagerOptions extends LogRotationPolicy {
  runtime: LogRotationRuntime;
  clock: Clock;
  log: Logger;
  /** containerLogMonitorInterval (ms). */
  monitorIntervalMs: number;
  /** containerLogMaxWorkers. */
  maxWorkers: number;
  /**
   * The running containers' ids as the kubelet's last relist saw them (at most a relist period
   * old), or undefined when it has none fresh: then the pass asks the runtime (ListContainers).
   * A pass over 1000 containers then decodes no list response every monitor interval.
   */
  runningContainers?: () => string[] | undefined;
}

/** `<log>.<stamp>` siblings of a live log, plain, compressed or temporary, sorted by name. */
async function rotationsOf(log: string): Promise<string[]> {
  const prefix = `${basename(log)}.`;
  const dir = dirname(log);
  const names = await readdir(dir).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return [] as string[];
    throw err;
  });
  return names.filter((n) => n.startsWith(prefix)).sort().map((n) => join(dir, n));
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(() => true, () => false);
}

/** gzip `log` into `log.gz` through `log.tmp` (a crash leaves a temporary the next pass removes). */
export async function compressLog(log: string): Promise<void> {
  const tmp = `${log}${TMP_SUFFIX}`;
  try {
    await pipeline(createReadStream(log), createGzip(), createWriteStream(tmp, { mode: 0o644 }));
    await rename(tmp, `${log}${COMPRESS_SUFFIX}`);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  await unlink(log);
}

export class ContainerLogManager {
  #timer?: Timer;
  #running = false;
  #pass?: Promise<void>;
  /**
   * Each running container's log path (the runtime fixes it at CreateContainer): one
   * ContainerStatus per container, not one per container per pass (1000 pods: 100 calls/s).
   */
  readonly #logPaths = new Map<string, string>();

  constructor(private readonly opts: ContainerLogManagerOptions) {}

  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#arm();
  }

  /** Stops the monitor; a pass in progress finishes its current files. */
  stop(): void {
    this.#running = false;
    this.#timer?.cancel();
    this.#timer = undefined;
  }

  /** The pass in progress (tests wait for it). */
  idle(): Promise<void> {
    return this.#pass ?? Promise.resolve();
  }

  #arm(): void {
    this.#timer = this.opts.clock.setTimeout(() => {
      this.#pass = this.rotateLogs()
        .catch((err) => this.opts.log.error('Failed to rotate container logs', { err: errorMessage(err) }))
        .finally(() => {
          this.#pass = undefined;
          if (this.#running) this.#arm();
        });
    }, this.opts.monitorIntervalMs);
  }

  /**
   * One pass over the running containers: one batched stat of every known live log, then the
   * containers whose log is over the limit, missing or not known yet go through
   * processContainer, at most maxWorkers at a time.
   */
  async rotateLogs(): Promise<void> {
    const ids = this.opts.runningContainers?.() ?? (await this.opts.runtime.listContainers({ state: { state: 'CONTAINER_RUNNING' } })).map((c) => c.id);
    const listed = new Set(ids);
    for (const id of this.#logPaths.keys()) if (!listed.has(id)) this.#logPaths.delete(id);
    // each id's row in the batch; -1: log path not known yet, -2: the container has none
    const row = new Int32Array(ids.length);
    const logs: string[] = [];
    for (let k = 0; k < ids.length; k++) {
      const log = this.#logPaths.get(ids[k]!);
      row[k] = log === undefined ? -1 : log === '' ? -2 : logs.push(log) - 1;
    }
    const st = logs.length > 0 ? await statBatch(logs) : undefined;
    const todo: string[] = [];
    for (let k = 0; k < ids.length; k++) {
      const i = row[k]!;
      if (i === -2) continue;
      if (i >= 0 && st!.ok(i) && st!.size(i) < this.opts.maxSizeBytes) continue;
      todo.push(ids[k]!);
    }
    if (todo.length === 0) return;
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < todo.length) {
        const id = todo[next++]!;
        try {
          await this.processContainer(id);
        } catch (err) {
          this.opts.log.error('Failed to rotate log for container', { containerID: id, err: errorMessage(err) });
        }
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, Math.min(this.opts.maxWorkers, todo.length)) }, worker));
  }

  /** Rotates one container's log when it is over the limit. */
  async processContainer(id: string): Promise<void> {
    let log = this.#logPaths.get(id);
    if (log === undefined) {
      const { status } = await this.opts.runtime.containerStatus(id);
      if (!status) return;
      log = status.log_path ?? '';
      this.#logPaths.set(id, log);
    }
    if (!log) return;
    let size: number;
    try {
      size = (await stat(log)).size;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      // a rotation whose reopen failed can leave no live file: ask the runtime to make one
      await this.opts.runtime.reopenContainerLog(id);
      size = (await stat(log)).size;
    }
    if (size < this.opts.maxSizeBytes) return;
    await this.rotateLog(id, log);
  }

  /** Prunes and compresses the old rotations, then rotates the live log. */
  async rotateLog(id: string, log: string): Promise<void> {
    let rotations: string[];
    try {
      rotations = await this.cleanupUnusedLogs(await rotationsOf(log));
      rotations = await this.removeExcessLogs(rotations);
    } catch (err) {
      throw new LogRotationError(log, 'cleanup', err);
    }
    for (const r of rotations) {
      if (r.endsWith(COMPRESS_SUFFIX)) continue;
      try {
        await compressLog(r);
      } catch (err) {
        throw new LogRotationError(r, 'compress', err);
      }
    }
    await this.rotateLatestLog(id, log);
  }

  /** Drops temporaries and plain files whose compressed copy exists (an interrupted compression). */
  private async cleanupUnusedLogs(rotations: string[]): Promise<string[]> {
    const keep: string[] = [];
    for (const r of rotations) {
      const unused = r.endsWith(TMP_SUFFIX) || (!r.endsWith(COMPRESS_SUFFIX) && (await exists(`${r}${COMPRESS_SUFFIX}`)));
      if (unused) await rm(r, { force: true });
      else keep.push(r);
    }
    return keep;
  }

  /** Keeps maxFiles-2 rotations: with the one about to be made and the live file, maxFiles. */
  private async removeExcessLogs(rotations: string[]): Promise<string[]> {
    const max = Math.max(0, this.opts.maxFiles - 2);
    const sorted = [...rotations].sort();
    const excess = Math.max(0, sorted.length - max);
    for (const r of sorted.slice(0, excess)) await rm(r, { force: true });
    return sorted.slice(excess);
  }

  private async rotateLatestLog(id: string, log: string): Promise<void> {
    let stampMs = this.opts.clock.now();
    let rotated = `${log}.${rotationStamp(stampMs)}`;
    // two rotations within a second must not overwrite each other
    while ((await exists(rotated)) || (await exists(`${rotated}${COMPRESS_SUFFIX}`))) {
      stampMs += 1000;
      rotated = `${log}.${rotationStamp(stampMs)}`;
    }
    try {
      await rename(log, rotated);
    } catch (err) {
      throw new LogRotationError(log, 'rename', err);
    }
    try {
      await this.opts.runtime.reopenContainerLog(id);
    } catch (err) {
      // put the log back so the next pass can try again
      await rename(rotated, log).catch((e) => this.opts.log.error('Failed to rename rotated log back', { rotatedLog: rotated, newLog: log, containerID: id, err: errorMessage(e) }));
      throw new LogRotationError(log, `reopen of container ${id}`, err);
    }
  }
}

/**
 * Removes the log directories (`<namespace>_<name>_<uid>`) under podLogsDir of pods whose
 * content may go (upstream evictPodLogsDirectories). Only real directories directly under
 * podLogsDir are touched; a symlink there is never followed.
 */
export async function cleanupPodLogDirs(podLogsDir: string, shouldRemove: (podUID: string) => boolean, log?: Logger): Promise<string[]> {
  let entries;
  try {
    entries = await readdir(podLogsDir, { withFileTypes: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  const removed: string[] = [];
  for (const e of entries) {
    // Dirent types come from lstat: a symlink is not a directory here
    if (!e.isDirectory() || e.name === '.' || e.name === '..' || e.name.includes('/')) continue;
    const uid = e.name.slice(e.name.lastIndexOf('_') + 1);
    if (!uid || !shouldRemove(uid)) continue;
    const dir = join(podLogsDir, e.name);
    try {
      await rm(dir, { recursive: true, force: true });
      removed.push(dir);
    } catch (err) {
      log?.error('Failed to remove pod logs directory', { path: dir, err: errorMessage(err) });
    }
  }
  return removed;
}

/**
 * Removes a container's live log and every rotation of it (upstream: the log manager's Clean,
 * called when a dead container is garbage-collected).
 */
export async function cleanContainerLogs(logPath: string): Promise<void> {
  if (!logPath) return;
  for (const r of await rotationsOf(logPath)) await rm(r, { force: true });
  await rm(logPath, { force: true });
}
