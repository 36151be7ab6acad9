// bench/gateway-load.mjs: HTTP load on a running `bgexec serve`, for A/B runs
// of the gateway (bench/gateway-ab.sh starts the gateways).
//
// CLIENTS keep-alive connections each send requests back to back for SECONDS:
//   get     GET /v1/jobs/{id} of one job submitted first
//   submit  POST /v1/jobs of a noop job (queue bench-gw-<pid>)
// Prints one line: "<mode> <requests/s> ok=<n> errors=<n>".  Any answer but
// 200 (get) or 201 (submit) counts as an error.
//
// Usage: node bench/gateway-load.mjs URL TOKEN [get|submit] [CLIENTS] [SECONDS]
// (defaults: get, 16 clients, 10 s)
import http from 'node:http';

const [url, token, mode = 'get', clientsArg = '16', secondsArg = '10'] = process.argv.slice(2);
if (!url || !token || !['get', 'submit'].includes(mode)) {
  console.error('usage: node bench/gateway-load.mjs URL TOKEN [get|submit] [CLIENTS] [SECONDS]');
  process.exit(2);
}
const clients = Number(clientsArg);
const seconds = Number(secondsArg);
const base = new URL(url);
const agent = new http.Agent({ keepAlive: true, maxSockets: clients });
const queue = `bench-gw-${process.pid}`;
const submitBody = JSON.stringify({ kind: 'noop', queue });

// One request; resolves to [status, body].
function request(method, path, body) {
  return new Promise((resolve, reject) => {
    const headers = { Authorization: `Bearer ${token}` };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      headers['Content-Length'] = Buffer.byteLength(body);
    }
    const req = http.request({ host: base.hostname, port: base.port, method, path, headers, agent }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve([res.statusCode, Buffer.concat(chunks).toString()]));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

const [st, text] = await request('POST', '/v1/jobs', submitBody);
if (st !== 201) throw new Error(`submit: ${st} ${text}`);
const { id } = JSON.parse(text);

let ok = 0;
let errors = 0;
const want = mode === 'get' ? 200 : 201;
const end = performance.now() + seconds * 1000;
async function client() {
  while (performance.now() < end) {
    const [status] = mode === 'get' ? await request('GET', `/v1/jobs/${id}`) : await request('POST', '/v1/jobs', submitBody);
    if (status === want) ok++;
    else errors++;
  }
}
const t0 = performance.now();
await Promise.all(Array.from({ length: clients }, client));
const elapsed = (performance.now() - t0) / 1000;
agent.destroy();
console.log(`${mode} ${Math.round((ok + errors) / elapsed)} ok=${ok} errors=${errors}`);
