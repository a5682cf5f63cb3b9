// The gate's authentication and authorization with doubles for the two reviews: upstream's
// union of authenticators (first identity wins, bad credentials are 401 even with anonymous on),
// the 401/403/500 texts, and both caches stepping a FakeClock.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';

import { bearerToken, unionAuthenticator, webhookTokenAuthenticator, type TokenReviewStatus } from '../../../src/server/auth/authn.js';
import { alwaysAllow, webhookAuthorizer, type SubjectAccessReviewSpec, type SubjectAccessReviewStatus } from '../../../src/server/auth/authz.js';
import { KubeletGate } from '../../../src/server/auth/gate.js';
import { buildGate } from '../../../src/server/secure.js';
import { defaultKubeletConfig } from '../../../src/config/index.js';
import { FakeClock } from '../../../src/util/clock.js';
import { isKubeletError } from '../../../src/util/errors.js';
import { recordingLogger } from '../raw-http.js';

function req(method: string, headers: Record<string, string> = {}): IncomingMessage {
  return { method, headers, socket: {} } as unknown as IncomingMessage;
}

function tokenDouble(known: Record<string, string>) {
  const seen: string[] = [];
  const review = async (token: string): Promise<TokenReviewStatus> => {
    seen.push(token);
    if (token === 'explode') throw new Error('connection refused');
    const user = known[token];
    return user ? { authenticated: true, user: { username: user, uid: `${user}-uid`, groups: ['team'] } } : { authenticated: false };
  };
  return { seen, review };
}

function sarDouble(allow: (s: SubjectAccessReviewSpec) => boolean | 'error') {
  const seen: SubjectAccessReviewSpec[] = [];
  const review = async (spec: SubjectAccessReviewSpec): Promise<SubjectAccessReviewStatus> => {
    seen.push(spec);
    const a = allow(spec);
    if (a === 'error') throw new Error('webhook down');
    return a ? { allowed: true } : { allowed: false, denied: true };
  };
  return { seen, review };
}

describe('bearerToken', () => {
  it('reads "Bearer <token>" (scheme case-insensitive), and the WebSocket subprotocol form', () => {
    assert.equal(bearerToken(req('GET', { authorization: 'Bearer abc' })), 'abc');
    assert.equal(bearerToken(req('GET', { authorization: 'bearer abc' })), 'abc');
    assert.equal(bearerToken(req('GET', { authorization: 'Basic abc' })), undefined);
    assert.equal(bearerToken(req('GET', { authorization: 'Bearer ' })), undefined);
    const b64 = Buffer.from('ws-token').toString('base64url');
    assert.equal(bearerToken(req('GET', { upgrade: 'websocket', 'sec-websocket-protocol': `v4.channel.k8s.io, base64url.bearer.authorization.k8s.io.${b64}` })), 'ws-token');
  });
});

describe('KubeletGate', () => {
  const clock = new FakeClock();
  const log = recordingLogger();

  function gate(o: { anonymous: boolean; tokens?: Record<string, string>; allow?: (s: SubjectAccessReviewSpec) => boolean | 'error'; alwaysAllow?: boolean }) {
    const t = tokenDouble(o.tokens ?? {});
    const s = sarDouble(o.allow ?? (() => true));
    const g = new KubeletGate({
      nodeName: 'node-a',
      authenticator: unionAuthenticator([webhookTokenAuthenticator(t.review, clock, 120_000)], o.anonymous),
      authorizer: o.alwaysAllow ? alwaysAllow : webhookAuthorizer(s.review, clock, { authorizedMs: 300_000, unauthorizedMs: 30_000 }),
      fineGrained: true,
      log,
    });
    return { g, tokens: t.seen, sars: s.seen };
  }

  it('no credentials: 401 "Unauthorized" with anonymous off; system:anonymous with it on', async () => {
    assert.deepEqual(await gate({ anonymous: false }).g.admit(req('GET'), '/pods'), { status: 401, message: 'Unauthorized' });
    const on = gate({ anonymous: true });
    assert.equal(await on.g.admit(req('GET'), '/pods'), undefined);
    assert.deepEqual(on.sars.map((s) => [s.user, s.groups]), [['system:anonymous', ['system:unauthenticated']]]);
  });

  it('a bad token is 401 even with anonymous on; a failing TokenReview too (not cached)', async () => {
    const { g, tokens } = gate({ anonymous: true, tokens: {} });
    assert.equal((await g.admit(req('GET', { authorization: 'Bearer nope' }), '/pods'))?.status, 401);
    assert.equal((await g.admit(req('GET', { authorization: 'Bearer explode' }), '/pods'))?.status, 401);
    assert.equal((await g.admit(req('GET', { authorization: 'Bearer explode' }), '/pods'))?.status, 401);
    assert.deepEqual(tokens, ['nope', 'explode', 'explode']);
  });

  it('a token user gets system:authenticated and uid; the SubjectAccessReview carries them', async () => {
    const { g, sars } = gate({ anonymous: false, tokens: { t1: 'alice' } });
    assert.equal(await g.admit(req('GET', { authorization: 'Bearer t1' }), '/stats/summary'), undefined);
    assert.deepEqual(sars, [{
      resourceAttributes: { namespace: '', verb: 'get', group: '', version: 'v1', resource: 'nodes', subresource: 'stats', name: 'node-a' },
      user: 'alice', uid: 'alice-uid', groups: ['team', 'system:authenticated'],
    }]);
  });

  it('403 with upstream\'s text listing every subresource tried; 500 when the authorizer fails', async () => {
    const denied = gate({ anonymous: false, tokens: { t1: 'alice' }, allow: () => false });
    assert.deepEqual(await denied.g.admit(req('DELETE', { authorization: 'Bearer t1' }), '/configz'), {
      status: 403, message: 'Forbidden (user=alice, verb=delete, resource=nodes, subresource(s)=[configz proxy])',
    });
    const broken = gate({ anonymous: false, tokens: { t1: 'alice' }, allow: () => 'error' });
    assert.deepEqual(await broken.g.admit(req('GET', { authorization: 'Bearer t1' }), '/exec/a/b/c'), {
      status: 500, message: 'Authorization error (user=alice, verb=get, resource=nodes, subresource(s)=[proxy])',
    });
  });

  it('token reviews are cached for cacheTTL (failures too); access decisions for 5m (allowed) and 30s (denied)', async () => {
    let allowStats = true;
    const { g, tokens, sars } = gate({ anonymous: false, tokens: { t1: 'alice' }, allow: (s) => s.resourceAttributes.subresource === 'stats' && allowStats });
    const ask = (path: string) => g.admit(req('GET', { authorization: 'Bearer t1' }), path);
    assert.equal(await ask('/stats/summary'), undefined);
    assert.equal((await ask('/metrics'))?.status, 403);
    allowStats = false;
    clock.step(29_000);
    assert.equal(await ask('/stats/summary'), undefined, 'allowed answer still cached');
    assert.equal((await ask('/metrics'))?.status, 403);
    assert.equal(sars.length, 2);
    clock.step(2_000);
    assert.equal((await ask('/metrics'))?.status, 403);
    assert.equal(sars.length, 3, 'denied answer expired after 30s');
    assert.equal(tokens.length, 1, 'token review cached');
    clock.step(90_000);
    assert.equal(await ask('/stats/summary'), undefined, 'allowed answer cached at 2m');
    assert.equal(tokens.length, 2, 'token review expired after cacheTTL (2m)');
    clock.step(180_000);
    assert.equal((await ask('/stats/summary'))?.status, 403, 'allowed answer expired after 5m');
  });

  it('AlwaysAllow admits any identified user without a review', async () => {
    const { g, sars } = gate({ anonymous: true, alwaysAllow: true });
    assert.equal(await g.admit(req('POST'), '/exec/a/b/c'), undefined);
    assert.equal(sars.length, 0);
  });
});

describe('buildGate', () => {
  it('refuses webhook authentication or authorization without an API client, naming the field', () => {
    const c = defaultKubeletConfig();
    assert.throws(() => buildGate({ config: c, nodeName: 'n', clock: new FakeClock(), log: recordingLogger() }),
      (err: unknown) => isKubeletError(err, 'ERR_SERVER_AUTH_CONFIG') && (err as Error).message.startsWith('authentication.webhook.enabled'));
    c.authentication.webhook.enabled = false;
    assert.throws(() => buildGate({ config: c, nodeName: 'n', clock: new FakeClock(), log: recordingLogger() }),
      (err: unknown) => isKubeletError(err, 'ERR_SERVER_AUTH_CONFIG') && (err as Error).message.startsWith('authorization.mode'));
    c.authorization.mode = 'AlwaysAllow';
    assert.ok(buildGate({ config: c, nodeName: 'n', clock: new FakeClock(), log: recordingLogger() }));
  });
});
