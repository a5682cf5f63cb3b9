// The VM node is what kubelet-ts's users run: systemd as PID 1 and unified cgroup v2 only.
import { describe, it, before } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, readlink } from 'node:fs/promises';
import { release } from 'node:os';
import { assertInVmNode, cgroupOf, run, unitProperty } from './vm-env.js';

describe('the VM node', () => {
  before(assertInVmNode);

  it('runs systemd as PID 1', async () => {
    assert.equal((await readFile('/proc/1/comm', 'utf8')).trim(), 'systemd');
    assert.match(await readlink('/proc/1/exe'), /\/systemd$/);
    const version = await run('systemctl', ['--version']);
    assert.equal(version.code, 0);
    assert.match(version.stdout, /^systemd \d+/);
    // The multi-user target was reached and the units the node needs are active.
    assert.equal(await unitProperty('multi-user.target', 'ActiveState'), 'active');
    assert.equal(await unitProperty('dbus.service', 'ActiveState'), 'active');
    assert.equal(await unitProperty('containerd.service', 'ActiveState'), 'active');
  });

  it('mounts unified cgroup v2 only, at /sys/fs/cgroup, with the cpu, memory, pids and io controllers', async () => {
    const mountinfo = await readFile('/proc/self/mountinfo', 'utf8');
    const cgroupMounts = mountinfo.split('\n').filter((l) => / - cgroup2? /.test(l)).map((l) => {
      const left = l.slice(0, l.indexOf(' - ')).split(' ');
      const fstype = l.slice(l.indexOf(' - ') + 3).split(' ')[0];
      return { mountPoint: left[4], fstype };
    });
    assert.deepEqual(cgroupMounts, [{ mountPoint: '/sys/fs/cgroup', fstype: 'cgroup2' }], 'one cgroup2 mount, no v1 hierarchy');
    const controllers = (await readFile('/sys/fs/cgroup/cgroup.controllers', 'utf8')).trim().split(/\s+/);
    for (const c of ['cpu', 'memory', 'pids', 'io']) assert.ok(controllers.includes(c), `cgroup.controllers lists ${c}: ${controllers.join(' ')}`);
    // systemd owns the tree: this test runs in the agent's service cgroup.
    assert.equal(await cgroupOf('self'), '/system.slice/kts-vm-agent.service');
    assert.equal(await unitProperty('kts-vm-agent.service', 'ControlGroup'), '/system.slice/kts-vm-agent.service');
  });

  it('boots Debian 12 with its 6.1 kernel', async () => {
    assert.match(release(), /^6\.1\.\d+-\d+-amd64$/);
    const osRelease = await readFile('/etc/os-release', 'utf8');
    assert.match(osRelease, /^VERSION_CODENAME=bookworm$/m);
  });
});
