// `bgexec serve` flags: a bad value is a usage error (exit 2) naming the flag.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import { writeFileSync } from 'node:fs';
import { freePort } from './lib.mjs';

test('a bad --pool, --listen or --request-timeout value exits 2 naming the flag', async () => {
  const listen = `127.0.0.1:${await freePort()}`;
  const tokens = ['--tokens', process.env.BGEXEC_TOKENS];
  for (const [args, flag] of [
    [['--pool', 'abc', '--listen', listen], '--pool'], [['--pool=5x', '--listen', listen], '--pool'],
    [['--pool', '0', '--listen', listen], '--pool'], [['--pool', '-1', '--listen', listen], '--pool'],
    [['--pool', '99999999999999999999', '--listen', listen], '--pool'],
    [['--listen', '127.0.0.1:abc'], '--listen'], [['--listen', '127.0.0.1:'], '--listen'],
    [['--listen', '127.0.0.1:65536'], '--listen'], [['--listen', '127.0.0.1:80x'], '--listen'],
    [['--listen', '127.0.0.1'], '--listen'],
    [['--request-timeout', '0', '--listen', listen], '--request-timeout'],
    [['--request-timeout', '86401', '--listen', listen], '--request-timeout'],
    [['--request-timeout', 'x', '--listen', listen], '--request-timeout']]) {
    const r = spawnSync(process.env.BGEXEC_BIN, ['serve', ...tokens, ...args], { encoding: 'utf8', timeout: 5000 });
    assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.ok(r.stderr.startsWith(`bgexec serve: ${flag} must be`), `${args.join(' ')}: ${r.stderr}`);
    assert.doesNotMatch(r.stderr, /sto(i|ul)/);
  }
});

// Runs `serve` until it logs that it serves (then stops it) or exits;
// returns {status, stderr, listen (the logged address)}.
function serveUntilReady(args, timeout = 5000) {
  return new Promise((resolve) => {
    const proc = spawn(process.env.BGEXEC_BIN, ['serve', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    let listen;
    const timer = setTimeout(() => proc.kill('SIGKILL'), timeout);
    proc.stderr.on('data', async (d) => {
      stderr += d;
      const m = /msg=serving listen=(\S+)/.exec(stderr);
      if (m && listen === undefined) {
        listen = m[1];
        const port = listen.slice(listen.lastIndexOf(':') + 1);
        try { listen = { logged: m[1], metrics: (await fetch(`http://127.0.0.1:${port}/metrics`)).status }; }
        catch (e) { listen = { logged: m[1], metrics: String(e) }; }
        proc.kill('SIGTERM');
      }
    });
    proc.on('exit', (status) => { clearTimeout(timer); resolve({ status, stderr, listen }); });
  });
}

test('--listen takes a host name and :PORT (0.0.0.0)', async () => {
  const tokens = ['--tokens', process.env.BGEXEC_TOKENS];
  let port = await freePort();
  let r = await serveUntilReady([...tokens, '--listen', `localhost:${port}`]);
  assert.equal(r.listen?.metrics, 200, r.stderr);
  assert.match(r.listen.logged, new RegExp(`:${port}$`));
  port = await freePort();
  r = await serveUntilReady([...tokens, '--listen', `:${port}`]);
  assert.deepEqual(r.listen, { logged: `0.0.0.0:${port}`, metrics: 200 }, r.stderr);
});

test('--listen with port 0 logs the port it bound', async () => {
  const tokens = ['--tokens', process.env.BGEXEC_TOKENS];
  const r = await serveUntilReady([...tokens, '--listen', '127.0.0.1:0']);
  assert.match(r.listen?.logged ?? '', /^127\.0\.0\.1:\d+$/, r.stderr);
  assert.notEqual(r.listen.logged, '127.0.0.1:0');
  assert.equal(r.listen.metrics, 200);
});

test('an address it cannot listen on, or a host that does not resolve, exits 2 with one line', async () => {
  const tokens = ['--tokens', process.env.BGEXEC_TOKENS];
  const holder = net.createServer();
  holder.listen(0, '127.0.0.1');
  await once(holder, 'listening');
  const { port } = holder.address();
  try {
    const r = await serveUntilReady([...tokens, '--listen', `127.0.0.1:${port}`]);
    assert.equal(r.status, 2, r.stderr);
    assert.equal(r.stderr, `bgexec serve: cannot listen on 127.0.0.1:${port}: address already in use\n`);
  } finally {
    holder.close();
  }
  const r = await serveUntilReady([...tokens, '--listen', 'no-such-host.invalid:8080']);
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /^bgexec serve: cannot resolve --listen host no-such-host\.invalid: [^\n]+\n$/);
});

test('a tokens file that is not valid JSON, has no tokens, a token twice or an empty one exits 2 saying so', async () => {
  const listen = ['--listen', `127.0.0.1:${await freePort()}`];
  const dir = process.env.BGEXEC_WORK;
  for (const [text, expected] of [
    ['{"token-a": "tenant_a",\n oops}', /^bgexec serve: \S+badtok\.json is not valid JSON: parse error at line 2, column 2: .+\n$/],
    ['{}', /^bgexec serve: \S+badtok\.json has no tokens: it must map at least one token to a role\n$/],
    ['{"t": "tenant_a", "t": "tenant_b"}', /^bgexec serve: \S+badtok\.json: a token is given more than once\n$/],
    ['["t"]', /^bgexec serve: \S+badtok\.json: must be a JSON object \{token: role\}\n$/],
    // an empty token is named as such (it was blamed on the role)
    ['{"": "tenant_a"}', /^bgexec serve: \S+badtok\.json: a token must not be empty\n$/],
    ['{"t": ""}', /^bgexec serve: \S+badtok\.json: every token must map to a role name\n$/],
    // one no request could present: a header's value is trimmed of its blanks
    ...['{"tok ": "tenant_a"}', '{" tok": "tenant_a"}', '{"to\\tk\\u0001": "tenant_a"}', '{"t": "tenant_a", "u\\t": "tenant_b"}']
      .map((t) => [t, /^bgexec serve: \S+badtok\.json: a token must not begin or end with a blank, nor hold a control character\n$/]),
  ]) {
    writeFileSync(`${dir}/badtok.json`, text);
    const r = spawnSync(process.env.BGEXEC_BIN, ['serve', '--tokens', `${dir}/badtok.json`, ...listen],
      { encoding: 'utf8', timeout: 5000 });
    assert.equal(r.status, 2, `${text}: ${r.stderr}`);
    assert.match(r.stderr, expected, text);
  }
});
