// Request targets read as Go's net/http and ServeMux read them.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';

import { cleanPath, decodePath, escapePath, parseRequestTarget } from '../../src/server/request-target.js';

describe('parseRequestTarget', () => {
  it('origin-form: the decoded path and the raw query', () => {
    assert.deepEqual(parseRequestTarget('GET', '/healthz?verbose&exclude=a%20b'), { kind: 'path', path: '/healthz', rawQuery: 'verbose&exclude=a%20b' });
    assert.deepEqual(parseRequestTarget('GET', '/pods%2F'), { kind: 'path', path: '/pods/', rawQuery: '' });
    assert.deepEqual(parseRequestTarget('GET', '/%00'), { kind: 'path', path: '/\0', rawQuery: '' });
  });

  it('absolute-form routes on its path; an empty path redirects to /', () => {
    assert.deepEqual(parseRequestTarget('GET', 'http://node-a:10255/pods?x=1'), { kind: 'path', path: '/pods', rawQuery: 'x=1' });
    assert.deepEqual(parseRequestTarget('GET', 'http://node-a'), { kind: 'redirect', location: '/' });
    assert.equal(parseRequestTarget('GET', 'node-a:10255').kind, 'bad');
    assert.equal(parseRequestTarget('GET', 'pods').kind, 'bad');
  });

  it('asterisk-form is OPTIONS only', () => {
    assert.deepEqual(parseRequestTarget('OPTIONS', '*'), { kind: 'options-asterisk' });
    assert.equal(parseRequestTarget('GET', '*').kind, 'bad');
  });

  it('a bad escape is rejected; invalid UTF-8 decodes to U+FFFD', () => {
    for (const t of ['/%', '/%z', '/%zz', '/a%4', '/%%41']) assert.deepEqual(parseRequestTarget('GET', t), { kind: 'bad', reason: 'invalid URL escape in path' }, t);
    assert.equal(decodePath('/%ff'), '/\uFFFD');
  });

  it('unclean paths redirect, escaped, with the query', () => {
    assert.deepEqual(parseRequestTarget('GET', '//'), { kind: 'redirect', location: '/' });
    assert.deepEqual(parseRequestTarget('GET', '/a/./b/../c/?q=1'), { kind: 'redirect', location: '/a/c/?q=1' });
    assert.deepEqual(parseRequestTarget('GET', '//x%20y'), { kind: 'redirect', location: '/x%20y' });
  });
});

describe('cleanPath (ServeMux)', () => {
  it('matches Go for the documented cases', () => {
    const cases: Array<[string, string]> = [
      ['', '/'], ['/', '/'], ['//', '/'], ['/a//b', '/a/b'], ['/a/./b', '/a/b'], ['/a/../b', '/b'],
      ['/../a', '/a'], ['/a/b/', '/a/b/'], ['/a/b/..', '/a'], ['/a/b/../', '/a/'], ['/./', '/'], ['/a/.', '/a'],
    ];
    for (const [p, want] of cases) assert.equal(cleanPath(p), want, p);
  });

  it('is idempotent, starts with one slash and has no dot segments', () => {
    fc.assert(fc.property(fc.array(fc.constantFrom('', '.', '..', 'a', 'b', '%', 'é')).map((s) => '/' + s.join('/')), (p) => {
      const c = cleanPath(p);
      assert.equal(cleanPath(c), c);
      assert.ok(c.startsWith('/') && !c.startsWith('//'));
      assert.ok(!c.split('/').some((s) => s === '.' || s === '..'));
    }), { numRuns: 500 });
  });
});

describe('escapePath', () => {
  it('leaves pchars, escapes the rest as UTF-8, and round-trips through decodePath', () => {
    assert.equal(escapePath('/a b/\r\n/é'), '/a%20b/%0D%0A/%C3%A9');
    fc.assert(fc.property(fc.string({ unit: 'grapheme' }), (s) => {
      const e = escapePath('/' + s);
      assert.match(e, /^[A-Za-z0-9\-._~!$&'()*+,;=:@/%]*$/);
      assert.equal(decodePath(e), '/' + s);
    }), { numRuns: 500 });
  });
});
