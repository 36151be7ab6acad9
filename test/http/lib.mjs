// Shared helpers of the HTTP gateway tests (environment set by run.sh).
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';

export const BASE = process.env.BGEXEC_URL;
export const A = 'token-a';
export const B = 'token-b';

// Writes raw bytes on a fresh TCP connection and returns what comes back.
export function rawRequest(bytes, base = BASE) {
  const { hostname, port } = new URL(base);
  return new Promise((resolve) => {
    const sock = net.connect(Number(port), hostname);
    let out = '';
    sock.on('data', (d) => { out += d; });
    sock.on('error', () => resolve(out));
    sock.on('close', () => resolve(out));
    sock.setTimeout(3000, () => sock.destroy());
    sock.end(bytes);
  });
}

// One HTTP call; returns {status, headers, body (parsed JSON when possible), text}.
export async function api(method, path, { token, body, raw, headers = {}, base = BASE } = {}) {
  const h = { ...headers };
  if (token) h.Authorization = `Bearer ${token}`;
  let payload;
  if (raw !== undefined) payload = raw;
  else if (body !== undefined) { payload = JSON.stringify(body); h['Content-Type'] = 'application/json'; }
  const res = await fetch(base + path, { method, headers: h, body: payload });
  const text = await res.text();
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: res.status, headers: res.headers, body: json, text };
}

// Runs SQL as the superuser through psql; returns the unaligned, tuples-only output.
export function psql(sql) {
  return execFileSync('psql', ['-X', '-qAt', '-v', 'ON_ERROR_STOP=1', '-d', 'postgres', '-c', sql],
    { encoding: 'utf8' }).trim();
}

export const uniq = (p) => `${p}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The SQL worker API, used to drive jobs without a worker daemon.
export function claim(queue) {
  const out = psql(`SELECT job_id || ',' || lease FROM bgexec.claim('http-test', ARRAY['${queue}'], 1, '60 s')`);
  if (!out) throw new Error(`nothing to claim in ${queue}`);
  const [job, lease] = out.split(',').map(Number);
  return { job, lease };
}
export function appendEvent(job, lease, kind, data = {}) {
  return Number(psql(`SELECT bgexec.append_event(${job}, ${lease}, '${kind}', '${JSON.stringify(data).replace(/'/g, "''")}')`));
}
export function finish(job, lease, outcome, body = {}) {
  return psql(`SELECT bgexec.finish(${job}, ${lease}, '${outcome}', '${JSON.stringify(body).replace(/'/g, "''")}')`);
}

export async function freePort() {
  const srv = net.createServer();
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const { port } = srv.address();
  srv.close();
  return port;
}

// Starts a private gateway (extra `serve` flags in `args`); returns {url, port,
// proc, log(), kill()}.  Port 0 (the default): the kernel picks a free port
// when the gateway binds, read back from its log line `msg=serving
// listen=HOST:PORT`, so no other process can take it in between (a port
// from freePort() is free only until it is closed).  A test that restarts
// a gateway on the same address passes the port it got.  `wrap` runs the
// gateway under another command (prlimit).  It is ready once `probe`
// answers (a /metrics scrape, which also starts its counters' window,
// unless the test needs the first scrape to itself).
// The suite's tokens unless `args` give a file of their own (a flag given
// twice is a usage error).
export async function startGateway(port = 0, args = [], probe = '/metrics', { wrap = [] } = {}) {
  const tokens = args.some((a) => a === '--tokens' || a.startsWith('--tokens=')) ? [] : ['--tokens', process.env.BGEXEC_TOKENS];
  const argv = [...wrap, process.env.BGEXEC_BIN,
    'serve', '--listen', `127.0.0.1:${port}`, ...tokens, ...args];
  const proc = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  let listen;
  let exited = false;
  proc.on('exit', () => { exited = true; });
  proc.stderr.on('data', (d) => {
    log += d;
    process.stderr.write(d);
    listen ??= /msg=serving listen=([0-9.]+:[0-9]+)/.exec(log)?.[1];
  });
  for (let i = 0; i < 100 && !listen && !exited; i++) await sleep(100);
  const url = `http://${listen ?? `127.0.0.1:${port}`}`;
  for (let i = 0; i < 100 && listen && !exited; i++) {
    try { const r = await fetch(url + probe); if (r.ok) break; } catch { /* not yet */ }
    await sleep(100);
  }
  return {
    url, port: Number(new URL(url).port), proc, log: () => log,
    kill: (sig = 'SIGKILL') => { try { proc.kill(sig); } catch { /* gone */ } },
  };
}

// Holds the row lock of job `id` for `seconds` in another session; resolves
// once it is held.  Returns the psql process.
export async function holdRow(id, seconds) {
  const p = spawn('psql', ['-X', '-q', '-d', 'postgres', '-c',
    `BEGIN; SELECT 1 FROM bgexec.job WHERE id = ${id} FOR UPDATE; SELECT pg_sleep(${seconds}); COMMIT;`],
  { stdio: 'ignore' });
  for (let i = 0; i < 50 && psql(`SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
                                    WHERE c.relname = 'job' AND l.mode = 'RowShareLock' AND l.granted`) === '0'; i++) {
    await sleep(100);
  }
  return p;
}
