// Hundreds of event streams on one job: each poll's read of the job row is
// shared, as its events query is, and a read refused for a full pool queue
// is tried again within a second.  Each stream read the row with its own
// query: polling in step, they went past the role's 256 waiting requests
// (53400), and a refused read lost the announcement it was for; with a
// thousand streams some waited a minute and more for an event.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { api, appendEvent, claim, holdRow, psql, sleep, startGateway, uniq, A } from './lib.mjs';

test('400 streams polling one job over one busy connection: no read refused, each gets the event', { timeout: 120000 }, async (t) => {
  const gw = await startGateway(0, ['--pool', '1']);
  const sockets = [];
  let locker;
  try {
    // Room for the streams: a role may open half the gateway's connections.
    const most = Number(/max_connections=(\d+)/.exec(gw.log())?.[1] ?? 0);
    if (most < 2 * 400 + 16) {
      t.skip(`the gateway may hold ${most} connections here (its descriptor limit)`);
      return;
    }
    const queue = uniq('crowd');
    const { body: { id } } = await api('POST', '/v1/jobs', { token: A, base: gw.url, body: { kind: 'noop', queue } });
    const { body: { id: other } } = await api('POST', '/v1/jobs', { token: A, base: gw.url, body: { kind: 'noop', queue: uniq('lock') } });
    const { lease } = claim(queue); // seq 1: started
    const got = new Array(400).fill('');
    for (let i = 0; i < 400; i++) {
      const s = net.connect(gw.port, '127.0.0.1');
      s.setEncoding('utf8');
      s.on('data', (d) => { got[i] += d; });
      s.on('error', () => {});
      s.write(`GET /v1/jobs/${id}/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${A}\r\n\r\n`);
      sockets.push(s);
    }
    for (let i = 0; i < 300 && got.some((g) => !g.includes('\nid: 1\n')); i++) await sleep(100);
    assert.equal(got.filter((g) => g.includes('\nid: 1\n')).length, 400, 'streams that sent seq 1');

    // The pool's one connection held (a stop waiting on the other job's
    // row) for longer than a poll: every stream polls while it waits.
    locker = await holdRow(other, 6);
    const stop = api('POST', `/v1/jobs/${other}/stop`, { token: A, base: gw.url });
    for (let i = 0; i < 50 && psql('SELECT count(*) FROM pg_locks WHERE NOT granted') === '0'; i++) await sleep(100);
    const seq = appendEvent(id, lease, 'log', { line: 'to all' });
    assert.equal((await stop).status, 200);
    const mark = `\nid: ${seq}\n`;
    for (let i = 0; i < 300 && got.some((g) => !g.includes(mark)); i++) await sleep(100);
    const late = got.filter((g) => !g.includes(mark)).length;
    assert.equal(late, 0, `${late} of 400 streams without the event 30 s after the connection was free`);
    assert.doesNotMatch(gw.log(), /already waiting for a database connection/);
  } finally {
    locker?.kill('SIGKILL');
    for (const s of sockets) s.destroy();
    gw.kill();
  }
});

// Opens `n` raw event streams of `token`, one per entry of `jobs`; returns
// {sockets, got} (what each has received).
function openStreams(gw, jobs, token = A) {
  const sockets = [];
  const got = new Array(jobs.length).fill('');
  jobs.forEach((job, i) => {
    const s = net.connect(gw.port, '127.0.0.1');
    s.setEncoding('utf8');
    s.on('data', (d) => { got[i] += d; });
    s.on('error', () => {});
    s.write(`GET /v1/jobs/${job}/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n\r\n`);
    sockets.push(s);
  });
  return { sockets, got };
}

// What the gateway's database has committed, as pg_stat_database counts it
// (a backend reports within a second of going idle).
const commits = () => Number(psql("SELECT xact_commit FROM pg_stat_database WHERE datname = 'postgres'"));

// Every browser reconnecting at once (a gateway restart): 1 000 opens by
// one token, 500 on a queued job with no event yet, 500 on a job with one.
// Each open's first reads went through the role's pool queue, capped at 256
// waiting (Pool::max_waiting): 645 of 1 000 got 429, which EventSource
// treats as fatal.  Stream reads now wait uncapped (a role's streams bound
// them) and the opens of one job share their reads.
test('1 000 stream opens at once by one token: every one gets 200', { timeout: 120000 }, async (t) => {
  const gw = await startGateway(0, []);
  let sockets = [];
  try {
    const most = Number(/max_connections=(\d+)/.exec(gw.log())?.[1] ?? 0);
    if (most < 2 * 1000 + 16) {
      t.skip(`the gateway may hold ${most} connections here (its descriptor limit)`);
      return;
    }
    const queue = uniq('burst');
    const { body: { id: started } } = await api('POST', '/v1/jobs', { token: A, base: gw.url, body: { kind: 'noop', queue } });
    claim(queue); // seq 1: started
    const { body: { id: queued } } = await api('POST', '/v1/jobs', { token: A, base: gw.url, body: { kind: 'noop', queue } });
    const jobs = Array.from({ length: 1000 }, (_, i) => (i % 2 ? queued : started));
    const o = openStreams(gw, jobs);
    sockets = o.sockets;
    for (let i = 0; i < 300 && o.got.some((g) => !/\r\n\r\n/.test(g)); i++) await sleep(100);
    const codes = {};
    for (const g of o.got) {
      const code = /^HTTP\/1\.1 (\d+)/.exec(g)?.[1] ?? 'none';
      codes[code] = (codes[code] ?? 0) + 1;
    }
    assert.deepEqual(codes, { 200: 1000 }, `answers by status: ${JSON.stringify(codes)}`);
    const withStarted = o.got.filter((g, i) => jobs[i] === started && g.includes('\nid: 1\n')).length;
    assert.equal(withStarted, 500, 'streams of the started job that sent seq 1');
  } finally {
    for (const s of sockets) s.destroy();
    gw.kill();
  }
});

// Idle streams cost per role, not per stream: one sweep statement every
// 3 s reads the jobs of all of a role's streams.  Each stream polled on its
// own (its job row, then its events: two statements every 3 s), 1 000 idle
// streams 776 transactions/s.  And an event written without a notification
// (a claim's `started`) still reaches every stream, by the sweep.
test('300 idle streams on 300 jobs: a few transactions per 3 s, and a claim still reaches them', { timeout: 120000 }, async (t) => {
  const gw = await startGateway(0, []);
  let sockets = [];
  try {
    const most = Number(/max_connections=(\d+)/.exec(gw.log())?.[1] ?? 0);
    if (most < 2 * 300 + 16) {
      t.skip(`the gateway may hold ${most} connections here (its descriptor limit)`);
      return;
    }
    const queue = uniq('idle');
    const jobs = [];
    for (let i = 0; i < 300; i++) {
      const { body: { id } } = await api('POST', '/v1/jobs', { token: A, base: gw.url, body: { kind: 'noop', queue } });
      jobs.push(id);
    }
    // 100 at a time: this test is about idle streams, not a burst (above).
    const got = [];
    for (let b = 0; b < 3; b++) {
      const o = openStreams(gw, jobs.slice(b * 100, b * 100 + 100));
      sockets.push(...o.sockets);
      for (let i = 0; i < 300 && o.got.some((g) => !g.includes('retry: 2000')); i++) await sleep(100);
      got.push(o.got);
    }
    const o = { get got() { return got.flat(); } };
    assert.equal(o.got.filter((g) => g.includes('retry: 2000')).length, 300, 'streams open');
    // The opens' own transactions reported: a backend's counts can reach
    // pg_stat_database up to 10 s after them (PGSTAT_IDLE_INTERVAL).
    await sleep(11000);
    const before = commits();
    await sleep(6500); // two sweeps at least; each stream polled twice
    const idle = commits() - before;
    // 300 streams polling on their own: 1 200 to 1 600 here.  Now two or
    // three sweeps, and this test's psql sessions (and autovacuum).
    assert.ok(idle < 300, `${idle} transactions in 6.5 s with 300 idle streams`);
    const m = (await api('GET', '/metrics', { base: gw.url })).text;
    assert.match(m, /^bgexec_gateway_stream_sweeps_total [1-9]/m);
    assert.match(m, /^bgexec_gateway_stream_sweep_wakes_total 0$/m, 'no stream woken while nothing happened');

    // Claims send no NOTIFY: `started` reaches the streams by the sweep.
    psql(`SELECT count(*) FROM bgexec.claim('http-test', ARRAY['${queue}'], 300, '60 s')`);
    for (let i = 0; i < 100 && o.got.some((g) => !g.includes('\nid: 1\n')); i++) await sleep(100);
    assert.equal(o.got.filter((g) => g.includes('\nid: 1\n')).length, 300, 'streams that sent `started`');
  } finally {
    for (const s of sockets) s.destroy();
    gw.kill();
  }
});
