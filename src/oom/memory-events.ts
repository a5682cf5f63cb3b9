// Parsers of the cgroup OOM counter files, for callers outside the native watcher (tests,
// tools, the final read before a container's cgroup goes away).

/** cgroup v2 memory.events: low, high, max, oom, oom_kill, oom_group_kill, ... */
export function parseMemoryEvents(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^(\w+) (\d+)$/.exec(line.trim());
    // a counter past a safe integer is not one the kernel printed (and would not count exactly)
    if (m && Number.isSafeInteger(Number(m[2]))) out.set(m[1]!, Number(m[2]));
  }
  return out;
}

/** cgroup v1 memory.oom_control: oom_kill_disable, under_oom, oom_kill (4.13+). */
export function parseOomControl(text: string): { oomKillDisable: boolean; underOom: boolean; oomKill?: number } {
  const kv = parseMemoryEvents(text);
  const r: { oomKillDisable: boolean; underOom: boolean; oomKill?: number } = {
    oomKillDisable: kv.get('oom_kill_disable') === 1,
    underOom: kv.get('under_oom') === 1,
  };
  if (kv.has('oom_kill')) r.oomKill = kv.get('oom_kill');
  return r;
}
