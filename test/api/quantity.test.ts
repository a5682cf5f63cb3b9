import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { parseQuantity, Quantity, QuantityError } from '../../src/api/quantity.js';

describe('parseQuantity', () => {
  const cases: Array<[string | number, number, number]> = [
    // input, milliValue, value
    ['100m', 100, 1],
    ['1', 1000, 1],
    ['0.5', 500, 1],
    ['1.5', 1500, 2],
    ['128Mi', 128 * 1024 * 1024 * 1000, 128 * 1024 * 1024],
    ['1G', 1e12, 1e9],
    ['1e3', 1e6, 1000],
    ['1E3', 1e6, 1000],
    ['1e-3', 1, 1],
    ['1Ki', 1024000, 1024],
    ['1.5Gi', 1.5 * 2 ** 30 * 1000, 1.5 * 2 ** 30],
    ['2k', 2e6, 2000],
    ['+3', 3000, 3],
    ['.5', 500, 1],
    ['5.', 5000, 5],
    ['0', 0, 0],
    ['1n', 1, 1],
    ['250u', 1, 1],
    ['1Ei', Number(2n ** 60n * 1000n), Number(2n ** 60n)],
    [512, 512000, 512],
    [0.25, 250, 1],
  ];
  for (const [input, milli, value] of cases) {
    it(`reads ${JSON.stringify(input)}`, () => {
      const q = parseQuantity(input);
      assert.equal(q.milliValue(), milli);
      assert.equal(q.value(), value);
    });
  }

  it('keeps exact nano-units and rounds finer input up to 1n', () => {
    assert.equal(parseQuantity('1n').nanos, 1n);
    assert.equal(parseQuantity('0.1n').nanos, 1n);
    assert.equal(parseQuantity('1e-12').nanos, 1n);
    assert.equal(parseQuantity('-0.1n').nanos, -1n);
    assert.equal(parseQuantity('123456789123456789').nanos, 123456789123456789n * 1_000_000_000n);
  });

  it('rounds negative values away from zero as upstream Value() does', () => {
    const q = parseQuantity('-1.5');
    assert.equal(q.value(), -2);
    assert.equal(q.milliValue(), -1500);
    assert.equal(parseQuantity('-100m').value(), -1);
  });

  it('records the format from the suffix', () => {
    assert.equal(parseQuantity('1Mi').format, 'BinarySI');
    assert.equal(parseQuantity('1M').format, 'DecimalSI');
    assert.equal(parseQuantity('100').format, 'DecimalSI');
    assert.equal(parseQuantity('1e6').format, 'DecimalExponent');
  });

  it('ignores surrounding whitespace', () => {
    assert.equal(parseQuantity(' 2Gi ').value(), 2 * 2 ** 30);
  });

  for (const bad of ['', 'abc', '1.2.3', '1Kb', '1 Mi', 'Mi', '1ee3', '.', '-', '1e', '5i', '1e1000', '--1']) {
    it(`rejects ${JSON.stringify(bad)} naming the input`, () => {
      assert.throws(
        () => parseQuantity(bad),
        (err: unknown) => err instanceof QuantityError && err.code === 'InvalidQuantity' && err.message.includes(JSON.stringify(bad)),
      );
    });
  }

  it('rejects non-finite numbers', () => {
    assert.throws(() => parseQuantity(Number.NaN), QuantityError);
    assert.throws(() => parseQuantity(Number.POSITIVE_INFINITY), QuantityError);
  });
});

describe('Quantity arithmetic and printing', () => {
  it('compares, adds and subtracts exactly', () => {
    const a = parseQuantity('100m');
    const b = parseQuantity('0.1');
    assert.equal(a.cmp(b), 0);
    assert.ok(a.equals(b));
    assert.equal(a.add(parseQuantity('900m')).toString(), '1');
    assert.equal(parseQuantity('1Gi').sub(parseQuantity('512Mi')).toString(), '512Mi');
    assert.equal(parseQuantity('1').cmp(parseQuantity('999m')), 1);
    assert.equal(parseQuantity('1').neg().sign(), -1);
    assert.ok(parseQuantity('0Mi').isZero());
  });

  const printed: Array<[string, string]> = [
    ['1000', '1k'],
    ['1500', '1500'],
    ['0.5', '500m'],
    ['1.5', '1500m'],
    ['1024Mi', '1Gi'],
    ['1536Mi', '1536Mi'],
    ['512', '512'],
    ['0.5Ki', '512'],
    ['100m', '100m'],
    ['1e3', '1e3'],
    ['1200e0', '1200'],
    ['0', '0'],
    ['1n', '1n'],
    ['-2G', '-2G'],
    ['1.5Ki', '1536'],
  ];
  for (const [input, canonical] of printed) {
    it(`prints ${input} as ${canonical}`, () => {
      assert.equal(parseQuantity(input).toString(), canonical);
      assert.equal(JSON.stringify({ q: parseQuantity(input) }), JSON.stringify({ q: canonical }));
    });
  }

  it('builds quantities from values and milli-values', () => {
    assert.equal(Quantity.fromValue(2048, 'BinarySI').toString(), '2Ki');
    assert.equal(Quantity.fromMilli(250).toString(), '250m');
    assert.equal(Quantity.fromMilli(250).value(), 1);
    assert.equal(Quantity.fromValue(3n).milliValue(), 3000);
    assert.throws(() => Quantity.fromValue(1.5), (e: unknown) => e instanceof QuantityError && e.input === '1.5');
  });

  it('approximates as a float', () => {
    assert.equal(parseQuantity('1.25').asApproximateFloat64(), 1.25);
    assert.equal(parseQuantity('2Ki').asApproximateFloat64(), 2048);
  });
});

describe('QuantityError', () => {
  it('is a KubeletError with its stable code and the input', async () => {
    const { KubeletError } = await import('../../src/util/errors.js');
    try {
      parseQuantity('12Zi');
      assert.fail('expected a QuantityError');
    } catch (e) {
      assert.ok(e instanceof QuantityError && e instanceof KubeletError);
      assert.equal(e.code, 'InvalidQuantity');
      assert.equal(e.name, 'QuantityError');
      assert.equal(e.input, '12Zi');
    }
  });
});
