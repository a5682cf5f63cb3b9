// SIMULATION. Standalone entry of the simulated CRI runtime (what `kubelet-ts sim-runtime`
// runs), for benchmarks that fork it as a separate process: node dist/src/sim/main.js
import { simRuntimeMain } from './cli.js';

process.exitCode = await simRuntimeMain(process.argv.slice(2));
// The IPC channel (when forked) would keep the process alive.
process.disconnect?.();
