// PKCS#10 certificate signing requests (RFC 2986) for ECDSA P-256 keys, encoded in DER by hand:
// node:crypto makes keys and signatures but no CSRs. The subject is written in the order Go's
// pkix.Name writes it (O before CN); SANs go into an extensionRequest attribute.

import { createHash, generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { isIP } from 'node:net';

function len(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let v = n; v > 0; v >>= 8) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

function tlv(tag: number, body: Buffer): Buffer {
  return Buffer.concat([Buffer.from([tag]), len(body.length), body]);
}

const seq = (...parts: Buffer[]) => tlv(0x30, Buffer.concat(parts));
const set = (...parts: Buffer[]) => tlv(0x31, Buffer.concat(parts));

function oid(dotted: string): Buffer {
  const p = dotted.split('.').map(Number);
  const out: number[] = [p[0] * 40 + p[1]];
  for (const n of p.slice(2)) {
    const b: number[] = [n & 0x7f];
    for (let v = Math.floor(n / 128); v > 0; v = Math.floor(v / 128)) b.unshift((v & 0x7f) | 0x80);
    out.push(...b);
  }
  return tlv(0x06, Buffer.from(out));
}

const OID_CN = '2.5.4.3';
const OID_O = '2.5.4.10';
const OID_EXTENSION_REQUEST = '1.2.840.113549.1.9.14';
const OID_SAN = '2.5.29.17';
const OID_ECDSA_SHA256 = '1.2.840.10045.4.3.2';

function ipBytes(ip: string): Buffer {
  if (isIP(ip) === 4) return Buffer.from(ip.split('.').map(Number));
  // IPv6: expand '::'
  const [head, tail] = ip.includes('::') ? ip.split('::') : [ip, undefined];
  const h = head ? head.split(':') : [];
  const t = tail !== undefined && tail !== '' ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill('0'), ...t];
  return Buffer.from(groups.flatMap((g) => { const v = parseInt(g, 16); return [v >> 8, v & 0xff]; }));
}

export interface CsrSubject {
  commonName: string;
  organizations?: string[];
  dnsNames?: string[];
  ipAddresses?: string[];
}

/** The DER of a CSR for `subject`, signed with `privateKey` (ECDSA, SHA-256). */
export function createCsrDer(subject: CsrSubject, privateKey: KeyObject, publicKey: KeyObject): Buffer {
  const rdn = (o: string, v: string) => set(seq(oid(o), tlv(0x0c, Buffer.from(v, 'utf8'))));
  const name = seq(...(subject.organizations ?? []).map((o) => rdn(OID_O, o)), rdn(OID_CN, subject.commonName));
  const spki = publicKey.export({ type: 'spki', format: 'der' });
  const general: Buffer[] = [
    ...(subject.dnsNames ?? []).map((d) => tlv(0x82, Buffer.from(d, 'ascii'))),
    ...(subject.ipAddresses ?? []).map((ip) => tlv(0x87, ipBytes(ip))),
  ];
  const attrs = general.length
    ? tlv(0xa0, seq(oid(OID_EXTENSION_REQUEST), set(seq(seq(oid(OID_SAN), tlv(0x04, seq(...general)))))))
    : tlv(0xa0, Buffer.alloc(0));
  const info = seq(tlv(0x02, Buffer.from([0])), name, spki, attrs);
  const sig = sign('sha256', info, privateKey);
  return seq(info, seq(oid(OID_ECDSA_SHA256)), tlv(0x03, Buffer.concat([Buffer.from([0]), sig])));
}

export function csrPem(der: Buffer): string {
  const b64 = der.toString('base64').replace(/(.{64})/g, '$1\n').replace(/\n$/, '');
  return `-----BEGIN CERTIFICATE REQUEST-----\n${b64}\n-----END CERTIFICATE REQUEST-----\n`;
}

/** A fresh ECDSA P-256 key (upstream's kubelet key type) and its SEC1 PEM ("EC PRIVATE KEY", as upstream writes it). */
export function newKey(): { privateKey: KeyObject; publicKey: KeyObject; pem: string } {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  return { privateKey, publicKey, pem: privateKey.export({ type: 'sec1', format: 'pem' }) as string };
}

/** Upstream's digested CSR name: node-csr- and a hash of the public key, subject and usages, so a retry finds its own request. */
export function digestedName(publicKey: KeyObject, subject: CsrSubject, usages: string[]): string {
  const h = createHash('sha512');
  h.update(publicKey.export({ type: 'spki', format: 'der' }));
  h.update(`|${subject.commonName}|${(subject.organizations ?? []).join(',')}|${usages.join(',')}`);
  return `node-csr-${h.digest('base64url').slice(0, 43)}`;
}
