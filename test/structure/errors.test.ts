// One error family: every error class in src/ derives from KubeletError (src/util/errors.ts),
// and src/ throws no bare `Error`. Argument-contract violations may stay TypeError/RangeError,
// as Node's own APIs do.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KubeletError, isKubeletError } from '../../src/util/errors.js';

const srcRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'src');

function tsFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((e) => {
    const p = join(dir, e);
    return statSync(p).isDirectory() ? tsFiles(p) : e.endsWith('.ts') ? [p] : [];
  });
}

test('no error class in src/ bypasses KubeletError, and no bare Error is thrown', () => {
  const offences: string[] = [];
  for (const f of tsFiles(srcRoot)) {
    if (relative(srcRoot, f) === join('util', 'errors.ts')) continue; // the base itself
    const lines = readFileSync(f, 'utf8').split('\n');
    lines.forEach((line, i) => {
      if (/\bclass\s+\w+\s+extends\s+Error\b/.test(line) || /\bthrow\s+new\s+Error\s*\(/.test(line)) {
        offences.push(`${relative(srcRoot, f)}:${i + 1}: ${line.trim()}`);
      }
    });
  }
  assert.deepEqual(offences, [], `errors outside the family:\n${offences.join('\n')}`);
});

test('KubeletError carries code, cause and its subclass name', () => {
  class ExampleError extends KubeletError {
    constructor(cause: unknown) { super('ERR_EXAMPLE', 'example failed for pod ns/name', { cause }); }
  }
  const root = new Error('root');
  const e = new ExampleError(root);
  assert.equal(e.code, 'ERR_EXAMPLE');
  assert.equal(e.cause, root);
  assert.equal(e.name, 'ExampleError');
  assert.ok(isKubeletError(e, 'ERR_EXAMPLE'));
  assert.ok(!isKubeletError(e, 'ERR_OTHER'));
  assert.ok(!isKubeletError(root));
});
