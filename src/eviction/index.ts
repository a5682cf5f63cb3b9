// Node-pressure eviction: signals, thresholds, ranking and the manager.
export * from './api.js';
export * from './thresholds.js';
export * from './signals.js';
export * from './ranking.js';
export * from './local-storage.js';
export * from './eviction-manager.js';
export * from './build.js';
export * from './memcg-notifier.js';
export * from './memcg-notifier-v2.js';
export * from './memory-notifier.js';
