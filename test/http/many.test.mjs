// POST /v1/jobs/stop and POST /v1/jobs/retry: one batch of the token's
// matching jobs (queue, kind, status), oldest first, at most `limit`;
// `next_after` continues it.  A tenant acts on its own jobs only (row-level
// security); a batch a full queue refuses changes nothing; bad bodies are
// refused naming the field and change nothing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { api, psql, uniq, claim, A, B } from './lib.mjs';

const statuses = (queue) => psql(`SELECT string_agg(id || ':' || status, ' ' ORDER BY id) FROM bgexec.job WHERE queue = '${queue}'`);

test('stop and retry of many: batches, next_after, tenants, running jobs', async () => {
  const queue = uniq('many');
  const ids = [];
  for (let i = 0; i < 5; i++) ids.push((await api('POST', '/v1/jobs', { token: A, body: { kind: i < 4 ? 'a' : 'b', queue } })).body.id);
  const theirs = (await api('POST', '/v1/jobs', { token: B, body: { kind: 'a', queue } })).body.id;

  // kind a, two at a time: the two oldest, then the next two, then none left
  let r = await api('POST', '/v1/jobs/stop', { token: A, body: { queue, kind: 'a', limit: 2 } });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.body, { matched: 2, cancelled: 2, stop_requested: 0, next_after: ids[1] });
  r = await api('POST', '/v1/jobs/stop', { token: A, body: { queue, kind: 'a', limit: 2, after: r.body.next_after } });
  assert.deepEqual(r.body, { matched: 2, cancelled: 2, stop_requested: 0, next_after: ids[3] });
  r = await api('POST', '/v1/jobs/stop', { token: A, body: { queue, kind: 'a', limit: 2, after: r.body.next_after } });
  assert.deepEqual(r.body, { matched: 0, cancelled: 0, stop_requested: 0, next_after: null });
  // tenant B's job of the same queue and kind is untouched, A's kind b too
  assert.equal(statuses(queue), `${ids[0]}:cancelled ${ids[1]}:cancelled ${ids[2]}:cancelled ${ids[3]}:cancelled ${ids[4]}:queued ${theirs}:queued`);

  // retry takes failed and timed_out by default: none here
  r = await api('POST', '/v1/jobs/retry', { token: A, body: { queue } });
  assert.deepEqual(r.body, { matched: 0, retried: 0, next_after: null });
  r = await api('POST', '/v1/jobs/retry', { token: A, body: { queue, status: ['cancelled', 'failed'] } });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.body, { matched: 4, retried: 4, next_after: null });
  assert.equal(psql(`SELECT count(*) FROM bgexec.job WHERE queue = '${queue}' AND status = 'queued'`), '6');

  // a running job is asked to stop (its worker ends it); the queued ones cancelled
  const run = claim(queue);
  r = await api('POST', '/v1/jobs/stop', { token: A, body: { queue, status: 'running' } });
  assert.deepEqual(r.body, { matched: 1, cancelled: 0, stop_requested: 1, next_after: null });
  assert.equal(psql(`SELECT status || ' ' || (stop_requested_at IS NOT NULL) FROM bgexec.job WHERE id = ${run.job}`), 'running true');
  r = await api('POST', '/v1/jobs/stop', { token: A, body: { queue } });
  assert.deepEqual(r.body, { matched: 5, cancelled: 4, stop_requested: 1, next_after: null });
  assert.equal(psql(`SELECT status FROM bgexec.job WHERE id = ${theirs}`), 'queued');
});

test('a retry batch past the queue\'s max_queued is refused whole (429, 53400)', async () => {
  const queue = uniq('manycap');
  for (let i = 0; i < 3; i++) await api('POST', '/v1/jobs', { token: A, body: { kind: 'a', queue } });
  await api('POST', '/v1/jobs/stop', { token: A, body: { queue } });
  psql(`SELECT bgexec.configure_queue('${queue}', max_queued => 2)`);
  const before = statuses(queue);
  const r = await api('POST', '/v1/jobs/retry', { token: A, body: { queue, status: 'cancelled' } });
  assert.equal(r.status, 429, r.text);
  assert.equal(r.body.error.sqlstate, '53400');
  assert.equal(statuses(queue), before);
  // a batch that fits goes through
  const ok = await api('POST', '/v1/jobs/retry', { token: A, body: { queue, status: 'cancelled', limit: 2 } });
  assert.equal(ok.status, 200, ok.text);
  assert.equal(ok.body.retried, 2);
});

test('stop and retry of many: bad bodies are refused naming the field, and change nothing', async () => {
  const queue = uniq('manybad');
  await api('POST', '/v1/jobs', { token: A, body: { kind: 'a', queue } });
  const before = statuses(queue);
  const bad = async (path, body, status, sqlstate, message) => {
    const r = await api('POST', path, { token: A, raw: typeof body === 'string' ? body : JSON.stringify(body) });
    assert.equal(r.status, status, `${JSON.stringify(body)}: ${r.text}`);
    assert.equal(r.body.error.sqlstate, sqlstate, `${JSON.stringify(body)}: ${r.text}`);
    assert.match(r.body.error.message, message, `${JSON.stringify(body)}`);
  };
  await bad('/v1/jobs/stop', {}, 422, '22023', /^give at least one of queue, kind and status: the jobs to stop$/);
  await bad('/v1/jobs/stop', '', 422, '22023', /^give at least one of queue, kind and status/);
  await bad('/v1/jobs/stop', { queue, status: 'failed' }, 422, '22023', /^status: stop acts on queued, suspended or running jobs, got "failed"$/);
  await bad('/v1/jobs/retry', { queue, status: ['failed', 'queued'] }, 422, '22023', /^status: retry acts on failed, cancelled or timed_out jobs, got "queued"$/);
  await bad('/v1/jobs/retry', { queue, status: [] }, 422, '22023', /^status must be a string or a non-empty array of strings$/);
  await bad('/v1/jobs/retry', { queue, status: [1] }, 422, '22023', /^status must be a string or an array of strings$/);
  await bad('/v1/jobs/stop', { queue: 5 }, 422, '22023', /^queue must be a string$/);
  await bad('/v1/jobs/stop', { queue, kind: ['a'] }, 422, '22023', /^kind must be a string$/);
  await bad('/v1/jobs/stop', { queue: `${queue}\u0000` }, 422, '22021', /^queue must not contain NUL/);
  await bad('/v1/jobs/stop', { queue, limit: 0 }, 422, '22003', /^limit must be an integer from 1 to 500$/);
  await bad('/v1/jobs/stop', { queue, limit: 501 }, 422, '22003', /^limit must be an integer from 1 to 500$/);
  await bad('/v1/jobs/stop', { queue, limit: 2.5 }, 422, '22023', /^limit must be an integer from 1 to 500$/);
  await bad('/v1/jobs/stop', { queue, limit: '2' }, 422, '22023', /^limit must be an integer from 1 to 500$/);
  await bad('/v1/jobs/stop', { queue, after: -1 }, 422, '22003', /^after must be an integer from 0 to 9223372036854775807$/);
  await bad('/v1/jobs/stop', `{"queue": "${queue}", "after": 9223372036854775808}`, 422, '22003', /^after must be an integer/);
  await bad('/v1/jobs/stop', { queue, owner: 'x' }, 400, '08P01', /^unknown field "owner"$/);
  await bad('/v1/jobs/stop', `{"queue": "${queue}", "queue": "other"}`, 400, '08P01', /duplicate key "queue"/);
  await bad('/v1/jobs/stop', [queue], 400, '08P01', /^request body must be a JSON object$/);
  await bad('/v1/jobs/stop', '{"queue":', 400, '08P01', /^request body is not valid JSON/);
  const get = await api('GET', '/v1/jobs/stop', { token: A });
  assert.equal(get.status, 405, get.text);
  assert.equal(get.headers.get('allow'), 'POST');
  const query = await api('POST', `/v1/jobs/retry?queue=${queue}`, { token: A, body: { queue } });
  assert.equal(query.status, 400, query.text);
  assert.equal(statuses(queue), before);
  // 2.0 and 1e2 are whole numbers, as for submit's integers
  const whole = await api('POST', '/v1/jobs/retry', { token: A, raw: `{"queue": "${queue}", "limit": 2.0, "after": 1e2}` });
  assert.equal(whole.status, 200, whole.text);
});
