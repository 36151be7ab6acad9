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
