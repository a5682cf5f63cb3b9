// Loading the whole configuration as upstream does: parse the flags, read and default the
// --config file (relative paths in it resolved against its directory), apply the flags
// given on the command line over it, validate; then name every setting that kubelet-ts
// accepts without acting on it.

import { promises as fsp } from 'node:fs';
import { dirname, resolve as resolvePath } from 'node:path';

import { MAX_CONFIG_FILE_BYTES, parseKubeletConfigFile } from './decode.js';
import { applyLegacyDefaults, defaultKubeletConfig } from './defaults.js';
import { ConfigError } from './errors.js';
import { featureGateWarnings } from './feature-gates.js';
import { applyFlagOverrides, type KubeletFlags, parseKubeletFlags } from './flags.js';
import type { KubeletConfig } from './kubelet-config.js';
import { resolveKubeletConfig, resolveRelativePaths } from './resolve.js';
import { notImplementedWarnings } from './schema.js';
import { validateKubeletConfig } from './validation.js';
import { parseVersionFlag } from '../version.js';

export type ReadFileFn = (path: string, encoding: 'utf8') => Promise<string>;

/** Reads at most `limit` bytes of `path` (one more tells that the file is larger). */
async function readCapped(path: string, limit: number): Promise<string> {
  const fh = await fsp.open(path, 'r');
  try {
    const buf = Buffer.alloc(limit + 1);
    let filled = 0;
    while (filled < buf.length) {
      const { bytesRead } = await fh.read(buf, filled, buf.length - filled, null);
      if (bytesRead === 0) break;
      filled += bytesRead;
    }
    if (filled > limit) throw new ConfigError('', `the file is larger than the limit of ${limit} bytes`, path);
    return buf.subarray(0, filled).toString('utf8');
  } finally {
    await fh.close();
  }
}

const defaultReadFile: ReadFileFn = (p) => readCapped(p, MAX_CONFIG_FILE_BYTES);

/**
 * Loads the kubelet configuration (see the file comment). Throws ConfigError naming the
 * file, field or flag. `warnings` name ignored and unknown fields, deprecated flags, and
 * every setting that is not implemented yet. When --help is given, returns at once with
 * flags.help set (and the defaults as config).
 */
export async function loadConfig(
  argv: readonly string[],
  readFile: ReadFileFn = defaultReadFile,
): Promise<{ config: KubeletConfig; flags: KubeletFlags; warnings: string[] }> {
  const { flags, overrides, warnings } = parseKubeletFlags(argv);
  // --help and --version print before any file is read (upstream's verflag runs first too)
  if (flags.help || parseVersionFlag(flags.version).print !== 'no') return { config: defaultKubeletConfig(), flags, warnings };

  let config: KubeletConfig;
  let baseline: KubeletConfig;
  const file = flags.configFile !== undefined && flags.configFile !== '' ? flags.configFile : undefined;
  if (file !== undefined) {
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (err) {
      if (err instanceof ConfigError) throw err;
      const e = err as NodeJS.ErrnoException;
      throw new ConfigError('', `failed to read kubelet config file: ${e.code ?? e.message}`, file, undefined, { cause: err });
    }
    const parsed = parseKubeletConfigFile(text, file);
    warnings.push(...parsed.warnings);
    config = resolveKubeletConfig(parsed.config, warnings, file);
    resolveRelativePaths(config, dirname(resolvePath(file)));
    baseline = defaultKubeletConfig();
    resolveRelativePaths(baseline, dirname(resolvePath(file)));
  } else {
    config = defaultKubeletConfig();
    applyLegacyDefaults(config);
    baseline = defaultKubeletConfig();
    applyLegacyDefaults(baseline);
  }
  applyFlagOverrides(config, overrides);
  validateKubeletConfig(config, file);

  warnings.push(...notImplementedWarnings(config, baseline), ...featureGateWarnings(config.featureGates));
  return { config, flags, warnings };
}
