// POST /v1/jobs/{id}/reschedule: bgexec.reschedule over HTTP, shaped as the
// other job actions (stop, resume, retry): 200 with the job's run_after, 409
// (55000) for a job not queued, 404 for one that is another tenant's or
// none, a bad body 400 (not JSON, unknown field) or 422 (a field's type or
// value, named), and nothing changed by a refused call.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { api, psql, uniq, A, B } from './lib.mjs';

const iso = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/;
const row = (id) => psql(`SELECT priority || ' ' || (run_after > now() + interval '1 hour') FROM bgexec.job WHERE id = ${id}`);

test('reschedule moves a queued job\'s run_after and priority, answers its run_after; the event says so', async () => {
  const queue = uniq('rs');
  const { body: { id } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue, run_after: '+1d' } });
  assert.equal(row(id), '0 true');
  let r = await api('POST', `/v1/jobs/${id}/reschedule`, { token: A, body: { run_after: '+0' } });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.body.id, id);
  assert.match(r.body.run_after, iso);
  assert.equal(row(id), '0 false');
  r = await api('POST', `/v1/jobs/${id}/reschedule`, { token: A, body: { priority: 7 } });
  assert.equal(r.status, 200, r.text);
  assert.equal(row(id), '7 false');
  r = await api('POST', `/v1/jobs/${id}/reschedule`, { token: A, body: { run_after: '2999-01-02T03:04:05+01:00', priority: -3 } });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.body.run_after, '2999-01-02T02:04:05.000000Z');
  assert.equal(row(id), '-3 true');
  // null is left out, as in a submit's body
  r = await api('POST', `/v1/jobs/${id}/reschedule`, { token: A, body: { run_after: null, priority: 2 } });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.body.run_after, '2999-01-02T02:04:05.000000Z');
  assert.equal(row(id), '2 true');
  assert.equal(psql(`SELECT count(*) FROM bgexec.job_event WHERE job_id = ${id} AND kind = 'rescheduled'`), '4');
  assert.equal(psql(`SELECT data->>'by' FROM bgexec.job_event WHERE job_id = ${id} AND kind = 'rescheduled' ORDER BY seq DESC LIMIT 1`), 'tenant_a');
});

test('reschedule refused: 409 not queued, 404 another tenant\'s or none, 400/422 a bad body; nothing changed', async () => {
  const queue = uniq('rs');
  const { body: { id } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue, run_after: '+1d', priority: 1 } });
  const cases = [
    // [token, path id, body (raw text), status, sqlstate, message]
    [B, id, '{"priority": 5}', 404, 'P0002', /^job \d+ does not exist/],
    [A, 999999999, '{"priority": 5}', 404, 'P0002', /does not exist/],
    [A, id, '{oops', 400, '08P01', /^request body is not valid JSON/],
    [A, id, '[1]', 400, '08P01', /^request body must be a JSON object$/],
    [A, id, '{"priority": 5, "queue": "x"}', 400, '08P01', /^unknown field "queue"$/],
    [A, id, '{"priority": 5, "priority": 6}', 400, '08P01', /duplicate key "priority"/],
    [A, id, '{}', 422, '22023', /^run_after or priority must be given$/],
    [A, id, '', 422, '22023', /^run_after or priority must be given$/],
    [A, id, '{"run_after": null, "priority": null}', 422, '22023', /^run_after or priority must be given$/],
    [A, id, '{"priority": "5"}', 422, '22023', /^priority must be an integer$/],
    [A, id, '{"priority": 1.5}', 422, '22023', /^priority must be an integer$/],
    [A, id, '{"priority": 2147483648}', 422, '22003', /^priority must be an integer from -2147483648 to 2147483647$/],
    [A, id, '{"run_after": 5}', 422, '22023', /^run_after must be a string$/],
    [A, id, '{"run_after": "tomorrow"}', 422, '22007', /^run_after must be an RFC 3339 time with an offset or Z .*: was "tomorrow"$/],
    [A, id, '{"run_after": "2026-12-08T03:00:00"}', 422, '22007', /^run_after must be an RFC 3339 time/],
    [A, id, '{"run_after": "+101y"}', 422, '22007', /^run_after must be an RFC 3339 time/],
    [A, id, '{"run_after": "+1h\\u0000"}', 422, '22021', /^run_after must not contain NUL/],
  ];
  for (const [token, jid, raw, status, state, message] of cases) {
    const r = await api('POST', `/v1/jobs/${jid}/reschedule`, { token, raw });
    assert.equal(r.status, status, `${raw}: ${r.text}`);
    assert.equal(r.body.error.sqlstate, state, raw);
    assert.match(r.body.error.message, message, raw);
    assert.doesNotMatch(r.text, /CONTEXT|PL\/pgSQL/, raw);
  }
  assert.equal(row(id), '1 true');
  assert.equal(psql(`SELECT count(*) FROM bgexec.job_event WHERE job_id = ${id} AND kind = 'rescheduled'`), '0');
  // not queued: 409 naming the status, as resume and retry answer a job they cannot act on
  assert.equal((await api('POST', `/v1/jobs/${id}/stop`, { token: A })).status, 200);
  const r = await api('POST', `/v1/jobs/${id}/reschedule`, { token: A, body: { priority: 5 } });
  assert.equal(r.status, 409, r.text);
  assert.equal(r.body.error.sqlstate, '55000');
  assert.equal(r.body.error.message, `job ${id} is cancelled: only a queued job can be rescheduled`);
  assert.equal(r.body.error.detail, 'status was cancelled');
  assert.equal(psql(`SELECT priority || ' ' || status FROM bgexec.job WHERE id = ${id}`), '1 cancelled');
  // the route's method, query and path: 405 with Allow, 400, 404
  let x = await api('GET', `/v1/jobs/${id}/reschedule`, { token: A });
  assert.equal(x.status, 405);
  assert.equal(x.headers.get('allow'), 'POST');
  x = await api('POST', `/v1/jobs/${id}/reschedule?priority=5`, { token: A, body: { priority: 5 } });
  assert.equal(x.status, 400);
  assert.match(x.body.error.message, /^unknown query parameter "priority"/);
  x = await api('POST', '/v1/jobs/abc/reschedule', { token: A, body: { priority: 5 } });
  assert.equal(x.status, 404);
  x = await api('POST', `/v1/jobs/${id}/reschedule`, { body: { priority: 5 } });
  assert.equal(x.status, 401);
});
