// --statement-timeout: a request whose statement waits on the database (here
// a row lock held by another session) ends with 504 and changes nothing,
// instead of holding a pool connection for as long as the lock lasts.
// --request-timeout: a request that does not arrive in time gets 408.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { api, holdRow, psql, sleep, startGateway, uniq, A } from './lib.mjs';

test('a statement blocked past --statement-timeout answers 504 and writes nothing', async () => {
  const gw = await startGateway(0, ['--statement-timeout', '1', '--pool', '1']);
  const locker = { kill() {} };
  try {
    const queue = uniq('timeout');
    const sub = await api('POST', '/v1/jobs', { token: A, base: gw.url, body: { kind: 'noop', queue } });
    assert.equal(sub.status, 201);
    const id = sub.body.id;
    // Another session holds the job's row lock for 3 s; stop() must wait for it.
    const p = await holdRow(id, 3);
    locker.kill = () => { try { p.kill('SIGKILL'); } catch { /* gone */ } };
    const t0 = Date.now();
    const r = await api('POST', `/v1/jobs/${id}/stop`, { token: A, base: gw.url });
    const waited = Date.now() - t0;
    assert.equal(r.status, 504, r.text);
    assert.equal(r.body.error.sqlstate, '57014');
    assert.match(r.body.error.message, /^database statement timed out: canceling statement due to statement timeout$/);
    assert.ok(waited >= 900 && waited < 2900, `answered after ${waited} ms`);
    assert.equal(psql(`SELECT status FROM bgexec.job WHERE id = ${id}`), 'queued');
    // The pool's only connection is usable again at once (same session, same timeout).
    const g = await api('GET', `/v1/jobs/${id}`, { token: A, base: gw.url });
    assert.equal(g.status, 200);
    // Once the lock is gone, the same request succeeds.
    if (p.exitCode === null) await once(p, 'exit');
    const s = await api('POST', `/v1/jobs/${id}/stop`, { token: A, base: gw.url });
    assert.equal(s.status, 200, s.text);
    assert.equal(psql(`SELECT status FROM bgexec.job WHERE id = ${id}`), 'cancelled');
  } finally {
    locker.kill();
    gw.kill();
  }
});

test('a database that stops answering (a frozen backend) gets 503 past the timeout, not a hang', { timeout: 40000 }, async () => {
  const app = uniq('frozen');
  const gw = await startGateway(0, ['--statement-timeout', '1', '--pool', '1', '--db', `application_name=${app}`]);
  let pids = [];
  try {
    assert.equal((await api('GET', '/v1/queues', { token: A, base: gw.url })).status, 200);
    // statement_timeout cannot fire in a backend that does not run: only the
    // gateway can give up on it.
    pids = psql(`SELECT pid FROM pg_stat_activity WHERE application_name = '${app}'`).split('\n').map(Number);
    for (const pid of pids) process.kill(pid, 'SIGSTOP');
    // Thawed whatever happens, or the cluster could not stop.
    setTimeout(() => { for (const pid of pids) try { process.kill(pid, 'SIGCONT'); } catch { /* gone */ } }, 20000).unref();
    const t0 = Date.now();
    const r = await api('GET', '/v1/queues', { token: A, base: gw.url });
    const waited = Date.now() - t0;
    assert.equal(r.status, 503, r.text);
    assert.equal(r.body.error.sqlstate, '08006');
    assert.match(r.body.error.message, /^database unavailable: .*did not answer/);
    assert.ok(waited >= 5000 && waited < 9000, `answered after ${waited} ms`);
    for (const pid of pids.splice(0)) process.kill(pid, 'SIGCONT');
    // The next request runs on a fresh connection.
    assert.equal((await api('GET', '/v1/queues', { token: A, base: gw.url })).status, 200);
  } finally {
    for (const pid of pids) process.kill(pid, 'SIGCONT');
    gw.kill();
  }
});

// A commit that never returns (a synchronous standby that has gone: the
// statement timeout does not cover that wait) may still have happened: the
// submit's answer must not read "nothing written".  Only this gateway's
// sessions wait for the standby (synchronous_commit on for them, local for
// everyone else), so the suites running beside it do not.
test('a write whose answer never comes gets 503 08007 (outcome unknown), and the cancel frees its backend', { timeout: 40000 }, async () => {
  const app = uniq('syncgone');
  const gw = await startGateway(0, ['--statement-timeout', '1', '--pool', '1',
    '--db', `application_name=${app} options=-csynchronous_commit=on`]);
  const reset = () => {
    psql('ALTER SYSTEM RESET synchronous_standby_names');
    psql('ALTER SYSTEM RESET synchronous_commit');
    psql('SELECT pg_reload_conf()');
  };
  try {
    assert.equal((await api('GET', '/v1/queues', { token: A, base: gw.url })).status, 200);
    psql('ALTER SYSTEM SET synchronous_commit = local');
    psql("ALTER SYSTEM SET synchronous_standby_names = 'gone'");
    psql('SELECT pg_reload_conf()');
    // pg_reload_conf only signals the postmaster: the submit below raced its
    // reload and committed at once (201) on a loaded host.  A session started
    // with the new value shows the postmaster has reloaded, and so has sent
    // the gateway's idle backend its SIGHUP, which it takes before the next
    // statement.
    let standby = '';
    for (let i = 0; i < 100 && standby !== 'gone'; i++) {
      standby = psql("SELECT setting FROM pg_settings WHERE name = 'synchronous_standby_names'");
      if (standby !== 'gone') await sleep(50);
    }
    assert.equal(standby, 'gone', 'the reload did not take');
    const queue = uniq('unknown');
    const t0 = Date.now();
    const r = await api('POST', '/v1/jobs', { token: A, base: gw.url, body: { kind: 'noop', queue } });
    const waited = Date.now() - t0;
    assert.equal(r.status, 503, r.text);
    assert.equal(r.body.error.sqlstate, '08007');
    assert.match(r.body.error.message, /did not answer.*may or may not have been applied$/);
    assert.match(r.body.error.hint, /idempotency_key/);
    assert.ok(waited >= 5000 && waited < 9000, `answered after ${waited} ms`);
    // It was applied: the commit was written, only its standby never answered.
    assert.equal(psql(`SELECT count(*) FROM bgexec.job WHERE queue = '${queue}'`), '1');
    // The gateway cancelled the wait: its backend does not stay behind.
    let left = '';
    for (let i = 0; i < 50; i++) {
      left = psql(`SELECT count(*) FROM pg_stat_activity WHERE application_name = '${app}' AND wait_event = 'SyncRep'`);
      if (left === '0') break;
      await sleep(100);
    }
    assert.equal(left, '0', 'a backend still waits for the standby');
  } finally {
    reset();
    gw.kill();
  }
});

// A write on a hot standby (or a read-only session): the database's state,
// 503 and Retry-After, as during a failover, not 500.
test('a write the database refuses as read-only (25006) gets 503 with Retry-After', async () => {
  const gw = await startGateway(0, ['--db', 'options=-cdefault_transaction_read_only=on']);
  try {
    const r = await api('POST', '/v1/jobs', { token: A, base: gw.url, body: { kind: 'noop', queue: uniq('ro') } });
    assert.equal(r.status, 503, r.text);
    assert.equal(r.body.error.sqlstate, '25006');
    assert.equal(r.headers.get('retry-after'), '5');
  } finally {
    gw.kill();
  }
});

// Writes `parts` on a fresh connection, `every` ms apart, never ending its
// side; resolves with what came back and when the gateway closed it.
async function slowClient(gw, parts, every = 0) {
  const sock = net.connect(gw.port, '127.0.0.1');
  sock.on('error', () => {});
  await once(sock, 'connect');
  const t0 = Date.now();
  let out = '';
  sock.on('data', (d) => { out += d; });
  const closed = once(sock, 'close');
  for (const p of parts) {
    if (sock.destroyed) break;
    sock.write(p);
    if (every) await sleep(every);
  }
  const guard = setTimeout(() => sock.destroy(), 15000);
  await closed;
  clearTimeout(guard);
  return { out, ms: Date.now() - t0 };
}

// --request-timeout bounds a request from its connection's opening (or its
// last answer) to its last byte: one not whole by then gets 408 (57014) and
// the connection is closed.  It was closed without a word at 120 s.  A
// connection idle since it opened or since its last answer is closed
// without one: an unasked 408 could be read as the answer to the request a
// client sends at that moment.
test('a request not whole within --request-timeout gets 408; an idle connection is closed unanswered', { timeout: 60000 }, async () => {
  const gw = await startGateway(0, ['--request-timeout', '1.5']);
  try {
    const header = 'POST /v1/jobs HTTP/1.1\r\nHost: x\r\n';
    const body = `POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${A}\r\n` +
      'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"kind":';
    const metrics = 'GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n';
    const cases = [
      ['half a header', [header], 0, 0],
      ['a header whole, the body partly', [body], 0, 0],
      // A byte every 100 ms: the bound is on the whole request, not on each read.
      ['a header a byte at a time', [...header], 100, 0],
      ['the second request of a connection half sent', [metrics + header], 0, 1],
    ];
    for (const [name, parts, every, answered] of cases) {
      const { out, ms } = await slowClient(gw, parts, every);
      assert.ok(ms >= 1400 && ms < 6000, `${name}: closed after ${ms} ms`);
      const answers = out.split(/(?=HTTP\/1\.1 )/);
      assert.equal(answers.length, answered + 1, `${name}: ${JSON.stringify(out)}`);
      for (const a of answers.slice(0, answered)) assert.match(a, /^HTTP\/1\.1 200 /, name);
      const last = answers[answered];
      assert.match(last, /^HTTP\/1\.1 408 Request Timeout\r\n/, `${name}: ${JSON.stringify(out)}`);
      assert.match(last, /\r\nConnection: close\r\n/i, name);
      const error = JSON.parse(last.slice(last.indexOf('\r\n\r\n') + 4)).error;
      assert.deepEqual(error, { sqlstate: '57014',
        message: 'the request did not arrive whole within 1.5 s; the connection is closed' }, name);
    }
    for (const [name, parts] of [['idle since it opened', []], ['idle since its answer', [metrics]]]) {
      const { out, ms } = await slowClient(gw, parts);
      assert.ok(ms >= 1400 && ms < 6000, `${name}: closed after ${ms} ms`);
      assert.doesNotMatch(out, /HTTP\/1\.1 408/, `${name}: ${JSON.stringify(out)}`);
      assert.equal(out.split(/(?=HTTP\/1\.1 )/).filter(Boolean).length, parts.length, name);
    }
    // A request whole in time is served as ever.
    assert.equal((await api('GET', '/v1/queues', { token: A, base: gw.url })).status, 200);
  } finally {
    gw.kill();
  }
});
