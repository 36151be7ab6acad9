// Recurring jobs over HTTP: PUT, GET and DELETE /v1/schedules/{name}, GET
// /v1/schedules, POST /v1/schedules/{name}/pause|resume|run; each token sees
// its own; bad input is 422 naming the field.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { api, psql, uniq, startGateway, A, B } from './lib.mjs';

// Makes the schedule due and runs reconcile().  The in-server watchdog runs
// reconcile() every second too, and each skips the schedule rows the other
// holds (FOR UPDATE SKIP LOCKED): when the watchdog took this one first, our
// call returned before its job was committed.  Locking the row waits for it.
function fireDue(name) {
  psql(`UPDATE bgexec.schedule SET next_run_at = now() - interval '1 minute' WHERE name = '${name}'`);
  psql('SELECT bgexec.reconcile()');
  psql(`SELECT 1 FROM bgexec.schedule WHERE name = '${name}' FOR UPDATE`);
}

test('schedules: create, replace, read, list, delete; a tenant sees only its own', async () => {
  const name = uniq('nightly');
  const queue = uniq('sq');
  const put = await api('PUT', `/v1/schedules/${name}`, { token: A, body: { cron: '0 3 * * *', kind: 'noop',
    payload: { n: 1 }, queue, priority: 2, max_attempts: 3, timeout: 60, concurrency_key: 'k' } });
  assert.equal(put.status, 200, put.text);
  assert.equal(put.body.name, name);
  assert.match(put.body.next_run_at, /^\d{4}-\d\d-\d\dT03:00:00\.000000Z$/);
  const got = await api('GET', `/v1/schedules/${name}`, { token: A });
  assert.equal(got.status, 200);
  assert.equal(got.body.owner, 'tenant_a');
  assert.equal(got.body.cron, '0 3 * * *');
  assert.deepEqual(got.body.payload, { n: 1 });
  assert.equal(got.body.max_attempts, 3);
  assert.equal(got.body.timeout, '00:01:00');
  // replaced in place, on another zone's clock (answered in UTC)
  const again = await api('PUT', `/v1/schedules/${name}`, { token: A, body: { cron: '@hourly', kind: 'noop', queue,
    time_zone: 'Asia/Kolkata', overlap: false } });
  assert.equal(again.status, 200, again.text);
  assert.match(again.body.next_run_at, /^\d{4}-\d\d-\d\dT\d\d:30:00\.000000Z$/);  // UTC+05:30
  const replaced = (await api('GET', `/v1/schedules/${name}`, { token: A })).body;
  assert.equal(replaced.time_zone, 'Asia/Kolkata');
  assert.equal(replaced.overlap, false);
  const list = await api('GET', '/v1/schedules', { token: A });
  assert.deepEqual(list.body.schedules.filter((s) => s.name === name).map((s) => s.cron), ['@hourly']);
  // B sees none of A's, and cannot delete it
  assert.equal((await api('GET', `/v1/schedules/${name}`, { token: B })).status, 404);
  assert.ok(!(await api('GET', '/v1/schedules', { token: B })).body.schedules.some((s) => s.name === name));
  assert.equal((await api('DELETE', `/v1/schedules/${name}`, { token: B })).status, 404);
  // fired by reconcile(), as its owner
  fireDue(name);
  const jobs = await api('GET', `/v1/jobs?queue=${queue}`, { token: A });
  assert.equal(jobs.body.jobs.length, 1);
  assert.equal(jobs.body.jobs[0].owner, 'tenant_a');
  const del = await api('DELETE', `/v1/schedules/${name}`, { token: A });
  assert.equal(del.status, 200);
  assert.deepEqual(del.body, { name, deleted: true });
  assert.equal((await api('DELETE', `/v1/schedules/${name}`, { token: A })).status, 404);
  assert.equal((await api('GET', `/v1/schedules/${name}`, { token: A })).status, 404);
});

test('schedules: pause fires nothing until resume, which answers the next run; others\' are 404', async () => {
  const name = uniq('pausable');
  const queue = uniq('pq');
  // yearly, so that no later tick comes due while the test counts jobs
  assert.equal((await api('PUT', `/v1/schedules/${name}`, { token: A, body: { cron: '0 0 1 1 *', kind: 'noop', queue } })).status, 200);
  assert.equal((await api('POST', `/v1/schedules/${name}/pause`, { token: B })).status, 404);
  const paused = await api('POST', `/v1/schedules/${name}/pause`, { token: A });
  assert.equal(paused.status, 200, paused.text);
  assert.deepEqual(paused.body, { name, paused: true });
  assert.equal((await api('GET', `/v1/schedules/${name}`, { token: A })).body.paused, true);
  fireDue(name);
  assert.equal((await api('GET', `/v1/jobs?queue=${queue}`, { token: A })).body.jobs.length, 0);
  assert.equal((await api('POST', `/v1/schedules/${name}/resume`, { token: B })).status, 404);
  const resumed = await api('POST', `/v1/schedules/${name}/resume`, { token: A });
  assert.equal(resumed.status, 200, resumed.text);
  assert.equal(resumed.body.paused, false);
  assert.match(resumed.body.next_run_at, /^\d{4}-01-01T00:00:00\.000000Z$/);
  assert.ok(Date.parse(resumed.body.next_run_at) > Date.now() - 60_000, resumed.body.next_run_at);
  fireDue(name);
  assert.equal((await api('GET', `/v1/jobs?queue=${queue}`, { token: A })).body.jobs.length, 1);
  assert.equal((await api('POST', `/v1/schedules/no-such/pause`, { token: A })).status, 404);
  assert.equal((await api('POST', `/v1/schedules/no-such/resume`, { token: A })).status, 404);
  const get = await api('GET', `/v1/schedules/${name}/pause`, { token: A });
  assert.equal(get.status, 405);
  assert.equal(get.headers.get('allow'), 'POST');
  assert.equal((await api('DELETE', `/v1/schedules/${name}`, { token: A })).status, 200);
});

test('schedules: run submits the job now (201, Location); 409 while a non-overlapping run is unfinished', async () => {
  const name = uniq('adhoc');
  const queue = uniq('rq');
  assert.equal((await api('PUT', `/v1/schedules/${name}`, { token: A, body: { cron: '0 3 * * *', kind: 'noop',
    payload: { n: 2 }, queue, overlap: false } })).status, 200);
  const run = await api('POST', `/v1/schedules/${name}/run`, { token: A });
  assert.equal(run.status, 201, run.text);
  assert.equal(run.body.name, name);
  assert.equal(run.headers.get('location'), `/v1/jobs/${run.body.id}`);
  const job = (await api('GET', `/v1/jobs/${run.body.id}`, { token: A })).body;
  assert.deepEqual([job.owner, job.queue, job.status, job.payload], ['tenant_a', queue, 'queued', { n: 2 }]);
  assert.equal((await api('GET', `/v1/schedules/${name}`, { token: A })).body.last_job_id, run.body.id);
  const again = await api('POST', `/v1/schedules/${name}/run`, { token: A });
  assert.equal(again.status, 409, again.text);
  assert.equal(again.body.error.sqlstate, '55006');
  assert.match(again.body.error.message, new RegExp(`job ${run.body.id} of its last run is still queued`));
  assert.equal((await api('POST', `/v1/schedules/${name}/run`, { token: B })).status, 404);
  assert.equal((await api('GET', `/v1/jobs?queue=${queue}`, { token: A })).body.jobs.length, 1);
  assert.equal((await api('DELETE', `/v1/schedules/${name}`, { token: A })).status, 200);
});

test('schedules: bad input is 422 or 400 naming the field, and stores nothing', async () => {
  const name = uniq('bad');
  for (const [body, status, sqlstate, message] of [
    [{ kind: 'noop' }, 422, '22023', /^cron is required$/],
    [{ cron: '0 25 * * *', kind: 'noop' }, 422, '22023', /^cron hour field "25" is not valid/],
    [{ cron: '0 0 30 2 *', kind: 'noop' }, 422, '22023', /matches no time/],
    [{ cron: 5, kind: 'noop' }, 422, '22023', /^cron must be a string$/],
    [{ cron: '@daily' }, 422, '22023', /^kind is required$/],
    [{ cron: '@daily', kind: 'noop', run_after: 'now' }, 400, '08P01', /^unknown field "run_after"$/],
    [{ cron: '@daily', kind: 'noop', idempotency_key: 'k' }, 400, '08P01', /^unknown field "idempotency_key"$/],
    [{ cron: '@daily', kind: 'noop', max_attempts: 0 }, 422, '22023', /max_attempts/],
    [{ cron: '@daily', kind: 'noop', time_zone: 'Mars/Olympus' }, 422, '22023', /^time_zone "Mars\/Olympus" is not known$/],
    [{ cron: '@daily', kind: 'noop', time_zone: 1 }, 422, '22023', /^time_zone must be a string$/],
    [{ cron: '@daily', kind: 'noop', overlap: 'no' }, 422, '22023', /^overlap must be true or false$/],
  ]) {
    const r = await api('PUT', `/v1/schedules/${name}`, { token: A, body });
    assert.equal(r.status, status, `${JSON.stringify(body)}: ${r.text}`);
    assert.equal(r.body.error.sqlstate, sqlstate, JSON.stringify(body));
    assert.match(r.body.error.message, message, JSON.stringify(body));
  }
  const badName = await api('PUT', '/v1/schedules/has%20space', { token: A, body: { cron: '@daily', kind: 'noop' } });
  assert.equal(badName.status, 422, badName.text);
  assert.match(badName.body.error.message, /^name must be 1-128 characters/);
  assert.equal(psql(`SELECT count(*) FROM bgexec.schedule WHERE name = '${name}' OR name = 'has space'`), '0');
  for (const [method, path, allow] of [['POST', '/v1/schedules', 'GET, HEAD'],
    ['POST', `/v1/schedules/${name}`, 'GET, HEAD, PUT, DELETE']]) {
    const r = await api(method, path, { token: A });
    assert.equal(r.status, 405, `${method} ${path}`);
    assert.equal(r.headers.get('allow'), allow);
  }
  assert.equal((await api('GET', '/v1/schedules?x=1', { token: A })).status, 400);
  assert.equal((await api('GET', '/v1/schedules', {})).status, 401);
});

test('schedules: the name in the path is percent-decoded, as clients encode it', async () => {
  const name = `${uniq('team')}:nightly.export`;  // ':' is a valid name character
  const path = `/v1/schedules/${encodeURIComponent(name)}`;  // ...which encodeURIComponent escapes
  assert.match(path, /%3A/);
  const put = await api('PUT', path, { token: A, body: { cron: '@daily', kind: 'noop' } });
  assert.equal(put.status, 200, put.text);
  assert.equal(put.body.name, name);
  const got = await api('GET', path, { token: A });
  assert.equal(got.status, 200, got.text);
  assert.equal(got.body.name, name);
  assert.equal((await api('GET', `/v1/schedules/${name}`, { token: A })).body.name, name);
  const paused = await api('POST', `${path}/pause`, { token: A });
  assert.equal(paused.status, 200, paused.text);
  assert.deepEqual(paused.body, { name, paused: true });
  const del = await api('DELETE', path, { token: A });
  assert.equal(del.status, 200, del.text);
  assert.deepEqual(del.body, { name, deleted: true });
  // Decoded bytes are checked like a query value's.
  let r = await api('GET', '/v1/schedules/a%FFb', { token: A });
  assert.equal(r.status, 400, r.text);
  assert.match(r.body.error.message, /not valid UTF-8/);
  r = await api('PUT', '/v1/schedules/a%00b', { token: A, body: { cron: '@daily', kind: 'noop' } });
  assert.equal(r.status, 422, r.text);
  assert.equal(r.body.error.sqlstate, '22021');
});

test('schedules: a NUL in the path\'s name is 422 on every route, never a name cut short at it', async () => {
  const name = uniq('nulname');
  const queue = uniq('nq');
  assert.equal((await api('PUT', `/v1/schedules/${name}`, { token: A, body: { cron: '0 3 * * *', kind: 'noop', queue } })).status, 200);
  // `${name}\0x` would reach the database as `${name}` (libpq takes C strings).
  for (const [method, suffix] of [['GET', ''], ['DELETE', ''], ['POST', '/pause'], ['POST', '/run'], ['POST', '/resume']]) {
    const r = await api(method, `/v1/schedules/${name}%00x${suffix}`, { token: A });
    assert.equal(r.status, 422, `${method} ${suffix}: ${r.text}`);
    assert.equal(r.body.error.sqlstate, '22021');
    assert.equal(r.body.error.message, 'name must not contain NUL (\\u0000)');
  }
  const s = await api('GET', `/v1/schedules/${name}`, { token: A });
  assert.equal(s.status, 200, 'not deleted');
  assert.equal(s.body.paused, false);
  assert.equal(s.body.last_job_id, null);
  assert.equal((await api('GET', `/v1/jobs?queue=${queue}`, { token: A })).body.jobs.length, 0, 'not run');
  assert.equal((await api('DELETE', `/v1/schedules/${name}`, { token: A })).status, 200);
});

test('schedules: a superuser\'s token reads its own schedules too, not every role\'s', async (t) => {
  const tokens = `${process.env.BGEXEC_WORK}/${uniq('admin-tokens')}.json`;
  writeFileSync(tokens, JSON.stringify({ 'token-a': 'tenant_a', 'token-admin': 'postgres' }));
  const gw = await startGateway(0, ['--tokens', tokens]);
  t.after(() => gw.kill());
  const admin = (method, path, opts = {}) => api(method, path, { token: 'token-admin', base: gw.url, ...opts });
  const name = uniq('shared-name');
  const mine = uniq('admin-own');
  // tenant_a's schedule, and the administrator's own of the same name and another
  assert.equal((await api('PUT', `/v1/schedules/${name}`, { token: A, body: { cron: '0 3 * * *', kind: 'tenant-kind' } })).status, 200);
  assert.equal((await admin('PUT', `/v1/schedules/${mine}`, { body: { cron: '0 5 * * *', kind: 'admin-kind' } })).status, 200);
  try {
    // tenant_a's is none of the administrator's: not listed, 404 by name
    // (as DELETE, pause and run answer for it)
    const list = await admin('GET', '/v1/schedules');
    assert.equal(list.status, 200);
    assert.deepEqual(list.body.schedules.map((s) => [s.owner, s.name]).filter(([, n]) => n === name || n === mine),
      [['postgres', mine]]);
    assert.ok(list.body.schedules.every((s) => s.owner === 'postgres'), JSON.stringify(list.body.schedules.map((s) => s.owner)));
    assert.equal((await admin('GET', `/v1/schedules/${name}`)).status, 404);
    assert.equal((await admin('POST', `/v1/schedules/${name}/pause`)).status, 404);
    // the same name of its own is its own, whoever else uses that name
    assert.equal((await admin('PUT', `/v1/schedules/${name}`, { body: { cron: '0 4 * * *', kind: 'admin-kind' } })).status, 200);
    for (let i = 0; i < 5; i++) {
      const one = await admin('GET', `/v1/schedules/${name}`);
      assert.equal(one.status, 200);
      assert.equal(one.body.owner, 'postgres');
      assert.equal(one.body.cron, '0 4 * * *');
    }
    const a = await api('GET', `/v1/schedules/${name}`, { token: A });
    assert.equal(a.body.owner, 'tenant_a');
    assert.equal(a.body.kind, 'tenant-kind');
  } finally {
    psql(`DELETE FROM bgexec.schedule WHERE name IN ('${name}', '${mine}')`);
  }
});
