// Registry credentials matched to images (upstream: pkg/credentialprovider keyring.go and
// secrets/secrets.go). A keyring holds docker config entries keyed by registry host and path;
// an image gets every entry whose key matches it, most specific key first:
//   - a key may carry a scheme (`https://`, `http://`), dropped; `/v1/` and `/v2/` path prefixes
//     count as the bare host (`https://index.docker.io/v1/` is `index.docker.io`);
//   - the host is matched per dot-separated label with shell globs (`*.example.com` matches
//     `a.example.com`, not `a.b.example.com`), the port must be equal (none matches none only),
//     and the key's path must be a prefix of the image's;
//   - keys are tried in reverse lexical order (`quay.io/coreos` before `quay.io`);
//   - when nothing matched and the image pulls from Docker Hub (no registry host in its name, or
//     `docker.io`/`index.docker.io`), the `index.docker.io` entry applies.

import type { AuthConfig } from '../runtime/cri-types.js';
import { KubeletError } from '../util/errors.js';

/** One registry's credentials as a docker config holds them (auth decoded into username/password). */
export interface DockerConfigEntry {
  username?: string;
  password?: string;
  email?: string;
}

/** A docker config: registry key → entry. */
export type DockerConfig = Record<string, DockerConfigEntry>;

/** The credentials for one pull attempt (CRI AuthConfig) and where they came from. */
export interface TrackedAuth {
  auth: AuthConfig;
  /** `secret default/regcred`, `plugin ecr`: named in logs, never holding the secret itself. */
  source: string;
}

const DEFAULT_REGISTRY_HOST = 'index.docker.io';

/** A pull secret (or plugin answer) that cannot be read; the message names it. */
export class CredentialError extends KubeletError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('ERR_CREDENTIALS', message, options);
  }
}

interface SchemelessURL {
  host: string;
  port: string;
  path: string;
}

/**
 * Parses `host[:port][/path]` as Go's url.Parse reads `https://` + it (upstream
 * ParseSchemelessURL): the host keeps its case, the path is what follows the authority
 * (empty when nothing does). Undefined when it cannot be parsed (a port that is not a number).
 */
export function parseSchemelessURL(s: string): SchemelessURL | undefined {
  if (/[\s\x00-\x1f\x7f]/.test(s)) return undefined;
  const stop = s.search(/[/?#]/);
  let authority = stop === -1 ? s : s.slice(0, stop);
  let rest = stop === -1 ? '' : s.slice(stop);
  const at = authority.lastIndexOf('@');
  if (at !== -1) authority = authority.slice(at + 1);
  const q = rest.search(/[?#]/);
  if (q !== -1) rest = rest.slice(0, q);
  let host = authority;
  let port = '';
  const m = /^(\[[^\]]*\]|[^:\[\]]*)(?::([^:]*))?$/.exec(authority);
  if (!m) return undefined;
  if (m[2] !== undefined) {
    if (!/^\d*$/.test(m[2])) return undefined;
    host = m[1]!;
    port = m[2];
  }
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  let path: string;
  try {
    path = decodeURIComponent(rest);
  } catch {
    return undefined;
  }
  return { host, port, path };
}

/** Go's path.Match for one host label: `*`, `?`, `[...]` (no separators in a label). */
function globMatch(pattern: string, name: string): boolean {
  let re = '^';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === '*') re += '[^.]*';
    else if (c === '?') re += '[^.]';
    else if (c === '[') {
      const close = pattern.indexOf(']', i + 1);
      if (close === -1) return false; // ErrBadPattern: no match
      let cls = pattern.slice(i + 1, close);
      if (cls.startsWith('^')) cls = `!${cls.slice(1)}`;
      re += `[${cls.startsWith('!') ? `^${cls.slice(1)}` : cls}]`;
      i = close;
    } else if (c === '\\' && i + 1 < pattern.length) re += `\\${pattern[++i]}`;
    else re += c.replace(/[.+^${}()|\\]/g, '\\$&');
  }
  try {
    return new RegExp(`${re}$`).test(name);
  } catch {
    return false;
  }
}

/**
 * Whether `target` (an image repository, schemeless) matches `glob` (a keyring key or a
 * matchImages entry): same port, same number of host labels each matching as a glob, and the
 * glob's path a prefix of the target's.
 */
export function urlsMatch(glob: string, target: string): boolean {
  const g = parseSchemelessURL(glob);
  const t = parseSchemelessURL(target);
  if (!g || !t) return false;
  if (g.port !== t.port) return false;
  const gl = g.host.split('.');
  const tl = t.host.split('.');
  if (gl.length !== tl.length) return false;
  if (!t.path.startsWith(g.path)) return false;
  return gl.every((p, i) => globMatch(p, tl[i]!));
}

/** Whether an image pulls from Docker Hub by its name (upstream isDefaultRegistryMatch). */
export function isDefaultRegistryMatch(image: string): boolean {
  const slash = image.indexOf('/');
  const first = slash === -1 ? image : image.slice(0, slash);
  if (first === '') return false;
  if (slash === -1) return true;
  if (first === 'docker.io' || first === 'index.docker.io') return true;
  return !/[.:]/.test(first);
}

/** The key a docker config location is stored under (scheme dropped, /v1/ and /v2/ as the host). */
export function keyringKey(location: string): string | undefined {
  const parsed = parseSchemelessURL(location.replace(/^https?:\/\//, ''));
  if (!parsed) return undefined;
  let path = parsed.path;
  if (path.startsWith('/v2/') || path.startsWith('/v1/')) path = path.slice(3);
  const host = parsed.host.includes(':') ? `[${parsed.host}]` : parsed.host;
  const hostPort = parsed.port ? `${host}:${parsed.port}` : host;
  return path.length > 0 && path !== '/' ? hostPort + path : hostPort;
}

/** A set of registry credentials and their lookup by image. */
export class DockerKeyring {
  private readonly creds = new Map<string, TrackedAuth[]>();
  private index: string[] = [];

  /** Adds a docker config's entries; `source` names where they came from. Bad keys are skipped. */
  add(config: DockerConfig, source: string, onBadKey?: (key: string) => void): void {
    for (const [loc, ident] of Object.entries(config)) {
      const key = keyringKey(loc);
      if (key === undefined) {
        onBadKey?.(loc);
        continue;
      }
      const auth: AuthConfig = {};
      if (ident.username !== undefined) auth.username = ident.username;
      if (ident.password !== undefined) auth.password = ident.password;
      const list = this.creds.get(key) ?? [];
      list.push({ auth, source });
      this.creds.set(key, list);
    }
    // Reverse lexical order: more specific paths first (quay.io/coreos before quay.io).
    this.index = [...this.creds.keys()].sort().reverse();
  }

  get size(): number {
    return this.index.length;
  }

  /** Every credential matching the image repository (no tag or digest), most specific first. */
  lookup(image: string): TrackedAuth[] {
    const out: TrackedAuth[] = [];
    for (const k of this.index) if (urlsMatch(k, image)) out.push(...this.creds.get(k)!);
    if (out.length > 0) return out;
    if (isDefaultRegistryMatch(image)) return [...(this.creds.get(DEFAULT_REGISTRY_HOST) ?? [])];
    return [];
  }
}

/** One entry of a docker config as JSON has it; `auth` (base64 of user:password) wins when set. */
function decodeEntry(raw: unknown, where: string): DockerConfigEntry {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new CredentialError(`${where}: must be an object`);
  const r = raw as Record<string, unknown>;
  const str = (f: string): string | undefined => {
    const v = r[f];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'string') throw new CredentialError(`${where}.${f}: must be a string`);
    return v;
  };
  const entry: DockerConfigEntry = {};
  const username = str('username');
  const password = str('password');
  const email = str('email');
  if (username !== undefined) entry.username = username;
  if (password !== undefined) entry.password = password;
  if (email !== undefined) entry.email = email;
  const auth = str('auth');
  if (auth) {
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(auth) || auth.length % 4 !== 0) {
      throw new CredentialError(`${where}.auth: illegal base64 data`);
    }
    const decoded = Buffer.from(auth, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon === -1) throw new CredentialError(`${where}.auth: unable to parse auth field, must be formatted as base64(username:password)`);
    entry.username = decoded.slice(0, colon);
    entry.password = decoded.slice(colon + 1);
  }
  return entry;
}

/** A docker config (registry → entry) decoded from JSON text; errors name `what` and the field. */
export function decodeDockerConfig(text: string, what: string, wrapped: boolean): DockerConfig {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new CredentialError(`${what}: not valid JSON: ${(err as Error).message}`);
  }
  let map: unknown = parsed;
  let where = what;
  if (wrapped) {
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new CredentialError(`${what}: must be a JSON object`);
    map = (parsed as { auths?: unknown }).auths ?? {};
    where = `${what}: auths`;
  }
  if (map === null || typeof map !== 'object' || Array.isArray(map)) throw new CredentialError(`${where}: must be a JSON object`);
  const out: DockerConfig = {};
  for (const [k, v] of Object.entries(map as Record<string, unknown>)) out[k] = decodeEntry(v, `${where}[${JSON.stringify(k)}]`);
  return out;
}

export const SECRET_TYPE_DOCKERCONFIGJSON = 'kubernetes.io/dockerconfigjson';
export const SECRET_TYPE_DOCKERCFG = 'kubernetes.io/dockercfg';

export interface PullSecret {
  metadata?: { name?: string; namespace?: string };
  type?: string;
  /** base64 values, as on the wire. */
  data?: Record<string, string>;
}

/**
 * Adds a pull secret's registries to the keyring (upstream MakeDockerKeyring): a
 * kubernetes.io/dockerconfigjson secret's `.dockerconfigjson`, a kubernetes.io/dockercfg
 * secret's `.dockercfg`; other secrets (or those without the key) add nothing.
 * Throws CredentialError naming the secret when its content cannot be decoded.
 */
export function addPullSecret(keyring: DockerKeyring, secret: PullSecret): void {
  const name = `${secret.metadata?.namespace ?? ''}/${secret.metadata?.name ?? ''}`;
  const what = `image pull secret "${name}"`;
  let key: string;
  let wrapped: boolean;
  if (secret.type === SECRET_TYPE_DOCKERCONFIGJSON && secret.data?.['.dockerconfigjson']) {
    key = '.dockerconfigjson';
    wrapped = true;
  } else if (secret.type === SECRET_TYPE_DOCKERCFG && secret.data?.['.dockercfg']) {
    key = '.dockercfg';
    wrapped = false;
  } else {
    return;
  }
  const b64 = secret.data[key]!;
  if (!/^[A-Za-z0-9+/\s]*={0,2}\s*$/.test(b64)) throw new CredentialError(`${what}: data[${JSON.stringify(key)}]: illegal base64 data`);
  const text = Buffer.from(b64, 'base64').toString('utf8');
  const config = decodeDockerConfig(text, `${what} ${key}`, wrapped);
  keyring.add(config, `secret ${name}`);
}
