// The HPACK decoder of the lean gRPC probe client (workers/hpack.ts) on RFC 7541's examples,
// Huffman codes taken from its Appendix B, and malformed blocks.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { HpackDecoder, HpackError, huffmanDecode } from '../../workers/hpack.js';

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex');

test('hpack: RFC 7541 C.4 requests with Huffman, the dynamic table carried from one block to the next', () => {
  const d = new HpackDecoder();
  assert.deepEqual(d.decode(hex('8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff')), [
    [':method', 'GET'], [':scheme', 'http'], [':path', '/'], [':authority', 'www.example.com'],
  ]);
  // 0xbe: index 62, the first dynamic entry (:authority from the first block)
  assert.deepEqual(d.decode(hex('8286 84be 5886 a8eb 1064 9cbf')), [
    [':method', 'GET'], [':scheme', 'http'], [':path', '/'], [':authority', 'www.example.com'], ['cache-control', 'no-cache'],
  ]);
  // 0xbf: index 63, now the older :authority entry; 0xbe the newer cache-control
  assert.deepEqual(d.decode(hex('bebf')), [['cache-control', 'no-cache'], [':authority', 'www.example.com']]);
});

test('hpack: literal forms without Huffman, new names, and a size update that empties the table', () => {
  const d = new HpackDecoder();
  const lit = (first: number, name: string, value: string): Buffer => Buffer.concat([Buffer.from([first, name.length]), Buffer.from(name), Buffer.from([value.length]), Buffer.from(value)]);
  // with indexing (0x40), without (0x00), never indexed (0x10)
  assert.deepEqual(d.decode(Buffer.concat([lit(0x40, 'grpc-status', '0'), lit(0x00, 'te', 'trailers'), lit(0x10, 'x-secret', 'k')])), [
    ['grpc-status', '0'], ['te', 'trailers'], ['x-secret', 'k'],
  ]);
  assert.deepEqual(d.decode(Buffer.from([0xbe])), [['grpc-status', '0']], 'only the indexed literal entered the table');
  // size update to 0 evicts it
  assert.throws(() => d.decode(Buffer.from([0x20, 0xbe])), /index 62 is not in the table/);
});

test('hpack: Huffman codes of RFC 7541 Appendix B decode, padding and EOS are checked', () => {
  // symbol → [code, bits] from the RFC's table
  const codes: [number, number, number][] = [[48, 0x0, 5], [97, 0x3, 5], [32, 0x14, 6], [58, 0x5c, 7], [38, 0xf8, 8], [33, 0x3f8, 10], [92, 0x7fff0, 19], [0, 0x1ff8, 13], [255, 0x3ffffee, 26], [10, 0x3ffffffc, 30], [128, 0xfffe6, 20], [200, 0x3ffffe2, 26]];
  let bits = '';
  for (const [, code, n] of codes) bits += code.toString(2).padStart(n, '0');
  bits += '1'.repeat((8 - (bits.length % 8)) % 8);
  const bytes = Buffer.from(bits.match(/.{8}/g)!.map((b) => parseInt(b, 2)));
  assert.equal(huffmanDecode(bytes), Buffer.from(codes.map(([s]) => s)).toString('latin1'));
  // '0' (00000) then three zero bits of padding: padding must be ones
  assert.throws(() => huffmanDecode(Buffer.from([0x00])), HpackError);
  // a whole byte of ones is more than 7 bits of padding
  assert.throws(() => huffmanDecode(Buffer.from([0x07, 0xff])), /padding/);
  // EOS itself (30 ones) is an error
  assert.throws(() => huffmanDecode(Buffer.from([0xff, 0xff, 0xff, 0xfc])), /EOS/);
});

test('hpack: malformed blocks are errors, never a crash', () => {
  const d = new HpackDecoder();
  assert.throws(() => d.decode(Buffer.from([0x80])), /index 0/);
  assert.throws(() => d.decode(Buffer.from([0xff, 0x80])), /truncated integer/);
  assert.throws(() => d.decode(Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0x7f])), /integer too large/);
  assert.throws(() => d.decode(Buffer.from([0x00, 0x05, 0x61])), /truncated string/);
  assert.throws(() => d.decode(Buffer.from([0x3f, 0xe2, 0x1f])), /table size 4097 over the limit 4096/);
  assert.throws(() => d.decode(Buffer.from([0x88, 0x20])), /size update after a header/);
  assert.throws(() => d.decode(Buffer.from([0xc0])), /not in the table/);
});
