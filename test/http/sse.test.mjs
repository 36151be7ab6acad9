// Server-Sent Events: every seq exactly once, in order, across a gateway
// kill -9 and restart in the middle of the stream (EventSource reconnects with
// Last-Event-ID by itself).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventSource } from 'eventsource';
import { api, claim, appendEvent, finish, freePort, startGateway, sleep, uniq, A, BASE } from './lib.mjs';

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
  const port = await freePort();
  let gw = await startGateway(port);
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
  r = await fetch(`${BASE}/v1/jobs/${id}/events?after=1`);
  assert.equal(r.status, 401);
  r = await fetch(`${BASE}/v1/jobs/${id}/events?token=${A}&after=x`);
  assert.equal(r.status, 400);
});
