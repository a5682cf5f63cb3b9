// Feature gates of upstream's kubelet 1.33 and 1.34: each is accepted; one kubelet-ts does not
// act on is named at start-up only when set off its default; an unknown gate stays an error.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { ConfigError } from '../../src/config/errors.js';
import { FEATURE_GATE_DEFAULTS_1_34 } from '../../src/config/feature-gates.js';
import { IMPLEMENTED_FEATURE_GATES, KNOWN_FEATURE_GATES, loadConfig } from '../../src/config/index.js';

const noFile = async (): Promise<string> => { throw new Error('no file'); };

describe('feature gates (1.33–1.34)', () => {
  it('accepts every gate upstream 1.34 lists, and GA/1.33 gates such as NodeSwap and KubeletCgroupDriverFromCRI', async () => {
    const names = Object.keys(FEATURE_GATE_DEFAULTS_1_34);
    assert.ok(names.length >= 120, `${names.length} gates`);
    for (const name of [...names, 'NodeSwap', 'KubeletCgroupDriverFromCRI', 'SidecarContainers', 'InPlacePodVerticalScalingAllocatedStatus']) {
      assert.ok(KNOWN_FEATURE_GATES.has(name), name);
    }
    const all = names.map((n) => `${n}=${FEATURE_GATE_DEFAULTS_1_34[n]}`).join(',');
    const { config, warnings } = await loadConfig([`--feature-gates=${all}`], noFile);
    assert.equal(Object.keys(config.featureGates).length, names.length);
    // every gate at its 1.34 default: nothing to report
    assert.deepEqual(warnings.filter((w) => w.startsWith('feature gate')), []);
    process.stdout.write(`# feature gates known: ${KNOWN_FEATURE_GATES.size} (${names.length} in the 1.34 list), acted on: ${[...IMPLEMENTED_FEATURE_GATES].join(', ')}\n`);
  });

  it('names a gate kubelet-ts does not act on when set off its default, and not one it acts on', async () => {
    const { warnings } = await loadConfig(['--feature-gates=MemoryQoS=true,EventedPLEG=true,GracefulNodeShutdown=true,NodeSwap=true'], noFile);
    const gates = warnings.filter((w) => w.startsWith('feature gate'));
    assert.deepEqual(gates.sort(), [
      'feature gate MemoryQoS is not implemented by kubelet-ts yet; ignored',
      'feature gate NodeSwap is not implemented by kubelet-ts yet; ignored',
    ]);
  });

  it('keeps an unknown gate an error, with upstream\'s message', async () => {
    await assert.rejects(loadConfig(['--feature-gates=NoSuchGate=true'], noFile),
      (e: unknown) => e instanceof ConfigError && e.message.includes('unrecognized feature gate: NoSuchGate'));
  });
});
