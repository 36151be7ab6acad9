// Connections are bounded by the gateway's file descriptors: idle or slow
// connections give way to new ones instead of starving them (accept failing
// with EMFILE), and a new connection nothing can give way to gets 503.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { api, claim, finish, sleep, startGateway, uniq, A, B } from './lib.mjs';

// A gateway limited to `nofile` descriptors (soft and hard: it cannot raise its own).
async function smallGateway(nofile) {
  return startGateway(0, [], '/metrics', { wrap: ['prlimit', `--nofile=${nofile}:${nofile}`] });
}

async function connect(port, bytes) {
  const s = net.connect(port, '127.0.0.1');
  s.on('error', () => {});
  await once(s, 'connect');
  if (bytes) s.write(bytes);
  return s;
}

// n event streams of job `id` on gw, each a connection that never reads.
async function openStreams(gw, id, n, socks, token = A) {
  for (let i = 0; i < n; i++) {
    socks.push(await connect(gw.port, `GET /v1/jobs/${id}/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n\r\n`));
  }
}

// A job of each of the two tenants: a role may hold at most half the
// connection limit in event streams, so every connection takes both.
async function twoJobs(gw, queue) {
  const a = await api('POST', '/v1/jobs', { token: A, base: gw.url, body: { kind: 'noop', queue } });
  const b = await api('POST', '/v1/jobs', { token: B, base: gw.url, body: { kind: 'noop', queue } });
  return [a.body.id, b.body.id];
}

// GET /v1/queues every 250 ms until it is not 503, for `ms` at most (a
// request sent by then counts): the time, not a number of tries, so that a
// slow machine's slow requests do not stretch the wait.
async function statusOnceFree(gw, ms) {
  const until = Date.now() + ms;
  let status = 503;
  while (status === 503 && Date.now() < until) {
    await sleep(250);
    status = (await api('GET', '/v1/queues', { token: A, base: gw.url })).status;
  }
  return status;
}

test('idle and half-sent connections past the descriptor limit give way to new requests', { timeout: 30000 }, async () => {
  const gw = await smallGateway(128);
  const socks = [];
  try {
    // 150 connections: silent ones, and slowloris ones that sent half a header.
    for (let i = 0; i < 150; i++) socks.push(await connect(gw.port, i % 2 ? 'GET /v1/queues HTTP/1.1\r\nHost: x\r\n' : ''));
    await sleep(300);
    for (let i = 0; i < 3; i++) {
      const r = await api('GET', '/v1/queues', { token: A, base: gw.url, headers: { Connection: 'close' } });
      assert.equal(r.status, 200, r.text);
    }
  } finally {
    for (const s of socks) s.destroy();
    gw.kill();
  }
});

test('past the limit with every connection busy streaming, a new one gets 503 JSON at once', { timeout: 30000 }, async () => {
  const gw = await smallGateway(128);
  const socks = [];
  try {
    const queue = uniq('conn-limit');
    const [id, idB] = await twoJobs(gw, queue);
    // Event streams are being served, not waiting for a request: none gives way.
    await openStreams(gw, id, 60, socks);
    await openStreams(gw, idB, 60, socks, B);
    await sleep(500);
    const r = await api('GET', '/v1/queues', { token: A, base: gw.url });
    assert.equal(r.status, 503, r.text);
    assert.equal(r.body.error.sqlstate, '53300');
    assert.equal(r.headers.get('retry-after'), '5');
    // The 503s given meanwhile (to clients that do not read) did not run
    // the process out of descriptors: a few at once, the rest closed.
    assert.doesNotMatch(gw.log(), /Too many open files/);
    // The job ends, so do its streams (each closing within 2 s; they were
    // held, the readers never leaving), and connections are free again.
    for (let i = 0; i < 2; i++) {
      const { job, lease } = claim(queue);
      finish(job, lease, 'completed');
    }
    assert.equal(await statusOnceFree(gw, 10000), 200);
  } finally {
    for (const s of socks) s.destroy();
    gw.kill();
  }
});

test('an event stream whose reader left ends at once, not at its next keepalive', { timeout: 30000 }, async () => {
  const gw = await smallGateway(128);
  const socks = [];
  try {
    const queue = uniq('conn-left');
    const { body: { id } } = await api('POST', '/v1/jobs', { token: A, base: gw.url, body: { kind: 'noop', queue } });
    const opened = Date.now();
    await openStreams(gw, id, 100, socks);
    await sleep(500);
    assert.equal((await api('GET', '/v1/queues', { token: A, base: gw.url })).status, 503);
    // The readers go: their streams, and the connections, end within a
    // moment (they were held, polling the database every 3 s, until a
    // keepalive write failed, 15 to 30 s after the stream's last write, its
    // opening).  Up to 13 s from the first opening (some 11 s from here):
    // room for a slow machine, short of the first keepalive.
    for (const s of socks.splice(0)) s.destroy();
    assert.equal(await statusOnceFree(gw, opened + 13000 - Date.now()), 200);
  } finally {
    for (const s of socks) s.destroy();
    gw.kill();
  }
});

test('the limit is exact: max_connections streams being served, and the next connection gets 503', { timeout: 30000 }, async () => {
  const gw = await smallGateway(128);
  const socks = [];
  try {
    const max = Number(/max_connections=(\d+)/.exec(gw.log())[1]);
    assert.equal(max, 128 - 4 - 32); // all but --pool + 32 descriptors
    const queue = uniq('conn-exact');
    const [id, idB] = await twoJobs(gw, queue);
    await openStreams(gw, id, max / 2, socks);
    await openStreams(gw, idB, max / 2, socks, B);
    await sleep(500);
    const r = await api('GET', '/v1/queues', { token: A, base: gw.url, headers: { Connection: 'close' } });
    assert.equal(r.status, 503, r.text);
    assert.equal(r.body.error.sqlstate, '53300');
    // One stream fewer: the request is served.
    socks.pop().destroy();
    assert.equal(await statusOnceFree(gw, 10000), 200);
    for (let i = 0; i < 2; i++) {
      const { job, lease } = claim(queue);
      finish(job, lease, 'completed');
    }
  } finally {
    for (const s of socks) s.destroy();
    gw.kill();
  }
});

test('a role holds at most half the connection limit in event streams; past it 429, and other roles are served', { timeout: 30000 }, async () => {
  const gw = await smallGateway(128);
  const socks = [];
  try {
    const max = Number(/max_connections=(\d+)/.exec(gw.log())[1]);
    const queue = uniq('conn-role');
    const { body: { id } } = await api('POST', '/v1/jobs', { token: A, base: gw.url, body: { kind: 'noop', queue } });
    // Streams were never shed: one tenant's took every connection, and
    // every other tenant's request got 503.
    await openStreams(gw, id, max / 2, socks);
    await sleep(500);
    const r = await api('GET', `/v1/jobs/${id}/events`, { token: A, base: gw.url });
    assert.equal(r.status, 429, r.text);
    assert.equal(r.body.error.sqlstate, '53400');
    assert.equal(r.body.error.message, `${max / 2} event streams of this role are open, half the gateway's connection limit`);
    assert.equal(r.headers.get('retry-after'), '5');
    assert.equal((await api('GET', '/v1/queues', { token: B, base: gw.url })).status, 200);
    // One of them ends: A may open another.
    socks.pop().destroy();
    let status = 429;
    for (let i = 0; i < 40 && status === 429; i++) {
      await sleep(250);
      const ctl = new AbortController();
      const res = await fetch(`${gw.url}/v1/jobs/${id}/events`, { headers: { Authorization: `Bearer ${A}` }, signal: ctl.signal });
      status = res.status;
      ctl.abort();
    }
    assert.equal(status, 200);
    const { lease } = claim(queue);
    finish(id, lease, 'completed');
  } finally {
    for (const s of socks) s.destroy();
    gw.kill();
  }
});
