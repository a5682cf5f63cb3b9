// What the in-VM tests know about the node they run on (scripts/vm-node.sh boots it and
// passes these through the agent's environment), and small helpers. These tests run only
// inside that node: scripts/run-tests.mjs never selects test/vm/ on the host.
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';

export const VM = {
  /** The node's own containerd (Debian's unit, SystemdCgroup = true). */
  endpoint: process.env.CONTAINER_RUNTIME_ENDPOINT ?? 'unix:///run/containerd/containerd.sock',
  images: {
    pause: process.env.KTS_PAUSE_IMAGE ?? '127.0.0.1:5000/kubelet-ts/pause:3.9',
    busybox: process.env.KTS_BUSYBOX_IMAGE ?? '127.0.0.1:5000/kubelet-ts/busybox:1.36',
  },
};

/** Refuses to run anywhere but in the VM node: these tests start daemons and write cgroups. */
export function assertInVmNode(): void {
  if (process.env.KTS_VM !== '1') {
    throw new Error('test/vm files run only inside the VM node (scripts/vm-node.sh test), not on this machine');
  }
}

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a program, never throwing for a non-zero exit (the caller asserts on it). */
export function run(file: string, args: string[], opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(file, args, { env: opts.env ?? process.env, timeout: opts.timeoutMs ?? 120_000, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      resolve({ code, stdout, stderr: err && !stderr ? String(err.message) : stderr });
    });
  });
}

/** A systemd unit property (`systemctl show -p NAME --value UNIT`). */
export async function unitProperty(unit: string, name: string): Promise<string> {
  const r = await run('systemctl', ['show', '-p', name, '--value', unit]);
  if (r.code !== 0) throw new Error(`systemctl show ${unit} -p ${name}: exit ${r.code}: ${r.stderr}`);
  return r.stdout.trim();
}

/** The cgroup v2 path of a process (`0::/...` in /proc/<pid>/cgroup). */
export async function cgroupOf(pid: number | 'self'): Promise<string> {
  const text = await readFile(`/proc/${pid}/cgroup`, 'utf8');
  const line = text.split('\n').find((l) => l.startsWith('0::'));
  if (!line) throw new Error(`/proc/${pid}/cgroup has no unified (0::) entry:\n${text}`);
  return line.slice(3);
}
