// The gateway's pool of database connections is shared fairly: while every
// connection is busy, requests wait in one queue per role and a freed
// connection goes to the roles in turn.  One tenant's flood of requests
// (or of token-less /metrics scrapes) held another tenant's request behind
// the whole flood: a thousand 83 ms requests, sent and abandoned, kept
// tenant B waiting 70 s.  And a role may have at most 256 requests
// waiting: the next gets 429 (53400).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { api, holdRow, psql, startGateway, sleep, uniq, A, B } from './lib.mjs';

// Until the gateway's only connection waits on the lock (its stop blocked).
async function untilBlocked() {
  for (let i = 0; i < 50 && psql(`SELECT count(*) FROM pg_locks WHERE NOT granted`) === '0'; i++) await sleep(100);
}

test('a tenant\'s request waits one turn behind another tenant\'s flood, not the whole flood', { timeout: 60000 }, async () => {
  const gw = await startGateway(0, ['--pool', '1']);
  let locker;
  try {
    const queue = uniq('fair');
    const { body: { id } } = await api('POST', '/v1/jobs', { token: A, base: gw.url, body: { kind: 'noop', queue } });
    const { body: { id: idB } } = await api('POST', '/v1/jobs', { token: B, base: gw.url, body: { kind: 'noop', queue } });
    locker = await holdRow(id, 2);
    // A's stop takes the only connection and waits on the lock.
    const done = [];
    const stop = api('POST', `/v1/jobs/${id}/stop`, { token: A, base: gw.url }).then((r) => { done.push('stop'); return r; });
    await untilBlocked();
    // A's flood queues behind it, then B's one request.
    const flood = [];
    for (let i = 0; i < 40; i++)
      flood.push(api('GET', `/v1/jobs/${id}`, { token: A, base: gw.url }).then((r) => { done.push('a'); return r; }));
    await sleep(500);
    const b = api('GET', `/v1/jobs/${idB}`, { token: B, base: gw.url }).then((r) => { done.push('b'); return r; });
    const results = await Promise.all([stop, ...flood, b]);
    for (const r of results) assert.equal(r.status, 200, r.text);
    // The stop, then A's oldest (A's turn came first), then B's.
    assert.ok(done.indexOf('b') <= 2, `B's request answered ${done.indexOf('b') + 1}th of ${done.length}`);
  } finally {
    locker?.kill('SIGKILL');
    gw.kill();
  }
});

test('a role with 256 requests waiting for a connection gets 429 (53400) for more; another role does not', { timeout: 60000 }, async () => {
  const gw = await startGateway(0, ['--pool', '1']);
  let locker;
  try {
    const queue = uniq('cap');
    const { body: { id } } = await api('POST', '/v1/jobs', { token: A, base: gw.url, body: { kind: 'noop', queue } });
    locker = await holdRow(id, 3);
    const stop = api('POST', `/v1/jobs/${id}/stop`, { token: A, base: gw.url });
    await untilBlocked();
    const flood = [];
    for (let i = 0; i < 300; i++) flood.push(api('GET', `/v1/jobs/${id}`, { token: A, base: gw.url }));
    await sleep(1000);
    const b = api('GET', '/v1/queues', { token: B, base: gw.url });
    const results = await Promise.all(flood);
    const refused = results.filter((r) => r.status === 429);
    assert.equal(refused.length, 300 - 256, `${refused.length} refused`);
    assert.equal(results.filter((r) => r.status === 200).length, 256);
    assert.equal(refused[0].body.error.sqlstate, '53400');
    assert.equal(refused[0].body.error.message, '256 requests of this role are already waiting for a database connection');
    assert.equal(refused[0].headers.get('retry-after'), '5');
    assert.equal((await b).status, 200);
    assert.equal((await stop).status, 200);
  } finally {
    locker?.kill('SIGKILL');
    gw.kill();
  }
});
