// systemd's D-Bus API through sd-bus (libsystemd): the transient units of the systemd cgroup
// driver (kubepods.slice and the QoS and pod slices) are started, changed and stopped here, on
// the libuv threadpool, one bus connection per call (an sd_bus object belongs to one thread).
//
// JS API (registered on the addon's exports):
//   systemdUnitCall(req: {
//     op: 'start' | 'set' | 'stop';
//     address: string;      // 'unix:path=/run/systemd/private' (root: systemd itself, no bus daemon)
//                           // or a bus daemon's address (then the connection says Hello)
//     busClient: boolean;   // true for a bus daemon's address
//     unit: string;         // e.g. 'kubepods-burstable.slice'
//     mode?: string;        // start/stop job mode, default 'replace'
//     runtime?: boolean;    // set: SetUnitProperties' runtime flag, default true
//     properties?: { name: string; type: 's' | 'b' | 't' | 'as'; value: string | boolean | bigint | number | string[] }[];
//     timeoutMs: number;    // the method call and, for start/stop, the wait for the job's end
//   }): Promise<{ job?: string; result?: string; errorName?: string; errorMessage?: string }>
//     start: StartTransientUnit(unit, mode, properties, []) and the wait for its JobRemoved signal;
//     set:   SetUnitProperties(unit, runtime, properties);
//     stop:  StopUnit(unit, mode) and the wait for its JobRemoved signal.
//     A D-Bus error answer of the method (org.freedesktop.systemd1.UnitExists, NoSuchUnit, ...)
//     resolves with errorName/errorMessage; the job's end resolves with result ('done', 'failed',
//     ...). Failing to connect or a timeout rejects with an Error naming the address or unit.
//     Bad arguments throw a TypeError naming the argument.
#pragma once
#include <napi.h>

namespace kts {
void InitSystemdUnits(Napi::Env env, Napi::Object exports);
}  // namespace kts
