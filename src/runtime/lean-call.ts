// Unary runtime calls whose answers are decoded on the wire by their caller (writable layers,
// container GC's lists): one lean h2c connection, made on the first call, closed with close().

import { toCriError } from './cri-errors.js';
import type { Clock } from '../util/clock.js';
import { H2cUnary, LEAN_FLOW_CONTROL_WINDOW } from './h2c.js';

export interface LeanRuntimeCallsOptions {
  /** The runtime's endpoint (`unix:///path`). */
  runtimeEndpoint: string;
  timeoutMs: number;
  /** Largest answer accepted (bytes). */
  maxMessageBytes: number;
  clock?: Clock;
}

/** A request message with no fields set (List* requests without a filter). */
const NO_FILTER = Buffer.alloc(0);

export class LeanRuntimeCalls {
  #h2c?: H2cUnary;
  #closed = false;

  constructor(private readonly opts: LeanRuntimeCallsOptions) {}

  /** `method` of runtime.v1.RuntimeService with an empty request; fails as a CriError of the method (CANCELLED after close()). */
  async call<T>(method: string, decode: (msg: Buffer) => T): Promise<T> {
    if (this.#closed) throw toCriError(method, { code: 1, details: 'lean runtime connection closed' });
    const { runtimeEndpoint, maxMessageBytes, clock } = this.opts;
    this.#h2c ??= new H2cUnary({ runtimeEndpoint, maxMessageBytes, flowControlWindow: LEAN_FLOW_CONTROL_WINDOW, ...(clock ? { clock } : {}) });
    try {
      return await this.#h2c.callDecoded(`/runtime.v1.RuntimeService/${method}`, NO_FILTER, this.opts.timeoutMs, decode);
    } catch (err) {
      throw toCriError(method, err);
    }
  }

  close(): void {
    this.#closed = true;
    this.#h2c?.close();
    this.#h2c = undefined;
  }
}
