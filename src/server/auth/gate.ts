// The secure port's gate, as upstream's auth filter: authenticate (401 "Unauthorized" for no
// identity or bad credentials), map the request to its nodes/<subresource> attributes, authorize
// each in turn until one is allowed (403 naming user, verb and subresources otherwise; 500 when
// the authorizer failed). Refusals are logged with the reason the client is not told.

import type { IncomingMessage } from 'node:http';
import type { Logger } from '../../util/log.js';
import { errorMessage } from '../../util/errors.js';
import type { Refusal, RequestGate } from '../server.js';
import { goList, requestAttributes } from './attributes.js';
import type { Authenticator } from './authn.js';
import type { Authorizer } from './authz.js';

export interface GateOptions {
  nodeName: string;
  authenticator: Authenticator;
  authorizer: Authorizer;
  /** KubeletFineGrainedAuthz (default on). */
  fineGrained: boolean;
  log: Logger;
}

export class KubeletGate implements RequestGate {
  constructor(private readonly o: GateOptions) {}

  async admit(req: IncomingMessage, path: string): Promise<Refusal | undefined> {
    const { o } = this;
    let user;
    try {
      user = await o.authenticator.authenticate(req);
    } catch (err) {
      o.log.v(2).info('Unable to authenticate the request', { path, err: errorMessage(err) });
      return { status: 401, message: 'Unauthorized' };
    }
    if (!user) return { status: 401, message: 'Unauthorized' };
    const attrs = requestAttributes(user, req.method ?? 'GET', path, o.nodeName, o.fineGrained);
    const subresources = goList(attrs.map((a) => a.subresource));
    const verb = attrs[0]!.verb;
    for (const a of attrs) {
      let decision;
      try {
        decision = await o.authorizer.authorize(a);
      } catch (err) {
        o.log.error('Authorization error', { user: user.name, verb, resource: 'nodes', subresource: a.subresource, err: errorMessage(err) });
        return { status: 500, message: `Authorization error (user=${user.name}, verb=${verb}, resource=nodes, subresource(s)=${subresources})` };
      }
      if (decision === 'allow') return undefined;
    }
    o.log.v(2).info('Forbidden', { user: user.name, verb, resource: 'nodes', subresources, path });
    return { status: 403, message: `Forbidden (user=${user.name}, verb=${verb}, resource=nodes, subresource(s)=${subresources})` };
  }
}
