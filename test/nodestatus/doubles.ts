// Test doubles for the node status: a machine and a runtime the test sets as it likes.

import type { MachineInfo, NodeImage, NodeStatusSource } from '../../src/nodestatus/index.js';

export const GiB = 1024 ** 3;

export function machine(over: Partial<MachineInfo> = {}): MachineInfo {
  return {
    numCores: 4, memoryCapacityBytes: 8 * GiB, hugePages: [{ pageSizeKiB: 2048, numPages: 0 }, { pageSizeKiB: 1048576, numPages: 0 }],
    machineID: 'mid-1', systemUUID: 'uuid-1', bootID: 'boot-1', kernelVersion: '6.1.0-test', osImage: 'Debian GNU/Linux 12 (bookworm)',
    rootfsCapacityBytes: 100 * GiB, ...over,
  };
}

export class FakeSource implements NodeStatusSource {
  info: MachineInfo = machine();
  errors: string[] = [];
  imageList: NodeImage[] = [{ id: 'sha256:a', repoTags: ['busybox:1.36'], repoDigests: ['busybox@sha256:aa'], sizeBytes: 2_000_000 }];
  runtime: { runtimeName: string; runtimeVersion: string } | Error = { runtimeName: 'containerd', runtimeVersion: '1.7.24' };
  machineInfo = async () => this.info;
  runtimeVersion = async () => { if (this.runtime instanceof Error) throw this.runtime; return this.runtime; };
  readyErrors = () => this.errors;
  images = async () => this.imageList;
}
