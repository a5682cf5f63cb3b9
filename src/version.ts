// The versions kubelet-ts reports. As a node of a cluster it is the Kubernetes 1.34 kubelet it
// implements (its KubeletConfiguration fields, flags, feature gates, container hash and node
// status are 1.34's): that is nodeInfo.kubeletVersion, what version-skew checks read, and what
// --version prints as upstream does. kubelet-ts's own build (package.json) is reported beside it,
// in the Node annotation BUILD_ANNOTATION and in --version=raw.

import { readFileSync } from 'node:fs';
import { KubeletError } from './util/errors.js';

/** The Kubernetes release whose kubelet kubelet-ts implements. */
export const KUBERNETES_VERSION = 'v1.34.0';

/** The Node annotation that names kubelet-ts's own build. */
export const BUILD_ANNOTATION = 'kubelet-ts.io/build';

/** kubelet-ts's own version (package.json), e.g. "v0.1.0". */
export const KUBELET_TS_BUILD = readBuild();

function readBuild(): string {
  // package.json sits two levels above this file as source (src/) and three as built (dist/src/).
  for (const rel of ['../package.json', '../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(rel, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'kubelet-ts' && pkg.version) return `v${pkg.version}`;
    } catch { /* try the next */ }
  }
  return 'v0.0.0-unknown';
}

/** What the --version flag asks for (upstream's verflag): print, print raw, or report another version. */
export type VersionRequest = { print: 'no' | 'plain' | 'raw'; override?: string };

/** Reads the --version value: a Go boolean, "raw", or a version (vX.Y.Z...) to report. */
export function parseVersionFlag(value: string | undefined): VersionRequest {
  if (value === undefined) return { print: 'no' };
  if (['1', 't', 'T', 'true', 'TRUE', 'True'].includes(value)) return { print: 'plain' };
  if (['0', 'f', 'F', 'false', 'FALSE', 'False'].includes(value)) return { print: 'no' };
  if (value === 'raw') return { print: 'raw' };
  if (/^v\d+\.\d+\.\d+([-+][0-9A-Za-z.+-]*)?$/.test(value)) return { print: 'no', override: value };
  throw new KubeletError('ERR_FLAG_VALUE', `invalid argument ${JSON.stringify(value)} for "--version" flag: want true, false, raw or a version vX.Y.Z`);
}

/** The version.Info upstream prints for --version=raw, with kubelet-ts's build. */
export function rawVersion(version = KUBERNETES_VERSION): string {
  const m = /^v(\d+)\.(\d+)/.exec(version);
  return `version.Info{Major:"${m?.[1] ?? ''}", Minor:"${m?.[2] ?? ''}", GitVersion:"${version}", GitCommit:"", GitTreeState:"", ` +
    `BuildDate:"", GoVersion:"", Compiler:"kubelet-ts ${KUBELET_TS_BUILD}", Platform:"${process.platform}/${process.arch === 'x64' ? 'amd64' : process.arch}"}`;
}
