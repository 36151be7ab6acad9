// /metrics counters: jobs finished since the gateway started, added up from
// finished_at windows; purge never makes them shrink.  Gauges: queued,
// running and suspended jobs right now.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { api, psql, claim, finish, startGateway, sleep, uniq, A } from './lib.mjs';

const value = (text, series) => {
  const line = text.split('\n').find((l) => l.startsWith(series + ' '));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
};

test('finished-job counters count each finish once and survive purge; gauges are exact', async () => {
  const gw = await startGateway(0);
  try {
    const queue = uniq('metrics');
    const first = await api('GET', '/metrics', { base: gw.url });
    assert.equal(first.status, 200);
    const claims0 = value(first.text, 'bgexec_claims_total');
    assert.equal(claims0, 0, 'counters start at 0 with the gateway');
    for (let i = 0; i < 4; i++) {
      const r = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } });
      assert.equal(r.status, 201);
    }
    const a = claim(queue); finish(a.job, a.lease, 'completed', { ok: 1 });
    const b = claim(queue); finish(b.job, b.lease, 'completed', { ok: 2 });
    const c = claim(queue); finish(c.job, c.lease, 'failed', { retryable: false });
    const d = claim(queue); finish(d.job, d.lease, 'suspended', {});
    await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } });
    // Finishes are counted once they are older than the 5 s commit margin.
    await sleep(5500);
    const m1 = (await api('GET', '/metrics', { base: gw.url })).text;
    assert.equal(value(m1, `bgexec_jobs_finished_total{queue="${queue}",status="completed"}`), 2);
    assert.equal(value(m1, `bgexec_jobs_finished_total{queue="${queue}",status="failed"}`), 1);
    assert.equal(value(m1, `bgexec_jobs{queue="${queue}",status="suspended"}`), 1);
    assert.equal(value(m1, `bgexec_jobs{queue="${queue}",status="queued"}`), 1);
    assert.equal(value(m1, `bgexec_jobs{queue="${queue}",status="running"}`), 0);
    assert.ok(value(m1, 'bgexec_claims_total') >= 3);
    assert.ok(value(m1, 'bgexec_job_duration_seconds_count') >= 3);
    // Scraped again, and after the jobs are purged: each finish counted once, never fewer.
    psql(`DELETE FROM bgexec.job WHERE queue = '${queue}' AND finished_at IS NOT NULL`);
    const m2 = (await api('GET', '/metrics', { base: gw.url })).text;
    assert.equal(value(m2, `bgexec_jobs_finished_total{queue="${queue}",status="completed"}`), 2);
    assert.equal(value(m2, `bgexec_jobs_finished_total{queue="${queue}",status="failed"}`), 1);
    assert.ok(value(m2, 'bgexec_claims_total') >= value(m1, 'bgexec_claims_total'));
  } finally {
    gw.kill();
  }
});

test('the counters count from the gateway\'s start, not from its first scrape', { timeout: 30000 }, async () => {
  const gw = await startGateway(0, [], '/');  // no scrape before the test's
  try {
    const queue = uniq('metrics-start');
    const r = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } });
    assert.equal(r.status, 201);
    const a = claim(queue); finish(a.job, a.lease, 'completed', { ok: 1 });
    await sleep(5500);  // past the commit margin
    const m = (await api('GET', '/metrics', { base: gw.url })).text;
    assert.equal(value(m, `bgexec_jobs_finished_total{queue="${queue}",status="completed"}`), 1,
      'a job finished before the first scrape is counted');
  } finally {
    gw.kill();
  }
});

test('a queued job with run_after -infinity does not break a scrape', async (t) => {
  const queue = uniq('inf');
  const r = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } });
  assert.equal(r.status, 201);
  try {
    try {
      psql(`UPDATE bgexec.job SET run_after = '-infinity' WHERE id = ${r.body.id}`);
    } catch {
      t.skip('the job table refuses a non-finite run_after');
      return;
    }
    const m = await api('GET', '/metrics');
    assert.equal(m.status, 200, m.text);
    assert.equal(value(m.text, `bgexec_jobs{queue="${queue}",status="queued"}`), 1);
    assert.equal(value(m.text, `bgexec_oldest_queued_seconds{queue="${queue}"}`), 0);
  } finally {
    psql(`DELETE FROM bgexec.job WHERE id = ${r.body.id}`);
  }
});

test('a finished job with started_at -infinity does not break a scrape; its duration is left out', { timeout: 30000 }, async (t) => {
  const gw = await startGateway(0, [], '/');  // its window: from its start
  try {
    const queue = uniq('inf-start');
    const r = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } });
    const a = claim(queue); finish(a.job, a.lease, 'completed', { ok: 1 });
    try {
      psql(`UPDATE bgexec.job SET started_at = '-infinity' WHERE id = ${r.body.id}`);
    } catch {
      t.skip('the job table refuses a non-finite started_at');
      return;
    }
    await sleep(5500);  // past the commit margin
    const m = await api('GET', '/metrics', { base: gw.url });
    // (every scrape was 422, "cannot subtract infinite timestamps", while the row was in its window)
    assert.equal(m.status, 200, m.text);
    assert.equal(value(m.text, `bgexec_jobs_finished_total{queue="${queue}",status="completed"}`), 1);
    // Every job finished in the window has a duration but this one (a job
    // of another test may end in it too: a lease the watchdog took back).
    const finished = m.text.split('\n').filter((l) => l.startsWith('bgexec_jobs_finished_total{'))
      .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
    assert.equal(value(m.text, 'bgexec_job_duration_seconds_count'), finished - 1);
  } finally {
    gw.kill();
    psql(`DELETE FROM bgexec.job WHERE queue LIKE 'inf-start-%'`);
  }
});

test('a queue\'s gauges drop to 0 when its last active job ends, rather than vanish', async () => {
  // No bgexec.queue row: the queue is known from its jobs only.
  const queue = uniq('gauge0');
  const series = (m) => [
    `bgexec_jobs{queue="${queue}",status="queued"}`,
    `bgexec_jobs{queue="${queue}",status="running"}`,
    `bgexec_jobs{queue="${queue}",status="suspended"}`,
    `bgexec_oldest_queued_seconds{queue="${queue}"}`,
  ].map((s) => value(m, s));
  const r = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } });
  assert.equal(r.status, 201);
  const queued = series((await api('GET', '/metrics')).text);
  assert.deepEqual(queued.slice(0, 3), [1, 0, 0]);
  assert.ok(queued[3] >= 0);
  const { job, lease } = claim(queue);
  assert.deepEqual(series((await api('GET', '/metrics')).text), [0, 1, 0, 0], 'claimed: nothing queued');
  finish(job, lease, 'completed', {});
  assert.deepEqual(series((await api('GET', '/metrics')).text), [0, 0, 0, 0], 'finished: nothing active');
  // Purged: the queue has no jobs left and is no longer known.
  psql(`DELETE FROM bgexec.job WHERE queue = '${queue}'`);
  assert.deepEqual(series((await api('GET', '/metrics')).text), [undefined, undefined, undefined, undefined]);
});

test('concurrent scrapes count a finish once: a scrape whose window another one counted adds nothing', { timeout: 30000 }, async () => {
  const gw = await startGateway(0);
  let p;
  try {
    const queue = uniq('metrics-conc');
    const r = await api('POST', '/v1/jobs', { token: A, base: gw.url, body: { kind: 'noop', queue } });
    assert.equal(r.status, 201);
    const a = claim(queue); finish(a.job, a.lease, 'completed', { ok: 1 });
    await sleep(5500);  // past the commit margin
    // The job table locked for 2 s: three scrapes start together (each reads
    // the same previous watermark), all wait for the lock, then run.
    p = spawn('psql', ['-X', '-q', '-d', 'postgres', '-c',
      'BEGIN; LOCK TABLE bgexec.job IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(2); COMMIT;'], { stdio: 'ignore' });
    for (let i = 0; i < 50 && psql(`SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
                                      WHERE c.relname = 'job' AND l.mode = 'AccessExclusiveLock' AND l.granted`) === '0'; i++) {
      await sleep(100);
    }
    const series = `bgexec_jobs_finished_total{queue="${queue}",status="completed"}`;
    const scrapes = await Promise.all([1, 2, 3].map(() => api('GET', '/metrics', { base: gw.url })));
    assert.deepEqual(scrapes.map((s) => s.status), [200, 200, 200]);
    if (p.exitCode === null) await once(p, 'exit');
    const m = (await api('GET', '/metrics', { base: gw.url })).text;
    assert.equal(value(m, series), 1, 'counted once, not once per concurrent scrape');
  } finally {
    if (p) try { p.kill('SIGKILL'); } catch { /* gone */ }
    gw.kill();
  }
});

test('bgexec_queue_workers counts the live workers that claim from each queue', async () => {
  const queue = uniq('qworkers');
  const w = uniq('qw').replace(/-/g, '_');
  const series = `bgexec_queue_workers{queue="${queue}"}`;
  const r = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } });
  assert.equal(r.status, 201);
  try {
    assert.equal(value((await api('GET', '/metrics')).text, series), 0, 'no worker: 0 beside a queued job');
    psql(`SELECT bgexec.register_worker('${w}-1', ARRAY['${queue}', 'other'], 1, '{"host": "h", "pid": 1}'),
                 bgexec.register_worker('${w}-2', ARRAY['${queue}'], 1, '{"host": "h", "pid": 2}')`);
    assert.equal(value((await api('GET', '/metrics')).text, series), 2);
    // a silent worker (no heartbeat for two minutes) and a stopped one claim nothing
    psql(`UPDATE bgexec.worker SET heartbeat_at = now() - interval '2 minutes' WHERE id = '${w}-1'`);
    assert.equal(value((await api('GET', '/metrics')).text, series), 1);
    psql(`SELECT bgexec.deregister_worker('${w}-2')`);
    assert.equal(value((await api('GET', '/metrics')).text, series), 0);
    const q = (await api('GET', '/v1/queues', { token: A })).body.queues.find((x) => x.queue === queue);
    assert.equal(q.workers, 0, JSON.stringify(q));
  } finally {
    psql(`DELETE FROM bgexec.worker WHERE id IN ('${w}-1', '${w}-2'); DELETE FROM bgexec.job WHERE id = ${r.body.id}`);
  }
});

test('the counters and gauges are right under any DateStyle, TimeZone and extra_float_digits', { timeout: 30000 }, async () => {
  // The watermark went out as timestamptz text: under DateStyle SQL in
  // Asia/Kolkata it read "... IST", which PostgreSQL reads as Israel's time,
  // 3.5 h later, and every later scrape's window was empty.  Counts went out
  // as float8 text: at extra_float_digits -15, 17 queued jobs read 20.
  const options = "options='-c DateStyle=SQL,DMY -c TimeZone=Asia/Kolkata -c extra_float_digits=-15'";
  const gw = await startGateway(0, ['--db', `dbname=postgres ${options}`]);
  try {
    const queue = uniq('metrics-style');
    const first = await api('GET', '/metrics', { base: gw.url });  // the watermark
    assert.equal(first.status, 200);
    for (let i = 0; i < 20; i++) {
      const r = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } });
      assert.equal(r.status, 201);
    }
    for (let i = 0; i < 3; i++) { const j = claim(queue); finish(j.job, j.lease, 'completed', {}); }
    await sleep(5500);  // past the commit margin
    const m = (await api('GET', '/metrics', { base: gw.url })).text;
    assert.equal(value(m, `bgexec_jobs_finished_total{queue="${queue}",status="completed"}`), 3, m);
    assert.equal(value(m, `bgexec_jobs{queue="${queue}",status="queued"}`), 17, m);
  } finally {
    gw.kill();
  }
});

test('bgexec_lease_expiries_total{reason="timeout"} counts the watchdog\'s timeouts, not a worker\'s own', { timeout: 30000 }, async () => {
  const gw = await startGateway(0);
  try {
    const queue = uniq('metrics-timeouts');
    for (let i = 0; i < 2; i++) {
      const r = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue, timeout: 1 } });
      assert.equal(r.status, 201);
    }
    // The worker ends its own job at its deadline (as job.cpp does) ...
    const a = claim(queue);
    finish(a.job, a.lease, 'timed_out', { reason: 'timeout', message: 'job exceeded its timeout' });
    // ... the other's worker does not, and the watchdog times it out.
    const b = claim(queue);
    await sleep(1200);
    psql(`SELECT bgexec._reconcile_one(j) FROM bgexec.job j WHERE j.id = ${b.job} FOR UPDATE`);
    assert.equal(psql(`SELECT status FROM bgexec.job WHERE id = ${b.job}`), 'timed_out');
    await sleep(5500);  // past the commit margin
    const m = (await api('GET', '/metrics', { base: gw.url })).text;
    assert.equal(value(m, `bgexec_jobs_finished_total{queue="${queue}",status="timed_out"}`), 2);
    assert.equal(value(m, 'bgexec_lease_expiries_total{reason="timeout"}'), 1);
  } finally {
    gw.kill();
  }
});

test('a job finished just before the gateway started is not counted by its second scrape', { timeout: 30000 }, async () => {
  const queue = uniq('metrics-before');
  const r = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } });
  assert.equal(r.status, 201);
  const a = claim(queue); finish(a.job, a.lease, 'completed', { ok: 1 });
  await sleep(1000);
  const gw = await startGateway(0, [], '/');  // no scrape before the test's
  try {
    const m1 = (await api('GET', '/metrics', { base: gw.url })).text;  // within 5 s of the start
    assert.equal(value(m1, `bgexec_jobs_finished_total{queue="${queue}",status="completed"}`), undefined);
    await sleep(6000);
    const m2 = (await api('GET', '/metrics', { base: gw.url })).text;
    assert.equal(value(m2, `bgexec_jobs_finished_total{queue="${queue}",status="completed"}`), undefined,
      'a job finished before the gateway started was counted');
  } finally {
    gw.kill();
  }
});

// The entries of `indexes` (job indexes) given out while `scrape` runs
// (pg_stat_user_indexes), once the claim index's count has grown by at
// least `atLeast`: the gateway's session flushes its counts when its
// statement ends, or up to 10 s later when it flushed less than a second
// before.  Other sessions of the suite may add a little.
async function indexReads(indexes, atLeast, scrape) {
  // Entries of jobs deleted by earlier tests would be read too, until a vacuum.
  psql('VACUUM bgexec.job');
  await sleep(1100);
  const list = indexes.map((i) => `'bgexec.${i}'::regclass`).join(', ');
  const reads = () => Object.fromEntries(psql(`SELECT string_agg(indexrelname || '=' || idx_tup_read, ',')
                                                 FROM pg_stat_user_indexes WHERE indexrelid IN (${list})`)
    .split(',').map((kv) => kv.split('=')).map(([k, v]) => [k, Number(v)]));
  const before = reads();
  const out = await scrape();
  let delta = {};
  for (let i = 0; i < 200 && !(delta.job_runnable_idx >= atLeast); i++) {
    await sleep(100);
    const now = reads();
    delta = Object.fromEntries(indexes.map((k) => [k, now[k] - before[k]]));
  }
  return { out, delta };
}
const queuedJobs = () => Number(psql(`SELECT count(*) FROM bgexec.job WHERE status = 'queued'`));

// A scrape reads each queued job once: the gauges count them, and the queue
// names (with their workers) come from bgexec._queue_names, which finds a
// queue's active jobs by one index descent.  It read them through
// queue_stats too, which counted every queued job a second time.  The
// entries the claim index gives out stay below 1.5 per queued job (of any
// queue: the scrape counts them all).
test('a scrape reads each queued job once', { timeout: 60000 }, async () => {
  const gw = await startGateway(0);
  const queue = uniq('metrics-once');
  const n = 5000;
  try {
    psql(`SELECT count(*) FROM bgexec.submit_many((SELECT jsonb_agg(jsonb_build_object('kind', 'noop', 'queue', '${queue}'))
                                                     FROM generate_series(1, ${n})))`);
    const q = queuedJobs();
    const { out, delta } = await indexReads(['job_runnable_idx'], q,
      async () => (await api('GET', '/metrics', { base: gw.url })).text);
    assert.equal(value(out, `bgexec_jobs{queue="${queue}",status="queued"}`), n);
    const read = delta.job_runnable_idx;
    assert.ok(read >= q, `the scrape's reads were never flushed (${read})`);
    assert.ok(read < 1.5 * q, `a scrape read ${read} entries of job_runnable_idx with ${q} jobs queued`);
  } finally {
    gw.kill();
    psql(`DELETE FROM bgexec.job WHERE queue = '${queue}'`);
  }
});

// As a login role under row-level security: the window of finished jobs is
// found through job_finished_idx, not the whole history before it (its lower
// bound, a coalesce in the WHERE, was filtered after the owner test, and a
// scrape walked every finished job), the queued jobs of another owner are
// read once (to be left out), and their queue still has its series, at 0.
test('a tenant login role\'s scrape reads neither the finished history nor others\' queued jobs twice', { timeout: 60000 }, async (t) => {
  const login = uniq('gw_metrics').replace(/-/g, '_');
  const hist = uniq('metrics-hist');
  const other = uniq('metrics-other');
  const mine = uniq('metrics-mine');
  const n = 5000;
  const old = 20000;
  psql(`CREATE ROLE ${login} LOGIN; GRANT bgexec_client TO ${login}`);
  const tokens = `${process.env.BGEXEC_WORK}/${login}.json`;
  writeFileSync(tokens, JSON.stringify({ 'token-m': login }));
  t.after(() => {
    psql(`DELETE FROM bgexec.job WHERE queue IN ('${hist}', '${other}', '${mine}')`);
    psql(`DROP ROLE ${login}`);
  });
  psql(`INSERT INTO bgexec.job (queue, kind, owner, status, result, attempt, started_at, finished_at)
        SELECT '${hist}', 'noop', current_user, 'completed', '{}', 1, now() - interval '2 days', now() - interval '2 days'
          FROM generate_series(1, ${old});
        INSERT INTO bgexec.queue_count VALUES ('${hist}', 'completed', ${old})`);
  psql(`SELECT count(*) FROM bgexec.submit_many((SELECT jsonb_agg(jsonb_build_object('kind', 'noop', 'queue', '${other}'))
                                                   FROM generate_series(1, ${n})))`);
  psql(`SET ROLE ${login}; SELECT bgexec.submit('noop', queue => '${mine}')`);
  const gw = await startGateway(0, ['--tokens', tokens, '--db', `user=${login} dbname=postgres`], '/');
  t.after(() => gw.kill());
  const q = queuedJobs();
  const { out, delta } = await indexReads(['job_finished_idx', 'job_runnable_idx'], q,
    async () => (await api('GET', '/metrics', { base: gw.url })).text);
  assert.equal(value(out, `bgexec_jobs{queue="${mine}",status="queued"}`), 1);
  assert.equal(value(out, `bgexec_jobs{queue="${other}",status="queued"}`), 0);
  assert.equal(value(out, `bgexec_jobs{queue="${hist}",status="queued"}`), 0);
  assert.equal(value(out, `bgexec_queue_workers{queue="${other}"}`), 0);
  const fin = delta.job_finished_idx;
  const run = delta.job_runnable_idx;
  const read = `a scrape read ${run} entries of job_runnable_idx with ${q} jobs queued, ` +
    `${fin} of job_finished_idx with ${old} jobs finished 2 days ago`;
  assert.ok(run >= q, `the scrape's reads were never flushed: ${read}`);
  assert.ok(fin < old / 2 && run < 1.5 * q, read);
});
