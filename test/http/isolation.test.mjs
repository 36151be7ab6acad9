// Tenant isolation: each token acts as its role, row-level security does the rest.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { api, psql, uniq, A, B } from './lib.mjs';

test('token B cannot see, list, stop, follow or dedupe against A\'s jobs', async () => {
  const queue = uniq('iso');
  const key = uniq('shared-key');
  const a = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue, idempotency_key: key } });
  assert.equal(a.status, 201);
  const id = a.body.id;
  assert.equal((await api('GET', `/v1/jobs/${id}`, { token: B })).status, 404);
  const list = await api('GET', `/v1/jobs?queue=${queue}`, { token: B });
  assert.deepEqual(list.body.jobs, []);
  for (const action of ['stop', 'resume', 'retry']) {
    const r = await api('POST', `/v1/jobs/${id}/${action}`, { token: B });
    assert.equal(r.status, 404, action);
    assert.equal(r.body.error.sqlstate, 'P0002');
  }
  assert.equal((await api('GET', `/v1/jobs/${id}/events`, { token: B })).status, 404);
  assert.equal(psql(`SELECT status FROM bgexec.job WHERE id = ${id}`), 'queued');
  // Same idempotency key under another tenant: a new job of B's own.
  const b = await api('POST', '/v1/jobs', { token: B, body: { kind: 'noop', queue, idempotency_key: key } });
  assert.equal(b.status, 201);
  assert.notEqual(b.body.id, id);
  assert.equal(psql(`SELECT owner FROM bgexec.job WHERE id = ${b.body.id}`), 'tenant_b');
  assert.deepEqual((await api('GET', `/v1/jobs?queue=${queue}`, { token: A })).body.jobs.map((j) => j.id), [id]);
});
