// HTTP/2 (RFC 9113) framing shared by the hand-written h2c clients: the CRI connection
// (src/runtime/h2c.ts) and the gRPC health probe (grpc-probe.ts).

export const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
// frame types
export const DATA = 0;
export const HEADERS = 1;
export const RST_STREAM = 3;
export const SETTINGS = 4;
export const PUSH_PROMISE = 5;
export const PING = 6;
export const GOAWAY = 7;
export const WINDOW_UPDATE = 8;
export const CONTINUATION = 9;
// flags
export const END_STREAM = 0x1;
export const ACK = 0x1;
export const END_HEADERS = 0x4;
export const PADDED = 0x8;
export const PRIORITY = 0x20;
/** The most bytes of one header block (HEADERS and its CONTINUATIONs) taken: a CONTINUATION flood ends the exchange. */
export const MAX_HEADER_BLOCK = 64 * 1024;

const H2_ERRORS = ['NO_ERROR', 'PROTOCOL_ERROR', 'INTERNAL_ERROR', 'FLOW_CONTROL_ERROR', 'SETTINGS_TIMEOUT', 'STREAM_CLOSED', 'FRAME_SIZE_ERROR', 'REFUSED_STREAM', 'CANCEL', 'COMPRESSION_ERROR', 'CONNECT_ERROR', 'ENHANCE_YOUR_CALM', 'INADEQUATE_SECURITY', 'HTTP_1_1_REQUIRED'];

/** An HTTP/2 error code's name as Node's client reports it in a stream error (NGHTTP2_CANCEL), else the number. */
export const h2ErrorName = (code: number): string => (H2_ERRORS[code] ? `NGHTTP2_${H2_ERRORS[code]}` : String(code));

/** Writes a frame's 9-byte header at `at`. */
export function frameHeader(b: Buffer, at: number, len: number, type: number, flags: number, stream: number): void {
  b[at] = (len >>> 16) & 0xff;
  b[at + 1] = (len >>> 8) & 0xff;
  b[at + 2] = len & 0xff;
  b[at + 3] = type;
  b[at + 4] = flags;
  b.writeUInt32BE(stream, at + 5);
}
