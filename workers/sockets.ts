// Socket helpers of the probe executors (workers/probe.ts, workers/grpc-probe.ts).

import type * as net from 'node:net';

export const hostPort = (host: string, port: number): string => `${host.includes(':') ? `[${host}]` : host}:${port}`;

/**
 * Closes with RST so the socket skips TIME_WAIT. A socket already shutting down (the peer
 * closed first, as busybox httpd does, and Node answered its FIN) cannot be reset: Node would
 * then drop the handle without closing it, leaking the descriptor and leaving a worker thread
 * that never finishes terminating (process.exit hangs). It is closed plainly; the TIME_WAIT is
 * the peer's, which closed first.
 */
export function reset(sock: net.Socket | null | undefined): void {
  if (!sock || sock.destroyed) return;
  sock.on('error', () => {});
  if (sock.writableEnded || sock.readyState === 'opening' || typeof sock.resetAndDestroy !== 'function') {
    sock.destroy();
    return;
  }
  try {
    sock.resetAndDestroy();
  } catch {
    // not a TCP handle (TLS): a plain close
    sock.destroy();
  }
}
