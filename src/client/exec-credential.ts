// exec credential plugins (client.authentication.k8s.io v1 and v1beta1): the kubeconfig's
// command runs with KUBERNETES_EXEC_INFO holding an ExecCredential, prints one back with a
// token or a client certificate; the answer is cached until its expirationTimestamp, and a
// 401 from the server throws it away so the next request runs the plugin again.

import { spawn } from 'node:child_process';
import type { Clock } from '../util/clock.js';
import { ExecCredentialError } from './errors.js';
import type { ExecConfig, RestConfig } from './kubeconfig.js';

export interface ExecCredential {
  token?: string;
  certData?: string;
  keyData?: string;
  /** Epoch ms after which the plugin must be asked again; none = until a 401. */
  expiresAt?: number;
}

const maxOutputBytes = 1 << 20;
// metav1.Time's JSON form, as time.Parse(time.RFC3339, ...) takes it (Date.parse alone also takes "2030").
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
const defaultTimeoutMs = 60_000;

export class ExecCredentialProvider {
  private cached: ExecCredential | undefined;
  private inflight: Promise<ExecCredential> | undefined;
  /** How many times the plugin ran (for tests and logs). */
  runs = 0;

  constructor(
    private readonly exec: ExecConfig,
    private readonly cluster: Pick<RestConfig, 'server' | 'tlsServerName' | 'insecureSkipTLSVerify' | 'caData'>,
    private readonly clock: Clock,
    private readonly timeoutMs = defaultTimeoutMs,
  ) {}

  /** The cached credential while it is valid, else a fresh one (concurrent callers share one run). */
  async get(): Promise<ExecCredential> {
    const c = this.cached;
    if (c && (c.expiresAt === undefined || this.clock.now() < c.expiresAt)) return c;
    this.inflight ??= this.run().then(
      (cred) => { this.cached = cred; this.inflight = undefined; return cred; },
      (err) => { this.inflight = undefined; throw err; },
    );
    return this.inflight;
  }

  /** Forgets the cached credential (the server said 401). */
  invalidate(): void {
    this.cached = undefined;
  }

  private input(): string {
    const spec: Record<string, unknown> = { interactive: false };
    if (this.exec.provideClusterInfo) {
      const cluster: Record<string, unknown> = { server: this.cluster.server };
      if (this.cluster.tlsServerName) cluster['tls-server-name'] = this.cluster.tlsServerName;
      if (this.cluster.insecureSkipTLSVerify) cluster['insecure-skip-tls-verify'] = true;
      if (this.cluster.caData) cluster['certificate-authority-data'] = Buffer.from(this.cluster.caData).toString('base64');
      spec.cluster = cluster;
    }
    return JSON.stringify({ apiVersion: this.exec.apiVersion, kind: 'ExecCredential', spec });
  }

  private run(): Promise<ExecCredential> {
    const { command, args } = this.exec;
    this.runs++;
    return new Promise((resolve, reject) => {
      const env = { ...process.env };
      for (const e of this.exec.env) env[e.name] = e.value;
      env.KUBERNETES_EXEC_INFO = this.input();
      const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      let err = '';
      let overflow = false;
      const timer = this.clock.setTimeout(() => {
        child.kill('SIGKILL');
        finish(new ExecCredentialError(command, `did not finish within ${this.timeoutMs} ms`));
      }, this.timeoutMs);
      let done = false;
      const finish = (e: Error | undefined, cred?: ExecCredential) => {
        if (done) return;
        done = true;
        timer.cancel();
        if (e) reject(e);
        else resolve(cred!);
      };
      child.stdout.setEncoding('utf8').on('data', (d: string) => {
        if (out.length + d.length > maxOutputBytes) { overflow = true; child.kill('SIGKILL'); return; }
        out += d;
      });
      child.stderr.setEncoding('utf8').on('data', (d: string) => { if (err.length < 4096) err += d; });
      child.on('error', (e: NodeJS.ErrnoException) => {
        const hint = e.code === 'ENOENT' && this.exec.installHint ? `; ${this.exec.installHint.trim()}` : '';
        finish(new ExecCredentialError(command, `cannot run: ${e.code ?? e.message}${hint}`, { cause: e }));
      });
      child.on('close', (code, signal) => {
        if (overflow) return finish(new ExecCredentialError(command, `printed more than ${maxOutputBytes} bytes`));
        if (code !== 0) {
          const why = signal ? `was killed by ${signal}` : `exited with ${code}`;
          return finish(new ExecCredentialError(command, `${why}${err.trim() ? `: ${err.trim().slice(0, 500)}` : ''}`));
        }
        try {
          finish(undefined, this.decode(out));
        } catch (e) {
          finish(e as Error);
        }
      });
    });
  }

  private decode(out: string): ExecCredential {
    const { command, apiVersion } = this.exec;
    let doc: any;
    try {
      doc = JSON.parse(out);
    } catch {
      throw new ExecCredentialError(command, 'printed no ExecCredential JSON');
    }
    if (doc?.kind !== 'ExecCredential') throw new ExecCredentialError(command, `printed kind ${JSON.stringify(doc?.kind)}, not ExecCredential`);
    if (doc.apiVersion !== apiVersion) throw new ExecCredentialError(command, `answered apiVersion ${JSON.stringify(doc.apiVersion)}, the kubeconfig asked for ${apiVersion}`);
    const st = doc.status;
    if (typeof st !== 'object' || st === null) throw new ExecCredentialError(command, 'answered no status');
    const cred: ExecCredential = {};
    if (typeof st.token === 'string' && st.token) cred.token = st.token;
    const hasCert = typeof st.clientCertificateData === 'string' && st.clientCertificateData;
    const hasKey = typeof st.clientKeyData === 'string' && st.clientKeyData;
    if (!!hasCert !== !!hasKey) throw new ExecCredentialError(command, 'answered clientCertificateData without clientKeyData, or the reverse');
    if (hasCert) {
      cred.certData = st.clientCertificateData;
      cred.keyData = st.clientKeyData;
    }
    if (!cred.token && !cred.certData) throw new ExecCredentialError(command, 'answered neither status.token nor a client certificate');
    if (st.expirationTimestamp !== undefined && st.expirationTimestamp !== null) {
      const t = typeof st.expirationTimestamp === 'string' && RFC3339.test(st.expirationTimestamp) ? Date.parse(st.expirationTimestamp) : NaN;
      if (Number.isNaN(t)) throw new ExecCredentialError(command, `status.expirationTimestamp ${JSON.stringify(st.expirationTimestamp)} is not RFC 3339`);
      cred.expiresAt = t;
    }
    return cred;
  }
}
