import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { ConfigError, DurationError, formatDuration, parseDuration } from '../../src/config/index.js';
import { isKubeletError, KubeletError } from '../../src/util/errors.js';

describe('config errors belong to the KubeletError family', () => {
  it('ConfigError keeps its code, field, file and issues', () => {
    const err = new ConfigError('maxPods', 'expected an integer', '/etc/kubelet/config.yaml');
    assert.ok(err instanceof KubeletError);
    assert.ok(isKubeletError(err, 'KubeletConfigInvalid'));
    assert.equal(err.name, 'ConfigError');
    assert.equal(err.field, 'maxPods');
    assert.equal(err.file, '/etc/kubelet/config.yaml');
    assert.deepEqual(err.issues, [{ field: 'maxPods', detail: 'expected an integer' }]);
    assert.equal(err.message, 'kubelet config /etc/kubelet/config.yaml: field maxPods: expected an integer');
    const cause = new Error('EACCES');
    const withCause = new ConfigError('', 'failed to read', undefined, undefined, { cause });
    assert.equal(withCause.withFile('/c.yaml').cause, cause);
  });

  it('DurationError keeps its code and input; out-of-range formatting throws it too', () => {
    assert.throws(() => parseDuration('1x'), (err: unknown) => err instanceof DurationError && isKubeletError(err, 'InvalidDuration') && err.input === '1x');
    assert.throws(() => formatDuration(Infinity), (err: unknown) => err instanceof DurationError && err.code === 'InvalidDuration');
    assert.throws(() => formatDuration(2 ** 62), DurationError);
  });
});
