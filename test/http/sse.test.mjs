// Server-Sent Events: every seq exactly once, in order, across a gateway
// kill -9 and restart in the middle of the stream (EventSource reconnects with
// Last-Event-ID by itself).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventSource } from 'eventsource';
import { readFileSync } from 'node:fs';
import { once } from 'node:events';
import net from 'node:net';
import { spawn } from 'node:child_process';
import { api, psql, claim, appendEvent, finish, startGateway, sleep, uniq, A, B, BASE } from './lib.mjs';

const KINDS = ['started', 'step_started', 'step_completed', 'step_failed', 'log', 'progress', 'stop_requested',
  'suspended', 'resumed', 'retry_scheduled', 'worker_lost', 'completed', 'failed', 'cancelled', 'timed_out'];

// Follows a job; resolves with the events seen when the stream reaches `last`.
function follow(url, id, token, until) {
  const seen = [];
  const es = new EventSource(`${url}/v1/jobs/${id}/events`, {
    fetch: (input, init) => fetch(input, { ...init, headers: { ...init.headers, Authorization: `Bearer ${token}` } }),
  });
  const done = new Promise((resolve) => {
    for (const k of KINDS) {
      es.addEventListener(k, (m) => {
        const ev = JSON.parse(m.data);
        assert.equal(String(ev.seq), m.lastEventId);
        assert.equal(ev.kind, m.type);
        seen.push(ev);
        if (until(ev)) { es.close(); resolve(seen); }
      });
    }
  });
  return { es, seen, done };
}

test('replay then live tail, no gap and no duplicate, across a gateway restart', { timeout: 60000 }, async () => {
  let gw = await startGateway();
  const { port } = gw;  // the restart below binds the same address
  try {
    const queue = uniq('sse');
    const { body: { id } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } });
    const { lease } = claim(queue); // seq 1: started
    for (let i = 0; i < 5; i++) appendEvent(id, lease, 'log', { line: `before ${i}` }); // seq 2..6 (replayed)
    const f = follow(gw.url, id, A, (ev) => ev.kind === 'completed');
    let last = 6;
    for (let i = 0; i < 10; i++) { last = appendEvent(id, lease, 'progress', { i }); await sleep(50); }
    await sleep(300);
    gw.kill('SIGKILL'); // mid-stream
    for (let i = 0; i < 10; i++) { last = appendEvent(id, lease, 'log', { line: `while down ${i}` }); }
    await sleep(300);
    gw = await startGateway(port);
    for (let i = 0; i < 10; i++) { last = appendEvent(id, lease, 'progress', { j: i }); await sleep(30); }
    // A burst: coalesced notifications must still deliver every event.
    for (let i = 0; i < 20; i++) last = appendEvent(id, lease, 'log', { burst: i });
    assert.equal(finish(id, lease, 'completed', { ok: true }), 'completed');
    last += 1;
    const seen = await f.done;
    assert.deepEqual(seen.map((e) => e.seq), Array.from({ length: last }, (_, i) => i + 1));
    assert.equal(seen.at(-1).kind, 'completed');
    assert.deepEqual(seen.at(-1).data, { result: { ok: true } });
    assert.equal(seen[0].job_id, id);
  } finally {
    gw.kill();
  }
});

test('resume point via ?after= and Last-Event-ID; ended job answers 204; ?token= works', async () => {
  const queue = uniq('sse2');
  const { body: { id } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } });
  const { lease } = claim(queue);
  appendEvent(id, lease, 'log', { a: 1 });
  finish(id, lease, 'completed', {});
  let r = await fetch(`${BASE}/v1/jobs/${id}/events?token=${A}&after=1`);
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /text\/event-stream/);
  const text = await r.text();
  assert.ok(text.startsWith('retry: 2000\n'));
  assert.deepEqual([...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1])), [2, 3]);
  assert.match(text, /event: completed\ndata: \{/);
  r = await fetch(`${BASE}/v1/jobs/${id}/events`, { headers: { Authorization: `Bearer ${A}`, 'Last-Event-ID': '2' } });
  assert.deepEqual([...(await r.text()).matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1])), [3]);
  r = await fetch(`${BASE}/v1/jobs/${id}/events?token=${A}&after=3`);
  assert.equal(r.status, 204);
  assert.equal(r.headers.get('x-content-type-options'), 'nosniff', 'every answer carries nosniff (README)');
  assert.equal(r.headers.get('cache-control'), 'no-store');
  r = await fetch(`${BASE}/v1/jobs/${id}/events?after=1`);
  assert.equal(r.status, 401);
  r = await fetch(`${BASE}/v1/jobs/${id}/events?token=${A}&after=x`);
  assert.equal(r.status, 400);
});

test('a stream ends when the terminal event is the last of a full replay batch (1000 events)', async () => {
  const queue = uniq('sse3');
  const { body: { id } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } });
  const { lease } = claim(queue); // seq 1
  psql(`SELECT count(bgexec.append_event(${id}, ${lease}, 'log', jsonb_build_object('i', i)))
          FROM generate_series(1, 998) i`); // seq 2..999
  assert.equal(finish(id, lease, 'completed', {}), 'completed'); // seq 1000
  // Without an end the stream would idle on; the abort makes that a failure.
  const r = await fetch(`${BASE}/v1/jobs/${id}/events?token=${A}`, { signal: AbortSignal.timeout(8000) });
  assert.equal(r.status, 200);
  const ids = [...(await r.text()).matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
  assert.deepEqual(ids, Array.from({ length: 1000 }, (_, i) => i + 1));
  // Two full batches, and 1000 events after a cursor that is not 0.
  const { body: { id: id2 } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } });
  const { lease: lease2 } = claim(queue);
  psql(`SELECT count(bgexec.append_event(${id2}, ${lease2}, 'log', '{}')) FROM generate_series(1, 1998) i`);
  assert.equal(finish(id2, lease2, 'failed', { retryable: false }), 'failed'); // seq 2000
  for (const [after, n] of [[0, 2000], [1000, 1000]]) {
    const rr = await fetch(`${BASE}/v1/jobs/${id2}/events?token=${A}&after=${after}`, { signal: AbortSignal.timeout(8000) });
    const text = await rr.text();
    assert.equal(text.match(/^id: /gm).length, n, `after=${after}`);
    assert.match(text, /id: 2000\nevent: failed\n/);
  }
});

test('a cursor past the job\'s last event: `rewound` to 0 and the whole log, live job or ended', async () => {
  // The job no longer has the event the reader names: its log was rewound
  // while the reader was away (a failover) or reset (a restore).  It got
  // 400, which EventSource gives up on, and the dashboard's reconnects
  // (?after= its last event) met it for ever.
  const queue = uniq('sse4');
  const { body: { id } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } });
  const { lease } = claim(queue); // seq 1, running
  const headers = (seq) => ({ Authorization: `Bearer ${A}`, 'Last-Event-ID': String(seq) });
  const events = (text) => [...text.matchAll(/^id: (\d+)\nevent: (\w+)\n/gm)].map((m) => `${m[1]} ${m[2]}`);
  let r = await fetch(`${BASE}/v1/jobs/${id}/events`, { headers: headers(50), signal: AbortSignal.timeout(8000) });
  assert.equal(r.status, 200);
  let text = r.text();
  await sleep(300);
  finish(id, lease, 'completed', {}); // seq 2: the stream goes on and ends with the job
  text = await text;
  assert.deepEqual(events(text), ['0 rewound', '1 started', '2 completed']);
  assert.match(text, /^data: \{"after":50,"last_seq":1,"resume":0\}$/m);
  // At the last event: the stream waits, and ends with the job.
  const { body: { id: id2 } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } });
  const { lease: lease2 } = claim(queue);
  r = await fetch(`${BASE}/v1/jobs/${id2}/events`, { headers: headers(1), signal: AbortSignal.timeout(8000) });
  assert.equal(r.status, 200);
  text = r.text();
  await sleep(200);
  finish(id2, lease2, 'completed', {});
  assert.deepEqual([...(await text).matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1])), [2]);
  // Ended: past the end, the whole log and the end; at the end, 204.
  r = await fetch(`${BASE}/v1/jobs/${id2}/events?token=${A}&after=3`, { signal: AbortSignal.timeout(5000) });
  assert.equal(r.status, 200);
  assert.deepEqual(events(await r.text()), ['0 rewound', '1 started', '2 completed']);
  r = await fetch(`${BASE}/v1/jobs/${id2}/events?token=${A}&after=2`);
  assert.equal(r.status, 204);
});

// Peak resident memory of a process, in kB (Linux).
function peakKb(pid) {
  return Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);
}

// Opens a stream of job `id`'s events on gateway `gw` that never reads (the
// gateway's writes block once the socket buffers fill), and watches the
// gateway's peak memory for `rounds` × 200 ms; returns the socket and the
// growth in kB (it stops watching once the growth passes `limitKb`).
async function stalledReader(gw, id, rounds, limitKb) {
  const before = peakKb(gw.proc.pid);
  const { hostname, port } = new URL(gw.url);
  const s = net.connect({ port: Number(port), host: hostname });
  await once(s, 'connect');
  s.pause();
  s.write(`GET /v1/jobs/${id}/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${A}\r\n\r\n`);
  let peak = before;
  for (let i = 0; i < rounds && peak - before < limitKb; i++) {
    await sleep(200);
    peak = peakKb(gw.proc.pid);
  }
  return { sock: s, grewKb: peak - before };
}

test('a long replay is sent batch by batch: a reader that does not read costs the gateway one batch', { timeout: 60000 }, async () => {
  const gw = await startGateway(0);
  const sock = { destroy() {} };
  try {
    const queue = uniq('sse5');
    const { body: { id } } = await api('POST', '/v1/jobs', { token: A, base: gw.url, body: { kind: 'noop', queue } });
    claim(queue); // seq 1
    // 40000 events of 2 kB (80 MB), written directly (append_event is one
    // round trip each) as the superuser may.
    psql(`INSERT INTO bgexec.job_event (job_id, seq, kind, data)
            SELECT ${id}, g, 'log', jsonb_build_object('line', repeat('x', 2000)) FROM generate_series(2, 40001) g`);
    // Holding the whole replay would take well over 80 MB; one batch of
    // 1000 events takes a few.
    const { sock: s, grewKb } = await stalledReader(gw, id, 30, 48 * 1024);
    sock.destroy = () => s.destroy();
    assert.ok(grewKb < 48 * 1024, `the gateway grew by ${Math.round(grewKb / 1024)} MB`);
  } finally {
    sock.destroy();
    gw.kill();
  }
});

test('big events are sent in batches cut by size: all arrive in order, and a reader that does not read costs one batch', { timeout: 60000 }, async () => {
  const gw = await startGateway(0);
  const sock = { destroy() {} };
  try {
    const queue = uniq('sse6');
    const { body: { id } } = await api('POST', '/v1/jobs', { token: A, base: gw.url, body: { kind: 'noop', queue } });
    const { lease } = claim(queue); // seq 1
    // 60 events of 1 MB (a step's output can be that big), then the end.
    psql(`SELECT count(bgexec.append_event(${id}, ${lease}, 'log', jsonb_build_object('i', i, 'line', repeat('x', 1000000))))
            FROM generate_series(2, 61) i`);
    assert.equal(finish(id, lease, 'completed', {}), 'completed'); // seq 62
    // The whole replay is 60 MB of text; a batch is cut after 256 kB.
    const { sock: s, grewKb } = await stalledReader(gw, id, 15, 32 * 1024);
    sock.destroy = () => s.destroy();
    assert.ok(grewKb < 32 * 1024, `the gateway grew by ${Math.round(grewKb / 1024)} MB`);
    s.destroy();
    // A reader that reads gets every event once, in order, and the end.
    const r = await fetch(`${gw.url}/v1/jobs/${id}/events?token=${A}`, { signal: AbortSignal.timeout(30000) });
    assert.equal(r.status, 200);
    const ids = [...(await r.text()).matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
    assert.deepEqual(ids, Array.from({ length: 62 }, (_, i) => i + 1));
  } finally {
    sock.destroy();
    gw.kill();
  }
});

test('a stream whose reader left while it waited for a pool connection runs no replay', { timeout: 60000 }, async () => {
  // One pool connection and a 1 s statement timeout; another session holds
  // job_event locked, so each replay that runs waits out the timeout.
  const gw = await startGateway(0, ['--pool', '1', '--statement-timeout', '1']);
  const locker = { kill() {} };
  const socks = [];
  try {
    const queue = uniq('sse7');
    const { body: { id } } = await api('POST', '/v1/jobs', { token: A, base: gw.url, body: { kind: 'noop', queue } });
    claim(queue); // seq 1
    const p = spawn('psql', ['-X', '-q', '-d', 'postgres', '-c',
      'BEGIN; LOCK TABLE bgexec.job_event IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(12); COMMIT;'], { stdio: 'ignore' });
    locker.kill = () => { try { p.kill('SIGKILL'); } catch { /* gone */ } };
    for (let i = 0; i < 50 && psql(`SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
                                      WHERE c.relname = 'job_event' AND l.mode = 'AccessExclusiveLock' AND l.granted`) === '0'; i++) {
      await sleep(100);
    }
    // Ten readers ask and leave: the first one's replay waits on the lock,
    // the other nine wait for the pool's connection.
    const { hostname, port } = new URL(gw.url);
    for (let i = 0; i < 10; i++) {
      const s = net.connect({ port: Number(port), host: hostname });
      socks.push(s);
      await once(s, 'connect');
      s.write(`GET /v1/jobs/${id}/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${A}\r\n\r\n`);
    }
    await sleep(300);
    for (const s of socks) s.destroy();
    // Queued behind them, a request answers once the first replay has timed
    // out (1 s): the nine others are skipped.  Run, each would hold the
    // connection for its own second.
    const t0 = Date.now();
    const g = await api('GET', `/v1/jobs/${id}`, { token: A, base: gw.url });
    const waited = Date.now() - t0;
    assert.equal(g.status, 200, g.text);
    assert.ok(waited < 5000, `answered after ${waited} ms: the left readers' replays ran`);
  } finally {
    for (const s of socks) s.destroy();
    locker.kill();
    psql(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'BEGIN; LOCK TABLE bgexec.job_event%'`);
    gw.kill();
  }
});

test('Last-Event-ID wins over ?after= (an EventSource reconnecting to a URL that carries ?after=)', async () => {
  const queue = uniq('sse-lei');
  const { body: { id } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } });
  const { lease } = claim(queue); // seq 1
  appendEvent(id, lease, 'log', { a: 1 }); // seq 2
  appendEvent(id, lease, 'log', { a: 2 }); // seq 3
  finish(id, lease, 'completed', {}); // seq 4
  const ids = async (after, lastEventId) => {
    const r = await fetch(`${BASE}/v1/jobs/${id}/events?token=${A}&after=${after}`,
      { headers: { 'Last-Event-ID': String(lastEventId) }, signal: AbortSignal.timeout(8000) });
    assert.equal(r.status, 200);
    return [...(await r.text()).matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
  };
  // The reconnect resumes after what it saw, never replaying it again...
  assert.deepEqual(await ids(0, 2), [3, 4]);
  // ...and never skipping what it has not seen.
  assert.deepEqual(await ids(3, 1), [2, 3, 4]);
  // At the end already: 204, whatever ?after= says.
  const r = await fetch(`${BASE}/v1/jobs/${id}/events?token=${A}&after=1`, { headers: { 'Last-Event-ID': '4' } });
  assert.equal(r.status, 204);
});

test('a stream whose role loses access to the job ends, and the reconnect is refused', { timeout: 30000 }, async () => {
  const queue = uniq('sse-revoke');
  const { body: { id } } = await api('POST', '/v1/jobs', { token: B, body: { kind: 'noop', queue } });
  const ac = new AbortController();
  const res = await fetch(`${BASE}/v1/jobs/${id}/events`, { headers: { Authorization: `Bearer ${B}` }, signal: ac.signal });
  assert.equal(res.status, 200);
  const t0 = Date.now();
  const body = res.text().catch(() => {});  // resolves when the gateway ends the stream
  await sleep(300);
  psql('REVOKE bgexec_client FROM tenant_b');
  try {
    const ended = await Promise.race([body.then(() => true), sleep(10000).then(() => false)]);
    assert.ok(ended, 'the stream stayed open (polling in vain every 3 s) after its role lost access');
    assert.ok(Date.now() - t0 < 8000);
    const again = await fetch(`${BASE}/v1/jobs/${id}/events`, { headers: { Authorization: `Bearer ${B}` } });
    assert.equal(again.status, 403);
  } finally {
    ac.abort();
    psql('GRANT bgexec_client TO tenant_b');
  }
});

test('a stream whose client keeps sending after its request is ended, not read for ever', { timeout: 30000 }, async () => {
  const queue = uniq('sse-junk');
  const { body: { id } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } });
  const { hostname, port } = new URL(BASE);
  const s = net.connect({ port: Number(port), host: hostname });
  await once(s, 'connect');
  s.on('data', () => {});
  s.on('error', () => {});
  s.write(`GET /v1/jobs/${id}/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${A}\r\n\r\n`);
  // A reader sends nothing after its request; this one sends 1 KiB every
  // 10 ms.  The gateway read and dropped it 512 bytes a turn, for ever.
  let closed = false;
  s.on('close', () => { closed = true; });
  const junk = 'x'.repeat(1024);
  for (let i = 0; i < 1500 && !closed; i++) {
    s.write(junk);
    await sleep(10);
  }
  s.destroy();
  assert.ok(closed, 'the stream was still open after 1.5 MB sent after its request');
});

test('the streams of one job share its events query: one per announcement, not one per stream', { timeout: 60000 }, async () => {
  // This gateway's sessions log their statements, so the events queries
  // can be counted in the server's log.
  const conninfo = `host=${process.env.PGHOST} port=${process.env.PGPORT} user=postgres dbname=postgres options=-clog_statement=all`;
  const gw = await startGateway(0, ['--db', conninfo]);
  const socks = [];
  try {
    const queue = uniq('sse-shared');
    const { body: { id } } = await api('POST', '/v1/jobs', { token: A, base: gw.url, body: { kind: 'noop', queue } });
    const { lease } = claim(queue); // seq 1
    const { hostname, port } = new URL(gw.url);
    const got = [];
    for (let i = 0; i < 30; i++) {
      const s = net.connect({ port: Number(port), host: hostname });
      await once(s, 'connect');
      got.push('');
      s.on('data', (d) => { got[i] += d; });
      s.on('error', () => {});
      s.write(`GET /v1/jobs/${id}/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${A}\r\n\r\n`);
      socks.push(s);
    }
    const all = async (text) => {
      for (let i = 0; i < 100 && !got.every((g) => g.includes(text)); i++) await sleep(100);
      assert.ok(got.every((g) => g.includes(text)), `not every stream got ${text}`);
    };
    await all('event: started');
    const logFile = `${process.env.BGEXEC_WORK}/pg/postgres.log`;
    const from = readFileSync(logFile).length;
    appendEvent(id, lease, 'log', { line: 'shared' });
    await all('shared');
    // Each events query's line, then its parameters: $1 the job.
    const lines = readFileSync(logFile).subarray(from).toString().split('\n');
    let queries = 0;
    for (let i = 0; i + 1 < lines.length; i++)
      if (lines[i].includes('bgexec.events(') && lines[i + 1].includes(`$1 = '${id}'`)) queries++;
    // One for the announcement; a stream's own 3 s poll may add one or two.
    assert.ok(queries >= 1 && queries <= 6, `${queries} events queries for 30 streams`);
    finish(id, lease, 'completed');
  } finally {
    for (const s of socks) s.destroy();
    gw.kill();
  }
});
