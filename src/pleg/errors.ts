// Errors of the PLEG's own making (misuse by a caller); malformed runtime responses are
// WireFormatError (wire.ts) and failed CRI calls CriError.

import { KubeletError } from '../util/errors.js';

export type PlegErrorCode = 'ERR_PLEG_RECORD_EXISTS' | 'ERR_PLEG_NO_STATUS_SOURCE' | 'ERR_PLEG_NO_LISTER';

export class PlegError extends KubeletError {
  declare readonly code: PlegErrorCode;
  constructor(code: PlegErrorCode, message: string) {
    super(code, message);
  }
}
