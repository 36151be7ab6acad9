// REST API: status codes of submit/get/list/stop/resume/retry, queues, metrics.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { api, psql, claim, appendEvent, finish, startGateway, uniq, sleep, rawRequest, A, B, BASE } from './lib.mjs';

// A GET with a body (fetch refuses to send one): the raw answer.
function getWithBody(path, body) {
  return rawRequest(`GET ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${A}\r\n`
    + `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
}

test('401 without or with an unknown token, JSON error body', async () => {
  for (const token of [undefined, 'nope']) {
    const r = await api('GET', '/v1/jobs', { token });
    assert.equal(r.status, 401);
    assert.equal(r.body.error.sqlstate, '28000');
    assert.ok(r.body.error.message);
  }
});

test('the token after one or more spaces (RFC 9110: 1*SP), in a scheme of any case', async () => {
  for (const auth of [`Bearer ${A}`, `Bearer  ${A}`, `bearer   ${A}`, `BEARER ${A}  `]) {
    const r = await fetch(`${BASE}/v1/queues`, { headers: { Authorization: auth } });
    assert.equal(r.status, 200, auth);
  }
  for (const auth of [`Bearer`, `Bearer   `, `Bearer${A}`, `Basic ${A}`]) {
    const r = await fetch(`${BASE}/v1/queues`, { headers: { Authorization: auth } });
    assert.equal(r.status, 401, auth);
  }
});

test('submit 201, idempotent resubmit 200 with the same id, get 200, unknown 404', async () => {
  const queue = uniq('q');
  const key = uniq('key');
  const s = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', payload: { n: 1 }, queue, priority: 5,
    max_attempts: 3, timeout: 30, idempotency_key: key, concurrency_key: 'c1' } });
  assert.equal(s.status, 201, s.text);
  assert.equal(s.headers.get('location'), `/v1/jobs/${s.body.id}`);
  const again = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue, idempotency_key: key } });
  assert.equal(again.status, 200);
  assert.equal(again.body.id, s.body.id);
  const g = await api('GET', `/v1/jobs/${s.body.id}`, { token: A });
  assert.equal(g.status, 200);
  assert.equal(g.body.status, 'queued');
  assert.equal(g.body.owner, 'tenant_a');
  assert.equal(g.body.priority, 5);
  assert.equal(g.body.max_attempts, 3);
  assert.equal(g.body.timeout, '00:00:30');
  assert.deepEqual(g.body.payload, { n: 1 });
  const t = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue, timeout: '2 minutes' } });
  assert.equal(t.status, 201);
  assert.equal((await api('GET', `/v1/jobs/${t.body.id}`, { token: A })).body.timeout, '00:02:00');
  assert.equal((await api('GET', '/v1/jobs/999999999', { token: A })).status, 404);
  assert.equal((await api('GET', '/v1/jobs/abc', { token: A })).status, 404);
});

test('timeout 0 or "none": no timeout, whatever the queue\'s default_timeout (submit and a schedule)', async () => {
  const queue = uniq('nt');
  psql(`SELECT bgexec.configure_queue('${queue}', default_timeout => '10 minutes')`);
  const timeoutOf = async (id) => (await api('GET', `/v1/jobs/${id}`, { token: A })).body.timeout;
  const d = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } });
  assert.equal(d.status, 201, d.text);
  assert.equal(await timeoutOf(d.body.id), '00:10:00');
  for (const t of ['0', '-0', '0.0', '0e5', '"none"', '"0"', '"0 s"']) {
    const r = await api('POST', '/v1/jobs', { token: A, raw: `{"kind": "noop", "queue": "${queue}", "timeout": ${t}}` });
    assert.equal(r.status, 201, `${t}: ${r.text}`);
    assert.equal(await timeoutOf(r.body.id), null, t);
  }
  // "none" alone: another word is the database's error; a positive number
  // too small for a microsecond is no 0; '1 mon -30 days' compares equal to
  // 0 but is not
  for (const [t, state, message] of [
    ['"None"', '22007', /^timeout: invalid input syntax for type interval: "None"$/],
    ['1e-7', '22023', /^timeout must be a positive number of seconds, at most 3110400000 \(100 years\), or 0 or "none" for no timeout$/],
    ['-1', '22023', /^timeout must be a positive number of seconds/],
    ['"1 mon -30 days"', '22023', /^timeout must be a positive interval of at most 100 years, or 0 for none$/]]) {
    const r = await api('POST', '/v1/jobs', { token: A, raw: `{"kind": "noop", "queue": "${queue}", "timeout": ${t}}` });
    assert.equal(r.status, 422, `${t}: ${r.text}`);
    assert.equal(r.body.error.sqlstate, state, t);
    assert.match(r.body.error.message, message, t);
  }
  // a schedule keeps the 0 (its own NULL is the queue's default when it fires)
  const name = uniq('nt');
  const p = await api('PUT', `/v1/schedules/${name}`, { token: A, body: { cron: '0 3 * * *', kind: 'noop', queue, timeout: 'none' } });
  assert.equal(p.status, 200, p.text);
  const run = await api('POST', `/v1/schedules/${name}/run`, { token: A });
  assert.equal(run.status, 201, run.text);
  assert.equal(await timeoutOf(run.body.id), null);
  assert.equal((await api('DELETE', `/v1/schedules/${name}`, { token: A })).status, 200);
});

test('unique_key: 200 with the active job, 201 once it has ended; bad values 422', async () => {
  const queue = uniq('uq');
  const key = uniq('ukey');
  const s = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue, unique_key: key } });
  assert.equal(s.status, 201, s.text);
  const again = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue, unique_key: key } });
  assert.equal(again.status, 200, again.text);
  assert.deepEqual(again.body, { id: s.body.id, deduplicated: true });
  assert.equal((await api('GET', `/v1/jobs/${s.body.id}`, { token: A })).body.unique_key, key);
  // another tenant's key is its own
  const b = await api('POST', '/v1/jobs', { token: B, body: { kind: 'noop', queue, unique_key: key } });
  assert.equal(b.status, 201, b.text);
  psql(`SELECT bgexec.stop(${s.body.id})`);
  const after = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue, unique_key: key } });
  assert.equal(after.status, 201, after.text);
  assert.notEqual(after.body.id, s.body.id);
  // a retry of the ended job while the new one holds the key: 409, as a
  // retry the job's state refuses (it was 500), one job or a batch, nothing changed
  for (const [path, body] of [[`/v1/jobs/${s.body.id}/retry`, undefined], ['/v1/jobs/retry', { queue, status: 'cancelled' }]]) {
    const r = await api('POST', path, { token: A, body });
    assert.equal(r.status, 409, `${path}: ${r.text}`);
    assert.equal(r.body.error.sqlstate, '23505');
    assert.equal(r.body.error.message, `job ${s.body.id} has unique_key "${key}", held by active job ${after.body.id}`);
    assert.equal(r.body.error.hint, 'retry it when that job has ended');
  }
  assert.equal(psql(`SELECT status FROM bgexec.job WHERE id = ${s.body.id}`), 'cancelled');
  for (const [body, field] of [[{ kind: 'noop', unique_key: 7 }, 'unique_key must be a string'],
                               [{ kind: 'noop', unique_key: '' }, 'unique_key must be 1-512'],
                               [{ kind: 'noop', unique_key: 'u', idempotency_key: 'i' }, 'idempotency_key and unique_key']]) {
    const r = await api('POST', '/v1/jobs', { token: A, body });
    assert.equal(r.status, 422, r.text);
    assert.ok(r.text.includes(field), r.text);
  }
});

test('a submit that waited for a concurrent first submit of its key answers 200 with that job', async () => {
  const queue = uniq('race');
  const key = uniq('key');
  // tenant_a's own transaction submits the key first and commits 1.5 s later;
  // the HTTP submit of the same key starts meanwhile and waits for it.
  const first = spawn('psql', ['-X', '-qAt', '-d', 'postgres', '-c', 'BEGIN', '-c', 'SET LOCAL ROLE tenant_a',
    '-c', `SELECT bgexec.submit('noop', queue => '${queue}', idempotency_key => '${key}')`,
    '-c', 'SELECT pg_sleep(1.5)', '-c', 'COMMIT'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = once(first, 'exit');  // attached now: psql may exit before the HTTP reply is read
  let out = '';
  first.stdout.on('data', (d) => { out += d; });
  try {
    for (let i = 0; i < 50 && psql(`SELECT count(*) FROM pg_stat_activity
                                      WHERE query = 'SELECT pg_sleep(1.5)' AND state = 'active'`) === '0'; i++) {
      await sleep(50);
    }
    const r = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue, idempotency_key: key } });
    await exited;
    const firstId = Number(out.trim().split('\n')[0]);
    assert.ok(firstId > 0, out);
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.body, { id: firstId, deduplicated: true });
    assert.equal(psql(`SELECT count(*) FROM bgexec.job WHERE queue = '${queue}'`), '1');
  } finally {
    first.kill('SIGKILL');
  }
});

test('a list page ends once its payloads, results and errors pass 4 MiB', async () => {
  // 500 jobs of 900 kB made a 90 MB answer, held in memory for a reader
  // that does not read.  Now the page ends early (its first job whatever
  // its size), and next_before continues it.
  const queue = uniq('big');
  const ids = [];
  const payload = { s: 'x'.repeat(900 * 1024) };
  for (let i = 0; i < 6; i++) {
    const r = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue, payload } });
    assert.equal(r.status, 201, r.text);
    ids.push(r.body.id);
  }
  const p1 = await api('GET', `/v1/jobs?queue=${queue}&limit=500`, { token: A });
  assert.equal(p1.status, 200);
  assert.deepEqual(p1.body.jobs.map((j) => j.id), [ids[5], ids[4], ids[3], ids[2], ids[1]]);
  assert.equal(p1.body.next_before, ids[1]);
  assert.equal(p1.body.jobs[0].payload.s.length, 900 * 1024);
  assert.ok(!('fetched' in p1.body.jobs[0]));
  const p2 = await api('GET', `/v1/jobs?queue=${queue}&limit=500&before=${p1.body.next_before}`, { token: A });
  assert.deepEqual(p2.body.jobs.map((j) => j.id), [ids[0]]);
  assert.equal(p2.body.next_before, null);
});

test('a list page ends once its text passes 4 MiB too (control characters are six bytes written, one stored)', async () => {
  // 600 jobs of 8000 control characters: 4.8 MB stored, under the cap as
  // the jobs are sized stored, and 29 MB of text (\u0001 each).
  const queue = uniq('ctl');
  psql(`SET ROLE tenant_a; SELECT count(bgexec.submit('noop', jsonb_build_object('x', repeat(chr(1), 8000)), queue => '${queue}'))
        FROM generate_series(1, 600)`);
  const p1 = await api('GET', `/v1/jobs?queue=${queue}&limit=500`, { token: A });
  assert.equal(p1.status, 200);
  assert.ok(p1.text.length < 4.5 * 1024 * 1024, `a page of ${p1.text.length} bytes`);
  assert.ok(p1.body.jobs.length > 50 && p1.body.jobs.length < 100, `${p1.body.jobs.length} jobs`);
  assert.equal(p1.body.next_before, p1.body.jobs.at(-1).id);
  assert.equal(p1.body.jobs[0].payload.x, '\u0001'.repeat(8000));
  // next_before continues it, every job once.
  let seen = p1.body.jobs.length;
  for (let before = p1.body.next_before; before !== null;) {
    const p = await api('GET', `/v1/jobs?queue=${queue}&limit=500&before=${before}`, { token: A });
    seen += p.body.jobs.length;
    before = p.body.next_before;
  }
  assert.equal(seen, 600);
});

test('list filters by kind, as the CLI\'s jobs --kind (it was 400, an unknown parameter)', async () => {
  const queue = uniq('kind');
  const a = (await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } })).body.id;
  const b = (await api('POST', '/v1/jobs', { token: A, body: { kind: 'other', queue } })).body.id;
  const c = (await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } })).body.id;
  const k = await api('GET', `/v1/jobs?queue=${queue}&kind=noop`, { token: A });
  assert.equal(k.status, 200, k.text);
  assert.deepEqual(k.body.jobs.map((j) => j.id), [c, a]);
  const o = await api('GET', `/v1/jobs?kind=other&queue=${queue}&status=queued`, { token: A });
  assert.deepEqual(o.body.jobs.map((j) => j.id), [b]);
  const e = await api('GET', `/v1/jobs?queue=${queue}&kind=`, { token: A });  // empty: no filter
  assert.deepEqual(e.body.jobs.map((j) => j.id), [c, b, a]);
  const n = await api('GET', `/v1/jobs?queue=${queue}&kind=none`, { token: A });
  assert.deepEqual(n.body, { jobs: [], next_before: null });
});

test('list pages by id desc with a before cursor and filters', async () => {
  const queue = uniq('list');
  const ids = [];
  for (let i = 0; i < 5; i++) ids.push((await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } })).body.id);
  const p1 = await api('GET', `/v1/jobs?queue=${queue}&limit=2`, { token: A });
  assert.equal(p1.status, 200);
  assert.deepEqual(p1.body.jobs.map((j) => j.id), [ids[4], ids[3]]);
  assert.equal(p1.body.next_before, ids[3]);
  const p2 = await api('GET', `/v1/jobs?queue=${queue}&limit=2&before=${p1.body.next_before}`, { token: A });
  assert.deepEqual(p2.body.jobs.map((j) => j.id), [ids[2], ids[1]]);
  const p3 = await api('GET', `/v1/jobs?queue=${queue}&limit=2&before=${p2.body.next_before}`, { token: A });
  assert.deepEqual(p3.body.jobs.map((j) => j.id), [ids[0]]);
  assert.equal(p3.body.next_before, null);
  await api('POST', `/v1/jobs/${ids[0]}/stop`, { token: A });
  const c = await api('GET', `/v1/jobs?queue=${queue}&status=cancelled`, { token: A });
  assert.deepEqual(c.body.jobs.map((j) => j.id), [ids[0]]);
  // several statuses, comma-separated, as the CLI's --status (one was all)
  const cq = await api('GET', `/v1/jobs?queue=${queue}&status=cancelled,queued,cancelled&limit=2`, { token: A });
  assert.equal(cq.status, 200, cq.text);
  assert.deepEqual(cq.body.jobs.map((j) => j.id), [ids[4], ids[3]]);
  const cq2 = await api('GET', `/v1/jobs?queue=${queue}&status=cancelled,queued&limit=3&before=${cq.body.next_before}`, { token: A });
  assert.deepEqual(cq2.body.jobs.map((j) => j.id), [ids[2], ids[1], ids[0]]);
  assert.equal(cq2.body.next_before, null);
  const d = await api('GET', `/v1/jobs?queue=${queue}`, { token: A });
  assert.equal(d.body.jobs.length, 5);
  for (const bad of ['limit=0', 'limit=501', 'limit=x', 'before=-1', 'status=bogus']) {
    const r = await api('GET', `/v1/jobs?${bad}`, { token: A });
    assert.equal(r.status, 422, bad);
    assert.ok(r.body.error.sqlstate, bad);
  }
  // limit as the batch routes' limit: out of range 22003, not an integer 22023
  for (const [q, state] of [['limit=0', '22003'], ['limit=501', '22003'], ['limit=x', '22023'], ['limit=1.5', '22023']]) {
    const r = await api('GET', `/v1/jobs?${q}`, { token: A });
    assert.equal(r.body.error.sqlstate, state, q);
    assert.equal(r.body.error.message, 'limit must be an integer from 1 to 500', q);
  }
  assert.equal((await api('GET', '/v1/jobs?colour=red', { token: A })).status, 400);
});

// Times were the login session's text: "12/06/2026 19:13:03.914461 EST"
// under DateStyle SQL in America/New_York.
test('every time is UTC ISO 8601 to the microsecond whatever the session\'s DateStyle and TimeZone; a job answers every column', { timeout: 60000 }, async (t) => {
  const saved = process.env.PGOPTIONS;
  process.env.PGOPTIONS = '-c DateStyle=SQL,MDY -c TimeZone=America/New_York';
  let gw;
  try {
    gw = await startGateway();
  } finally {
    if (saved === undefined) delete process.env.PGOPTIONS;
    else process.env.PGOPTIONS = saved;
  }
  t.after(() => gw.kill());
  const iso = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/;
  const times = (o, keys) => { for (const k of keys) if (o[k] !== null) assert.match(o[k], iso, `${k}: ${o[k]}`); };
  const exact = (id) => psql(`SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') FROM bgexec.job WHERE id = ${id}`);
  const queue = uniq('times');
  const { body: { id } } = await api('POST', '/v1/jobs', { base: gw.url, token: A, body: { kind: 'noop', queue } });
  const { lease } = claim(queue);
  appendEvent(id, lease, 'log', { line: 'x' });
  finish(id, lease, 'completed', {});
  const jobTimes = ['run_after', 'deadline', 'lease_expires_at', 'stop_requested_at', 'created_at', 'started_at', 'finished_at'];
  const g = (await api('GET', `/v1/jobs/${id}`, { base: gw.url, token: A })).body;
  times(g, jobTimes);
  assert.equal(g.created_at, exact(id));
  assert.ok(g.finished_at && g.started_at, JSON.stringify(g));
  const columns = psql(`SELECT string_agg(attname, ',' ORDER BY attname) FROM pg_attribute
                         WHERE attrelid = 'bgexec.job'::regclass AND attnum > 0 AND NOT attisdropped`).split(',');
  assert.deepEqual(Object.keys(g).sort(), columns, 'the job answers every column of bgexec.job');
  const l = (await api('GET', `/v1/jobs?queue=${queue}`, { base: gw.url, token: A })).body.jobs;
  assert.equal(l.length, 1);
  assert.deepEqual(l[0], g);
  const w = (await api('GET', '/v1/workers?all=true', { base: gw.url, token: A })).body.workers;
  for (const x of w) times(x, ['started_at', 'heartbeat_at', 'stopped_at']);
  const name = uniq('times');
  const put = await api('PUT', `/v1/schedules/${name}`, { base: gw.url, token: A, body: { cron: '0 3 * * *', kind: 'noop', queue } });
  assert.match(put.body.next_run_at, iso);
  const sched = (await api('GET', `/v1/schedules/${name}`, { base: gw.url, token: A })).body;
  times(sched, ['next_run_at', 'last_run_at', 'created_at']);
  assert.equal(sched.next_run_at, put.body.next_run_at);
  for (const x of (await api('GET', '/v1/schedules', { base: gw.url, token: A })).body.schedules) times(x, ['next_run_at', 'last_run_at', 'created_at']);
  await api('DELETE', `/v1/schedules/${name}`, { base: gw.url, token: A });
  // the event stream's events (the job has ended: replayed, then closed)
  const r = await fetch(`${gw.url}/v1/jobs/${id}/events`, { headers: { Authorization: `Bearer ${A}` } });
  const text = await r.text();
  const events = text.split('\n').filter((x) => x.startsWith('data: ')).map((x) => JSON.parse(x.slice(6)));
  assert.deepEqual(events.map((e) => e.kind), ['started', 'log', 'completed'], text);
  for (const e of events) times(e, ['created_at']);
});

test('stop returns the status; resume/retry 409 when refused, 200 when applied', async () => {
  const queue = uniq('ctl');
  const { body: { id } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } });
  let r = await api('POST', `/v1/jobs/${id}/resume`, { token: A, raw: '{"x":1}' });
  assert.equal(r.status, 409);
  assert.equal(r.body.error.sqlstate, '55000');
  r = await api('POST', `/v1/jobs/${id}/retry`, { token: A });
  assert.equal(r.status, 409);
  r = await api('POST', `/v1/jobs/${id}/stop`, { token: A });
  assert.deepEqual([r.status, r.body.status], [200, 'cancelled']);
  r = await api('POST', `/v1/jobs/${id}/stop`, { token: A });
  assert.deepEqual([r.status, r.body.status], [200, 'cancelled']);
  r = await api('POST', `/v1/jobs/${id}/retry`, { token: A });
  assert.equal(r.status, 200);
  assert.equal((await api('GET', `/v1/jobs/${id}`, { token: A })).body.status, 'queued');
  // running → stop requested, status stays running
  const c = claim(queue);
  assert.equal(c.job, id);
  r = await api('POST', `/v1/jobs/${id}/stop`, { token: A });
  assert.deepEqual([r.status, r.body.status], [200, 'running']);
  finish(id, c.lease, 'cancelled', { reason: 'stopped' });
  // suspended → resume with the body as input
  const { body: { id: id2 } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } });
  const c2 = claim(queue);
  assert.equal(finish(id2, c2.lease, 'suspended', { step: 'gate' }), 'suspended');
  r = await api('POST', `/v1/jobs/${id2}/resume`, { token: A, raw: '{"approved": true}' });
  assert.equal(r.status, 200, r.text);
  const ev = psql(`SELECT data->'input' FROM bgexec.job_event WHERE job_id = ${id2} AND kind = 'resumed'`);
  assert.deepEqual(JSON.parse(ev), { approved: true });
  assert.equal((await api('POST', `/v1/jobs/${id2}/resume`, { token: A, raw: '{oops' })).status, 400);
  assert.equal((await api('GET', `/v1/jobs/${id2}/stop`, { token: A })).status, 405);
  assert.equal((await api('POST', '/v1/jobs/999999999/stop', { token: A })).status, 404);
});

test('validation errors are 422 with the SQLSTATE; a full queue is 429 with Retry-After', async () => {
  const cases = [
    [{ kind: 'bad kind' }, '22023'],
    [{ kind: 'noop', queue: 'no spaces' }, '22023'],
    [{ kind: 'noop', max_attempts: 0 }, '22023'],
    [{ kind: 'noop', timeout: -1 }, '22023'],
    [{ kind: 'noop', timeout: 'soon' }, '22007'],
    [{ kind: 'noop', priority: 'high' }, '22023'],
    [{ kind: 'noop', priority: 1e12 }, '22003'],
    [{ kind: 'noop', payload: [1, 2] }, '22023'],
    [{ kind: 'workflow', payload: { steps: [] } }, '22023'],
    [{ kind: 'noop', run_after: 'tomorrowish' }, '22007'],
    [{ kind: 'noop', timeout: '99999999999 hours' }, '22015'],
    [{ payload: {} }, '22023'],
  ];
  for (const [body, state] of cases) {
    const r = await api('POST', '/v1/jobs', { token: A, body });
    assert.equal(r.status, 422, JSON.stringify(body) + ' ' + r.text);
    assert.equal(r.body.error.sqlstate, state, JSON.stringify(body));
  }
  const queue = uniq('cap');
  psql(`SELECT bgexec.configure_queue('${queue}', max_queued => 1)`);
  assert.equal((await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } })).status, 201);
  const full = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } });
  assert.equal(full.status, 429);
  assert.equal(full.body.error.sqlstate, '53400');
  assert.ok(Number(full.headers.get('retry-after')) > 0);
});

test('queues and metrics', async () => {
  const q = await api('GET', '/v1/queues', { token: A });
  assert.equal(q.status, 200);
  assert.ok(Array.isArray(q.body.queues) && q.body.queues.length > 0);
  assert.ok('queued' in q.body.queues[0]);
  const m = await api('GET', '/metrics');
  assert.equal(m.status, 200);
  assert.match(m.headers.get('content-type'), /text\/plain/);
  for (const name of ['bgexec_jobs{queue=', 'bgexec_oldest_queued_seconds{', 'bgexec_workers_alive ',
    '# TYPE bgexec_jobs_finished_total counter', 'bgexec_claims_total ', 'bgexec_retries_total ',
    'bgexec_lease_expiries_total{reason="worker_lost"}',
    'bgexec_job_duration_seconds_bucket{le="+Inf"}', 'bgexec_job_duration_seconds_count ']) {
    assert.ok(m.text.includes(name), name);
  }
  // Gauges: what is queued, running or suspended now, exactly.
  const queued = Number(psql("SELECT count(*) FROM bgexec.job WHERE status = 'queued' AND queue = 'default'"));
  const g = /^bgexec_jobs\{queue="default",status="queued"\} (\d+)$/m.exec(m.text);
  assert.equal(Number(g ? g[1] : 0), queued);
});

test('a string holding NUL gets 422 naming the field, never a truncated value', async () => {
  const queue = uniq('nul');
  const count = () => Number(psql(`SELECT count(*) FROM bgexec.job WHERE queue = '${queue}'`));
  const cases = [
    [{ kind: 'no\u0000op' }, 'kind'],
    [{ kind: 'noop', queue: `${queue}\u0000x` }, 'queue'],
    [{ kind: 'noop', idempotency_key: 'k\u0000a' }, 'idempotency_key'],
    [{ kind: 'noop', concurrency_key: 'c\u0000' }, 'concurrency_key'],
    [{ kind: 'noop', timeout: '1\u0000 hour' }, 'timeout'],
    [{ kind: 'noop', run_after: 'now\u0000' }, 'run_after'],
    [{ kind: 'noop', payload: { a: ['x\u0000'] } }, 'payload'],
    [{ kind: 'noop', payload: { 'k\u0000': 1 } }, 'payload'],
  ];
  for (const [body, field] of cases) {
    const r = await api('POST', '/v1/jobs', { token: A, body: { queue, ...body } });
    assert.equal(r.status, 422, `${JSON.stringify(body)}: ${r.text}`);
    assert.equal(r.body.error.sqlstate, '22021');
    assert.equal(r.body.error.message, `${field} must not contain NUL (\\u0000)`);
  }
  assert.equal(count(), 0);
  const { body: { id } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } });
  const c = claim(queue);
  finish(c.job, c.lease, 'suspended', {});
  let r = await api('POST', `/v1/jobs/${id}/resume`, { token: A, raw: '{"ok": "y\\u0000"}' });
  assert.equal(r.status, 422, r.text);
  assert.equal(r.body.error.message, 'resume input must not contain NUL (\\u0000)');
  assert.equal((await api('GET', `/v1/jobs/${id}`, { token: A })).body.status, 'suspended');
  r = await api('POST', `/v1/jobs/${id}/resume`, { token: A, raw: '{"ok": [1e-16384]}' });
  assert.equal(r.status, 422, r.text);
  assert.equal(r.body.error.sqlstate, '22003', r.text);
  assert.match(r.body.error.message, /^resume input holds the number 1e-16384, out of the range of PostgreSQL's numeric/);
  assert.equal((await api('GET', `/v1/jobs/${id}`, { token: A })).body.status, 'suspended');
  // Past a double's range: 22003 naming where, not a 400 syntax error.
  for (const [raw, where] of [['{"ok": [1e400]}', ' at ok[0]'], ['1e400', '']]) {
    r = await api('POST', `/v1/jobs/${id}/resume`, { token: A, raw });
    assert.equal(r.status, 422, r.text);
    assert.deepEqual(r.body.error, { sqlstate: '22003',
      message: `resume input${where} holds the number 1e400, past a double's range (at most 1.8e308 either way)` });
  }
  assert.equal((await api('GET', `/v1/jobs/${id}`, { token: A })).body.status, 'suspended');
  for (const q of [`queue=${queue}%00x`, 'status=queued%00']) {
    r = await api('GET', `/v1/jobs?${q}`, { token: A });
    assert.equal(r.status, 422, `${q}: ${r.text}`);
    assert.match(r.body.error.message, /^query parameter "(queue|status)" must not contain NUL/);
  }
});

test('error messages: the server\'s primary message naming the field, DETAIL and HINT apart, no CONTEXT', async () => {
  const cases = [
    [{ kind: 'noop', timeout: 'abc' }, '22007', /^timeout: invalid input syntax for type interval: "abc"$/],
    [{ kind: 'noop', timeout: '99999999999 hours' }, '22015', /^timeout: interval field value out of range/],
    [{ kind: 'noop', timeout: 1e300 }, '22023', /^timeout must be a positive number of seconds, at most 3110400000 \(100 years\), or 0 or "none" for no timeout$/],
    [{ kind: 'noop', timeout: 1e-7 }, '22023', /^timeout must be a positive number of seconds, at most 3110400000 \(100 years\), or 0 or "none" for no timeout$/],
    [{ kind: 'noop', timeout: 3110400001 }, '22023', /^timeout must be/],
    // Read by the gateway, not by its session's DateStyle (zones.test.mjs).
    [{ kind: 'noop', run_after: '294277-01-01T00:00Z' }, '22007', /^run_after must be an RFC 3339 time with an offset or Z .*: was "294277-01-01T00:00Z"$/],
    [{ kind: 'noop', run_after: 'soonish', timeout: '1 hour' }, '22007', /^run_after must be an RFC 3339 time/],
    [{ kind: 'noop', priority: 2147483648 }, '22003', /^priority must be an integer from -2147483648 to 2147483647$/],
    [{ kind: 'noop', max_attempts: -2147483649 }, '22003', /^max_attempts must be an integer from 1 to 2147483647$/],
    [{ kind: 'noop', max_attempts: 99999999999 }, '22003', /^max_attempts must be an integer from 1 to 2147483647$/],
    // A whole number too large for an int64 arrives as a double: out of range too, not "not an integer".
    [{ kind: 'noop', priority: 1e20 }, '22003', /^priority must be an integer from -2147483648 to 2147483647$/],
    [{ kind: 'noop', priority: -1e300 }, '22003', /^priority must be an integer from -2147483648 to 2147483647$/],
    [{ kind: 'noop', priority: 1.5 }, '22023', /^priority must be an integer$/],
    [{ kind: 'bad kind' }, '22023', /^kind must be 1-128 characters/],
  ];
  for (const [body, state, message] of cases) {
    const r = await api('POST', '/v1/jobs', { token: A, body });
    assert.equal(r.status, 422, `${JSON.stringify(body)}: ${r.text}`);
    assert.equal(r.body.error.sqlstate, state, JSON.stringify(body));
    assert.match(r.body.error.message, message, JSON.stringify(body));
    assert.doesNotMatch(r.text, /CONTEXT|PL\/pgSQL|portal/, JSON.stringify(body));
  }
  const big = await api('POST', '/v1/jobs', { token: A, raw: '{"kind": "noop", "max_attempts": 18446744073709551615}' });
  assert.equal(big.status, 422);
  assert.equal(big.body.error.sqlstate, '22003');
  // A number PostgreSQL's numeric refuses is named with its own field: the
  // payload is cast from the whole body, and the database's "value
  // overflows numeric format" was pinned on the payload whichever field held
  // it.  Nothing is submitted.
  const nq = uniq('numeric');
  const numeric = [
    [`{"kind":"noop","queue":"${nq}","priority":0e-99999,"payload":{}}`, /^priority holds the number 0e-99999, out of the range of PostgreSQL's numeric/],
    [`{"kind":"noop","queue":"${nq}","payload":{"a":[1e-16384]}}`, /^payload holds the number 1e-16384, out of the range/],
    [`{"kind":"noop","queue":"${nq}","payload":{},"timeout":1.${'0'.repeat(17000)}}`, /^timeout holds the number 1\.0{38}\.\.\., out of the range/],
  ];
  for (const [raw, message] of numeric) {
    const r = await api('POST', '/v1/jobs', { token: A, raw });
    assert.equal(r.status, 422, `${raw.slice(0, 80)}: ${r.text.slice(0, 300)}`);
    assert.equal(r.body.error.sqlstate, '22003', r.text.slice(0, 300));
    assert.match(r.body.error.message, message, r.text.slice(0, 300));
  }
  const sched = await api('PUT', `/v1/schedules/${nq}`, { token: A, raw: '{"cron":"* * * * *","kind":"noop","priority":1e-16384,"payload":{}}' });
  assert.equal(sched.status, 422, sched.text);
  assert.match(sched.body.error.message, /^priority holds the number 1e-16384/);
  assert.equal(psql(`SELECT count(*) FROM bgexec.job WHERE queue = '${nq}'`), '0');
  assert.equal(psql(`SELECT count(*) FROM bgexec.schedule WHERE name = '${nq}'`), '0');
  // A number past a double's range is 22003 naming where it is, as the SQL
  // functions raise it: it was a 400 syntax error of the whole body (nlohmann
  // stops at it), naming nothing.  Quoted at most 40 characters of it.
  const past = ' holds the number 1e400, past a double\'s range (at most 1.8e308 either way)';
  const doubles = [
    ['POST', '/v1/jobs', `{"kind":"noop","queue":"${nq}","priority":1e400}`, `priority${past}`],
    ['POST', '/v1/jobs', `{"kind":"noop","queue":"${nq}","payload":{"a":[1,{"b c":-1e999}]},"priority":1}`,
      'payload.a[1]["b c"] holds the number -1e999, past a double\'s range (at most 1.8e308 either way)'],
    ['POST', '/v1/jobs', `{"kind":"noop","queue":"${nq}","payload":{"x":1${'0'.repeat(200000)}}}`,
      `payload.x holds the number 1${'0'.repeat(39)}..., past a double's range (at most 1.8e308 either way)`],
    ['PUT', `/v1/schedules/${nq}`, '{"cron":"* * * * *","kind":"noop","timeout":1e400}', `timeout${past}`],
    ['POST', '/v1/jobs/stop', `{"queue":"${nq}","after":1e400}`, `after${past}`],
  ];
  for (const [method, path, raw, message] of doubles) {
    const r = await api(method, path, { token: A, raw });
    assert.equal(r.status, 422, `${raw.slice(0, 80)}: ${r.text.slice(0, 300)}`);
    assert.ok(r.text.length < 400, r.text.slice(0, 400));
    assert.deepEqual(r.body.error, { sqlstate: '22003', message }, raw.slice(0, 80));
  }
  // The body's own faults come first: a syntax error after the number, an
  // unknown field holding it, a body that is no object.
  for (const [raw, message] of [
    [`{"kind":"noop","queue":"${nq}","priority":1e400,}`, /^request body is not valid JSON: parse error .*syntax error/],
    [`{"kind":"noop","queue":"${nq}","priority":1e400} x`, /^request body is not valid JSON: parse error .*syntax error/],
    [`{"kind":"noop","queue":"${nq}","priority":1e400,"priority":1}`, /^duplicate key "priority"/],
    [`{"kind":"noop","queue":"${nq}","bogus":1e400}`, /^unknown field "bogus"$/],
    ['[1e400]', /^request body must be a JSON object$/],
  ]) {
    const r = await api('POST', '/v1/jobs', { token: A, raw });
    assert.equal(r.status, 400, `${raw}: ${r.text}`);
    assert.match(r.body.error.message, message, raw);
  }
  const nobody = await api('POST', '/v1/jobs/1/stop', { token: A, raw: '{"x":1e400}' });
  assert.equal(nobody.status, 400, nobody.text);
  assert.equal(nobody.body.error.message, 'unknown field "x"');
  assert.equal(psql(`SELECT count(*) FROM bgexec.job WHERE queue = '${nq}'`), '0');
  assert.equal(psql(`SELECT count(*) FROM bgexec.schedule WHERE name = '${nq}'`), '0');
  const bad = await api('POST', '/v1/jobs', { token: A, body: { kind: 'bad kind' } });
  assert.equal(bad.body.error.detail, "kind was 'bad kind'");
  const st = await api('GET', '/v1/jobs?status=bogus', { token: A });
  assert.equal(st.status, 422);
  assert.equal(st.body.error.sqlstate, '22023');
  assert.equal(st.body.error.message,
    'status: unknown status "bogus" (a job is queued, running, suspended, completed, failed, cancelled or timed_out)');
  for (const q of ['status=failed,', 'status=,failed', 'status=failed,,queued']) {
    const e = await api('GET', `/v1/jobs?${q}`, { token: A });
    assert.equal(e.status, 422, q);
    assert.match(e.body.error.message, /^status: expected a status, got /, q);
  }
  // A whole number written with an exponent or a fraction is that integer.
  const whole = await api('POST', '/v1/jobs', { token: A, raw: `{"kind":"noop","queue":"${uniq('whole')}","priority":1e2,"max_attempts":3.0}` });
  assert.equal(whole.status, 201, whole.text);
  const wj = (await api('GET', `/v1/jobs/${whole.body.id}`, { token: A })).body;
  assert.deepEqual([wj.priority, wj.max_attempts], [100, 3]);
  const whole2 = await api('POST', '/v1/jobs', { token: A, raw: `{"kind":"noop","queue":"${uniq('whole')}","priority":2.50e1,"max_attempts":-0.3e1,"timeout":2.50}` });
  assert.equal(whole2.status, 422, whole2.text);  // -3 attempts: the database's range check
  const whole3 = await api('POST', '/v1/jobs', { token: A, raw: `{"kind":"noop","queue":"${uniq('whole')}","priority":2.50e1,"max_attempts":300e-2,"timeout":2.50}` });
  assert.equal(whole3.status, 201, whole3.text);
  const wj3 = (await api('GET', `/v1/jobs/${whole3.body.id}`, { token: A })).body;
  assert.deepEqual([wj3.priority, wj3.max_attempts, wj3.timeout], [25, 3, '00:00:02.5']);
  // an exponent at long long's end: zero is whole (the digit count plus
  // the exponent overflowed, undefined behaviour)
  const zero = await api('POST', '/v1/jobs', { token: A, raw: `{"kind":"noop","queue":"${uniq('whole')}","priority":0e9223372036854775807,"max_attempts":1.5e-9223372036854775807}` });
  assert.equal(zero.status, 422, zero.text);
  assert.match(zero.body.error.message, /^max_attempts must be an integer/);
  const zero2 = await api('POST', '/v1/jobs', { token: A, raw: `{"kind":"noop","queue":"${uniq('whole')}","priority":0e9223372036854775807}` });
  assert.equal(zero2.status, 201, zero2.text);
  // A fraction a double rounds to a whole number is still a fraction: it
  // was stored as that whole number (priority 1, max_attempts 3).
  for (const raw of ['{"kind":"noop","priority":1.0000000000000001}', '{"kind":"noop","max_attempts":2.9999999999999999}',
    '{"kind":"noop","priority":1e-400}']) {
    const r = await api('POST', '/v1/jobs', { token: A, raw });
    assert.equal(r.status, 422, `${raw}: ${r.text}`);
    assert.match(r.body.error.message, /^(priority|max_attempts) must be an integer$/, raw);
  }
  // The edges of the ranges are accepted.
  const ok = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue: uniq('edge'), priority: -2147483648,
    max_attempts: 2147483647, timeout: 3110400000 } });
  assert.equal(ok.status, 201, ok.text);
  const queue = uniq('hint');
  psql(`SELECT bgexec.configure_queue('${queue}', max_queued => 0)`);
  const full = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } });
  assert.equal(full.status, 429);
  assert.match(full.body.error.message, /^queue ".*" is full \(max_queued 0\)$/);
  assert.match(full.body.error.hint, /configure_queue/);
});

test('every route: a wrong method is 405 with Allow, an unknown or repeated query parameter 400 and changes nothing', async () => {
  const queue = uniq('routes');
  const { body: { id } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } });
  for (const [method, path, allow] of [
    ['POST', `/v1/jobs/${id}/events`, 'GET'], ['HEAD', `/v1/jobs/${id}/events`, 'GET'],
    ['PUT', `/v1/jobs/${id}/events`, 'GET'], ['DELETE', `/v1/jobs/${id}`, 'GET, HEAD'],
    ['POST', '/v1/queues', 'GET, HEAD'], ['GET', `/v1/jobs/${id}/stop`, 'POST'], ['PUT', '/v1/jobs', 'GET, HEAD, POST'],
    ['POST', '/metrics', 'GET, HEAD'], ['POST', '/', 'GET, HEAD']]) {
    const r = await api(method, path, { token: A });
    assert.equal(r.status, 405, `${method} ${path}`);
    assert.equal(r.headers.get('allow'), allow, `${method} ${path}`);
    if (method !== 'HEAD') assert.equal(r.body.error.sqlstate, '08P01');
  }
  // The path, then the method, then the query, on the schedules' routes
  // too (their query was checked first: POST /v1/schedules?x=1 was a 400).
  for (const [method, path, status] of [['POST', '/v1/schedules?x=1', 405], ['PATCH', '/v1/schedules/s1?x=1', 405],
    ['GET', '/v1/schedules/s1/run?x=1', 405], ['GET', '/v1/schedules/a/b/c?x=1', 404],
    ['GET', '/v1/schedules?x=1', 400], ['DELETE', '/v1/schedules/s1?x=1', 400]]) {
    const r = await api(method, path, { token: A });
    assert.equal(r.status, status, `${method} ${path}: ${r.text}`);
  }
  for (const [method, path] of [['GET', `/v1/jobs/${id}?bogus=1`], ['GET', '/v1/queues?foo=1'],
    ['GET', `/v1/jobs/${id}/events?foo=1`], ['GET', `/v1/jobs/${id}/events?after=0&Token=x`],
    ['POST', '/v1/jobs?dry_run=1'], ['POST', `/v1/jobs/${id}/stop?force=1`], ['GET', '/metrics?x=1'],
    ['GET', `/v1/jobs/${id}?token=${A}`]]) {
    const r = await api(method, path, { token: A });
    assert.equal(r.status, 400, `${method} ${path}: ${r.text}`);
    assert.match(r.body.error.message, /^unknown query parameter "/);
  }
  // A parameter given twice is refused, not decided by one of its values.
  for (const path of [`/v1/jobs?status=failed&status=queued`, `/v1/jobs?limit=1&queue=${queue}&limit=2`,
    `/v1/jobs/${id}/events?after=0&after=1`]) {
    const r = await api('GET', path, { token: A });
    assert.equal(r.status, 400, `${path}: ${r.text}`);
    assert.match(r.body.error.message, /^query parameter "(status|limit|after)" is given more than once$/);
  }
  assert.equal(psql(`SELECT count(*) || ' ' || min(status::text) FROM bgexec.job WHERE queue = '${queue}'`), '1 queued');
  // A GET takes an empty body or {} only, as every route without one (it
  // dropped any body, JSON or not, without a word).
  const sname = uniq('s');
  await api('PUT', `/v1/schedules/${sname}`, { token: A, body: { cron: '0 3 * * *', kind: 'noop', queue } });
  for (const path of [`/v1/jobs/${id}`, `/v1/jobs?queue=${queue}`, '/v1/queues', '/v1/schedules', `/v1/schedules/${sname}`, '/metrics']) {
    for (const [raw, status] of [['garbage', 400], ['{"limit":1}', 400], ['{}', 200], [' ', 200]]) {
      const out = await getWithBody(path, raw);
      assert.match(out, new RegExp(`^HTTP/1\\.1 ${status} `), `GET ${path} with ${raw}: ${out.slice(0, 300)}`);
    }
  }
  // The dashboard page takes any query (links to it may carry one).
  assert.equal((await api('GET', '/?utm_source=x')).status, 200);
  assert.equal((await api('GET', '/?a=1&a=2')).status, 200);
});

test('HEAD answers the headers GET would, Content-Length included, and no body', async () => {
  const { body: { id } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue: uniq('head') } });
  for (const path of ['/', '/app.js', `/v1/jobs/${id}`]) {
    const get = await fetch(BASE + path, { headers: { Authorization: `Bearer ${A}` } });
    const bytes = Buffer.byteLength(await get.text());
    assert.ok(bytes > 0, path);
    const head = await fetch(BASE + path, { method: 'HEAD', headers: { Authorization: `Bearer ${A}` } });
    assert.equal(head.status, 200, path);
    assert.equal(head.headers.get('content-length'), String(bytes), path);
    assert.equal(head.headers.get('content-type'), get.headers.get('content-type'), path);
    assert.equal(await head.text(), '', path);
  }
  // The connection carries on after a HEAD: no body bytes were sent.
  const again = await api('GET', `/v1/jobs/${id}`, { token: A });
  assert.equal(again.status, 200);
  assert.equal(again.body.id, id);
});

test('payloads and resume inputs are stored as sent: numbers beyond a double exact', async () => {
  const queue = uniq('exact');
  const numbers = '{"big": 123456789012345678901234567890, "dec": 0.10000000000000000001, "i": -9223372036854775809}';
  const s = await api('POST', '/v1/jobs', { token: A, headers: { 'Content-Type': 'application/json' },
    raw: `{"kind": "noop", "queue": "${queue}", "payload": ${numbers}}` });
  assert.equal(s.status, 201, s.text);
  // the parsed body's dump stored 1.2345678901234568e+29, 0.1 and -9223372036854775808
  assert.equal(psql(`SELECT payload = '${numbers}'::jsonb FROM bgexec.job WHERE id = ${s.body.id}`), 't',
    psql(`SELECT payload FROM bgexec.job WHERE id = ${s.body.id}`));
  const c = claim(queue);
  finish(c.job, c.lease, 'suspended', {});
  const r = await api('POST', `/v1/jobs/${c.job}/resume`, { token: A, raw: numbers });
  assert.equal(r.status, 200, r.text);
  assert.equal(psql(`SELECT data->'input' = '${numbers}'::jsonb FROM bgexec.job_event WHERE job_id = ${c.job} AND kind = 'resumed'`), 't');
  // ... and answered as stored: the job, the list, the event stream (they
  // were read as doubles: 1.2345678901234568e+29, 0.1, -9.223372036854776e+18)
  const compact = '{"big":123456789012345678901234567890,"dec":0.10000000000000000001,"i":-9223372036854775809}';
  const again = claim(queue);
  psql(`SELECT bgexec.finish(${again.job}, ${again.lease}, 'completed', '{"r": 2.50, "n": ${numbers}}')`);
  const job = await api('GET', `/v1/jobs/${c.job}`, { token: A });
  assert.equal(job.status, 200);
  assert.ok(job.text.includes(`"payload":${compact}`), job.text);
  assert.ok(job.text.includes(`"result":{"n":${compact},"r":2.50}`), job.text);
  const list = await api('GET', `/v1/jobs?queue=${queue}`, { token: A });
  assert.ok(list.text.includes(`"payload":${compact}`), list.text);
  const res = await fetch(`${BASE}/v1/jobs/${c.job}/events`, { headers: { Authorization: `Bearer ${A}` } });
  const stream = await res.text();  // ends at the job's terminal event
  assert.ok(stream.includes(`"input":${compact}`), stream);
  assert.ok(stream.includes(`"result":{"n":${compact},"r":2.50}`), stream);
});

test('a stored value nested 50 000 deep is answered as its text; the gateway does not crash', async () => {
  const queue = uniq('deep');
  const { body: { id } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } });
  // Written past the functions (a superuser; PostgreSQL's default stack
  // refuses such jsonb past about 13 000 levels).  Copied or written out
  // by the gateway, it overflowed its stack: signal 11, for every tenant.
  psql(`SET max_stack_depth = '7MB'; UPDATE bgexec.job SET result = (repeat('[', 50000) || repeat(']', 50000))::jsonb WHERE id = ${id}`);
  const one = await api('GET', `/v1/jobs/${id}`, { token: A });
  assert.equal(one.status, 200, one.text.slice(0, 200));
  assert.equal(typeof one.body.result, 'string');
  assert.ok(one.body.result.startsWith('[[[['));
  const list = await api('GET', `/v1/jobs?queue=${queue}`, { token: A });
  assert.equal(list.status, 200, list.text.slice(0, 200));
  assert.equal(typeof list.body.jobs[0].result, 'string');
  // nested 1024 levels, the most read back as JSON, it stays JSON
  psql(`UPDATE bgexec.job SET result = (repeat('[', 1024) || repeat(']', 1024))::jsonb WHERE id = ${id}`);
  assert.ok(Array.isArray((await api('GET', `/v1/jobs/${id}`, { token: A })).body.result));
  assert.equal((await api('GET', '/metrics')).status, 200);
});

test('the server short of a resource (class 53: a full disk) answers 503 with Retry-After, and the gateway logs it', async () => {
  const gw = await startGateway(0);
  const kind = uniq('diskfull');
  // A submit that meets a full disk, as PostgreSQL raises it (53100): a
  // trigger of the test's own, on this kind only.  It answered a bare 500,
  // logging nothing, as if the request were wrong.
  psql(`CREATE FUNCTION test_disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
          BEGIN RAISE EXCEPTION 'could not extend file "base/5/16400": No space left on device'
                USING ERRCODE = 'disk_full'; END $$;
        CREATE TRIGGER "${kind}" BEFORE INSERT ON bgexec.job FOR EACH ROW
          WHEN (NEW.kind = '${kind}') EXECUTE FUNCTION test_disk_full()`);
  try {
    const r = await api('POST', '/v1/jobs', { token: A, base: gw.url, body: { kind, queue: uniq('q') } });
    assert.equal(r.status, 503, r.text);
    assert.equal(r.body.error.sqlstate, '53100');
    assert.match(r.body.error.message, /^database unavailable: could not extend file/);
    assert.equal(r.headers.get('retry-after'), '5');
    for (let i = 0; i < 50 && !/msg="database short of a resource"/.test(gw.log()); i++) await sleep(100);
    assert.match(gw.log(), /level=warn msg="database short of a resource" error="could not extend file[^\n]*sqlstate=53100/);
    assert.equal(psql(`SELECT count(*) FROM bgexec.job WHERE kind = '${kind}'`), '0');
  } finally {
    psql(`DROP TRIGGER "${kind}" ON bgexec.job; DROP FUNCTION test_disk_full()`);
    gw.kill();
  }
});
