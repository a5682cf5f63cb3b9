// Kubernetes-style events (upstream: record.EventRecorder). Standalone there is no API server
// to post them to: they are logged as upstream's "Event occurred" lines and the latest are kept.

import type { Logger } from '../util/log.js';

export interface RecordedEvent {
  /** `Pod default/web` or `Node n1`. */
  object: string;
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
  time: number;
}

const KEEP = 200;

export class EventRecorder {
  private readonly events: RecordedEvent[] = [];

  constructor(private readonly log: Logger, private readonly now: () => number) {}

  record(object: string, type: RecordedEvent['type'], reason: string, message: string): void {
    const e = { object, type, reason, message, time: this.now() };
    this.events.push(e);
    if (this.events.length > KEEP) this.events.shift();
    this.log.info('Event occurred', { object, type, reason, message });
  }

  /** The latest events, oldest first. */
  recent(): readonly RecordedEvent[] {
    return this.events;
  }
}
