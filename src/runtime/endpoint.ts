// The CRI endpoint forms the kubelet accepts (upstream on Linux: unix sockets only).

import { CriEndpointError } from './errors.js';

/** Turns `unix:///path` or `/path` into a grpc-js target; rejects other schemes (as upstream on Linux). */
export function criEndpointToTarget(endpoint: string): string {
  const ep = endpoint.trim();
  if (ep.startsWith('unix://')) {
    const path = ep.slice('unix://'.length);
    if (!path.startsWith('/')) throw new CriEndpointError(`CRI endpoint ${endpoint}: unix socket path must be absolute`);
    return `unix://${path}`;
  }
  if (ep.startsWith('/')) return `unix://${ep}`;
  throw new CriEndpointError(`CRI endpoint ${endpoint}: only unix sockets are supported (unix:///path or /path)`);
}
