// bench/sse-burst.mjs: one ordinary request during a burst of event-stream
// opens by the same token, on a running `bgexec serve` (bench/sse-burst-ab.sh
// starts the gateways).
//
// STREAMS noop jobs are submitted (token-a) and claimed (seq 1: `started`
// each), then STREAMS connections open at once, one per job (every browser
// of a token reconnecting after a gateway restart, each doing its first
// events read); from AT ms after the last open is written until every
// stream has sent its event, `GET /v1/jobs/ID` of the same token, one
// after another, each timed.  Prints one line: the first GET's ms, the
// GETs' count, p50 and max ms, the time until every stream had sent its
// event, and the opens refused.
// Usage: node bench/sse-burst.mjs URL STREAMS AT
import net from 'node:net';
import { execFileSync } from 'node:child_process';

const [url, streamsArg = '1000', atArg = '0'] = process.argv.slice(2);
const [n, at] = [Number(streamsArg), Number(atArg)];
const base = new URL(url);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const psql = (sql) => execFileSync('psql', ['-X', '-qAt', '-v', 'ON_ERROR_STOP=1', '-d', 'postgres', '-c', sql],
  { encoding: 'utf8' }).trim();
const auth = { Authorization: 'Bearer token-a' };

const queue = `burst-${process.pid}`;
const jobs = psql(`SET ROLE tenant_a; SELECT string_agg(bgexec.submit('noop', '{}', '${queue}')::text, ',') FROM generate_series(1, ${n})`)
  .split(',').map(Number);
psql(`SELECT count(*) FROM bgexec.claim('bench', ARRAY['${queue}'], ${n}, '600 s')`);
const target = psql(`SET ROLE tenant_a; SELECT bgexec.submit('noop', '{}', '${queue}-get')`);
// One request first: the gateway's pool connections are open.
await (await fetch(`${url}/v1/jobs/${target}`, { headers: auth })).text();

const got = new Array(n).fill('');
const sockets = [];
let all = null;
const t0 = performance.now();
for (let i = 0; i < n; i++) {
  const s = net.connect(Number(base.port), base.hostname);
  s.setEncoding('utf8');
  s.on('data', (d) => {
    got[i] += d;
    if (all === null && got.every((g) => g.includes('\nid: 1\n'))) all = performance.now() - t0;
  });
  s.on('error', () => {});
  s.write(`GET /v1/jobs/${jobs[i]}/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer token-a\r\n\r\n`);
  sockets.push(s);
}
await sleep(at);
// GETs one after another until every stream has sent its event.
const gets = [];
let status = 200;
while (all === null && performance.now() - t0 < 60000) {
  const g0 = performance.now();
  const r = await fetch(`${url}/v1/jobs/${target}`, { headers: auth });
  await r.text();
  if (r.status !== 200) status = r.status;
  gets.push(performance.now() - g0);
}
const first = gets[0];
gets.sort((x, y) => x - y);
const refused = got.filter((g) => !g.startsWith('HTTP/1.1 200')).length;
for (const s of sockets) s.destroy();
console.log(`first_get_ms=${first.toFixed(1)} gets=${gets.length} get_p50_ms=${gets[gets.length >> 1].toFixed(1)} get_max_ms=${gets[gets.length - 1].toFixed(1)}`
  + ` non_200=${status === 200 ? 0 : status} all_streams_ms=${all === null ? 'n/a' : all.toFixed(0)} refused=${refused}`);
