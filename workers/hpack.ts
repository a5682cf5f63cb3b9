// An HPACK decoder (RFC 7541) for the lean gRPC probe client: the static table, a dynamic
// table per connection, integers with prefixes, and Huffman-coded strings. Only decoding: the
// probe's own request is encoded literally (no Huffman, no indexing), which needs no state.

export class HpackError extends Error {
  override name = 'HpackError';
}

/** RFC 7541 Appendix A: the static table (index 1..61). */
const STATIC: readonly (readonly [string, string])[] = [
  [':authority', ''], [':method', 'GET'], [':method', 'POST'], [':path', '/'], [':path', '/index.html'],
  [':scheme', 'http'], [':scheme', 'https'], [':status', '200'], [':status', '204'], [':status', '206'],
  [':status', '304'], [':status', '400'], [':status', '404'], [':status', '500'], ['accept-charset', ''],
  ['accept-encoding', 'gzip, deflate'], ['accept-language', ''], ['accept-ranges', ''], ['accept', ''],
  ['access-control-allow-origin', ''], ['age', ''], ['allow', ''], ['authorization', ''], ['cache-control', ''],
  ['content-disposition', ''], ['content-encoding', ''], ['content-language', ''], ['content-length', ''],
  ['content-location', ''], ['content-range', ''], ['content-type', ''], ['cookie', ''], ['date', ''], ['etag', ''],
  ['expect', ''], ['expires', ''], ['from', ''], ['host', ''], ['if-match', ''], ['if-modified-since', ''],
  ['if-none-match', ''], ['if-range', ''], ['if-unmodified-since', ''], ['last-modified', ''], ['link', ''],
  ['location', ''], ['max-forwards', ''], ['proxy-authenticate', ''], ['proxy-authorization', ''], ['range', ''],
  ['referer', ''], ['refresh', ''], ['retry-after', ''], ['server', ''], ['set-cookie', ''],
  ['strict-transport-security', ''], ['transfer-encoding', ''], ['user-agent', ''], ['vary', ''], ['via', ''],
  ['www-authenticate', ''],
];

/**
 * RFC 7541 Appendix B: the Huffman code length of each symbol 0..256 (256 is EOS), one letter
 * per symbol ('A' = 5 bits ... 'Z' = 30). The code is canonical (codes of one length are
 * consecutive, in symbol order, after those of shorter lengths), so the lengths define it.
 */
const HUFFMAN_LENGTHS =
  'ISXXXXXXXTZXXZXXXXXXXXZXXXXXXXXXBFFHIBDGFFDGDBBBAAABBBBBBBCDKBHFIBCCCCCCCCCCCCCCCCCCCCCCDCDIOIJBKABABABBBACCBBBABCBAABCCCCCKGJIXPRPPRRRSRSSSSSTSTTRSTSSSSQRSRSSTRQPRRSSQSRRTQRSSQQRQSRSSPRRRSRRSVVPORSRUVVVWWVTUOQVWWVWTQQVVXWWWPTPQRQQSRRUUTTVSVWVVWWWWWXWWWWWVZ';
const EOS = 256;

/** Canonical decoding tables: per length, the first code, how many codes, and where its symbols start. */
const huff = (() => {
  const lens = Array.from(HUFFMAN_LENGTHS, (c) => c.charCodeAt(0) - 65 + 5);
  const symbols = Array.from({ length: 257 }, (_, s) => s).sort((a, b) => lens[a]! - lens[b]! || a - b);
  const first = new Int32Array(31);
  const count = new Int32Array(31);
  const offset = new Int32Array(31);
  for (const l of lens) count[l]!++;
  let code = 0;
  let at = 0;
  for (let l = 1; l <= 30; l++) {
    first[l] = code;
    offset[l] = at;
    code = (code + count[l]!) << 1;
    at += count[l]!;
  }
  return { first, count, offset, symbols: Int16Array.from(symbols) };
})();

/** Decodes a Huffman-coded string (RFC 7541 5.2): padding is at most 7 one bits, EOS is an error. */
export function huffmanDecode(b: Uint8Array): string {
  const out: number[] = [];
  let code = 0;
  let len = 0;
  for (let i = 0; i < b.length; i++) {
    const byte = b[i]!;
    for (let bit = 7; bit >= 0; bit--) {
      code = (code << 1) | ((byte >> bit) & 1);
      len++;
      const k = code - huff.first[len]!;
      if (k >= 0 && k < huff.count[len]!) {
        const sym = huff.symbols[huff.offset[len]! + k]!;
        if (sym === EOS) throw new HpackError('Huffman string holds EOS');
        out.push(sym);
        code = 0;
        len = 0;
      } else if (len >= 30) {
        throw new HpackError('invalid Huffman code');
      }
    }
  }
  // what is left must be a prefix of EOS (all ones) shorter than a byte
  if (len > 7 || code !== (1 << len) - 1) throw new HpackError('invalid Huffman padding');
  return Buffer.from(out).toString('latin1');
}

/** Header blocks of one connection, decoded in order (they share the dynamic table). */
export class HpackDecoder {
  private readonly dynamic: [string, string][] = [];
  private size = 0;
  private max: number;

  /** `limit`: the SETTINGS_HEADER_TABLE_SIZE this side advertised (4096 by default). */
  constructor(private readonly limit = 4096) {
    this.max = limit;
  }

  /** Name/value pairs of one complete header block. */
  decode(block: Uint8Array): [string, string][] {
    const out: [string, string][] = [];
    let p = 0;
    const int = (prefixBits: number): number => {
      const mask = (1 << prefixBits) - 1;
      let v = block[p++]! & mask;
      if (v < mask) return v;
      for (let shift = 0; ; shift += 7) {
        if (p >= block.length) throw new HpackError('truncated integer');
        if (shift > 21) throw new HpackError('integer too large');
        const b = block[p++]!;
        v += (b & 0x7f) * 2 ** shift;
        if (!(b & 0x80)) return v;
      }
    };
    const str = (): string => {
      if (p >= block.length) throw new HpackError('truncated string');
      const huffman = (block[p]! & 0x80) !== 0;
      const n = int(7);
      if (p + n > block.length) throw new HpackError('truncated string');
      const raw = block.subarray(p, p + n);
      p += n;
      return huffman ? huffmanDecode(raw) : Buffer.from(raw.buffer, raw.byteOffset, raw.length).toString('latin1');
    };
    const entry = (i: number): readonly [string, string] => {
      if (i >= 1 && i <= STATIC.length) return STATIC[i - 1]!;
      const d = this.dynamic[i - STATIC.length - 1];
      if (!d) throw new HpackError(`index ${i} is not in the table`);
      return d;
    };
    let first = true;
    while (p < block.length) {
      const b = block[p]!;
      if (b & 0x80) {
        const i = int(7);
        if (i === 0) throw new HpackError('index 0');
        const [n, v] = entry(i);
        out.push([n, v]);
      } else if (b & 0x40) {
        const i = int(6);
        const name = i ? entry(i)[0] : str();
        const value = str();
        out.push([name, value]);
        this.add(name, value);
      } else if (b & 0x20) {
        // a size update only at the start of a block, within what this side allows
        if (!first) throw new HpackError('table size update after a header');
        const n = int(5);
        if (n > this.limit) throw new HpackError(`table size ${n} over the limit ${this.limit}`);
        this.max = n;
        this.evict(0);
        continue;
      } else {
        const i = int(4);
        const name = i ? entry(i)[0] : str();
        out.push([name, str()]);
      }
      first = false;
    }
    return out;
  }

  private add(name: string, value: string): void {
    const n = name.length + value.length + 32;
    this.evict(n);
    // an entry larger than the table empties it and is not added
    if (n > this.max) return;
    this.dynamic.unshift([name, value]);
    this.size += n;
  }

  private evict(room: number): void {
    while (this.dynamic.length && this.size + room > this.max) {
      const [n, v] = this.dynamic.pop()!;
      this.size -= n.length + v.length + 32;
    }
  }
}

/** Encodes an HPACK integer with an n-bit prefix (RFC 7541 5.1) after `first`'s flag bits. */
export function hpackInt(out: number[], first: number, bits: number, v: number): void {
  const max = (1 << bits) - 1;
  if (v < max) {
    out.push(first | v);
    return;
  }
  out.push(first | max);
  v -= max;
  while (v >= 128) {
    out.push((v & 0x7f) | 0x80);
    v >>>= 7;
  }
  out.push(v);
}

/** Encodes a literal field without indexing (no encoder state): the name by static index, or new when 0; no Huffman. */
export function hpackLiteral(out: number[], nameIndex: number, name: string, value: string): void {
  hpackInt(out, 0x00, 4, nameIndex);
  if (!nameIndex) {
    hpackInt(out, 0x00, 7, name.length);
    for (let i = 0; i < name.length; i++) out.push(name.charCodeAt(i));
  }
  const v = Buffer.from(value, 'utf8');
  hpackInt(out, 0x00, 7, v.length);
  for (const c of v) out.push(c);
}
