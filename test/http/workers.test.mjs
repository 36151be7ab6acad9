// GET /v1/workers: the live workers (bgexec.worker_stats), ?all=true the
// stopped and silent ones too; bad input refused, nothing changed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { api, psql, uniq, A } from './lib.mjs';

test('workers: live ones, all of them, bad input', async () => {
  const live = uniq('wk-live'), stopped = uniq('wk-stopped');
  psql(`SELECT bgexec.register_worker('${live}', '{q1,q2}', 3, '{"host": "h1", "pid": 4242}')`);
  psql(`SELECT bgexec.register_worker('${stopped}', '{q3}', 1, '{"host": "h2", "pid": 4343}')`);
  psql(`SELECT bgexec.deregister_worker('${stopped}')`);

  const r = await api('GET', '/v1/workers', { token: A });
  assert.equal(r.status, 200, r.text);
  const w = r.body.workers.find((x) => x.id === live);
  assert.ok(w, r.text);
  assert.deepEqual([w.host, w.pid, w.queues, w.concurrency, w.in_flight, w.alive, w.stopped_at],
    ['h1', 4242, ['q1', 'q2'], 3, 0, true, null]);
  assert.ok(!r.body.workers.some((x) => x.id === stopped), 'a stopped worker is listed');

  const all = await api('GET', '/v1/workers?all=true', { token: A });
  assert.equal(all.status, 200, all.text);
  const s = all.body.workers.find((x) => x.id === stopped);
  assert.ok(s && s.alive === false && s.stopped_at !== null, all.text);
  assert.ok(all.body.workers.some((x) => x.id === live));
  const none = await api('GET', '/v1/workers?all=false', { token: A });
  assert.ok(!none.body.workers.some((x) => x.id === stopped));

  const bad = await api('GET', '/v1/workers?all=yes', { token: A });
  assert.equal(bad.status, 422, bad.text);
  assert.match(bad.body.error.message, /all must be true or false/);
  assert.equal((await api('GET', '/v1/workers?alive=1', { token: A })).status, 400);
  const post = await api('POST', '/v1/workers', { token: A, body: {} });
  assert.equal(post.status, 405);
  assert.equal(post.headers.get('allow'), 'GET, HEAD');
  assert.equal((await api('GET', '/v1/workers')).status, 401);
  psql(`DELETE FROM bgexec.worker WHERE id IN ('${live}', '${stopped}')`);
});
