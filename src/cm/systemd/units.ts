// systemd's unit manager over D-Bus, as the systemd cgroup driver uses it: start a transient
// slice with its properties, change its properties, stop it. The calls go through sd-bus in the
// native addon (native/systemd_units.cc), on the threadpool; tests give a fake SystemdUnits.

import { loadNative, type NativeAddon } from '../../native.js';
import { KubeletError } from '../../util/errors.js';

/** One unit property as D-Bus carries it: s string, b boolean, t uint64, as string array. */
export type UnitProperty =
  | { name: string; type: 's'; value: string }
  | { name: string; type: 'b'; value: boolean }
  | { name: string; type: 't'; value: bigint }
  | { name: string; type: 'as'; value: string[] };

/** systemd's USEC_INFINITY / CGROUP_LIMIT_MAX: "no limit" for MemoryMax, TasksMax, CPUQuotaPerSecUSec. */
export const UINT64_MAX = 0xffff_ffff_ffff_ffffn;

export class SystemdUnitError extends KubeletError {
  constructor(readonly unit: string, message: string, readonly dbusError?: string, options?: { cause?: unknown }) {
    super('ERR_SYSTEMD_UNIT', `systemd unit ${unit}: ${message}`, options);
  }
}

export interface SystemdUnits {
  /** Starts a transient unit; resolves once its job is done. Resolves 'exists' when the unit is already loaded. */
  start(unit: string, properties: readonly UnitProperty[]): Promise<'started' | 'exists'>;
  /** Sets properties of a loaded unit at runtime (SetUnitProperties). */
  set(unit: string, properties: readonly UnitProperty[]): Promise<void>;
  /** Stops a unit; resolves once its job is done; a unit that is not loaded is already stopped. */
  stop(unit: string): Promise<void>;
}

interface NativeUnitAnswer {
  job?: string;
  result?: string;
  errorName?: string;
  errorMessage?: string;
}

type SystemdAddon = NativeAddon & {
  systemdUnitCall?(req: {
    op: 'start' | 'set' | 'stop';
    address: string;
    busClient: boolean;
    unit: string;
    mode?: string;
    runtime?: boolean;
    properties?: readonly UnitProperty[];
    timeoutMs: number;
  }): Promise<NativeUnitAnswer>;
};

/** systemd's own bus socket: root talks to systemd there without a bus daemon (as go-systemd does for root). */
export const SYSTEMD_PRIVATE_ADDRESS = 'unix:path=/run/systemd/private';
export const SYSTEM_BUS_ADDRESS = 'unix:path=/run/dbus/system_bus_socket';

export interface DbusSystemdUnitsOptions {
  /** Default: the private socket for root, the system bus otherwise. */
  address?: string;
  /** Whether `address` is a bus daemon (Hello, AddMatch); default: not for the private socket. */
  busClient?: boolean;
  /** Per call, including the wait for its job (upstream waits 30 s). */
  timeoutMs?: number;
  addon?: SystemdAddon;
}

const UNIT_EXISTS = 'org.freedesktop.systemd1.UnitExists';
const NO_SUCH_UNIT = 'org.freedesktop.systemd1.NoSuchUnit';

/** The real unit manager: sd-bus from the native addon. */
export class DbusSystemdUnits implements SystemdUnits {
  readonly address: string;
  readonly #busClient: boolean;
  readonly #timeoutMs: number;
  readonly #call: NonNullable<SystemdAddon['systemdUnitCall']>;

  constructor(o: DbusSystemdUnitsOptions = {}) {
    const root = typeof process.getuid === 'function' && process.getuid() === 0;
    this.address = o.address ?? (root ? SYSTEMD_PRIVATE_ADDRESS : SYSTEM_BUS_ADDRESS);
    this.#busClient = o.busClient ?? this.address !== SYSTEMD_PRIVATE_ADDRESS;
    this.#timeoutMs = o.timeoutMs ?? 30_000;
    let addon = o.addon;
    if (!addon) {
      const loaded = loadNative();
      if (!loaded.addon) throw new SystemdUnitError('-', `the systemd cgroup driver needs the native addon: ${loaded.error}`);
      addon = loaded.addon as SystemdAddon;
    }
    if (typeof addon.systemdUnitCall !== 'function') throw new SystemdUnitError('-', 'the native addon was built without sd-bus (systemdUnitCall); rebuild it with libsystemd-dev installed');
    this.#call = addon.systemdUnitCall.bind(addon);
  }

  async start(unit: string, properties: readonly UnitProperty[]): Promise<'started' | 'exists'> {
    const a = await this.#do(unit, { op: 'start', unit, mode: 'replace', properties });
    if (a.errorName === UNIT_EXISTS) return 'exists';
    if (a.errorName) throw new SystemdUnitError(unit, `StartTransientUnit failed: ${a.errorName}: ${a.errorMessage ?? ''}`, a.errorName);
    if (a.result !== 'done') throw new SystemdUnitError(unit, `its start job ${a.job ?? ''} ended "${a.result ?? ''}" (not "done")`);
    return 'started';
  }

  async set(unit: string, properties: readonly UnitProperty[]): Promise<void> {
    const a = await this.#do(unit, { op: 'set', unit, runtime: true, properties });
    if (a.errorName) throw new SystemdUnitError(unit, `SetUnitProperties failed: ${a.errorName}: ${a.errorMessage ?? ''}`, a.errorName);
  }

  async stop(unit: string): Promise<void> {
    const a = await this.#do(unit, { op: 'stop', unit, mode: 'replace' });
    if (a.errorName === NO_SUCH_UNIT) return;
    if (a.errorName) throw new SystemdUnitError(unit, `StopUnit failed: ${a.errorName}: ${a.errorMessage ?? ''}`, a.errorName);
    if (a.result !== 'done') throw new SystemdUnitError(unit, `its stop job ${a.job ?? ''} ended "${a.result ?? ''}" (not "done")`);
  }

  async #do(unit: string, req: { op: 'start' | 'set' | 'stop'; unit: string; mode?: string; runtime?: boolean; properties?: readonly UnitProperty[] }): Promise<NativeUnitAnswer> {
    try {
      return await this.#call({ ...req, address: this.address, busClient: this.#busClient, timeoutMs: this.#timeoutMs });
    } catch (err) {
      throw new SystemdUnitError(unit, (err as Error).message, undefined, { cause: err });
    }
  }
}
