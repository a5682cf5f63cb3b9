// Parser of the kernel's OOM-killer lines in /dev/kmsg, the last-resort OOM source (what
// upstream's cAdvisor oomparser reads). A kill is logged as, in order:
//   <comm> invoked oom-killer: gfp_mask=..., order=0, oom_score_adj=0
//   oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/a,task_memcg=/a/b,task=sh,pid=42,uid=0
//   Memory cgroup out of memory: Killed process 42 (sh) total-vm:26852kB, anon-rss:16228kB, file-rss:1584kB, shmem-rss:0kB, UID:0 pgtables:80kB oom_score_adj:0
// Kernels before 4.19 log "Task in /a/b killed as a result of limit of /a" instead of oom-kill:,
// then "Memory cgroup out of memory: Kill process N (comm) score S ..." and a bare "Killed process".

export interface KmsgOomRecord {
  pid: number;
  comm: string;
  /** CONSTRAINT_MEMCG (a cgroup limit), CONSTRAINT_NONE (the whole node), ... */
  constraint?: string;
  /** The cgroup whose limit was hit ('/' for a node-wide OOM). */
  oomMemcg?: string;
  /** The victim's memory cgroup. */
  taskMemcg?: string;
  uid?: number;
  totalVmKb?: number;
  anonRssKb?: number;
  fileRssKb?: number;
  shmemRssKb?: number;
  pgtablesKb?: number;
  oomScoreAdj?: number;
  /** The kernel said "Memory cgroup out of memory" (true) or "Out of memory" (false). */
  memcgOom: boolean;
}

// The message starts with it (anchored: a Killed process line's comm may say "oom-kill:").
const OOM_KILL_LINE = /^oom-kill:(.*)$/;
const LEGACY_TASK_LINE = /Task in (\S+) killed as a result of limit of (\S+)/;
const KILLED_LINE = /(?:(Memory cgroup out of memory|Out of memory[^:]*): )?Killed process (\d+) \((.*)\)(.*)$/;
// Before 4.19 the verdict came first ("...: Kill process N (comm) score S or sacrifice child").
const LEGACY_VERDICT_LINE = /(Memory cgroup out of memory|Out of memory[^:]*): Kill process \d+/;
const INVOKED_LINE = /invoked oom-killer:/;

interface Context {
  fields: Map<string, string>;
  /** From a pre-4.19 verdict line: whether it was a memory cgroup's OOM. */
  memcgOom?: boolean;
}

/** Turns a kill's kmsg lines into one record, emitted at its "Killed process" line. */
export class KmsgOomParser {
  private context: Context | undefined;

  /** Feeds one kmsg message (without the "pri,seq,ts,flags;" prefix); returns a completed record. */
  feed(message: string): KmsgOomRecord | undefined {
    if (INVOKED_LINE.test(message)) {
      this.context = { fields: new Map() };
      return undefined;
    }
    const oomKill = OOM_KILL_LINE.exec(message);
    if (oomKill) {
      this.context = { fields: parseOomKillFields(oomKill[1]!) };
      return undefined;
    }
    const legacy = LEGACY_TASK_LINE.exec(message);
    if (legacy) {
      const fields = this.context?.fields ?? new Map<string, string>();
      fields.set('task_memcg', legacy[1]!);
      fields.set('oom_memcg', legacy[2]!);
      this.context = { fields };
      return undefined;
    }
    const verdict = LEGACY_VERDICT_LINE.exec(message);
    if (verdict) {
      this.context = { fields: this.context?.fields ?? new Map<string, string>(), memcgOom: verdict[1] === 'Memory cgroup out of memory' };
      return undefined;
    }
    const killed = KILLED_LINE.exec(message);
    if (!killed) return undefined;
    const pid = Number(killed[2]);
    // not a pid the kernel logs (0, or past what a number holds exactly)
    if (!(pid > 0 && Number.isSafeInteger(pid))) return undefined;
    const fields = this.context?.fields ?? new Map<string, string>();
    const memcgOom = killed[1] !== undefined ? killed[1] === 'Memory cgroup out of memory' : this.context?.memcgOom ?? false;
    this.context = undefined;
    // The context belongs to another kill when both name a pid and they differ.
    const ctxPid = fields.get('pid');
    const same = ctxPid === undefined || Number(ctxPid) === pid;
    const record: KmsgOomRecord = { pid, comm: killed[3]!, memcgOom };
    if (same) {
      if (fields.has('constraint')) record.constraint = fields.get('constraint');
      if (fields.has('oom_memcg')) record.oomMemcg = fields.get('oom_memcg');
      if (fields.has('task_memcg')) record.taskMemcg = fields.get('task_memcg');
      assignDefined(record, 'uid', safeInt(fields.get('uid')));
    }
    const tail = killed[4] ?? '';
    const kb = (name: string): number | undefined => safeInt(new RegExp(`${name}:(\\d+)kB`).exec(tail)?.[1]);
    assignDefined(record, 'totalVmKb', kb('total-vm'));
    assignDefined(record, 'anonRssKb', kb('anon-rss'));
    assignDefined(record, 'fileRssKb', kb('file-rss'));
    assignDefined(record, 'shmemRssKb', kb('shmem-rss'));
    assignDefined(record, 'pgtablesKb', kb('pgtables'));
    assignDefined(record, 'uid', safeInt(/UID:(\d+)/.exec(tail)?.[1]));
    assignDefined(record, 'oomScoreAdj', safeInt(/oom_score_adj:(-?\d+)/.exec(tail)?.[1]));
    return record;
  }
}

/** A decimal the kernel printed, or undefined when there is none or it is past a safe integer. */
function safeInt(s: string | undefined): number | undefined {
  if (s === undefined) return undefined;
  const n = Number(s);
  return Number.isSafeInteger(n) ? n : undefined;
}

function assignDefined<K extends keyof KmsgOomRecord>(r: KmsgOomRecord, key: K, v: KmsgOomRecord[K] | undefined): void {
  if (v !== undefined) r[key] = v;
}

/**
 * Splits `constraint=...,nodemask=(null),cpuset=/,...,task=sh,pid=42,uid=0`. Values may hold
 * commas (a cpuset or cgroup path can), so a comma only ends a value when a known key follows.
 */
export function parseOomKillFields(text: string): Map<string, string> {
  const keys = ['constraint', 'nodemask', 'cpuset', 'mems_allowed', 'oom_memcg', 'task_memcg', 'task', 'pid', 'uid'];
  const out = new Map<string, string>();
  const starts: { key: string; at: number }[] = [];
  for (const key of keys) {
    const prefix = starts.length === 0 ? `${key}=` : `,${key}=`;
    const from = starts.length === 0 ? 0 : starts[starts.length - 1]!.at;
    const at = text.indexOf(prefix, from);
    if (at < 0) continue;
    starts.push({ key, at: starts.length === 0 ? at : at + 1 });
  }
  for (let i = 0; i < starts.length; i++) {
    const { key, at } = starts[i]!;
    const valueStart = at + key.length + 1;
    const end = i + 1 < starts.length ? starts[i + 1]!.at - 1 : text.length;
    out.set(key, text.slice(valueStart, end));
  }
  // The victim names itself (task= is its comm, which any process may set to ",pid=1"): the
  // kernel's last two fields, pid and uid, are read from the end, and the comm is what precedes them.
  const task = starts.find((s) => s.key === 'task');
  const last = /,pid=(\d+),uid=(\d+)$/.exec(text);
  if (task && last && last.index >= task.at + 'task='.length) {
    out.set('task', text.slice(task.at + 'task='.length, last.index));
    out.set('pid', last[1]!);
    out.set('uid', last[2]!);
  }
  return out;
}
