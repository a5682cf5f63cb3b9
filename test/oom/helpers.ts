// Shared by the OOM tests that use the real addon (KTS_NATIVE_ADDON overrides its path).
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

import type { NativeOomEvent, NativeOomExports, NativeOomWatcherHandle } from '../../src/oom/native-types.js';
import { loadOomNative } from '../../src/oom/oom-watcher.js';
import { repoRoot } from '../fixtures/runtime.js';

/** The addon's OOM exports; throws (failing the test) when the addon cannot be loaded. */
export function realNative(): Required<NativeOomExports> {
  const { native, error } = loadOomNative();
  if (!native?.OomWatcherHandle || !native.oomEbpfBuild) throw new Error(`native OOM watcher unavailable: ${error ?? 'no OomWatcherHandle export'}`);
  return native as Required<NativeOomExports>;
}

/** A native handle whose events collect into `events`, with a waiter. */
export function collectingHandle(native: Required<NativeOomExports>): {
  handle: NativeOomWatcherHandle;
  events: NativeOomEvent[];
  waitFor(pred: (e: NativeOomEvent) => boolean, what: string, timeoutMs?: number): Promise<NativeOomEvent>;
} {
  const events: NativeOomEvent[] = [];
  const waiters: { pred: (e: NativeOomEvent) => boolean; resolve: (e: NativeOomEvent) => void }[] = [];
  const handle = new native.OomWatcherHandle((batch) => {
    for (const e of batch) {
      events.push(e);
      for (let i = waiters.length - 1; i >= 0; i--) {
        if (waiters[i]!.pred(e)) {
          waiters[i]!.resolve(e);
          waiters.splice(i, 1);
        }
      }
    }
  });
  const waitFor = (pred: (e: NativeOomEvent) => boolean, what: string, timeoutMs = 20_000): Promise<NativeOomEvent> => {
    const seen = events.find(pred);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no native event for ${what} within ${timeoutMs} ms; got ${JSON.stringify(events, (_k, v) => (typeof v === 'bigint' ? String(v) : v))}`)), timeoutMs);
      waiters.push({ pred, resolve: (e) => { clearTimeout(timer); resolve(e); } });
    });
  };
  return { handle, events, waitFor };
}

/**
 * Whether this machine can build the eBPF source (clang, bpftool, libbpf headers, BTF), by the
 * same check binding.gyp runs. When it can, the addon must have it and it must load.
 */
export async function ebpfBuildExpected(): Promise<{ expected: boolean; reason?: string }> {
  const mod = (await import(pathToFileURL(join(repoRoot(), 'native', 'detect-ebpf.mjs')).href)) as {
    detectEbpfBuild(env?: Record<string, string | undefined>): { ok: boolean; reason?: string };
  };
  // Honours KTS_DISABLE_EBPF too, so a suite run against a build made with it expects none.
  const r = mod.detectEbpfBuild(process.env);
  return r.ok ? { expected: true } : { expected: false, reason: r.reason };
}
