// /healthz as upstream's healthz package (k8s.io/apiserver/pkg/server/healthz) serves it: `ok`,
// or one line per check with ?verbose or on failure (a failing check's reason is withheld on the
// root path and logged; /healthz/<check> names it), ?exclude=<check>, and any method.
//
// Which checks: upstream's healthz port (10248) installs none, so it has only `ping`; the
// kubelet's server (10250, and the read-only 10255) has ping, log and syncloop. Runtime and PLEG
// health are not healthz checks upstream: they make the node's Ready condition false. Until that
// condition exists here, they are shown with ?verbose (and on failure) as `warn:` lines, the form
// upstream already uses for notes that do not fail the check.

import type { ServerResponse } from 'node:http';
import type { Logger } from '../util/log.js';

/** One check: undefined when healthy, else the reason. */
export interface HealthzCheck {
  name: string;
  check(): string | undefined;
}

/** A condition reported alongside the checks that does not fail them (runtime, PLEG). */
export interface HealthzNote {
  name: string;
  ok: boolean;
  message: string;
}

export const pingCheck: HealthzCheck = { name: 'ping', check: () => undefined };

// upstream's log check fails when a klog flush has not completed for 2 minutes; the logger here
// writes synchronously (stderr is a blocking file, pipe or TTY on Linux), so when this answers, it is not blocked.
export const logCheck: HealthzCheck = { name: 'log', check: () => undefined };

function sendPlain(res: ServerResponse, code: number, body: string): void {
  res.writeHead(code, {
    'Content-Type': 'text/plain; charset=utf-8',
    'X-Content-Type-Options': 'nosniff',
    'Content-Length': Buffer.byteLength(body),
  });
  res.end(body);
}

/** /healthz on `checks`, with the notes as informational lines. */
export function serveHealthzRoot(
  res: ServerResponse,
  query: URLSearchParams,
  checks: readonly HealthzCheck[],
  notes: readonly HealthzNote[],
  log: Logger,
): void {
  const excluded = new Set(query.getAll('exclude'));
  const lines: string[] = [];
  const failed: string[] = [];
  const reasons: string[] = [];
  for (const c of checks) {
    if (excluded.delete(c.name)) {
      lines.push(`[+]${c.name} excluded: ok`);
      continue;
    }
    const err = c.check();
    if (err === undefined) {
      lines.push(`[+]${c.name} ok`);
    } else {
      // This endpoint is public: the reason goes to the log, as upstream.
      lines.push(`[-]${c.name} failed: reason withheld`);
      failed.push(c.name);
      reasons.push(`[-]${c.name} failed: ${err}`);
    }
  }
  if (excluded.size > 0) {
    const names = [...excluded].sort().map((n) => JSON.stringify(n)).join(',');
    lines.push(`warn: some health checks cannot be excluded: no matches for ${names}`);
  }
  for (const n of notes) {
    // One line each, whatever the message holds (a newline could forge a check line).
    if (!n.ok) lines.push(`warn: ${n.name} is not healthy (a node Ready condition, not a healthz check): ${n.message.replace(/\s+/g, ' ').trim()}`);
  }
  if (failed.length) {
    log.v(2).info('healthz check failed', { checks: failed.join(','), reasons: reasons.join('; ') });
    return sendPlain(res, 500, `${lines.join('\n')}\nhealthz check failed\n`);
  }
  if (!query.has('verbose')) return sendPlain(res, 200, 'ok');
  sendPlain(res, 200, `${lines.join('\n')}\nhealthz check passed\n`);
}

/** /healthz/<check>: `ok`, or the reason with a 500. */
export function serveHealthzCheck(res: ServerResponse, check: HealthzCheck): void {
  const err = check.check();
  if (err === undefined) sendPlain(res, 200, 'ok');
  else sendPlain(res, 500, `internal server error: ${err}\n`);
}
