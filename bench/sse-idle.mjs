// bench/sse-idle.mjs: idle event streams and their cost, on a running
// `bgexec serve` (bench/sse-idle-ab.sh starts the gateways).
//
// STREAMS connections follow JOBS queued noop jobs (GET /v1/jobs/{id}/events,
// STREAMS / JOBS per job), the job i submitted and read with token t(i % ROLES
// + 1); opened 100 at a time.  Then, nothing happening, the database's
// commits are counted for IDLE seconds (pg_stat_database.xact_commit, the
// gateway's connections' the only ones, after 11 s for the opens' to be
// reported).  Then the jobs are claimed
// (`started`: claims send no NOTIFY, found by the gateway's safety net) and
// a `log` event is appended to each (notified); the time from each event's
// created_at to its arrival on each stream is measured.  Prints one line:
// tx/s idle, started p50/max ms, log p50/p99/max ms, streams refused.
// Usage: node bench/sse-idle.mjs URL STREAMS JOBS ROLES IDLE
import net from 'node:net';
import { execFileSync } from 'node:child_process';

const [url, streamsArg = '1000', jobsArg = '500', rolesArg = '1', idleArg = '15'] = process.argv.slice(2);
const [nStreams, nJobs, nRoles, idleS] = [streamsArg, jobsArg, rolesArg, idleArg].map(Number);
const base = new URL(url);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const psql = (sql) => execFileSync('psql', ['-X', '-qAt', '-v', 'ON_ERROR_STOP=1', '-d', 'postgres', '-c', sql],
  { encoding: 'utf8' }).trim();
const token = (i) => `t${(i % nRoles) + 1}`;
const commits = () => Number(psql("SELECT xact_commit FROM pg_stat_database WHERE datname = 'postgres'"));
const pct = (a, p) => (a.length ? a[Math.min(a.length - 1, Math.floor((a.length * p) / 100))].toFixed(1) : 'n/a');

const queue = `idle-${process.pid}`;
const jobs = [];
for (let i = 0; i < nJobs; i++) {
  const r = await fetch(`${url}/v1/jobs`, {
    method: 'POST', headers: { Authorization: `Bearer ${token(i)}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ kind: 'noop', queue }),
  });
  if (r.status !== 201) throw new Error(`submit: ${r.status}`);
  jobs.push((await r.json()).id);
}
const lat = { started: [], log: [] };
const heads = [];
const sockets = [];
function open(k) {
  const j = k % nJobs;
  const s = net.connect(Number(base.port), base.hostname);
  s.setEncoding('utf8');
  let buf = '';
  s.on('data', (d) => {
    const now = Date.now();
    buf += d;
    if (heads[k] === undefined && buf.includes('\r\n')) heads[k] = buf.slice(9, 12);
    let at;
    while ((at = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, at);
      buf = buf.slice(at + 2);
      const kind = /^event: (.*)$/m.exec(ev)?.[1];
      const data = /^data: (.*)$/m.exec(ev)?.[1];
      if ((kind === 'started' || kind === 'log') && data) lat[kind].push(now - Date.parse(JSON.parse(data).created_at));
    }
  });
  s.on('error', () => {});
  s.write(`GET /v1/jobs/${jobs[j]}/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token(j)}\r\n\r\n`);
  sockets.push(s);
}
for (let k = 0; k < nStreams; k += 100) {
  for (let m = k; m < Math.min(nStreams, k + 100); m++) open(m);
  for (let i = 0; i < 100 && heads.filter((h) => h !== undefined).length < Math.min(nStreams, k + 100); i++) await sleep(50);
}
// The opens' own commits reported first: a backend's counts can reach
// pg_stat_database up to 10 s after its transaction (PGSTAT_IDLE_INTERVAL).
await sleep(11000);
const c0 = commits();
const t0 = Date.now();
await sleep(idleS * 1000);
const txs = (commits() - c0) / ((Date.now() - t0) / 1000);
const metrics = await (await fetch(`${url}/metrics`)).text();
const metric = (name) => new RegExp(`^${name} (\\d+)`, 'm').exec(metrics)?.[1] ?? '-';
psql(`SELECT count(*) FROM bgexec.claim('bench', ARRAY['${queue}'], ${nJobs}, '600 s')`);
await sleep(4000);
psql(`SELECT count(bgexec.append_event(j.id, j.lease, 'log', '{"line":"x"}')) FROM bgexec.job j WHERE j.queue = '${queue}'`);
await sleep(4000);
for (const s of sockets) s.destroy();
for (const a of Object.values(lat)) a.sort((x, y) => x - y);
const refused = heads.filter((h) => h !== '200').length;
console.log(`idle_tx_per_s=${txs.toFixed(1)} started_ms p50=${pct(lat.started, 50)} max=${pct(lat.started, 100)} n=${lat.started.length}`
  + ` log_ms p50=${pct(lat.log, 50)} p99=${pct(lat.log, 99)} max=${pct(lat.log, 100)} n=${lat.log.length} refused=${refused}`
  + ` sweeps=${metric('bgexec_gateway_stream_sweeps_total')} wakes=${metric('bgexec_gateway_stream_sweep_wakes_total')}`);
