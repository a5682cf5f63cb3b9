// kubeconfig loading as kubectl and the kubelet read it: the current context (or a named
// one) picks a cluster and a user; relative file paths resolve against the kubeconfig's own
// directory; *-data fields are base64. Anything malformed or unsupported is an error naming
// the file and the field, never a silently different client.

import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { parse } from 'yaml';
import { KubeconfigError } from './errors.js';

export interface ExecEnvVar {
  name: string;
  value: string;
}

/** users[].user.exec: a credential plugin run with the ExecCredential protocol. */
export interface ExecConfig {
  apiVersion: 'client.authentication.k8s.io/v1' | 'client.authentication.k8s.io/v1beta1';
  command: string;
  args: string[];
  env: ExecEnvVar[];
  installHint?: string;
  provideClusterInfo: boolean;
  interactiveMode: 'Never' | 'IfAvailable' | 'Always';
}

/** What a client needs to reach and authenticate to one API server. */
export interface RestConfig {
  /** The kubeconfig it came from (for messages), or a description. */
  source: string;
  server: string;
  tlsServerName?: string;
  insecureSkipTLSVerify: boolean;
  /** PEM of the CA bundle to trust, when not the system roots. */
  caData?: string;
  certData?: string;
  keyData?: string;
  token?: string;
  /** Read on use (and re-read as it rotates), as client-go's cached token source. */
  tokenFile?: string;
  username?: string;
  password?: string;
  exec?: ExecConfig;
  /** The context's namespace, when it names one. */
  namespace?: string;
}

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

const clusterFields = new Set([
  'server', 'certificate-authority', 'certificate-authority-data', 'insecure-skip-tls-verify', 'tls-server-name',
  'proxy-url', 'disable-compression', 'extensions',
]);
const userFields = new Set([
  'token', 'tokenFile', 'client-certificate', 'client-certificate-data', 'client-key', 'client-key-data',
  'username', 'password', 'exec', 'auth-provider', 'as', 'as-uid', 'as-groups', 'as-user-extra', 'extensions',
]);

class Reader {
  constructor(readonly file: string) {}

  fail(field: string | undefined, detail: string, notImplemented = false): never {
    throw new KubeconfigError(this.file, field, detail, { notImplemented });
  }

  str(o: Obj, key: string, field: string): string | undefined {
    const v = o[key];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'string') this.fail(`${field}.${key}`, `must be a string, not ${Array.isArray(v) ? 'a list' : typeof v}`);
    return v;
  }

  bool(o: Obj, key: string, field: string): boolean {
    const v = o[key];
    if (v === undefined || v === null) return false;
    if (typeof v !== 'boolean') this.fail(`${field}.${key}`, `must be true or false, not ${JSON.stringify(v)}`);
    return v;
  }

  /** base64 *-data, decoded to text; rejects what is not base64 (a PEM pasted unencoded, say). */
  data(o: Obj, key: string, field: string): string | undefined {
    const v = this.str(o, key, field);
    if (v === undefined) return undefined;
    const compact = v.replace(/\s+/g, '');
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(compact) || compact.length % 4 !== 0) this.fail(`${field}.${key}`, 'is not valid base64');
    return Buffer.from(compact, 'base64').toString('utf8');
  }

  /** A file field, resolved against the kubeconfig's directory and read now. */
  file_(o: Obj, key: string, field: string): string | undefined {
    const p = this.str(o, key, field);
    if (p === undefined || p === '') return undefined;
    const abs = this.path(p);
    try {
      return readFileSync(abs, 'utf8');
    } catch (err) {
      throw new KubeconfigError(this.file, `${field}.${key}`, `cannot read ${abs}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`, { cause: err });
    }
  }

  path(p: string): string {
    return isAbsolute(p) ? p : resolve(dirname(this.file), p);
  }

  /** The entry of a named list (clusters, users, contexts) with the given name. */
  named(root: Obj, list: string, name: string, inner: string, ref: string): Obj {
    const arr = root[list];
    if (arr !== undefined && arr !== null && !Array.isArray(arr)) this.fail(list, 'must be a list');
    const entries = (arr ?? []) as unknown[];
    entries.forEach((e, i) => {
      if (!isObj(e) || typeof e.name !== 'string') this.fail(`${list}[${i}]`, 'must be a map with a name');
    });
    const hit = (entries as Obj[]).find((e) => e.name === name);
    if (!hit) this.fail(ref, `${list.replace(/s$/, '')} ${JSON.stringify(name)} is not defined in ${list}`);
    const body = hit[inner];
    if (body === undefined || body === null) return {};
    if (!isObj(body)) this.fail(`${list}[name=${name}].${inner}`, 'must be a map');
    return body;
  }
}

function parseExec(r: Reader, o: unknown, field: string): ExecConfig {
  if (!isObj(o)) r.fail(field, 'must be a map');
  const apiVersion = r.str(o, 'apiVersion', field);
  if (apiVersion === undefined) r.fail(`${field}.apiVersion`, 'is required (client.authentication.k8s.io/v1 or v1beta1)');
  if (apiVersion !== 'client.authentication.k8s.io/v1' && apiVersion !== 'client.authentication.k8s.io/v1beta1') {
    r.fail(`${field}.apiVersion`, `${JSON.stringify(apiVersion)} is not supported (client.authentication.k8s.io/v1 or v1beta1)`, true);
  }
  let command = r.str(o, 'command', field);
  if (!command) r.fail(`${field}.command`, 'is required');
  // As client-go: a relative path (with a slash) is relative to the kubeconfig; a bare name is looked up in PATH.
  if (command.includes('/')) command = r.path(command);
  const args = o.args ?? [];
  if (!Array.isArray(args) || args.some((a) => typeof a !== 'string')) r.fail(`${field}.args`, 'must be a list of strings');
  const envIn = o.env ?? [];
  if (!Array.isArray(envIn)) r.fail(`${field}.env`, 'must be a list of {name, value}');
  const env = envIn.map((e, i) => {
    if (!isObj(e) || typeof e.name !== 'string' || typeof e.value !== 'string') r.fail(`${field}.env[${i}]`, 'must have string name and value');
    return { name: e.name, value: e.value };
  });
  // v1 requires interactiveMode; v1beta1 defaults it to IfAvailable.
  let mode = r.str(o, 'interactiveMode', field);
  if (mode === undefined) {
    if (apiVersion === 'client.authentication.k8s.io/v1') r.fail(`${field}.interactiveMode`, 'is required for client.authentication.k8s.io/v1 (Never, IfAvailable or Always)');
    mode = 'IfAvailable';
  }
  if (mode !== 'Never' && mode !== 'IfAvailable' && mode !== 'Always') r.fail(`${field}.interactiveMode`, `${JSON.stringify(mode)} is not Never, IfAvailable or Always`);
  // A node agent has no terminal: a plugin that must talk to a user cannot run.
  if (mode === 'Always') r.fail(`${field}.interactiveMode`, 'Always needs a terminal, which the kubelet does not have');
  const installHint = r.str(o, 'installHint', field);
  return {
    apiVersion, command, args: args as string[], env, provideClusterInfo: r.bool(o, 'provideClusterInfo', field), interactiveMode: mode,
    ...(installHint ? { installHint } : {}),
  };
}

/** Parses kubeconfig text; `file` names it in errors and anchors relative paths. */
export function parseKubeconfig(text: string, file: string, opts: { context?: string } = {}): RestConfig {
  const r: Reader = new Reader(file);
  let root: unknown;
  try {
    root = parse(text);
  } catch (err) {
    throw new KubeconfigError(file, undefined, `not valid YAML: ${(err as Error).message.split('\n')[0]}`, { cause: err });
  }
  if (!isObj(root)) r.fail(undefined, 'is not a map (empty file?)');
  if (root.kind !== undefined && root.kind !== 'Config') r.fail('kind', `must be Config, not ${JSON.stringify(root.kind)}`);
  if (root.apiVersion !== undefined && root.apiVersion !== 'v1') r.fail('apiVersion', `must be v1, not ${JSON.stringify(root.apiVersion)}`);

  const contextName = opts.context ?? r.str(root, 'current-context', '');
  if (!contextName) r.fail('current-context', 'is not set and no context was named');
  const ctxRef = opts.context ? 'context' : 'current-context';
  const ctx = r.named(root, 'contexts', contextName, 'context', ctxRef);
  const ctxField = `contexts[name=${contextName}].context`;
  const clusterName = r.str(ctx, 'cluster', ctxField);
  if (!clusterName) r.fail(`${ctxField}.cluster`, 'is required');
  const userName = r.str(ctx, 'user', ctxField);

  const cluster = r.named(root, 'clusters', clusterName, 'cluster', `${ctxField}.cluster`);
  const cf = `clusters[name=${clusterName}].cluster`;
  for (const k of Object.keys(cluster)) if (!clusterFields.has(k)) r.fail(`${cf}.${k}`, 'is not a known field');
  if (cluster['proxy-url'] !== undefined) r.fail(`${cf}.proxy-url`, 'is not implemented', true);
  const server = r.str(cluster, 'server', cf);
  if (!server) r.fail(`${cf}.server`, 'is required');
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    r.fail(`${cf}.server`, `${JSON.stringify(server)} is not a URL`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') r.fail(`${cf}.server`, `scheme ${url.protocol} is not http or https`);

  const cfg: RestConfig = { source: file, server: server.replace(/\/+$/, ''), insecureSkipTLSVerify: r.bool(cluster, 'insecure-skip-tls-verify', cf) };
  const tlsServerName = r.str(cluster, 'tls-server-name', cf);
  if (tlsServerName) cfg.tlsServerName = tlsServerName;
  if (cluster['certificate-authority'] && cluster['certificate-authority-data']) r.fail(`${cf}.certificate-authority`, 'and certificate-authority-data are both set; use one');
  const ca = r.data(cluster, 'certificate-authority-data', cf) ?? r.file_(cluster, 'certificate-authority', cf);
  if (ca !== undefined) {
    if (cfg.insecureSkipTLSVerify) r.fail(`${cf}.insecure-skip-tls-verify`, 'cannot be combined with a certificate authority');
    if (!ca.includes('-----BEGIN CERTIFICATE-----')) r.fail(`${cf}.certificate-authority${cluster['certificate-authority-data'] ? '-data' : ''}`, 'holds no PEM certificate');
    cfg.caData = ca;
  }
  const namespace = r.str(ctx, 'namespace', ctxField);
  if (namespace) cfg.namespace = namespace;

  if (!userName) return cfg;
  const user = r.named(root, 'users', userName, 'user', `${ctxField}.user`);
  const uf = `users[name=${userName}].user`;
  for (const k of Object.keys(user)) if (!userFields.has(k)) r.fail(`${uf}.${k}`, 'is not a known field');
  if (user['auth-provider'] !== undefined) {
    const name = isObj(user['auth-provider']) ? user['auth-provider'].name : undefined;
    r.fail(`${uf}.auth-provider`, `auth provider ${JSON.stringify(name ?? '?')} is not implemented (use an exec credential plugin)`, true);
  }
  for (const k of ['as', 'as-uid', 'as-groups', 'as-user-extra']) if (user[k] !== undefined) r.fail(`${uf}.${k}`, 'impersonation is not implemented', true);

  for (const [file_, data] of [['client-certificate', 'client-certificate-data'], ['client-key', 'client-key-data']] as const) {
    if (user[file_] && user[data]) r.fail(`${uf}.${file_}`, `and ${data} are both set; use one`);
  }
  const cert = r.data(user, 'client-certificate-data', uf) ?? r.file_(user, 'client-certificate', uf);
  const key = r.data(user, 'client-key-data', uf) ?? r.file_(user, 'client-key', uf);
  if ((cert === undefined) !== (key === undefined)) {
    r.fail(`${uf}.${cert === undefined ? 'client-certificate' : 'client-key'}`, 'is missing: a client certificate needs both certificate and key');
  }
  if (cert !== undefined && key !== undefined) {
    if (!cert.includes('-----BEGIN CERTIFICATE-----')) r.fail(`${uf}.client-certificate`, 'holds no PEM certificate');
    if (!/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(key)) r.fail(`${uf}.client-key`, 'holds no PEM private key');
    cfg.certData = cert;
    cfg.keyData = key;
  }
  const token = r.str(user, 'token', uf);
  const tokenFile = r.str(user, 'tokenFile', uf);
  // As client-go: an inline token wins over tokenFile.
  if (token) cfg.token = token;
  else if (tokenFile) cfg.tokenFile = r.path(tokenFile);
  const username = r.str(user, 'username', uf);
  const password = r.str(user, 'password', uf);
  if (username !== undefined || password !== undefined) {
    if (cfg.token || cfg.tokenFile) r.fail(`${uf}.username`, 'basic auth and a bearer token are both set; use one');
    cfg.username = username ?? '';
    cfg.password = password ?? '';
  }
  if (user.exec !== undefined && user.exec !== null) cfg.exec = parseExec(r, user.exec, `${uf}.exec`);
  return cfg;
}

/** Reads and parses a kubeconfig file. */
export function loadKubeconfig(file: string, opts: { context?: string } = {}): RestConfig {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new KubeconfigError(file, undefined, `cannot read: ${(err as NodeJS.ErrnoException).code ?? String(err)}`, { cause: err });
  }
  return parseKubeconfig(text, file, opts);
}
