// The secure port the fuzz tests attack (fuzz-secure.test.ts over HTTP/1.1, fuzz-h2.test.ts over
// HTTP/2): every route below a gate whose token "good" is allowed, "denied" authenticated but
// refused and anything else unknown; streaming routes answer 101 to an admitted upgrade; short
// limits so that a hung input shows quickly.

import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { defaultKubeletConfig } from '../../src/config/index.js';
import { KubeletServer, withMethods, type Handler } from '../../src/server/server.js';
import { secureRoutes } from '../../src/server/secure.js';
import { servingTLS } from '../../src/server/tls.js';
import { unionAuthenticator, webhookTokenAuthenticator } from '../../src/server/auth/authn.js';
import { webhookAuthorizer } from '../../src/server/auth/authz.js';
import { KubeletGate } from '../../src/server/auth/gate.js';
import { statsRoutes } from '../../src/stats/routes.js';
import type { Summary } from '../../src/stats/summary.js';
import { Registry } from '../../src/metrics/registry.js';
import { FakeClock } from '../../src/util/clock.js';
import { freePort, hostDouble, recordingLogger } from './raw-http.js';

export const FUZZ_SUMMARY: Summary = { node: { nodeName: 'node-a', startTime: new Date(1_767_225_600_000) }, pods: [] };

export interface FuzzSecureServer {
  server: KubeletServer;
  port: number;
  /** Stops the server and removes its directory. */
  close(): Promise<void>;
}

/** Starts the secure port on 127.0.0.1 with its files (system logs, serving certificate) under a new temp dir named by prefix. */
export async function startFuzzSecureServer(prefix: string): Promise<FuzzSecureServer> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  mkdirSync(join(dir, 'varlog', 'dir'), { recursive: true });
  writeFileSync(join(dir, 'varlog', 'syslog'), 'line\n');
  const clock = new FakeClock();
  const log = recordingLogger();
  const config = defaultKubeletConfig();
  config.enableProfilingHandler = false;
  const streaming = (name: string): Handler => Object.assign(withMethods(['GET', 'POST'], (_req, res) => { res.writeHead(200); res.end(name); }), {
    upgrade: (_req: unknown, socket: import('node:stream').Duplex) => { socket.end('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n'); },
  });
  const routes = secureRoutes({
    config, clock,
    statsRoutes: statsRoutes({ getSummary: () => Promise.resolve(FUZZ_SUMMARY) }),
    metrics: new Registry(),
    cadvisor: { getSummary: () => Promise.resolve(FUZZ_SUMMARY), getPods: () => [], podCgroupName: () => '' },
    runningPods: () => [],
    streaming: new Map(['/containerLogs/', '/exec/', '/attach/', '/portForward/', '/run/'].map((p) => [p, streaming(p)])),
    systemLogRoot: join(dir, 'varlog'),
  });
  const gate = new KubeletGate({
    nodeName: 'node-a',
    authenticator: unionAuthenticator([webhookTokenAuthenticator(async (t) => (t === 'good' || t === 'denied'
      ? { authenticated: true, user: { username: t } } : { authenticated: false }), clock, 120_000)], false),
    authorizer: webhookAuthorizer(async (spec) => ({ allowed: spec.user === 'good' }), clock, { authorizedMs: 300_000, unauthorizedMs: 30_000 }),
    fineGrained: true,
    log,
  });
  const serving = await servingTLS({ config, certDirectory: join(dir, 'pki'), hostname: 'node-a', clock, log });
  const port = await freePort();
  const server = new KubeletServer({
    host: hostDouble(), log, healthzBindAddress: '127.0.0.1', healthzPort: 0, address: '127.0.0.1', readOnlyPort: 0,
    secure: { address: '127.0.0.1', port, tls: serving.options, gate, routes },
    limits: { headersTimeoutMs: 200, requestTimeoutMs: 400, connectionsCheckingIntervalMs: 25, socketIdleTimeoutMs: 1000, keepAliveTimeoutMs: 200, rejectLingerMs: 200, maxConnections: 64 },
  });
  await server.start();
  return {
    server,
    port,
    close: async () => {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
