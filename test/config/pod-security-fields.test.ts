// allowedUnsafeSysctls and seccompDefault: the file fields, their flags (--allowed-unsafe-sysctls
// in pflag's string-slice form, --seccomp-default), defaults, and the patterns refused at start.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError } from '../../src/config/errors.js';
import { loadConfig, type ReadFileFn } from '../../src/config/index.js';

function files(map: Record<string, string>): ReadFileFn {
  return async (path: string) => {
    const text = map[path];
    if (text === undefined) throw Object.assign(new Error(`ENOENT: ${path}`), { code: 'ENOENT' });
    return text;
  };
}

const HEADER = 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n';

describe('allowedUnsafeSysctls and seccompDefault', () => {
  it('default to none and off, with and without a file', async () => {
    const bare = await loadConfig([], files({}));
    assert.deepEqual(bare.config.allowedUnsafeSysctls, []);
    assert.equal(bare.config.seccompDefault, false);
    const file = await loadConfig(['--config', '/c.yaml'], files({ '/c.yaml': HEADER }));
    assert.deepEqual(file.config.allowedUnsafeSysctls, []);
    assert.equal(file.config.seccompDefault, false);
  });

  it('are read from the file, without a not-implemented warning', async () => {
    const { config, warnings } = await loadConfig(['--config', '/c.yaml'], files({
      '/c.yaml': `${HEADER}seccompDefault: true\nallowedUnsafeSysctls:\n- kernel.msg*\n- net.core.somaxconn\n`,
    }));
    assert.equal(config.seccompDefault, true);
    assert.deepEqual(config.allowedUnsafeSysctls, ['kernel.msg*', 'net.core.somaxconn']);
    assert.equal(warnings.filter((w) => /seccompDefault|allowedUnsafeSysctls/.test(w)).length, 0, warnings.join('\n'));
  });

  it('the flags override the file; repeated --allowed-unsafe-sysctls append as pflag does', async () => {
    const { config } = await loadConfig([
      '--config', '/c.yaml', '--seccomp-default',
      '--allowed-unsafe-sysctls', 'kernel.msg*,kernel.sem', '--allowed-unsafe-sysctls=net.core.somaxconn',
    ], files({ '/c.yaml': `${HEADER}seccompDefault: false\nallowedUnsafeSysctls: [fs.mqueue.*]\n` }));
    assert.equal(config.seccompDefault, true);
    assert.deepEqual(config.allowedUnsafeSysctls, ['kernel.msg*', 'kernel.sem', 'net.core.somaxconn']);
    assert.equal((await loadConfig(['--seccomp-default=false'], files({}))).config.seccompDefault, false);
  });

  it('a pattern upstream refuses at start is a config error naming the entry', async () => {
    await assert.rejects(loadConfig(['--allowed-unsafe-sysctls', 'kernel.msg*,vm.swappiness'], files({})), (err: unknown) => {
      assert.ok(err instanceof ConfigError, String(err));
      assert.equal(err.field, 'allowedUnsafeSysctls[1]');
      assert.match(err.message, /the sysctls "vm.swappiness" are not known to be namespaced/);
      return true;
    });
    await assert.rejects(loadConfig(['--config', '/c.yaml'], files({ '/c.yaml': `${HEADER}allowedUnsafeSysctls: ["Bad Name"]\n` })), /allowedUnsafeSysctls\[0\].*must have at most 253 characters/s);
  });
});
