// The sd-bus unit client in the native addon, on this host (no systemd here): its argument
// checks, and a connection that cannot be made is an error naming the unit and the address.
// Starting and stopping real slices is tested on a systemd node (test/vm/).

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { DbusSystemdUnits, SystemdUnitError, SYSTEMD_PRIVATE_ADDRESS, SYSTEM_BUS_ADDRESS } from '../../../src/cm/systemd/units.js';
import { loadNative } from '../../../src/native.js';

type Call = (req: Record<string, unknown>) => Promise<unknown>;

describe('systemd units over sd-bus', () => {
  const addon = loadNative().addon as unknown as { systemdUnitCall: Call };

  it('the addon refuses bad requests with a TypeError naming the argument', () => {
    const base = { op: 'start', address: SYSTEMD_PRIVATE_ADDRESS, unit: 'x.slice', timeoutMs: 1000 };
    assert.throws(() => addon.systemdUnitCall({ ...base, op: 'restart' }), /op must be start, set or stop/);
    assert.throws(() => addon.systemdUnitCall({ ...base, unit: '' }), /unit must not be empty/);
    assert.throws(() => addon.systemdUnitCall({ ...base, timeoutMs: 0 }), /timeoutMs must be a positive number/);
    assert.throws(() => addon.systemdUnitCall({ ...base, properties: [{ name: 'MemoryMax', type: 't', value: -1 }] }), /property MemoryMax must have a non-negative integer/);
    assert.throws(() => addon.systemdUnitCall({ ...base, properties: [{ name: 'MemoryMax', type: 't', value: 1n << 64n }] }), /property MemoryMax must fit in an unsigned 64-bit/);
    assert.throws(() => addon.systemdUnitCall({ ...base, properties: [{ name: 'Wants', type: 'as', value: [1] }] }), /property Wants must have an array of strings/);
    assert.throws(() => addon.systemdUnitCall({ ...base, properties: [{ name: 'X', type: 'ay', value: [] }] }), /property X has type ay/);
  });

  it('no bus at the address: start, set and stop fail naming the unit and the address', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kts-sdbus-'));
    try {
      const address = `unix:path=${join(dir, 'no-such.sock')}`;
      const units = new DbusSystemdUnits({ address, timeoutMs: 2000 });
      for (const call of [() => units.start('kubepods.slice', [{ name: 'MemoryMax', type: 't', value: 1n }]), () => units.set('kubepods.slice', []), () => units.stop('kubepods.slice')]) {
        await assert.rejects(call(), (err: Error) => err instanceof SystemdUnitError && err.message.includes('kubepods.slice') && err.message.includes(address) && /connecting: No such file or directory/.test(err.message));
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('root talks to systemd on its private socket (no bus daemon needed); others on the system bus', () => {
    const units = new DbusSystemdUnits();
    assert.equal(units.address, process.getuid?.() === 0 ? SYSTEMD_PRIVATE_ADDRESS : SYSTEM_BUS_ADDRESS);
  });
});
