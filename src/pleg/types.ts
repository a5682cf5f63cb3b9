// What the PLEG hands the syncLoop (upstream: pkg/kubelet/pleg/pleg.go).

export type PodLifecycleEventType = 'ContainerStarted' | 'ContainerDied' | 'ContainerRemoved' | 'ContainerChanged' | 'PodSync';

export interface PodLifecycleEvent {
  /** Pod UID. */
  id: string;
  type: PodLifecycleEventType;
  /** Container (or sandbox) id for container events. */
  data?: string;
}

/** upstream isSyncPodWorthy: a removed container is housekeeping's business, not a reason to sync. */
export function isSyncPodWorthy(e: PodLifecycleEvent): boolean {
  return e.type !== 'ContainerRemoved';
}

export interface HealthResult {
  ok: boolean;
  message: string;
}

/** A pod as the last relist (or event) saw it: ids and states only. */
export interface KnownPod {
  readonly uid: string;
  readonly name: string;
  readonly namespace: string;
  readonly sandboxes: ReadonlyArray<{ readonly id: string; readonly state: string; readonly createdAt: number }>;
  readonly containers: ReadonlyArray<{ readonly id: string; readonly name: string; readonly state: string; readonly createdAt: number }>;
}

/** What the kubelet calls on either PLEG. */
export interface PodLifecycleEventGenerator {
  start(): void;
  stop(): void;
  healthy(): HealthResult;
  /** The pods the runtime holds, as last seen (housekeeping finds orphans here without a list call). */
  knownPods(): ReadonlyMap<string, KnownPod>;
  /** When the PLEG was last seen active (ms since the epoch, 0 before the first relist). */
  lastSeen(): number;
  /** One relist now (tests and the evented PLEG's reconnects). */
  relist(): Promise<void>;
}
