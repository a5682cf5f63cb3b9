// Kubernetes-style events (upstream: record.EventRecorder). Every event is logged as upstream's
// "Event occurred" line at verbosity 3 (upstream's kubelet logs its events at V(3): at rest a
// pod sync can record one per pod, e.g. MissingClusterDNS) and the latest are kept; with an API server they are also handed to
// the event sink (correlated, rate limited and sent in the background, never blocking).

import type { Logger } from '../util/log.js';
import type { ObjectReference } from './event-sink.js';

export interface RecordedEvent {
  /** `Pod default/web` or `Node n1`. */
  object: string;
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
  time: number;
}

/** Where events go besides the log: the API server's event sink. */
export interface EventDestination {
  /** The reference of `Pod ns/name` or `Node n` (undefined: not sent, e.g. a pod already gone). */
  ref(object: string): ObjectReference | undefined;
  post(ref: ObjectReference, type: RecordedEvent['type'], reason: string, message: string): void;
}

const KEEP = 200;

export class EventRecorder {
  private readonly events: RecordedEvent[] = [];
  private destination: EventDestination | undefined;

  constructor(private readonly log: Logger, private readonly now: () => number) {}

  /** Sends every later event to `d` too (the API server, once the kubelet has one). */
  sendTo(d: EventDestination | undefined): void {
    this.destination = d;
  }

  record(object: string, type: RecordedEvent['type'], reason: string, message: string): void {
    const e = { object, type, reason, message, time: this.now() };
    this.events.push(e);
    if (this.events.length > KEEP) this.events.shift();
    this.log.v(3).info('Event occurred', { object, type, reason, message });
    const d = this.destination;
    if (!d) return;
    const ref = d.ref(object);
    if (ref) d.post(ref, type, reason, message);
  }

  /** The latest events, oldest first. */
  recent(): readonly RecordedEvent[] {
    return this.events;
  }
}
