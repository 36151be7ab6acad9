// The gateway's sessions as its login role sees them: a tenant role revoked
// from the login is refused at the next request on every session, and a
// session the server closed while idle is reconnected before a submit runs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import net from 'node:net';
import { once } from 'node:events';
import { api, psql, uniq, sleep, startGateway } from './lib.mjs';

test('a revoked tenant role is refused on warm sessions; a closed idle session is reconnected', async (t) => {
  const login = uniq('gw_login').replace(/-/g, '_');
  const tenant = uniq('tenant_rv').replace(/-/g, '_');
  psql(`CREATE ROLE ${login} LOGIN; CREATE ROLE ${tenant}; GRANT bgexec_client TO ${tenant}; GRANT ${tenant} TO ${login}`);
  const tokens = `${process.env.BGEXEC_WORK}/${login}.json`;
  writeFileSync(tokens, JSON.stringify({ 'token-rv': tenant }));
  const gw = await startGateway(0, ['--tokens', tokens, '--db', `user=${login} dbname=postgres`, '--pool', '4']);
  t.after(() => {
    gw.kill();
    psql(`DELETE FROM bgexec.job WHERE owner = '${tenant}'`);
    psql(`DROP ROLE ${login}; DROP ROLE ${tenant}`);
  });
  const base = gw.url;
  const submit = () => api('POST', '/v1/jobs', { token: 'token-rv', base, body: { kind: 'noop', queue: 'rv' } });
  // every session of the pool acts as the tenant once
  const warm = await Promise.all([1, 2, 3, 4].map(submit));
  assert.deepEqual(warm.map((r) => r.status), [201, 201, 201, 201], JSON.stringify(warm.map((r) => r.body)));

  // the server closes the idle sessions (as a restart does): the next
  // submits reconnect; they were answered 503 (database unavailable).
  // Once the sessions' backends are gone: one still exiting could take a
  // submit (pg_terminate_backend only signals).
  const pids = psql(`SELECT string_agg(pid::text, ',') FROM pg_stat_activity WHERE usename = '${login}'`);
  assert.ok(pids, 'the gateway has no session open');
  psql(`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE pid = ANY('{${pids}}'::int[])`);
  let left = '';
  for (let i = 0; i < 200 && left !== '0'; i++) {
    left = psql(`SELECT count(*) FROM pg_stat_activity WHERE pid = ANY('{${pids}}'::int[])`);
    if (left !== '0') await sleep(100);
  }
  assert.equal(left, '0', 'the sessions\' backends did not exit');
  const after = await Promise.all([1, 2, 3, 4].map(submit));
  assert.deepEqual(after.map((r) => r.status), [201, 201, 201, 201], JSON.stringify(after.map((r) => r.body)));

  // revoked: every request is refused, whichever session it meets
  psql(`REVOKE ${tenant} FROM ${login}`);
  const before = Number(psql(`SELECT count(*) FROM bgexec.job WHERE owner = '${tenant}'`));
  const refused = await Promise.all([1, 2, 3, 4, 5, 6].map(submit));
  assert.deepEqual(refused.map((r) => r.status), [403, 403, 403, 403, 403, 403]);
  assert.equal(Number(psql(`SELECT count(*) FROM bgexec.job WHERE owner = '${tenant}'`)), before);
});

test('a 503 for a database the gateway cannot reach names no socket path or address', async () => {
  const gw = await startGateway(0, ['--db', 'host=/nonexistent/bgexec-socket-dir port=5 dbname=postgres'], '/');
  try {
    const r = await api('GET', '/v1/jobs', { token: 'token-a', base: gw.url });
    assert.equal(r.status, 503, r.text);
    assert.match(r.body.error.message, /^database unavailable: the gateway cannot reach the database/);
    assert.doesNotMatch(r.text, /nonexistent|bgexec-socket-dir|http-pool/);
  } finally {
    gw.kill();
  }
});

test('a token mapped to a role that does not exist is refused 403 (42501), not a 4xx about the request', async (t) => {
  const ghost = uniq('no_such_role').replace(/-/g, '_');
  const tokens = `${process.env.BGEXEC_WORK}/${ghost}.json`;
  writeFileSync(tokens, JSON.stringify({ 'token-ghost': ghost }));
  const gw = await startGateway(0, ['--tokens', tokens]);
  t.after(() => gw.kill());
  const base = gw.url;
  const queue = uniq('ghost');
  for (const [method, path, body] of [['POST', '/v1/jobs', { kind: 'noop', queue }], ['GET', '/v1/jobs'],
    ['GET', '/v1/queues'], ['GET', '/v1/schedules']]) {
    const r = await api(method, path, { token: 'token-ghost', base, body });
    assert.equal(r.status, 403, `${method} ${path}: ${r.text}`);
    assert.equal(r.body.error.sqlstate, '42501', `${method} ${path}`);
    assert.match(r.body.error.message, /^cannot act as the token's role: /);
  }
  assert.equal(psql(`SELECT count(*) FROM bgexec.job WHERE queue = '${queue}'`), '0');
});

// The server's FATAL (57P01, as at a restart) arriving in answer to a request,
// before any of its results: an ErrorResponse message of the wire protocol.
function fatalMessage() {
  const fields = Buffer.from('SFATAL\0VFATAL\0C57P01\0Mterminating connection due to administrator command\0\0');
  const len = Buffer.alloc(4);
  len.writeInt32BE(fields.length + 4);
  return Buffer.concat([Buffer.from('E'), len, fields]);
}

// A proxy in front of the server for the gateway's pool connection.  Armed
// with 'fatal', it answers that connection's next request with a FATAL and
// closes, without passing the request on; with 'lose-answer', it passes the
// request on and closes when the server answers, dropping the answer.
async function pgProxy() {
  const state = { armed: null };
  const srv = net.createServer((client) => {
    // the cluster's Unix socket (it listens on no TCP port)
    const server = net.connect(`${process.env.PGHOST}/.s.PGSQL.${process.env.PGPORT}`);
    let startup = '';
    let dead = false;
    let losing = false;
    const kill = () => { dead = true; server.destroy(); client.destroy(); };
    client.on('error', () => {});
    server.on('error', () => {});
    server.on('data', (d) => {
      if (dead) return;
      if (losing) kill(); else client.write(d);
    });
    server.on('close', () => { if (!dead) client.destroy(); });
    client.on('close', () => server.destroy());
    client.on('data', (d) => {
      if (dead) return;
      if (startup.length < 512) startup += d.toString('latin1');
      if (state.armed && startup.includes('http-pool')) {
        const mode = state.armed;
        state.armed = null;
        if (mode === 'fatal') {
          dead = true;
          server.destroy();
          client.end(fatalMessage());
          return;
        }
        losing = true;
      }
      server.write(d);
    });
  });
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  state.port = srv.address().port;
  state.close = () => srv.close();
  return state;
}

// A gateway with one pool connection through pgProxy, and a submit of a
// noop job to a queue of its own through it.
async function proxiedGateway(t, prefix) {
  const proxy = await pgProxy();
  const gw = await startGateway(0,
    ['--pool', '1', '--db', `host=127.0.0.1 port=${proxy.port} dbname=postgres sslmode=disable`]);
  t.after(() => { gw.kill(); proxy.close(); });
  const queue = uniq(prefix);
  const submit = () => api('POST', '/v1/jobs', { token: 'token-a', base: gw.url, body: { kind: 'noop', queue } });
  return { proxy, gw, queue, submit };
}

test('a connection that breaks while a request is sent (the server\'s FATAL before any answer) is replaced, and the request sent once more', async (t) => {
  const { proxy, gw, queue, submit } = await proxiedGateway(t, 'refused-midway');
  assert.equal((await submit()).status, 201);  // the pool's connection is up and warm
  proxy.armed = 'fatal';
  const r = await submit();
  assert.equal(proxy.armed, null, 'the request met the broken connection');
  assert.equal(r.status, 201, r.text);
  assert.equal(psql(`SELECT count(*) FROM bgexec.job WHERE queue = '${queue}'`), '2');
  assert.equal((await api('GET', `/v1/jobs/${r.body.id}`, { token: 'token-a', base: gw.url })).body.queue, queue);
});

test('a submit whose answer is lost with its connection is not sent again (it may have committed): 503, one job', async (t) => {
  const { proxy, gw, queue, submit } = await proxiedGateway(t, 'lost-answer');
  assert.equal((await submit()).status, 201);
  proxy.armed = 'lose-answer';
  const r = await submit();
  assert.equal(proxy.armed, null, 'the request met the broken connection');
  assert.equal(r.status, 503, r.text);
  assert.equal(r.body.error.sqlstate.slice(0, 2), '08');
  // It committed once; sent again it would have made a second job.
  assert.equal(psql(`SELECT count(*) FROM bgexec.job WHERE queue = '${queue}'`), '2');
  // A read is idempotent: sent again on a new connection (the pool's
  // connection up again first, so the answer is what gets lost).
  assert.equal((await api('GET', '/v1/queues', { token: 'token-a', base: gw.url })).status, 200);
  proxy.armed = 'lose-answer';
  const g = await api('GET', `/v1/jobs?queue=${queue}`, { token: 'token-a', base: gw.url });
  assert.equal(proxy.armed, null);
  assert.equal(g.status, 200, g.text);
  assert.equal(g.body.jobs.length, 2);
});
