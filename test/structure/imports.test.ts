// Imports run one way between the top-level folders of src/: no folder imports a folder that
// imports it back, directly or through others. Every import counts (static, `export ... from`,
// dynamic `import()`, and `import type`: a type is a dependency of the design too).
// The sources are read from src/, not dist/, so type-only imports are seen.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const here = dirname(fileURLToPath(import.meta.url));
// dist/test/structure -> repo root
const repoRoot = resolve(here, '..', '..', '..');
const srcRoot = join(repoRoot, 'src');

export interface ImportEdge {
  from: string;
  to: string;
  typeOnly: boolean;
}

function tsFiles(dir: string): string[] {
  let out: string[] = [];
  for (const e of readdirSync(dir)) {
    const p = join(dir, e);
    if (statSync(p).isDirectory()) out = out.concat(tsFiles(p));
    else if (e.endsWith('.ts') && !e.endsWith('.d.ts')) out.push(p);
  }
  return out.sort();
}

/** Module specifiers of a file: imports, re-exports and dynamic import() with a literal. */
export function moduleSpecifiers(fileName: string, text: string): { spec: string; typeOnly: boolean }[] {
  const sf = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const out: { spec: string; typeOnly: boolean }[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      out.push({ spec: node.moduleSpecifier.text, typeOnly: !!node.importClause?.isTypeOnly });
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      out.push({ spec: node.moduleSpecifier.text, typeOnly: node.isTypeOnly });
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference) && ts.isStringLiteral(node.moduleReference.expression)) {
      out.push({ spec: node.moduleReference.expression.text, typeOnly: node.isTypeOnly });
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const arg = node.arguments[0];
      if (arg && (ts.isStringLiteral(arg) || ts.isNoSubstitutionTemplateLiteral(arg))) out.push({ spec: arg.text, typeOnly: false });
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      out.push({ spec: node.argument.literal.text, typeOnly: true });
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return out;
}

/** The unit a src file belongs to: its top-level folder, or the file itself at the top. */
export function unitOf(srcRelPath: string): string {
  const parts = srcRelPath.split(sep);
  return parts[0]!;
}

/** Every import between two different units of src/ (file paths relative to src/). */
function importEdges(): ImportEdge[] {
  const edges: ImportEdge[] = [];
  for (const file of tsFiles(srcRoot)) {
    for (const { spec, typeOnly } of moduleSpecifiers(file, readFileSync(file, 'utf8'))) {
      if (!spec.startsWith('.')) continue;
      let target = resolve(dirname(file), spec).replace(/\.js$/, '.ts');
      if (!existsSync(target) && existsSync(join(target, 'index.ts'))) target = join(target, 'index.ts');
      const rel = relative(srcRoot, target);
      // Outside src/ (a generated file, a worker) is not a folder of src.
      if (rel.startsWith('..')) continue;
      edges.push({ from: relative(srcRoot, file), to: rel, typeOnly });
    }
  }
  return edges;
}

/** Strongly connected components of the unit graph with more than one unit (Tarjan). */
export function unitCycles(edges: readonly ImportEdge[]): string[][] {
  const graph = new Map<string, Set<string>>();
  for (const e of edges) {
    const a = unitOf(e.from);
    const b = unitOf(e.to);
    if (a === b) continue;
    if (!graph.has(a)) graph.set(a, new Set());
    if (!graph.has(b)) graph.set(b, new Set());
    graph.get(a)!.add(b);
  }
  let index = 0;
  const idx = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const sccs: string[][] = [];
  const strong = (v: string): void => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!idx.has(w)) {
        strong(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, idx.get(w)!));
      }
    }
    if (low.get(v) === idx.get(v)) {
      const scc: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        scc.push(w);
      } while (w !== v);
      if (scc.length > 1) sccs.push(scc.sort());
    }
  };
  for (const v of [...graph.keys()].sort()) if (!idx.has(v)) strong(v);
  return sccs;
}

/** A readable account: each pair of units importing each other with the files on both sides, then longer cycles. */
export function describeCycles(edges: readonly ImportEdge[]): string[] {
  const byPair = new Map<string, ImportEdge[]>();
  for (const e of edges) {
    const a = unitOf(e.from);
    const b = unitOf(e.to);
    if (a === b) continue;
    const k = `${a} -> ${b}`;
    if (!byPair.has(k)) byPair.set(k, []);
    byPair.get(k)!.push(e);
  }
  const show = (list: ImportEdge[]): string => list.map((e) => `    ${e.from} imports ${e.to}${e.typeOnly ? ' (type only)' : ''}`).join('\n');
  const lines: string[] = [];
  const units = [...new Set([...byPair.keys()].flatMap((k) => k.split(' -> ')))].sort();
  const mutual = new Set<string>();
  for (const a of units) {
    for (const b of units) {
      if (a >= b) continue;
      const ab = byPair.get(`${a} -> ${b}`);
      const ba = byPair.get(`${b} -> ${a}`);
      if (!ab || !ba) continue;
      mutual.add(`${a}|${b}`);
      lines.push(`${a} <-> ${b}:\n${show(ab)}\n${show(ba)}`);
    }
  }
  // Longer cycles: for each link inside a component that is not half of a mutual pair, the
  // shortest way back, shown hop by hop with the first files of each hop.
  const seen = new Set<string>();
  for (const scc of unitCycles(edges)) {
    const inScc = new Set(scc);
    const next = (u: string): string[] => units.filter((v) => inScc.has(v) && byPair.has(`${u} -> ${v}`));
    for (const a of scc) {
      for (const b of next(a)) {
        if (mutual.has(a < b ? `${a}|${b}` : `${b}|${a}`)) continue;
        const back = shortestPath(b, a, next);
        if (!back) continue;
        const cycle = [a, ...back];
        const hops = cycle.slice(0, -1).map((u, i) => `${u} -> ${cycle[i + 1]}`);
        const key = [...hops].sort().join(',');
        if (seen.has(key)) continue;
        seen.add(key);
        lines.push(`cycle ${cycle.join(' -> ')}:\n${hops.map((k) => `  ${k}:\n${show(byPair.get(k)!.slice(0, 3))}`).join('\n')}`);
      }
    }
  }
  return lines;
}

function shortestPath(from: string, to: string, next: (u: string) => string[]): string[] | undefined {
  const prev = new Map<string, string>([[from, '']]);
  const queue = [from];
  while (queue.length) {
    const u = queue.shift()!;
    if (u === to) {
      const path = [u];
      for (let p = prev.get(u)!; p; p = prev.get(p)!) path.unshift(p);
      return path;
    }
    for (const v of next(u)) if (!prev.has(v)) { prev.set(v, u); queue.push(v); }
  }
  return undefined;
}

test('the import parser sees static, re-exported, type-only and dynamic imports', () => {
  const specs = moduleSpecifiers('x.ts', [
    "import { a } from '../a/a.js';",
    "import type { B } from '../b/b.js';",
    "export { c } from '../c/c.js';",
    "export type { D } from '../d/d.js';",
    "import '../e/e.js';",
    "const f = await import('../f/f.js');",
    "type G = import('../g/g.js').G;",
    "// import { h } from '../h/h.js';",
    "const s = \"import { i } from '../i/i.js'\";",
  ].join('\n'));
  assert.deepEqual(specs, [
    { spec: '../a/a.js', typeOnly: false },
    { spec: '../b/b.js', typeOnly: true },
    { spec: '../c/c.js', typeOnly: false },
    { spec: '../d/d.js', typeOnly: true },
    { spec: '../e/e.js', typeOnly: false },
    { spec: '../f/f.js', typeOnly: false },
    { spec: '../g/g.js', typeOnly: true },
  ]);
});

test('cycles between folders are found, directly and through a third', () => {
  const e = (from: string, to: string): ImportEdge => ({ from, to, typeOnly: false });
  assert.deepEqual(unitCycles([e('a/x.ts', 'b/y.ts'), e('b/y.ts', 'c/z.ts')]), []);
  assert.deepEqual(unitCycles([e('a/x.ts', 'b/y.ts'), e('b/z.ts', 'a/w.ts'), e('a/x.ts', 'a/w.ts')]), [['a', 'b']]);
  const three = [e('a/x.ts', 'b/y.ts'), e('b/y.ts', 'c/z.ts'), e('c/z.ts', 'a/x.ts')];
  assert.deepEqual(unitCycles(three), [['a', 'b', 'c']]);
  const text = describeCycles(three).join('\n');
  assert.match(text, /cycle a -> b -> c -> a/);
  assert.match(text, /c\/z\.ts imports a\/x\.ts/);
  assert.match(describeCycles([e('a/x.ts', 'b/y.ts'), e('b/z.ts', 'a/w.ts')]).join('\n'), /a <-> b:\n {4}a\/x\.ts imports b\/y\.ts\n {4}b\/z\.ts imports a\/w\.ts/);
});

test('no folder of src/ imports a folder that imports it back', () => {
  const edges = importEdges();
  assert.ok(edges.length > 50, `found only ${edges.length} imports between folders of ${srcRoot}`);
  const cycles = describeCycles(edges);
  assert.equal(cycles.length, 0, `imports between folders of src/ must run one way:\n${cycles.join('\n')}`);
});
