import { describe, it } from 'node:test';
import assert from 'node:assert/strict';

import { KmsgOomParser, parseOomKillFields } from '../../src/oom/kmsg-parser.js';

// Lines as this machine's kernel (6.18) logged a memcg OOM kill.
const INVOKED = 'busybox invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0';
const OOM_KILL = 'oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/kubepods/burstable/pod1f0c/abc123,task_memcg=/kubepods/burstable/pod1f0c/abc123,task=busybox,pid=19730,uid=0';
const KILLED = 'Memory cgroup out of memory: Killed process 19730 (busybox) total-vm:26852kB, anon-rss:16228kB, file-rss:1584kB, shmem-rss:0kB, UID:0 pgtables:80kB oom_score_adj:-997';

describe('KmsgOomParser', () => {
  it('turns the three lines of a memcg kill into one record at the Killed process line', () => {
    const p = new KmsgOomParser();
    assert.equal(p.feed(INVOKED), undefined);
    assert.equal(p.feed(OOM_KILL), undefined);
    const r = p.feed(KILLED);
    assert.deepEqual(r, {
      pid: 19730,
      comm: 'busybox',
      memcgOom: true,
      constraint: 'CONSTRAINT_MEMCG',
      oomMemcg: '/kubepods/burstable/pod1f0c/abc123',
      taskMemcg: '/kubepods/burstable/pod1f0c/abc123',
      uid: 0,
      totalVmKb: 26852,
      anonRssKb: 16228,
      fileRssKb: 1584,
      shmemRssKb: 0,
      pgtablesKb: 80,
      oomScoreAdj: -997,
    });
  });

  it('marks a node-wide kill and ignores unrelated lines', () => {
    const p = new KmsgOomParser();
    assert.equal(p.feed('eth0: link up'), undefined);
    p.feed('oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/system.slice/foo.service,task=foo,pid=77,uid=1000');
    const r = p.feed('Out of memory: Killed process 77 (foo) total-vm:1000kB, anon-rss:900kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:12kB oom_score_adj:0');
    assert.equal(r?.memcgOom, false);
    assert.equal(r?.constraint, 'CONSTRAINT_NONE');
    assert.equal(r?.taskMemcg, '/system.slice/foo.service');
    assert.equal(r?.uid, 1000);
  });

  it('drops the context of a different pid', () => {
    const p = new KmsgOomParser();
    p.feed(OOM_KILL);
    const r = p.feed(KILLED.replace('19730', '555'));
    assert.equal(r?.pid, 555);
    assert.equal(r?.taskMemcg, undefined);
  });

  it('reads the pre-4.19 lines: Task in ..., the Kill process verdict, a bare Killed process', () => {
    const p = new KmsgOomParser();
    assert.equal(p.feed('Task in /kubepods/pod9/c1 killed as a result of limit of /kubepods/pod9'), undefined);
    assert.equal(p.feed('Memory cgroup out of memory: Kill process 31 (sh) score 1000 or sacrifice child'), undefined);
    const r = p.feed('Killed process 31 (sh) total-vm:100kB, anon-rss:90kB, file-rss:0kB, shmem-rss:0kB');
    assert.equal(r?.pid, 31);
    assert.equal(r?.memcgOom, true);
    assert.equal(r?.taskMemcg, '/kubepods/pod9/c1');
    assert.equal(r?.oomMemcg, '/kubepods/pod9');
    assert.equal(r?.anonRssKb, 90);
  });
});

describe('parseOomKillFields', () => {
  it('keeps commas inside values that are not followed by a known key', () => {
    const f = parseOomKillFields('constraint=CONSTRAINT_CPUSET,nodemask=(null),cpuset=/a,b,mems_allowed=0-1,oom_memcg=/x,task_memcg=/x/y,task=my,task,pid=9,uid=0');
    assert.equal(f.get('cpuset'), '/a,b');
    assert.equal(f.get('mems_allowed'), '0-1');
    assert.equal(f.get('task'), 'my,task');
    assert.equal(f.get('pid'), '9');
  });
});
