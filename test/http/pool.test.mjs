// The gateway's pool of database connections is shared fairly: while every
// connection is busy, requests wait in one queue per role and a freed
// connection goes to the roles in turn.  One tenant's flood of requests
// (or of token-less /metrics scrapes) held another tenant's request behind
// the whole flood: a thousand 83 ms requests, sent and abandoned, kept
// tenant B waiting 70 s.  And a role may have at most 256 requests
// waiting: the next gets 429 (53400).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
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

// Within one role, its ordinary requests go before its event streams'
// reads: a burst of stream opens (every browser of a token reconnecting
// after a gateway restart) queued each open's first read ahead of the
// role's `GET /v1/jobs/ID`, which waited for all of them (bench/README.md,
// the fifty-fifth round).  Here 300 opens of 300 jobs, each with one event,
// wait behind the pool's only connection, then one GET of the same token.
test('a role\'s request is served before its 300 waiting stream reads, and every stream still gets its event', { timeout: 90000 }, async (t) => {
  const gw = await startGateway(0, ['--pool', '1']);
  const sockets = [];
  let locker;
  try {
    const most = Number(/max_connections=(\d+)/.exec(gw.log())?.[1] ?? 0);
    if (most < 2 * 300 + 16) {
      t.skip(`the gateway may hold ${most} connections here (its descriptor limit)`);
      return;
    }
    const queue = uniq('burst');
    const jobs = psql(`SET ROLE tenant_a; SELECT string_agg(bgexec.submit('noop', '{}', '${queue}')::text, ',') FROM generate_series(1, 300)`)
      .split(',').map(Number);
    assert.equal(psql(`SELECT count(*) FROM bgexec.claim('http-test', ARRAY['${queue}'], 300, '60 s')`), '300'); // seq 1 each
    const { body: { id: other } } = await api('POST', '/v1/jobs', { token: A, base: gw.url, body: { kind: 'noop', queue: uniq('lock') } });
    const { body: { id: target } } = await api('POST', '/v1/jobs', { token: A, base: gw.url, body: { kind: 'noop', queue: uniq('get') } });
    // Held until the GET waits too (the holder ended below), however slow
    // the host: a lock that timed out first would serve the streams first.
    locker = await holdRow(other, 120);
    // A's stop takes the only connection and waits on the lock.
    const stop = api('POST', `/v1/jobs/${other}/stop`, { token: A, base: gw.url });
    await untilBlocked();
    const got = new Array(jobs.length).fill('');
    jobs.forEach((job, i) => {
      const s = net.connect(gw.port, '127.0.0.1');
      s.setEncoding('utf8');
      s.on('data', (d) => { got[i] += d; });
      s.on('error', () => {});
      s.write(`GET /v1/jobs/${job}/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${A}\r\n\r\n`);
      sockets.push(s);
    });
    await sleep(1500); // every open's first read waiting
    let ahead = -1;
    const get = api('GET', `/v1/jobs/${target}`, { token: A, base: gw.url }).then((r) => {
      ahead = got.filter((g) => g.includes('\nid: 1\n')).length;
      return r;
    });
    // The GET parsed and waiting before the connection is freed: a loaded
    // host (load 12) took more than 300 ms to read it behind 300 opens.
    await sleep(2000);
    psql(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
           WHERE query LIKE '%bgexec.job WHERE id = ${other} FOR UPDATE%' AND pid <> pg_backend_pid()`);
    assert.equal((await stop).status, 200);
    assert.equal((await get).status, 200);
    // The stop, then the GET; the streams' reads after it.
    assert.ok(ahead <= 30, `${ahead} of 300 streams had sent their event before the GET was answered`);
    for (let i = 0; i < 300 && got.some((g) => !g.includes('\nid: 1\n')); i++) await sleep(100);
    assert.equal(got.filter((g) => g.includes('\nid: 1\n')).length, 300, 'streams that sent seq 1');
    const metrics = (await api('GET', '/metrics', { base: gw.url })).text;
    assert.match(metrics, /^bgexec_gateway_pool_waiting\{class="request"\} 0$/m);
    assert.match(metrics, /^bgexec_gateway_pool_waiting\{class="stream"\} 0$/m);
  } finally {
    locker?.kill('SIGKILL');
    for (const s of sockets) s.destroy();
    gw.kill();
  }
});
