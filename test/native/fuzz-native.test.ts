// The native parsers under libFuzzer (scripts/fuzz-native.sh, harnesses in native/fuzz/): the
// cgroup file parsers of the batch reader and the OOM watcher's /proc, cgroup and /dev/kmsg
// parsers, each run for a bounded time from its committed seeds (test/fuzz/corpus/) with
// AddressSanitizer and UndefinedBehaviorSanitizer. A crash, a sanitizer report or a broken
// invariant fails this test with the harness, the seed and the input. The seeds include the
// inputs of the bugs found so far (a pid past INT32_MAX in cgroup.procs: signed overflow; a
// /proc/<pid>/stat ending at its comm's ')': a read past the end; a memory.events counter past
// 64 bits: wrapped around by the pressure backend; a victim whose comm says ",pid=1" or
// "Killed process ": its pid taken from its name, or its kill not found in the kernel log).
// KTS_FUZZ_NATIVE_SECS sets the
// time per harness (default 20).

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

// dist/test/native -> repo root
const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const SECS = Math.max(1, Number(process.env.KTS_FUZZ_NATIVE_SECS) || 20);

function run(args: string[]): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    const child = spawn('bash', [join(root, 'scripts', 'fuzz-native.sh'), ...args], { cwd: root });
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { out += d; });
    child.on('close', (code) => resolve({ code: code ?? 1, out }));
  });
}

describe('native parsers under libFuzzer', () => {
  for (const harness of ['cgroup_parse', 'oom_parse']) {
    it(`${harness}: no crash, sanitizer report or broken invariant in ${SECS}s`, { timeout: (SECS + 120) * 1000 }, async (t) => {
      const r = await run([String(SECS), harness]);
      t.diagnostic(r.out.trim());
      assert.equal(r.code, 0, r.out);
      assert.match(r.out, new RegExp(`${harness}: ok \\(\\d+ inputs\\)`));
    });
  }
});
