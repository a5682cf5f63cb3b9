// Credential-provider exec plugins (upstream: pkg/credentialprovider/plugin). The kubelet reads a
// CredentialProviderConfig (--image-credential-provider-config) naming executables in
// --image-credential-provider-bin-dir; for an image matching a provider's matchImages it runs
// `<bin-dir>/<name> <args...>` with the kubelet's environment plus the provider's env, writes a
// CredentialProviderRequest to its stdin and reads a CredentialProviderResponse from its stdout.
//
// As upstream:
//   - one minute per run (the process is killed after it);
//   - answers are cached by the response's cacheKeyType: Image (the image repository), Registry
//     (its host[:port]) or Global; lookups try image, then registry, then global. The entry lives
//     cacheDuration (the response's; unset: the provider's defaultCacheDuration; 0: not cached);
//     expired entries are purged every 15 minutes;
//   - one run at a time per image (concurrent lookups share it);
//   - a plugin that fails (timeout, non-zero exit, an answer that does not decode, a wrong
//     apiVersion or cacheKeyType) adds no credentials: the pull goes on without them. Its error,
//     naming the plugin, is returned to the caller so a failed pull can say why.

import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

import { parseDocument } from 'yaml';

import { DurationError, parseDuration } from '../config/duration.js';
import type { Clock } from '../util/clock.js';
import { DEF_BUCKETS, type Counter, type Histogram, type Registry } from '../metrics/registry.js';
import { KubeletError } from '../util/errors.js';
import { parseSchemelessURL, urlsMatch, type DockerConfig } from './keyring.js';

export const CREDENTIAL_PROVIDER_API_VERSIONS = [
  'credentialprovider.kubelet.k8s.io/v1',
  'credentialprovider.kubelet.k8s.io/v1beta1',
  'credentialprovider.kubelet.k8s.io/v1alpha1',
] as const;
const CONFIG_API_VERSIONS = ['kubelet.config.k8s.io/v1', 'kubelet.config.k8s.io/v1beta1', 'kubelet.config.k8s.io/v1alpha1'];

/** upstream's catch-all timeout of one plugin run. */
export const PLUGIN_EXEC_TIMEOUT_MS = 60_000;
/** upstream's cachePurgeInterval. */
export const CACHE_PURGE_INTERVAL_MS = 15 * 60_000;
export const GLOBAL_CACHE_KEY = 'global';

/** The credential provider config is unusable; the message names the file and the field. */
export class CredentialProviderConfigError extends KubeletError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('ERR_CREDENTIAL_PROVIDER_CONFIG', message, options);
  }
}

/** A plugin run failed; the message names the plugin and the image. */
export class CredentialPluginError extends KubeletError {
  constructor(readonly plugin: string, message: string, options?: { cause?: unknown }) {
    super('ERR_CREDENTIAL_PLUGIN', message, options);
  }
}

export interface CredentialProvider {
  name: string;
  matchImages: string[];
  /** ms. */
  defaultCacheDuration: number;
  apiVersion: string;
  args: string[];
  env: { name: string; value: string }[];
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Validates a decoded CredentialProviderConfig (upstream validateCredentialProviderConfig). */
export function validateCredentialProviderConfig(doc: unknown, file: string): CredentialProvider[] {
  const fail = (field: string, msg: string): never => {
    throw new CredentialProviderConfigError(`credential provider config ${JSON.stringify(file)}: ${field}: ${msg}`);
  };
  if (!isObj(doc)) return fail('(root)', 'must be an object');
  if (!CONFIG_API_VERSIONS.includes(doc.apiVersion as string)) {
    fail('apiVersion', `unsupported value ${JSON.stringify(doc.apiVersion ?? '')}: supported values: ${CONFIG_API_VERSIONS.map((v) => JSON.stringify(v)).join(', ')}`);
  }
  if (doc.kind !== 'CredentialProviderConfig') fail('kind', `must be "CredentialProviderConfig", got ${JSON.stringify(doc.kind ?? '')}`);
  for (const k of Object.keys(doc)) {
    if (!['apiVersion', 'kind', 'providers'].includes(k)) fail(k, 'unknown field');
  }
  const providers = doc.providers;
  if (!Array.isArray(providers) || providers.length === 0) return fail('providers', 'Required value: at least 1 item in plugins is required');
  const seen = new Set<string>();
  return providers.map((p, i): CredentialProvider => {
    const at = `providers[${i}]`;
    if (!isObj(p)) return fail(at, 'must be an object');
    for (const k of Object.keys(p)) {
      if (k === 'tokenAttributes') fail(`${at}.tokenAttributes`, 'service account tokens for credential providers are not implemented by kubelet-ts');
      if (!['name', 'matchImages', 'defaultCacheDuration', 'apiVersion', 'args', 'env'].includes(k)) fail(`${at}.${k}`, 'unknown field');
    }
    const name = p.name;
    if (typeof name !== 'string' || name === '') fail(`${at}.name`, 'Required value: name is required');
    const n = name as string;
    if (n.includes('/')) fail(`${at}.name`, `Invalid value ${JSON.stringify(n)}: provider name cannot contain '/'`);
    if (n.includes(' ')) fail(`${at}.name`, `Invalid value ${JSON.stringify(n)}: provider name cannot contain spaces`);
    if (n === '.' || n === '..') fail(`${at}.name`, `Invalid value ${JSON.stringify(n)}: provider name cannot be '${n}'`);
    if (seen.has(n)) fail(`${at}.name`, `Duplicate value: ${JSON.stringify(n)}`);
    seen.add(n);

    const mi = p.matchImages;
    if (!Array.isArray(mi) || mi.length === 0) fail(`${at}.matchImages`, 'Required value: at least 1 item in matchImages is required');
    (mi as unknown[]).forEach((m, j) => {
      if (typeof m !== 'string' || m === '' || parseSchemelessURL(m) === undefined) fail(`${at}.matchImages[${j}]`, `Invalid value ${JSON.stringify(m)}: match image is invalid`);
    });

    if (p.defaultCacheDuration === undefined || p.defaultCacheDuration === null) fail(`${at}.defaultCacheDuration`, 'Required value: defaultCacheDuration is required');
    let dcd = 0;
    try {
      dcd = parseDuration(String(p.defaultCacheDuration));
    } catch (err) {
      if (err instanceof DurationError) fail(`${at}.defaultCacheDuration`, `Invalid value ${JSON.stringify(p.defaultCacheDuration)}: ${err.message}`);
      throw err;
    }
    if (dcd < 0) fail(`${at}.defaultCacheDuration`, `Invalid value ${JSON.stringify(p.defaultCacheDuration)}: defaultCacheDuration must be greater than or equal to 0`);

    const av = p.apiVersion;
    if (typeof av !== 'string' || av === '') fail(`${at}.apiVersion`, 'Required value: apiVersion is required');
    if (!(CREDENTIAL_PROVIDER_API_VERSIONS as readonly string[]).includes(av as string)) {
      fail(`${at}.apiVersion`, `Unsupported value: ${JSON.stringify(av)}: supported values: ${CREDENTIAL_PROVIDER_API_VERSIONS.map((v) => JSON.stringify(v)).join(', ')}`);
    }

    const args = p.args ?? [];
    if (!Array.isArray(args) || args.some((a) => typeof a !== 'string')) fail(`${at}.args`, 'must be a list of strings');
    const env = p.env ?? [];
    if (!Array.isArray(env)) fail(`${at}.env`, 'must be a list of {name, value}');
    (env as unknown[]).forEach((e, j) => {
      if (!isObj(e) || typeof e.name !== 'string' || e.name === '') fail(`${at}.env[${j}].name`, 'Required value');
      const ev = e as Obj;
      if (ev.value !== undefined && typeof ev.value !== 'string') fail(`${at}.env[${j}].value`, 'must be a string');
    });
    return {
      name: n,
      matchImages: mi as string[],
      defaultCacheDuration: dcd,
      apiVersion: av as string,
      args: args as string[],
      env: (env as Obj[]).map((e) => ({ name: e.name as string, value: (e.value as string | undefined) ?? '' })),
    };
  });
}

/** Reads and validates the config file (YAML or JSON). */
export async function loadCredentialProviderConfig(file: string): Promise<CredentialProvider[]> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new CredentialProviderConfigError(`unable to read external registry credential provider configuration from ${JSON.stringify(file)}: ${(err as Error).message}`, { cause: err });
  }
  if (text.trim() === '') throw new CredentialProviderConfigError(`credential provider config file ${JSON.stringify(file)} is empty`);
  const parsed = parseDocument(text, { version: '1.2', uniqueKeys: true });
  if (parsed.errors.length > 0) throw new CredentialProviderConfigError(`credential provider config ${JSON.stringify(file)}: ${parsed.errors[0]!.message}`);
  return validateCredentialProviderConfig(parsed.toJS(), file);
}

/** The answer of one plugin run, as the provider keeps it. */
export interface PluginResponse {
  cacheKeyType: 'Image' | 'Registry' | 'Global';
  /** ms; undefined: the provider's default. */
  cacheDuration?: number;
  auth: DockerConfig;
}

/** Runs the plugin for an image (a real child process; tests may give another). */
export type PluginExec = (provider: CredentialProvider, image: string) => Promise<PluginResponse>;

/** The registry host[:port] of an image repository (upstream parseRegistry). */
export function parseRegistry(image: string): string {
  return image.split('/')[0]!;
}

/** Decodes a plugin's stdout (apiVersion and kind checked); errors name the plugin. */
export function decodePluginResponse(provider: CredentialProvider, image: string, stdout: string): PluginResponse {
  const fail = (msg: string): never => {
    throw new CredentialPluginError(provider.name, `credential provider plugin ${provider.name} for image ${image}: ${msg}`);
  };
  let doc: unknown;
  try {
    doc = JSON.parse(stdout);
  } catch (err) {
    // The output may hold credentials: it is not repeated.
    return fail(`error reading GVK from response: not a JSON object (${(err as Error).message})`);
  }
  if (!isObj(doc)) return fail('error reading GVK from response: not a JSON object');
  if (doc.apiVersion !== provider.apiVersion) {
    fail(`apiVersion from credential plugin response did not match expected apiVersion:${provider.apiVersion}, actual apiVersion:${String(doc.apiVersion ?? '')}`);
  }
  if (doc.kind !== 'CredentialProviderResponse') fail(`failed to decode CredentialProviderResponse, unexpected Kind: ${JSON.stringify(doc.kind ?? '')}`);
  const ckt = doc.cacheKeyType;
  if (ckt !== 'Image' && ckt !== 'Registry' && ckt !== 'Global') {
    fail(`credential provider plugin did not return a valid cacheKeyType: ${JSON.stringify(ckt ?? '')}`);
  }
  let cacheDuration: number | undefined;
  if (doc.cacheDuration !== undefined && doc.cacheDuration !== null) {
    try {
      cacheDuration = parseDuration(String(doc.cacheDuration));
    } catch {
      fail(`error decoding credential provider plugin response from stdout: cacheDuration ${JSON.stringify(doc.cacheDuration)} is not a duration`);
    }
  }
  const auth: DockerConfig = {};
  const rawAuth = doc.auth ?? {};
  if (!isObj(rawAuth)) return fail('error decoding credential provider plugin response from stdout: auth must be an object');
  for (const [k, v] of Object.entries(rawAuth)) {
    if (!isObj(v) || (v.username !== undefined && typeof v.username !== 'string') || (v.password !== undefined && typeof v.password !== 'string')) {
      fail(`error decoding credential provider plugin response from stdout: auth[${JSON.stringify(k)}] must be {username, password}`);
    }
    auth[k] = { username: ((v as Obj).username as string | undefined) ?? '', password: ((v as Obj).password as string | undefined) ?? '' };
  }
  return { cacheKeyType: ckt as PluginResponse['cacheKeyType'], ...(cacheDuration !== undefined ? { cacheDuration } : {}), auth };
}

/** Runs `<binDir>/<name> args...` with the request on stdin (the real protocol). */
export function execPlugin(binDir: string, opts: { timeoutMs?: number; environ?: () => NodeJS.ProcessEnv } = {}): PluginExec {
  const timeoutMs = opts.timeoutMs ?? PLUGIN_EXEC_TIMEOUT_MS;
  return (provider, image) => new Promise<PluginResponse>((resolve, reject) => {
    const prefix = `error execing credential provider plugin ${provider.name} for image ${image}`;
    const env: NodeJS.ProcessEnv = { ...(opts.environ ? opts.environ() : process.env) };
    for (const e of provider.env) env[e.name] = e.value;
    let child;
    try {
      child = spawn(join(binDir, provider.name), provider.args, { env, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    } catch (err) {
      reject(new CredentialPluginError(provider.name, `${prefix}: ${(err as Error).message}`, { cause: err }));
      return;
    }
    const out: Buffer[] = [];
    const errOut: Buffer[] = [];
    let done = false;
    const finish = (fn: () => void): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      fn();
    };
    const killGroup = (): void => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        child.kill('SIGKILL');
      }
    };
    const timer = setTimeout(() => {
      killGroup();
      child.stdout?.destroy();
      child.stderr?.destroy();
      finish(() => reject(new CredentialPluginError(provider.name, `${prefix}: context deadline exceeded: ${Buffer.concat(errOut).toString('utf8').trim()}`)));
    }, timeoutMs);
    timer.unref?.();
    child.stdout!.on('data', (b: Buffer) => { if (out.reduce((n, x) => n + x.length, 0) < 4 << 20) out.push(b); });
    child.stderr!.on('data', (b: Buffer) => { if (errOut.reduce((n, x) => n + x.length, 0) < 64 << 10) errOut.push(b); });
    child.on('error', (err) => finish(() => reject(new CredentialPluginError(provider.name, `${prefix}: ${err.message}`, { cause: err }))));
    child.on('close', (code, signal) => finish(() => {
      const stderr = Buffer.concat(errOut).toString('utf8').trim();
      if (code !== 0) {
        reject(new CredentialPluginError(provider.name, `${prefix}: ${signal ? `signal: ${signal}` : `exit status ${code}`}: ${stderr}`));
        return;
      }
      try {
        resolve(decodePluginResponse(provider, image, Buffer.concat(out).toString('utf8')));
      } catch (err) {
        reject(err);
      }
    }));
    child.stdin!.on('error', () => { /* a plugin that does not read its stdin */ });
    child.stdin!.end(JSON.stringify({ apiVersion: provider.apiVersion, kind: 'CredentialProviderRequest', image }));
  });
}

interface CacheEntry {
  credentials: DockerConfig;
  expiresAt: number;
}

/** Upstream's credential provider plugin families (pkg/credentialprovider/plugin/metrics.go). */
export interface PluginMetrics {
  errors: Counter;
  duration: Histogram;
}

export function credentialProviderPluginMetrics(registry: Registry): PluginMetrics {
  return {
    errors: registry.counter({ name: 'kubelet_credential_provider_plugin_errors_total', help: 'Number of errors from credential provider plugin', labelNames: ['plugin_name'] }),
    duration: registry.histogram({ name: 'kubelet_credential_provider_plugin_duration', help: 'Duration of execution in seconds for credential provider plugin', labelNames: ['plugin_name'], buckets: DEF_BUCKETS }),
  };
}

/** One configured provider: matchImages, the answer cache, one run per image at a time. */
export class PluginProvider {
  /** Set by the kubelet to record each run (errors, duration) by plugin name. */
  metrics: PluginMetrics | undefined;
  private readonly cache = new Map<string, CacheEntry>();
  private readonly inflight = new Map<string, Promise<DockerConfig>>();
  private lastPurge: number;
  /** Plugin runs started (for tests). */
  runs = 0;

  constructor(readonly provider: CredentialProvider, private readonly exec: PluginExec, private readonly clock: Clock) {
    this.lastPurge = clock.now();
  }

  matches(image: string): boolean {
    return this.provider.matchImages.some((m) => urlsMatch(m, image));
  }

  /** Cached entries (expired ones included until purged), for tests. */
  get cacheSize(): number {
    return this.cache.size;
  }

  private cached(key: string): DockerConfig | undefined {
    const e = this.cache.get(key);
    if (!e) return undefined;
    if (this.clock.now() > e.expiresAt) {
      this.cache.delete(key);
      return undefined;
    }
    return e.credentials;
  }

  /** The docker config the plugin gives for an image repository; {} when it does not match. Throws CredentialPluginError. */
  async provide(image: string): Promise<DockerConfig> {
    if (!this.matches(image)) return {};
    const now = this.clock.now();
    if (now - this.lastPurge > CACHE_PURGE_INTERVAL_MS) {
      for (const [k, e] of this.cache) if (now > e.expiresAt) this.cache.delete(k);
      this.lastPurge = now;
    }
    const hit = this.cached(image) ?? this.cached(parseRegistry(image)) ?? this.cached(GLOBAL_CACHE_KEY);
    if (hit) return hit;
    let p = this.inflight.get(image);
    if (!p) {
      p = this.run(image).finally(() => this.inflight.delete(image));
      this.inflight.set(image, p);
    }
    return p;
  }

  private async run(image: string): Promise<DockerConfig> {
    this.runs++;
    const started = performance.now();
    let res: Awaited<ReturnType<PluginExec>>;
    try {
      res = await this.exec(this.provider, image);
    } catch (err) {
      this.metrics?.errors.withLabelValues(this.provider.name).inc();
      throw err;
    } finally {
      this.metrics?.duration.withLabelValues(this.provider.name).observe((performance.now() - started) / 1000);
    }
    const key = res.cacheKeyType === 'Image' ? image : res.cacheKeyType === 'Registry' ? parseRegistry(image) : GLOBAL_CACHE_KEY;
    const duration = res.cacheDuration ?? this.provider.defaultCacheDuration;
    if (duration > 0) this.cache.set(key, { credentials: res.auth, expiresAt: this.clock.now() + duration });
    return res.auth;
  }
}

/**
 * The providers of --image-credential-provider-config with executables in
 * --image-credential-provider-bin-dir (upstream RegisterCredentialProviderPlugins): the bin dir
 * and every provider's executable must exist, the config must validate. Throws
 * CredentialProviderConfigError naming the flag, file or field.
 */
export async function registerCredentialProviderPlugins(configFile: string, binDir: string | undefined, clock: Clock, opts: { timeoutMs?: number } = {}): Promise<PluginProvider[]> {
  const { stat } = await import('node:fs/promises');
  if (!binDir) throw new CredentialProviderConfigError('--image-credential-provider-bin-dir: required when --image-credential-provider-config is set');
  try {
    await stat(binDir);
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    throw new CredentialProviderConfigError(e.code === 'ENOENT'
      ? `--image-credential-provider-bin-dir: plugin binary directory ${binDir} did not exist`
      : `--image-credential-provider-bin-dir: error inspecting binary directory ${binDir}: ${e.message}`, { cause: err });
  }
  const providers = await loadCredentialProviderConfig(configFile);
  const exec = execPlugin(binDir, opts);
  const out: PluginProvider[] = [];
  for (const p of providers) {
    const bin = join(binDir, p.name);
    try {
      await stat(bin);
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      throw new CredentialProviderConfigError(e.code === 'ENOENT'
        ? `credential provider ${JSON.stringify(p.name)}: plugin binary executable ${bin} did not exist`
        : `credential provider ${JSON.stringify(p.name)}: error inspecting binary executable ${bin}: ${e.message}`, { cause: err });
    }
    out.push(new PluginProvider(p, exec, clock));
  }
  return out;
}
