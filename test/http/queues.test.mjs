// POST /v1/queues/{name}/pause|resume: bgexec.configure_queue over HTTP.
// It is not granted to clients, so a tenant's token is refused (403) and
// changes nothing; a token mapped to an administrator's role pauses and
// resumes, answered with the queue's settings.  Bad paths, methods, queries
// and bodies are refused as on the other routes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { api, psql, uniq, startGateway, A } from './lib.mjs';

test('queues: an administrator pauses and resumes a queue; a tenant is refused', async (t) => {
  const tokens = `${process.env.BGEXEC_WORK}/${uniq('admin-tokens')}.json`;
  writeFileSync(tokens, JSON.stringify({ 'token-a': 'tenant_a', 'token-admin': 'postgres' }));
  const gw = await startGateway(0, ['--tokens', tokens]);
  t.after(() => gw.kill());
  const queue = uniq('pq');
  const admin = (method, path, opts = {}) => api(method, path, { token: 'token-admin', base: gw.url, ...opts });
  const tenant = (method, path, opts = {}) => api(method, path, { token: A, base: gw.url, ...opts });
  const row = () => psql(`SELECT paused FROM bgexec.queue WHERE name = '${queue}'`);
  assert.equal((await tenant('POST', '/v1/jobs', { body: { kind: 'noop', queue } })).status, 201);

  const paused = await admin('POST', `/v1/queues/${queue}/pause`);
  assert.equal(paused.status, 200, paused.text);
  assert.deepEqual(paused.body, { name: queue, paused: true, max_queued: null, max_running: null,
    max_running_per_key: null, retry_base: '00:00:01', retry_cap: '00:10:00', rate_limit: null,
    rate_period: null });
  // paused: the queue's job is not claimed, and GET /v1/queues says so
  assert.equal(psql(`SELECT count(*) FROM bgexec.claim('http-q', '{${queue}}', 1)`), '0');
  const listed = (await tenant('GET', '/v1/queues')).body.queues.find((q) => q.queue === queue);
  assert.equal(listed.paused, true);
  // a tenant cannot resume it (configure_queue is not granted to clients)
  const refused = await tenant('POST', `/v1/queues/${queue}/resume`);
  assert.equal(refused.status, 403, refused.text);
  assert.equal(refused.body.error.sqlstate, '42501');
  assert.match(refused.body.error.message, /permission denied for function configure_queue/);
  assert.equal(row(), 't');

  const resumed = await admin('POST', `/v1/queues/${queue}/resume`);
  assert.equal(resumed.status, 200, resumed.text);
  assert.equal(resumed.body.paused, false);
  assert.equal(row(), 'f');
  assert.equal(psql(`SELECT count(*) FROM bgexec.claim('http-q', '{${queue}}', 1)`), '1');
  // and a tenant cannot pause it either
  assert.equal((await tenant('POST', `/v1/queues/${queue}/pause`)).status, 403);
  assert.equal(row(), 'f');

  // A name is percent-decoded (':' is escaped by encodeURIComponent).
  const colon = `${queue}:x`;
  const c = await admin('POST', `/v1/queues/${encodeURIComponent(colon)}/pause`);
  assert.equal(c.status, 200, c.text);
  assert.equal(c.body.name, colon);

  // Bad input changes nothing.
  const before = psql('SELECT count(*) FROM bgexec.queue');
  const bad = async (method, path, status, sqlstate, message, opts = {}) => {
    const r = await admin(method, path, opts);
    assert.equal(r.status, status, `${method} ${path}: ${r.text}`);
    assert.equal(r.body.error.sqlstate, sqlstate, `${method} ${path}: ${r.text}`);
    if (message) assert.match(r.body.error.message, message, `${method} ${path}`);
    return r;
  };
  assert.equal((await bad('GET', `/v1/queues/${queue}/pause`, 405, '08P01')).headers.get('allow'), 'POST');
  await bad('POST', `/v1/queues/${queue}/stop`, 404, 'P0002');
  await bad('POST', `/v1/queues/${queue}`, 404, 'P0002');
  await bad('POST', `/v1/queues/${queue}/pause?now=1`, 400, '08P01', /now/);
  await bad('POST', `/v1/queues/${queue}/pause`, 400, '08P01', null, { body: { paused: true } });
  await bad('POST', '/v1/queues/bad%20name!/pause', 422, '23514', /^name must be 1-63 characters: ASCII letters/);
  await bad('POST', '/v1/queues/a%00b/pause', 422, '22021', /^name must not contain NUL/);
  await bad('POST', '/v1/queues/%FF/pause', 400, '08P01', /not valid UTF-8/);
  assert.equal(psql('SELECT count(*) FROM bgexec.queue'), before);
  assert.equal(row(), 'f');
  // no token: 401, whatever the path
  assert.equal((await api('POST', `/v1/queues/${queue}/pause`, { base: gw.url })).status, 401);
  assert.equal(row(), 'f');
});
