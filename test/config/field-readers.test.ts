// Keeps the field table (src/config/schema.ts) honest: a field declared implemented must be
// read by code outside src/config, and a field read there must be declared implemented.
// "Read" is found with the type checker: a property access, element access or destructuring
// whose object is the KubeletConfig (or KubeletFlags) type, or a structural view of it
// (a type the config is assignable to that declares the property). Renaming a variable does
// not fool it; reading a field under a name the scanner does not see would fail the test.

import assert from 'node:assert/strict';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

import ts from 'typescript';

import { FIELD_SUPPORT, FLAG_SUPPORT } from '../../src/config/index.js';

/** The repository root: the directory above this file (source or dist) holding src/config. */
function repoRoot(): string {
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'src', 'config', 'kubelet-config.ts'))) return dir;
    if (dirname(dir) === dir) throw new Error('repository root (src/config/kubelet-config.ts) not found');
  }
}

function tsFiles(dir: string): string[] {
  let out: string[] = [];
  for (const e of readdirSync(dir)) {
    const p = join(dir, e);
    if (statSync(p).isDirectory()) out = out.concat(tsFiles(p));
    else if (p.endsWith('.ts') && !p.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

/** Field name → the files (relative to the root) that read it, per config type. */
type Reads = { config: Map<string, Set<string>>; flags: Map<string, Set<string>> };
/** One read: which type, which field, in which file (absolute). */
type Read = { kind: keyof Reads; field: string; file: string };

function interfaceType(checker: ts.TypeChecker, file: ts.SourceFile, name: string): ts.Type {
  for (const stmt of file.statements) {
    if (ts.isInterfaceDeclaration(stmt) && stmt.name.text === name) {
      return checker.getDeclaredTypeOfSymbol(checker.getSymbolAtLocation(stmt.name)!);
    }
  }
  throw new Error(`interface ${name} not found in ${file.fileName}`);
}

function scan(root: string, files: string[], inScope: (file: string) => boolean): Read[] {
  const program = ts.createProgram(files, {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    strict: true,
    skipLibCheck: true,
    noEmit: true,
    types: ['node'],
  });
  const checker = program.getTypeChecker();
  const source = (rel: string): ts.SourceFile => {
    const sf = program.getSourceFile(join(root, rel));
    if (sf === undefined) throw new Error(`${rel} is not in the program`);
    return sf;
  };
  const targets = [
    { kind: 'config' as const, type: interfaceType(checker, source('src/config/kubelet-config.ts'), 'KubeletConfig'), fields: new Set(Object.keys(FIELD_SUPPORT)) },
    { kind: 'flags' as const, type: interfaceType(checker, source('src/config/flags.ts'), 'KubeletFlags'), fields: new Set(Object.keys(FLAG_SUPPORT)) },
  ];
  const allFields = new Set(targets.flatMap((t) => [...t.fields]));
  const reads: Read[] = [];
  const verdicts = new Map<ts.Type, (typeof targets)[number] | null>();

  // Which config type a value of type `t` is: the interface itself, or a structural view of
  // it (e.g. `{ statsBackend: ... }`) that declares only config fields and that the config is
  // assignable to. An unrelated type sharing a field name (`{ port, host, path }`) is neither.
  const targetOf = (t: ts.Type): (typeof targets)[number] | null => {
    let v = verdicts.get(t);
    if (v !== undefined) return v;
    v = null;
    for (const target of targets) {
      if (t === target.type) v = target;
      else {
        const props = t.getProperties();
        if (props.length > 0 && props.every((p) => target.fields.has(p.name)) && checker.isTypeAssignableTo(target.type, t)) v = target;
      }
      if (v !== null) break;
    }
    verdicts.set(t, v);
    return v;
  };

  const record = (objectType: ts.Type, name: string, file: string): void => {
    const t = checker.getNonNullableType(objectType);
    if (t.flags & (ts.TypeFlags.Any | ts.TypeFlags.Unknown)) return;
    const target = targetOf(t);
    if (target !== null && target.fields.has(name)) reads.push({ kind: target.kind, field: name, file });
  };

  for (const sf of program.getSourceFiles()) {
    if (sf.isDeclarationFile || !inScope(sf.fileName)) continue;
    const file = sf.fileName;
    // Ask the checker only about names that are fields: it is most of the cost.
    const visit = (node: ts.Node): void => {
      if (ts.isPropertyAccessExpression(node)) {
        if (allFields.has(node.name.text)) record(checker.getTypeAtLocation(node.expression), node.name.text, file);
      } else if (ts.isElementAccessExpression(node) && ts.isStringLiteralLike(node.argumentExpression)) {
        if (allFields.has(node.argumentExpression.text)) record(checker.getTypeAtLocation(node.expression), node.argumentExpression.text, file);
      } else if (ts.isObjectBindingPattern(node)) {
        const keys = node.elements.map((el) => el.propertyName ?? el.name).filter((k) => (ts.isIdentifier(k) || ts.isStringLiteralLike(k)) && allFields.has(k.text));
        if (keys.length > 0) {
          const objectType = checker.getTypeAtLocation(node);
          for (const key of keys) record(objectType, (key as ts.Identifier | ts.StringLiteralLike).text, file);
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(sf);
  }
  return reads;
}

describe('config field table vs the code that reads it', () => {
  const root = repoRoot();
  const srcConfig = join(root, 'src', 'config') + sep;
  const sample = join(root, 'test', 'fixtures', 'config', 'readers', 'sample-reader.ts');
  const real: Reads = { config: new Map(), flags: new Map() };
  const sampleReads: Reads = { config: new Map(), flags: new Map() };

  before(() => {
    const inSrc = (f: string): boolean => resolve(f).startsWith(join(root, 'src') + sep) && !resolve(f).startsWith(srcConfig);
    // One program for both: building it is most of this test's time.
    for (const r of scan(root, [...tsFiles(join(root, 'src')), sample], (f) => inSrc(f) || resolve(f) === sample)) {
      const into = resolve(r.file) === sample ? sampleReads : real;
      const files = into[r.kind].get(r.field) ?? new Set<string>();
      files.add(relative(root, r.file));
      into[r.kind].set(r.field, files);
    }
  });

  it('the scanner sees every way of reading a field, and only reads of the config', () => {
    assert.deepEqual([...sampleReads.config.keys()].sort(), [
      'authentication', 'clusterDomain', 'eventBurst', 'evictionHard', 'failSwapOn', 'maxPods', 'podPidsLimit', 'registerNode',
    ]);
    assert.deepEqual([...sampleReads.flags.keys()], ['kubeconfig']);
  });

  it('every field declared implemented is read by code outside src/config', () => {
    const unread = Object.entries(FIELD_SUPPORT)
      .filter(([f, s]) => s === 'implemented' && !real.config.has(f))
      .map(([f]) => f);
    assert.deepEqual(unread, [], `declared implemented in src/config/schema.ts but read nowhere outside src/config: ${unread.join(', ')}`);
    const unreadFlags = Object.entries(FLAG_SUPPORT)
      .filter(([f, s]) => s === 'implemented' && !real.flags.has(f))
      .map(([f]) => f);
    assert.deepEqual(unreadFlags, [], `flag settings declared implemented but read nowhere: ${unreadFlags.join(', ')}`);
  });

  it('every field read outside src/config is declared implemented', () => {
    const undeclared = [...real.config.entries()]
      .filter(([f]) => FIELD_SUPPORT[f as keyof typeof FIELD_SUPPORT] !== 'implemented')
      .map(([f, files]) => `${f} (read in ${[...files].join(', ')})`);
    assert.deepEqual(undeclared, [], 'read by code but declared not implemented in src/config/schema.ts');
    const undeclaredFlags = [...real.flags.entries()]
      .filter(([f]) => FLAG_SUPPORT[f as keyof typeof FLAG_SUPPORT] === 'not-implemented')
      .map(([f, files]) => `${f} (read in ${[...files].join(', ')})`);
    assert.deepEqual(undeclaredFlags, [], 'flag settings read by code but declared not implemented');
  });
});
