// The peers of the probe benchmark, in a process of their own so that their cost is not the
// prober's: an HTTP server, a TCP listener and a grpc.health.v1 server on 127.0.0.1.
// Prints one JSON line with the ports, then serves until killed.

import * as http from 'node:http';
import * as net from 'node:net';
import type { AddressInfo } from 'node:net';
import * as grpc from '@grpc/grpc-js';

const httpServer = http.createServer((_q, s) => s.end('ok'));
httpServer.keepAliveTimeout = 5000;
const tcpServer = net.createServer((s) => s.on('error', () => {}).resume());
const ident = (b: Buffer): Buffer => b;
const grpcServer = new grpc.Server();
grpcServer.addService({
  Check: { path: '/grpc.health.v1.Health/Check', requestStream: false, responseStream: false, requestSerialize: ident, requestDeserialize: ident, responseSerialize: ident, responseDeserialize: ident, originalName: 'check' },
} as grpc.ServiceDefinition, { Check: (_c: unknown, cb: grpc.sendUnaryData<Buffer>) => cb(null, Buffer.from([0x08, 1])) });

await new Promise<void>((r) => httpServer.listen(0, '127.0.0.1', 4096, r));
await new Promise<void>((r) => tcpServer.listen(0, '127.0.0.1', 4096, r));
const grpcPort = await new Promise<number>((res, rej) => grpcServer.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))));
process.stdout.write(JSON.stringify({ http: (httpServer.address() as AddressInfo).port, tcp: (tcpServer.address() as AddressInfo).port, grpc: grpcPort }) + '\n');
