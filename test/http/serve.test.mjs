// `bgexec serve` flags: a bad value is a usage error (exit 2) naming the flag.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { freePort } from './lib.mjs';

test('a bad --pool or --listen value exits 2 naming the flag', async () => {
  const listen = `127.0.0.1:${await freePort()}`;
  const tokens = ['--tokens', process.env.BGEXEC_TOKENS];
  for (const [args, flag] of [
    [['--pool', 'abc', '--listen', listen], '--pool'], [['--pool=5x', '--listen', listen], '--pool'],
    [['--pool', '0', '--listen', listen], '--pool'], [['--pool', '-1', '--listen', listen], '--pool'],
    [['--pool', '99999999999999999999', '--listen', listen], '--pool'],
    [['--listen', '127.0.0.1:abc'], '--listen'], [['--listen', '127.0.0.1:'], '--listen'],
    [['--listen', '127.0.0.1:65536'], '--listen'], [['--listen', '127.0.0.1:80x'], '--listen'],
    [['--listen', '127.0.0.1'], '--listen']]) {
    const r = spawnSync(process.env.BGEXEC_BIN, ['serve', ...tokens, ...args], { encoding: 'utf8', timeout: 5000 });
    assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.ok(r.stderr.startsWith(`bgexec serve: ${flag} must be`), `${args.join(' ')}: ${r.stderr}`);
    assert.doesNotMatch(r.stderr, /sto(i|ul)/);
  }
});
