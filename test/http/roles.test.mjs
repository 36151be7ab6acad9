// The gateway's sessions as its login role sees them: a tenant role revoked
// from the login is refused at the next request on every session, and a
// session the server closed while idle is reconnected before a submit runs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { api, psql, uniq, freePort, sleep, startGateway } from './lib.mjs';

test('a revoked tenant role is refused on warm sessions; a closed idle session is reconnected', async (t) => {
  const login = uniq('gw_login').replace(/-/g, '_');
  const tenant = uniq('tenant_rv').replace(/-/g, '_');
  psql(`CREATE ROLE ${login} LOGIN; CREATE ROLE ${tenant}; GRANT bgexec_client TO ${tenant}; GRANT ${tenant} TO ${login}`);
  const tokens = `${process.env.BGEXEC_WORK}/${login}.json`;
  writeFileSync(tokens, JSON.stringify({ 'token-rv': tenant }));
  const port = await freePort();
  const proc = spawn(process.env.BGEXEC_BIN,
    ['serve', '--listen', `127.0.0.1:${port}`, '--tokens', tokens, '--db', `user=${login} dbname=postgres`, '--pool', '4'],
    { stdio: ['ignore', 'ignore', 'inherit'] });
  t.after(() => {
    proc.kill('SIGKILL');
    psql(`DELETE FROM bgexec.job WHERE owner = '${tenant}'`);
    psql(`DROP ROLE ${login}; DROP ROLE ${tenant}`);
  });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 100; i++) {
    try { if ((await fetch(base + '/metrics')).ok) break; } catch { /* not yet */ }
    await sleep(100);
  }
  const submit = () => api('POST', '/v1/jobs', { token: 'token-rv', base, body: { kind: 'noop', queue: 'rv' } });
  // every session of the pool acts as the tenant once
  const warm = await Promise.all([1, 2, 3, 4].map(submit));
  assert.deepEqual(warm.map((r) => r.status), [201, 201, 201, 201], JSON.stringify(warm.map((r) => r.body)));

  // the server closes the idle sessions (as a restart does): the next
  // submits reconnect; they were answered 503 (database unavailable)
  psql(`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = '${login}'`);
  await sleep(300);
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
  const gw = await startGateway(await freePort(), ['--db', 'host=/nonexistent/bgexec-socket-dir port=5 dbname=postgres'], '/');
  try {
    const r = await api('GET', '/v1/jobs', { token: 'token-a', base: gw.url });
    assert.equal(r.status, 503, r.text);
    assert.match(r.body.error.message, /^database unavailable: the gateway cannot reach the database/);
    assert.doesNotMatch(r.text, /nonexistent|bgexec-socket-dir|http-pool/);
  } finally {
    gw.kill();
  }
});
