#!/usr/bin/env node
// Decides at configure time whether binding.gyp builds the eBPF OOM source: it needs clang (to
// compile the BPF object), bpftool (to generate vmlinux.h), the libbpf headers and this host's
// BTF (/sys/kernel/btf/vmlinux). libbpf itself is dlopen()ed at run time, so it is not linked.
//   node native/detect-ebpf.mjs           prints 1 or 0
//   node native/detect-ebpf.mjs --reason  prints why not ('' when it is built)
// KTS_DISABLE_EBPF=1 forces 0 (to test the build without it).
import { accessSync, constants, realpathSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const SEARCH = [...(process.env.PATH ?? '').split(delimiter), '/usr/sbin', '/sbin', '/usr/local/sbin'];
const INCLUDE_DIRS = ['/usr/include', '/usr/local/include'];

function canRun(file) {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function canRead(file) {
  try {
    accessSync(file, constants.R_OK);
    return true;
  } catch {
    return false;
  }
}

/** Absolute path of an executable, or undefined. */
export function which(name) {
  if (name.includes('/')) return canRun(name) ? name : undefined;
  for (const dir of SEARCH) {
    if (dir && canRun(join(dir, name))) return join(dir, name);
  }
  return undefined;
}

export const BTF_PATH = '/sys/kernel/btf/vmlinux';

/** { ok: true, clang, bpftool } or { ok: false, reason }. */
export function detectEbpfBuild(env = process.env) {
  if (env.KTS_DISABLE_EBPF && env.KTS_DISABLE_EBPF !== '0') return { ok: false, reason: 'disabled at build time (KTS_DISABLE_EBPF)' };
  if (process.platform !== 'linux') return { ok: false, reason: `not Linux (${process.platform})` };
  const clang = which(env.CLANG || 'clang');
  if (!clang) return { ok: false, reason: 'clang not found at build time' };
  const bpftool = which(env.BPFTOOL || 'bpftool');
  if (!bpftool) return { ok: false, reason: 'bpftool not found at build time' };
  const headers = ['bpf/libbpf.h', 'bpf/bpf_helpers.h', 'bpf/bpf_core_read.h'];
  for (const h of headers) {
    if (!INCLUDE_DIRS.some((d) => canRead(join(d, h)))) return { ok: false, reason: `libbpf headers missing at build time (${h}; install libbpf-dev)` };
  }
  if (!canRead(BTF_PATH)) return { ok: false, reason: `no kernel BTF at build time (${BTF_PATH})` };
  return { ok: true, clang, bpftool };
}

function isMain() {
  try {
    return !!process.argv[1] && realpathSync(process.argv[1]) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isMain()) {
  const r = detectEbpfBuild();
  // gyp pastes the reason into a C string define: keep it to plain characters.
  if (process.argv.includes('--reason')) process.stdout.write(r.ok ? '' : r.reason.replace(/[^A-Za-z0-9 _.,:;/()=+-]/g, ' '));
  else process.stdout.write(r.ok ? '1' : '0');
}
