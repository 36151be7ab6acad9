// Answers waiting for readers that do not read are bounded by
// --response-memory: one role's at most half of it, the gateway's all of
// it.  Past it a request gets 429 (its role's half) or 503 at once, not an
// answer held for as long as its write deadline (over 30 minutes for 30 MB),
// and the memory is free again when the reader goes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { api, claim, finish, psql, sleep, startGateway, uniq, A, B } from './lib.mjs';

const MB = 1000000;

// A job of `token`'s role whose result is `mb` MB of JSON text (set by SQL:
// a job's result, unlike a step's output, has no bound of its own).
async function bigJob(gw, token, mb) {
  const r = await api('POST', '/v1/jobs', { token, base: gw.url, body: { kind: 'noop', queue: uniq('mem') } });
  assert.equal(r.status, 201, r.text);
  psql(`UPDATE bgexec.job SET result = to_jsonb(repeat('x', ${mb * MB})) WHERE id = ${r.body.id}`);
  return r.body.id;
}

// A job of A's, submitted through gw and claimed here: {job, lease}.
async function runningJob(gw, prefix) {
  const queue = uniq(prefix);
  const r = await api('POST', '/v1/jobs', { token: A, base: gw.url, body: { kind: 'noop', queue } });
  const claimed = claim(queue);
  assert.equal(claimed.job, r.body.id);
  return claimed;
}

// A connection that sends a request and reads no more than the answer's
// status line, once it has come (the answer is then being written).
async function unread(gw, path, token) {
  const s = net.connect(gw.port, '127.0.0.1');
  s.on('error', () => {});
  await once(s, 'connect');
  s.pause();
  s.write(`GET ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n\r\n`);
  for (let i = 0; i < 200 && s.readableLength < 15; i++) await sleep(50);
  const status = String(s.read(15));
  assert.equal(status, 'HTTP/1.1 200 OK', 'the unread answer is served');
  return s;
}

// The request's status once it is `want`, polling for 10 s at most (the
// unread answer before it is being computed meanwhile).
async function statusOnce(want, request) {
  let r;
  for (let i = 0; i < 40; i++) {
    r = await request();
    if (r.status === want) break;
    await sleep(250);
  }
  return r;
}

test('answers nobody reads are bounded per role and in all, and freed when the reader goes', { timeout: 60000 }, async () => {
  const gw = await startGateway(0, ['--response-memory', '32']);
  const socks = [];
  try {
    const a = await bigJob(gw, A, 30);
    const b = await bigJob(gw, B, 30);
    // 30 MB to a reader that does not read: more than the role's half, but
    // the first answer of a role holding none is served.
    socks.push(await unread(gw, `/v1/jobs/${a}`, A));
    const again = await statusOnce(429, () => api('GET', `/v1/jobs/${a}`, { token: A, base: gw.url }));
    assert.equal(again.status, 429, `a second answer of the role is refused: ${again.status}`);
    assert.equal(again.body.error.sqlstate, '53400');
    assert.match(again.body.error.message, /this role's requests hold 29 MiB waiting to be read, and this one would take them past half \(16 MiB\) of the gateway's --response-memory/);
    assert.equal(again.headers.get('retry-after'), '5');
    // Another role's answer would take the gateway past its 32 MiB: 503.
    const other = await api('GET', `/v1/jobs/${b}`, { token: B, base: gw.url });
    assert.equal(other.status, 503, other.text.slice(0, 200));
    assert.equal(other.body.error.sqlstate, '53200');
    assert.equal(other.headers.get('retry-after'), '5');
    // Small answers are not counted: the role and the gateway still answer them.
    assert.equal((await api('GET', '/v1/queues', { token: A, base: gw.url })).status, 200);
    assert.equal((await api('GET', '/metrics', { base: gw.url })).status, 200);
    assert.match(gw.log(), /msg="answer refused"/);
    // The reader goes: its 30 MB are free, and B's answer is served whole.
    socks.shift().destroy();
    const served = await statusOnce(200, () => api('GET', `/v1/jobs/${b}`, { token: B, base: gw.url }));
    assert.equal(served.status, 200, served.text.slice(0, 200));
    assert.equal(served.body.result.length, 30 * MB);
  } finally {
    for (const s of socks) s.destroy();
    gw.kill();
  }
});

test('an event stream the gateway has no room for is refused before it starts', { timeout: 60000 }, async () => {
  const gw = await startGateway(0, ['--response-memory', '32']);
  const socks = [];
  try {
    const { job, lease } = await runningJob(gw, 'mem-sse');
    psql(`SELECT bgexec.append_event(${job}, ${lease}, 'log', jsonb_build_object('line', repeat('y', ${30 * MB})))`);
    // One stream not reading its 30 MB first batch; the role's next stream
    // is refused with 429 rather than given an empty 200.
    socks.push(await unread(gw, `/v1/jobs/${job}/events`, A));
    const second = await statusOnce(429, () => api('GET', `/v1/jobs/${job}/events`, { token: A, base: gw.url }));
    assert.equal(second.status, 429);
    assert.equal(second.body.error.sqlstate, '53400');
    assert.match(gw.log(), /msg="event stream refused"/);
    // Gone, and the next stream gets the event (the job finished, so the
    // stream ends after it).
    socks.shift().destroy();
    finish(job, lease, 'completed');
    const ok = await statusOnce(200, () => api('GET', `/v1/jobs/${job}/events`, { token: A, base: gw.url, headers: { 'Last-Event-ID': '1' } }));
    assert.equal(ok.status, 200);
    assert.ok(ok.text.length > 30 * MB, `the stream carried ${ok.text.length} bytes`);
  } finally {
    for (const s of socks) s.destroy();
    gw.kill();
  }
});

// It ended, a clean end without the job's last event to a reader such as
// curl, and an EventSource reconnecting while the room was still taken met
// 429 and gave up: 153 of 200 readers of one job, all reading at full
// speed, lost their stream to the copies of a 2.5 MB event the others held.
test('a stream whose next batch finds no room waits for room, and goes on to the job\'s end', { timeout: 60000 }, async () => {
  const gw = await startGateway(0, ['--response-memory', '32']);
  const socks = [];
  try {
    const { job, lease } = await runningJob(gw, 'mem-wait');
    // A stream that reads: its first batch (the started event) is small.
    const stream = net.connect(gw.port, '127.0.0.1');
    stream.on('error', () => {});
    await once(stream, 'connect');
    let got = '';
    let closed = false;
    stream.on('data', (d) => { got += d; });
    stream.on('close', () => { closed = true; });
    stream.write(`GET /v1/jobs/${job}/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${A}\r\n\r\n`);
    for (let i = 0; i < 100 && !got.includes('event: started'); i++) await sleep(50);
    assert.match(got, /event: started/);
    // The role's answer of 30 MB nobody reads, then a 100 kB event: the
    // stream's next batch is over the role's half with it.
    const big = await bigJob(gw, A, 30);
    socks.push(await unread(gw, `/v1/jobs/${big}`, A));
    psql(`SELECT bgexec.append_event(${job}, ${lease}, 'log', jsonb_build_object('line', repeat('z', 100000)))`);
    for (let i = 0; i < 100 && !gw.log().includes('msg="event stream waits for room"'); i++) await sleep(50);
    await sleep(1000);
    assert.equal(closed, false, 'the stream is still open');
    assert.doesNotMatch(got, /z{1000}/, 'the batch was not written while there was no room');
    assert.match(gw.log(), /msg="event stream waits for room"/);
    // Room again: the same stream sends the batch, then the job's end, and closes.
    socks.shift().destroy();
    for (let i = 0; i < 100 && !/z{100000}/.test(got); i++) await sleep(50);
    assert.match(got, /z{100000}/, 'the waiting batch came on the same stream');
    finish(job, lease, 'completed');
    for (let i = 0; i < 100 && !closed; i++) await sleep(50);
    assert.equal(closed, true, 'the stream ended with the job');
    const ids = [...got.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
    assert.deepEqual(ids, [1, 2, 3], 'every event once, in order');
    assert.match(got, /event: completed/);
  } finally {
    for (const s of socks) s.destroy();
    gw.kill();
  }
});

// `n` raw event streams of `job`, read at full speed: each { s, got, closed }.
async function openStreams(gw, job, n) {
  const out = [];
  for (let i = 0; i < n; i++) {
    const s = net.connect(gw.port, '127.0.0.1');
    const r = { s, got: '', closed: false };
    s.on('error', () => {});
    s.on('data', (d) => { r.got += d; });
    s.on('close', () => { r.closed = true; });
    out.push(r);
    await once(s, 'connect');
    s.write(`GET /v1/jobs/${job}/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${A}\r\n\r\n`);
  }
  return out;
}

// The readers of one job all read at full speed, but each of their streams
// held its own copy of a big batch until its socket took it (the streams
// at one cursor now share one, counted once: the next test), and readers
// at different cursors still hold one each: together they may pass the
// role's half, through no reader's fault.  Every stream must still carry
// every event and the job's end (153 of 200 curl readers of a job with
// 2.5 MB events were cut short, a clean end without `completed`).
test('a crowd of readers of one job\'s big events each get every event and its end', { timeout: 120000 }, async () => {
  const gw = await startGateway(0, ['--response-memory', '8']);
  const readers = [];
  try {
    const { job, lease } = await runningJob(gw, 'mem-crowd');
    readers.push(...await openStreams(gw, job, 20));
    for (let i = 0; i < 200 && readers.some((r) => !r.got.includes('event: started')); i++) await sleep(50);
    // Three events of 1 MB each, then the end: 20 copies of a batch are
    // 20 MB against the role's 4 MiB.
    for (const c of 'xyz') {
      psql(`SELECT bgexec.append_event(${job}, ${lease}, 'log', jsonb_build_object('line', repeat('${c}', ${MB})))`);
    }
    finish(job, lease, 'completed');
    for (let i = 0; i < 1800 && readers.some((r) => !r.closed); i++) await sleep(50);
    const short = readers.filter((r) => !/event: completed/.test(r.got)).length;
    assert.equal(short, 0, `${short} of 20 streams ended without the job's end`);
    for (const r of readers) {
      const ids = [...r.got.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
      assert.deepEqual(ids, [1, 2, 3, 4, 5], 'every event once, in order');
    }
  } finally {
    for (const r of readers) r.s.destroy();
    gw.kill();
  }
});

// The /metrics value of `name` (a series without labels), NaN without one.
async function metric(gw, name) {
  const text = (await fetch(`${gw.url}/metrics`).then((r) => r.text()));
  const m = new RegExp(`^${name} (\\d+)$`, 'm').exec(text);
  return m ? Number(m[1]) : NaN;
}

// The streams of one job at one cursor share its fetch, and so its
// rendering: each rendered and serialized the batch itself, 200 streams
// × 2.5 MB of JSON work per event on the gateway's one thread, and other
// requests waited seconds.  And the batch is in memory once, so its room
// is counted once: 30 copies of a 1 MB event took 30 MB against the role's
// 8 MiB, and streams waited for room the event did not take.
test('the streams of one job at one cursor share one rendering of a batch, and its room counts once', { timeout: 120000 }, async () => {
  const gw = await startGateway(0, ['--response-memory', '16']);
  const readers = [];
  try {
    const { job, lease } = await runningJob(gw, 'mem-render');
    readers.push(...await openStreams(gw, job, 30));
    for (let i = 0; i < 200 && readers.some((r) => !r.got.includes('event: started')); i++) await sleep(50);
    const rendered = await metric(gw, 'bgexec_gateway_event_batches_rendered_total');
    const sent = await metric(gw, 'bgexec_gateway_event_batches_sent_total');
    psql(`SELECT bgexec.append_event(${job}, ${lease}, 'log', jsonb_build_object('line', repeat('r', ${MB})))`);
    finish(job, lease, 'completed');
    for (let i = 0; i < 1200 && readers.some((r) => !r.closed); i++) await sleep(50);
    for (const r of readers) {
      const ids = [...r.got.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
      assert.deepEqual(ids, [1, 2, 3], 'every event once, in order');
      assert.match(r.got, /r{1000000}/);
    }
    assert.doesNotMatch(gw.log(), /msg="event stream waits for room"/, 'one copy of the event, counted once');
    // 30 streams sent the big event and the end (60 batches or more: a
    // stream may get them apart); a rendering per announcement, and a
    // stream's own 3 s poll may add one or two.
    const sentNow = (await metric(gw, 'bgexec_gateway_event_batches_sent_total')) - sent;
    const renderedNow = (await metric(gw, 'bgexec_gateway_event_batches_rendered_total')) - rendered;
    assert.ok(sentNow >= 30, `${sentNow} batches sent`);
    assert.ok(renderedNow >= 1 && renderedNow <= 6, `${renderedNow} renderings for ${sentNow} batches sent to 30 streams`);
    // Nothing waits to be written once the streams are over.
    assert.equal(await metric(gw, 'bgexec_gateway_response_bytes_held'), 0);
  } finally {
    for (const r of readers) r.s.destroy();
    gw.kill();
  }
});
