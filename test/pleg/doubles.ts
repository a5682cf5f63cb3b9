// Test doubles for the PLEG tests: a runtime double whose pods the test edits between relists,
// an event source double the test pushes container events through, and a channel double.

import type { RuntimePod } from '../../src/runtime/runtime-manager.js';
import type { ContainerRuntimeStatus, RuntimePodStatus, SandboxRuntimeStatus } from '../../src/runtime/types.js';
import type { ContainerEventHandlers, ContainerEventSource } from '../../src/pleg/relist-source.js';
import type { ContainerStatusSource } from '../../src/pleg/status.js';
import type { PodLifecycleEvent } from '../../src/pleg/types.js';
import type { ContainerEvent } from '../../src/pleg/wire-event.js';
import type { Logger } from '../../src/util/log.js';

export type DoubleState = 'CONTAINER_CREATED' | 'CONTAINER_RUNNING' | 'CONTAINER_EXITED' | 'CONTAINER_UNKNOWN';

const CRI_TO_RUNTIME: Record<DoubleState, ContainerRuntimeStatus['state']> = {
  CONTAINER_CREATED: 'created',
  CONTAINER_RUNNING: 'running',
  CONTAINER_EXITED: 'exited',
  CONTAINER_UNKNOWN: 'unknown',
};

/** A runtime double: pods as getPods() returns them; statuses derived from them. */
export class RuntimeDouble {
  readonly pods = new Map<string, RuntimePod>();
  statusCalls: string[] = [];
  failStatusFor = new Set<string>();
  listCalls = 0;
  failList = false;

  addPod(uid: string, name = `pod-${uid}`, namespace = 'default'): RuntimePod {
    const p: RuntimePod = { uid, name, namespace, sandboxes: [], containers: [] };
    this.pods.set(uid, p);
    return p;
  }

  sandbox(uid: string, id: string, state: 'SANDBOX_READY' | 'SANDBOX_NOTREADY', createdAt = 1): void {
    const p = this.pods.get(uid) ?? this.addPod(uid);
    const s = p.sandboxes.find((x) => x.id === id);
    if (s) s.state = state;
    else p.sandboxes.push({ id, state, createdAt });
  }

  container(uid: string, id: string, state: DoubleState, name = `c-${id}`, createdAt = 2): void {
    const p = this.pods.get(uid) ?? this.addPod(uid);
    const c = p.containers.find((x) => x.id === id);
    if (c) c.state = state;
    else p.containers.push({ id, name, state, createdAt });
  }

  removeContainer(uid: string, id: string): void {
    const p = this.pods.get(uid);
    if (!p) return;
    const i = p.containers.findIndex((c) => c.id === id);
    if (i >= 0) p.containers.splice(i, 1);
    const j = p.sandboxes.findIndex((c) => c.id === id);
    if (j >= 0) p.sandboxes.splice(j, 1);
    if (!p.containers.length && !p.sandboxes.length) this.pods.delete(uid);
  }

  async getPods(): Promise<Map<string, RuntimePod>> {
    this.listCalls++;
    if (this.failList) throw new Error('runtime double: list failed');
    // a copy, as a real list returns fresh objects
    return new Map([...this.pods].map(([k, p]) => [k, { ...p, sandboxes: p.sandboxes.map((s) => ({ ...s })), containers: p.containers.map((c) => ({ ...c })) }]));
  }

  statusOf(uid: string, name = '', namespace = ''): RuntimePodStatus {
    const p = this.pods.get(uid);
    const sandboxStatuses: SandboxRuntimeStatus[] = (p?.sandboxes ?? []).map((s) => this.sandboxStatus(s.id, s.state, s.createdAt));
    const containerStatuses: ContainerRuntimeStatus[] = (p?.containers ?? []).map((c) => this.containerStatusOf(c.id, c.name, c.state as DoubleState, c.createdAt));
    const ready = sandboxStatuses.find((s) => s.state === 'ready');
    return {
      uid,
      name: p?.name ?? name,
      namespace: p?.namespace ?? namespace,
      ips: ready ? [ready.ip] : [],
      sandboxStatuses,
      containerStatuses,
      timestamp: 0,
    };
  }

  sandboxStatus(id: string, state: string, createdAt: number): SandboxRuntimeStatus {
    return {
      id,
      state: state === 'SANDBOX_READY' ? 'ready' : 'notready',
      createdAt,
      attempt: 0,
      ip: state === 'SANDBOX_READY' ? '10.88.0.9' : '',
      additionalIps: [],
      hostNetwork: false,
      labels: {},
      annotations: {},
    };
  }

  containerStatusOf(id: string, name: string, state: DoubleState, createdAt: number): ContainerRuntimeStatus {
    return {
      id,
      containerID: `containerd://${id}`,
      name,
      state: CRI_TO_RUNTIME[state],
      createdAt,
      startedAt: 0,
      finishedAt: 0,
      exitCode: state === 'CONTAINER_EXITED' ? 1 : 0,
      image: 'busybox',
      imageRef: 'sha256:0',
      hash: '0',
      restartCount: 0,
      reason: '',
      message: '',
      labels: {},
      annotations: {},
    };
  }

  async getPodStatus(uid: string, name: string, namespace: string): Promise<RuntimePodStatus> {
    this.statusCalls.push(uid);
    if (this.failStatusFor.has(uid)) throw new Error(`runtime double: status of ${uid} failed`);
    return this.statusOf(uid, name, namespace);
  }

  /** Single reads, for the evented PLEG's partial refreshes. */
  readonly singleReads: string[] = [];
  readonly statusSource: ContainerStatusSource = {
    containerStatus: async (id) => {
      this.singleReads.push(id);
      for (const p of this.pods.values()) {
        const c = p.containers.find((x) => x.id === id);
        if (c) return this.containerStatusOf(c.id, c.name, c.state as DoubleState, c.createdAt);
      }
      return null;
    },
    sandboxStatus: async (id) => {
      this.singleReads.push(id);
      for (const p of this.pods.values()) {
        const s = p.sandboxes.find((x) => x.id === id);
        if (s) return this.sandboxStatus(s.id, s.state, s.createdAt);
      }
      return null;
    },
  };
}

/** The syncLoop's bounded channel, as a double that records what it accepted. */
export class ChannelDouble {
  readonly accepted: PodLifecycleEvent[] = [];
  constructor(public capacity = 1000) {}
  readonly emit = (e: PodLifecycleEvent): boolean => {
    if (this.accepted.length >= this.capacity) return false;
    this.accepted.push(e);
    return true;
  };
  take(): PodLifecycleEvent[] {
    return this.accepted.splice(0);
  }
}

/** An event source double: the test opens, feeds and breaks streams by hand. */
export class EventSourceDouble implements ContainerEventSource {
  opens = 0;
  current?: ContainerEventHandlers;
  private cancelled = false;

  openContainerEvents(h: ContainerEventHandlers): { cancel(): void } {
    this.opens++;
    this.current = h;
    this.cancelled = false;
    return {
      cancel: () => {
        this.cancelled = true;
        if (this.current === h) this.current = undefined;
        h.onEnd();
      },
    };
  }

  ready(): void {
    this.current?.onReady();
  }

  send(e: ContainerEvent): void {
    if (!this.current || this.cancelled) throw new Error('event source double: no open stream');
    this.current.onEvent(e);
  }

  fail(message = 'runtime went away'): void {
    const h = this.current;
    this.current = undefined;
    h?.onEnd(new Error(message));
  }
}

/** A logger double that keeps lines for assertions. */
export function loggerDouble(lines: string[] = []): Logger {
  const l: Logger = {
    info: (m) => void lines.push(`I ${m}`),
    warn: (m) => void lines.push(`W ${m}`),
    error: (m) => void lines.push(`E ${m}`),
    v: () => ({ info: () => undefined }),
    with: () => l,
  };
  return l;
}

/** Lets pending promise callbacks and immediates run. */
export async function settle(rounds = 5): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((r) => setImmediate(r));
}
