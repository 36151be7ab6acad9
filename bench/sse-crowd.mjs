// bench/sse-crowd.mjs: a crowd of readers of one job's event stream, on a
// running `bgexec serve` (bench/sse-crowd-ab.sh starts the gateways).
//
// crowd: READERS connections follow a job (GET /v1/jobs/{id}/events, read
//   at full speed); once every one has the job's `started` event, the job
//   writes a 2.5 MB step_completed event (a step's stdout of `seq 1 100000
//   | sed s/^/line-of-log-output-/`) and completes with the same 2.5 MB as
//   its result (the `completed` event).  Meanwhile GET /v1/queues is sent
//   every 100 ms (one at a time).  Prints one line: the seconds from the
//   first write until every stream ended, the /v1/queues latencies (p50,
//   max, samples), and the streams that ended without the job's end.
// single: one reader replays a finished job of EVENTS events of BYTES bytes
//   each; prints the seconds it took and the MB/s.
//
// The job is driven through the SQL worker API with psql (PG* environment).
// Usage: node bench/sse-crowd.mjs URL TOKEN crowd [READERS]
//        node bench/sse-crowd.mjs URL TOKEN single [EVENTS] [BYTES]
import net from 'node:net';
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';

const [url, token, mode = 'crowd', a1, a2] = process.argv.slice(2);
const base = new URL(url);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const psql = (sql) => execFileSync('psql', ['-X', '-qAt', '-v', 'ON_ERROR_STOP=1', '-d', 'postgres', '-c', sql],
  { encoding: 'utf8' }).trim();
// Asynchronous, for the writes during the crowd: execFileSync stopped the
// readers and the /v1/queues sampler while psql ran.
const psqlAsync = (sql) => promisify(execFile)('psql', ['-X', '-qAt', '-v', 'ON_ERROR_STOP=1', '-d', 'postgres', '-c', sql],
  { encoding: 'utf8' });

async function submit(queue) {
  const r = await fetch(`${url}/v1/jobs`, {
    method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ kind: 'noop', queue }),
  });
  if (r.status !== 201) throw new Error(`submit: ${r.status}`);
  const id = (await r.json()).id;
  const [job, lease] = psql(`SELECT job_id || ',' || lease FROM bgexec.claim('bench', ARRAY['${queue}'], 1, '600 s')`)
    .split(',').map(Number);
  if (job !== id) throw new Error('claimed another job');
  return { job, lease };
}

// A reader: counts bytes, keeps the ids it saw and whether it saw the end.
function reader(job) {
  const s = net.connect(Number(base.port), base.hostname);
  const r = { s, bytes: 0, tail: Buffer.alloc(0), ids: [], started: false, completed: false, closed: false, at: 0 };
  s.on('error', () => {});
  s.on('data', (d) => {
    r.bytes += d.length;
    // Only the id and event lines matter: find the chunk's line ends
    // (Buffer.indexOf, native: a data line is megabytes without one) and
    // read the few bytes after each, keeping a partial last line's start.
    const buf = r.tail.length ? Buffer.concat([r.tail, d]) : d;
    let from = 0;
    for (;;) {
      const nl = buf.indexOf(10, from);
      if (nl < 0) break;
      const head = buf.toString('latin1', from, Math.min(nl, from + 20));
      if (head.startsWith('id: ')) r.ids.push(Number(head.slice(4)));
      else if (head.startsWith('event: started')) r.started = true;
      else if (head.startsWith('event: completed')) r.completed = true;
      from = nl + 1;
    }
    r.tail = buf.length - from > 64 ? Buffer.alloc(0) : Buffer.from(buf.subarray(from));
  });
  s.on('close', () => { r.closed = true; r.at = performance.now(); });
  s.on('connect', () => s.write(`GET /v1/jobs/${job}/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n\r\n`));
  return r;
}

async function crowd(n) {
  const { job, lease } = await submit(`bench-crowd-${process.pid}`);
  const readers = [];
  for (let i = 0; i < n; i++) readers.push(reader(job));
  for (let i = 0; i < 600 && readers.some((r) => !r.started); i++) await sleep(50);
  if (readers.some((r) => !r.started)) throw new Error('not every reader got started');
  const lat = [];
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const t = performance.now();
      const r = await fetch(`${url}/v1/queues`, { headers: { Authorization: `Bearer ${token}` } });
      await r.arrayBuffer();
      lat.push(performance.now() - t);
      const wait = 100 - (performance.now() - t);
      if (wait > 0) await sleep(wait);
    }
  })();
  const out = "(SELECT string_agg('line-of-log-output-' || g, E'\\n') || E'\\n' FROM generate_series(1, 100000) g)";
  const t0 = performance.now();
  await psqlAsync(`SELECT bgexec.append_event(${job}, ${lease}, 'step_completed',
          jsonb_build_object('step', 'log', 'output', jsonb_build_object('stdout', ${out}, 'exit_code', 0)))`);
  await psqlAsync(`SELECT bgexec.finish(${job}, ${lease}, 'completed', jsonb_build_object('stdout', ${out}))`);
  for (let i = 0; i < 6000 && readers.some((r) => !r.closed); i++) await sleep(20);
  const t1 = Math.max(...readers.map((r) => r.at));
  sampling = false;
  await sampler;
  for (const r of readers) r.s.destroy();
  lat.sort((x, y) => x - y);
  const short = readers.filter((r) => !r.completed || r.ids.join() !== '1,2,3').length;
  const mb = readers.reduce((s, r) => s + r.bytes, 0) / 1e6;
  console.log(`crowd readers=${n} total_s=${((t1 - t0) / 1000).toFixed(2)} queues_p50_ms=${lat[lat.length >> 1].toFixed(1)}` +
    ` queues_max_ms=${lat[lat.length - 1].toFixed(1)} samples=${lat.length} short=${short} MB=${mb.toFixed(0)}`);
}

async function single(events, bytes) {
  const { job, lease } = await submit(`bench-single-${process.pid}`);
  psql(`SELECT count(bgexec.append_event(${job}, ${lease}, 'log', jsonb_build_object('line', repeat('x', ${bytes}))))
          FROM generate_series(1, ${events})`);
  psql(`SELECT bgexec.finish(${job}, ${lease}, 'completed', '{}')`);
  const best = [];
  for (let k = 0; k < 3; k++) {
    const t0 = performance.now();
    const r = reader(job);
    while (!r.closed) await sleep(5);
    if (r.ids.length !== events + 2) throw new Error(`got ${r.ids.length} events`);
    best.push({ s: (r.at - t0) / 1000, mb: r.bytes / 1e6 });
  }
  best.sort((x, y) => x.s - y.s);
  const m = best[1];
  console.log(`single events=${events} bytes=${bytes} median_s=${m.s.toFixed(3)} MB_per_s=${(m.mb / m.s).toFixed(1)}`);
}

if (mode === 'crowd') await crowd(Number(a1 ?? 200));
else await single(Number(a1 ?? 20000), Number(a2 ?? 500));
