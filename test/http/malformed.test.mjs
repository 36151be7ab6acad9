// Bad requests get a 4xx JSON error, change nothing, and never take the server down.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { readFileSync } from 'node:fs';
import { api, psql, uniq, claim, finish, rawRequest, A, BASE } from './lib.mjs';

const count = () => Number(psql('SELECT count(*) FROM bgexec.job'));

test('malformed JSON, unknown fields, wrong types, oversize bodies: 4xx JSON, nothing written', async () => {
  const before = count();
  const bodies = ['', '{', 'null', '[]', '"x"', '{"kind": "noop",}', '{"kind":"noop","extra":1}',
    '{"kind": 1}', '{"kind": "noop", "payload": "str"}', '{"kind":"noop","timeout":{}}', '\u0000\u0001\u0002',
    '{"kind":"noop","max_attempts":1.5}', '{"kind":"noop","queue":null,"bad":true}'];
  for (const raw of bodies) {
    const r = await api('POST', '/v1/jobs', { token: A, raw, headers: { 'Content-Type': 'application/json' } });
    assert.ok(r.status >= 400 && r.status < 500, `${JSON.stringify(raw)} -> ${r.status}`);
    assert.ok(r.body?.error?.message, `${JSON.stringify(raw)} has a JSON error body`);
    assert.equal(typeof r.body.error.sqlstate, 'string');
  }
  const big = await api('POST', '/v1/jobs', { token: A, raw: 'x'.repeat((1 << 20) + 10) });
  assert.equal(big.status, 413);
  assert.equal(big.body.error.sqlstate, '54000');
  for (const path of ['/v1/nothing', '/v1/jobs/1/explode', '/v2/jobs', '/v1/jobs/%ff%00']) {
    const r = await api('GET', path, { token: A });
    assert.equal(r.status, 404, path);
    assert.ok(r.body.error);
  }
  assert.equal((await api('DELETE', '/v1/jobs', { token: A })).status, 405);
  assert.equal(count(), before);
});

test('a raw NUL byte or a byte order mark in a body is malformed JSON: 400, nothing done', async () => {
  // nlohmann ended its input at a NUL: {"kind":"t"}\0garbage created a job,
  // {}\0garbage on stop cancelled one.  A BOM was skipped by the parser but
  // passed on to the server: 201 without a payload, 422 naming it with one.
  const queue = uniq('nul');
  const before = count();
  const { body: { id } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue, run_after: '2999-01-01T00:00:00Z' } });
  const cases = [
    ['POST', '/v1/jobs', `{"kind":"noop","queue":"${queue}"}\u0000{{{{not json`],
    ['POST', '/v1/jobs', `{"kind":"noop","queue":"${queue}","payload":{"a":1}}\u0000`],
    ['POST', '/v1/jobs', `\ufeff{"kind":"noop","queue":"${queue}"}`],
    ['POST', '/v1/jobs', `\ufeff{"kind":"noop","queue":"${queue}","payload":{"a":1}}`],
    ['POST', `/v1/jobs/${id}/stop`, '{}\u0000garbage'],
    ['PUT', `/v1/schedules/${queue}`, '{"cron":"0 3 * * *","kind":"noop"}\u0000garbage'],
    ['PUT', `/v1/schedules/${queue}`, '\ufeff{"cron":"0 3 * * *","kind":"noop"}'],
  ];
  for (const [method, path, raw] of cases) {
    const r = await api(method, path, { token: A, raw, headers: { 'Content-Type': 'application/json' } });
    assert.equal(r.status, 400, `${method} ${path} ${JSON.stringify(raw)}: ${r.text}`);
    assert.match(r.body.error.message, /^request body is not valid JSON: (a NUL byte at offset \d+|a byte order mark)/);
  }
  assert.equal(count(), before + 1);
  assert.equal(psql(`SELECT status FROM bgexec.job WHERE id = ${id}`), 'queued');
  assert.equal(psql(`SELECT count(*) FROM bgexec.schedule WHERE name = '${queue}'`), '0');
});

test('garbage on the socket gets 400 or a close, and the server keeps serving', async () => {
  const before = count();
  const garbage = [
    'GARBAGE\r\n\r\n',
    'POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}',
    'POST /v1/jobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n',
    'GET /' + 'a'.repeat(20000) + ' HTTP/1.1\r\nHost: x\r\n\r\n',
    'GET /v1/jobs HTTP/1.1\r\n' + 'X-Junk: y\r\n'.repeat(3000) + '\r\n',
    Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7919) % 256)),
    'POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer token-a\r\nContent-Length: 100\r\n\r\n{"kind":',
  ];
  for (const g of garbage) {
    const out = await rawRequest(g);
    if (out) assert.match(out, /^HTTP\/1\.1 4\d\d/, JSON.stringify(out.slice(0, 80)));
  }
  const ok = await api('GET', '/v1/queues', { token: A });
  assert.equal(ok.status, 200);
  assert.equal(count(), before);
});

test('bytes that are not UTF-8 in the path or the query get 400 JSON, with or without a token', async () => {
  const raw = (target, auth) => rawRequest(Buffer.concat([
    Buffer.from('GET '), Buffer.from(target, 'latin1'),
    Buffer.from(` HTTP/1.1\r\nHost: x\r\n${auth ? 'Authorization: Bearer token-a\r\n' : ''}Connection: close\r\n\r\n`)]));
  for (const [target, auth] of [['/\xff', false], ['/v1/jobs/\xff', true], ['/v1/jobs/1/events?a=\xff', true],
    ['/v1/\xc3\x28', true]]) {
    const out = await raw(target, auth);
    assert.match(out, /^HTTP\/1\.1 400 /, JSON.stringify(target));
    const body = JSON.parse(out.slice(out.indexOf('\r\n\r\n') + 4));
    assert.equal(body.error.sqlstate, '08P01');
    assert.match(body.error.message, /not valid UTF-8/);
  }
  for (const q of ['%FF=1', 'queue=%FF', 'status=%C3%28', 'queue=%ED%A0%80', 'limit=%F4%90%80%80']) {
    const r = await api('GET', `/v1/jobs?${q}`, { token: A });
    assert.equal(r.status, 400, `${q}: ${r.text}`);
    assert.match(r.body.error.message, /not valid UTF-8/, q);
  }
  // Valid multi-byte text is fine: an unknown queue lists nothing.
  const ok = await api('GET', `/v1/jobs?queue=${encodeURIComponent('é€😀')}`, { token: A });
  assert.equal(ok.status, 200, ok.text);
  assert.deepEqual(ok.body.jobs, []);
  assert.equal((await api('GET', '/v1/queues', { token: A })).status, 200);
});

test('JSON nested deeper than 512 levels gets 422 naming the field; the gateway survives', async () => {
  const nest = (n, inner = '') => '['.repeat(n) + inner + ']'.repeat(n);
  const post = (path, raw) => api('POST', path, { token: A, raw, headers: { 'Content-Type': 'application/json' } });
  const before = count();
  let r = await post('/v1/jobs', `{"kind":"noop","payload":{"a":${nest(100000)}}}`);
  assert.equal(r.status, 422, r.text);
  assert.deepEqual(r.body.error, { sqlstate: '54000', message: 'payload nested deeper than 512 levels' });
  r = await post('/v1/jobs', nest(60000));
  assert.equal(r.status, 400, r.text);
  r = await post('/v1/jobs/999999/resume', nest(100000));
  assert.equal(r.status, 422, r.text);
  assert.deepEqual(r.body.error, { sqlstate: '54000', message: 'resume input nested deeper than 512 levels' });
  // 512 levels of payload (the object and 511 arrays) are accepted, 513 are not.
  r = await post('/v1/jobs', `{"kind":"noop","queue":"deep","payload":{"a":${nest(512)}}}`);
  assert.equal(r.status, 422, r.text);
  assert.equal(count(), before);
  r = await post('/v1/jobs', `{"kind":"noop","queue":"deep","payload":{"a":${nest(511)}}}`);
  assert.equal(r.status, 201, r.text);
  const g = await api('GET', `/v1/jobs/${r.body.id}`, { token: A });
  assert.equal(g.status, 200);
  assert.equal(JSON.stringify(g.body.payload), `{"a":${nest(511)}}`);
  assert.equal((await post('/v1/jobs/999999/resume', nest(512))).status, 404);
  assert.equal((await api('GET', '/v1/queues', { token: A })).status, 200);
});

// Sends `head`, waits up to `wait` ms for the first bytes back, then sends
// `body` (unless the server already answered with a final status); returns
// {first, all}: what came before the body was sent, and everything.
function expectContinue(head, body, wait = 500) {
  const { hostname, port } = new URL(BASE);
  return new Promise((resolve) => {
    const sock = net.connect(Number(port), hostname);
    let out = '';
    let first = null;
    const send = () => {
      if (first !== null) return;
      first = out;
      if (/^HTTP\/1\.1 100 /.test(out) || out === '') sock.end(body);
    };
    sock.on('data', (d) => { out += d; if (first === null) send(); });
    sock.on('error', () => resolve({ first, all: out }));
    sock.on('close', () => resolve({ first, all: out }));
    sock.setTimeout(5000, () => sock.destroy());
    sock.write(head);
    setTimeout(send, wait);
  });
}

test('Expect: 100-continue is answered at once: 100 then the body, or 413 for a Content-Length over 1 MiB', async () => {
  const head = (extra) => `POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer token-a\r\n` +
    `Content-Type: application/json\r\nExpect: 100-continue\r\nConnection: close\r\n${extra}\r\n`;
  const queue = uniq('expect');
  const json = JSON.stringify({ kind: 'noop', queue });
  let r = await expectContinue(head(`Content-Length: ${json.length}\r\n`), json);
  assert.match(r.first, /^HTTP\/1\.1 100 Continue\r\n\r\n$/);
  assert.match(r.all, /\r\n\r\nHTTP\/1\.1 201 /);
  // Chunked, over the limit: invited, then refused once the body passes 1 MiB.
  const chunk = 'x'.repeat(64 * 1024);
  const chunks = Array.from({ length: 17 }, () => `${chunk.length.toString(16)}\r\n${chunk}\r\n`).join('') + '0\r\n\r\n';
  r = await expectContinue(head('Transfer-Encoding: chunked\r\n'), chunks);
  assert.match(r.first, /^HTTP\/1\.1 100 Continue\r\n\r\n$/);
  assert.match(r.all, /\r\n\r\nHTTP\/1\.1 413 /);
  // A Content-Length over the limit: 413 before any body is sent.
  r = await expectContinue(head(`Content-Length: ${2 << 20}\r\n`), '');
  assert.match(r.first, /^HTTP\/1\.1 413 /);
  assert.equal(psql(`SELECT count(*) FROM bgexec.job WHERE queue = '${queue}'`), '1');
});

test('a key given twice in one object, at any depth, is 400 naming it and where; nothing written', async () => {
  const post = (method, path, raw) => api(method, path, { token: A, raw, headers: { 'Content-Type': 'application/json' } });
  const before = count();
  const queue = uniq('dup');
  for (const [method, path, raw, message] of [
    ['POST', '/v1/jobs', `{"kind":"noop","queue":"${queue}","kind":"x"}`, 'duplicate key "kind" in the request body'],
    ['POST', '/v1/jobs', `{"kind":"noop","queue":"${queue}","payload":{"a":[1,{"b":1,"b":2}]}}`,
      'duplicate key "b" in the request body at payload.a[1]'],
    ['PUT', `/v1/schedules/${queue}`, '{"cron":"@daily","kind":"noop","cron":"@hourly"}',
      'duplicate key "cron" in the request body'],
    ['POST', '/v1/jobs/999999/resume', '{"approved":true,"approved":false}', 'duplicate key "approved" in the resume input'],
  ]) {
    const r = await post(method, path, raw);
    assert.equal(r.status, 400, `${raw}: ${r.text}`);
    assert.deepEqual(r.body.error, { sqlstate: '08P01', message }, raw);
  }
  assert.equal(count(), before);
  assert.equal(psql(`SELECT count(*) FROM bgexec.schedule WHERE name = '${queue}'`), '0');
  // The same key in different objects is fine.
  const r = await post('POST', '/v1/jobs', `{"kind":"noop","queue":"${queue}","payload":{"a":{"k":1},"b":{"k":2}}}`);
  assert.equal(r.status, 201, r.text);
});

test('a route without a body refuses one that is not {} (400), and does nothing; empty and {} pass', async () => {
  const post = (method, path, raw) => api(method, path, { token: A, raw, headers: { 'Content-Type': 'application/json' } });
  const queue = uniq('nobody');
  const { body: { id } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } });
  const name = uniq('nobody');
  assert.equal((await api('PUT', `/v1/schedules/${name}`, { token: A, body: { cron: '@daily', kind: 'noop', queue: name } })).status, 200);
  const status = () => psql(`SELECT status FROM bgexec.job WHERE id = ${id}`);
  const paused = () => psql(`SELECT paused FROM bgexec.schedule WHERE name = '${name}'`);
  const refused = [
    ['{bad json', /^request body is not valid JSON: .*line 1, column 2/],
    ['{"unknown":1}', /^unknown field "unknown"$/],
    ['{"why":{"nested":true}}', /^unknown field "why"$/],
    ['[]', /^request body must be a JSON object$/],
    ['[[1]]', /^request body must be a JSON object$/],
    ['null', /^request body must be a JSON object$/],
    ['{}{}', /^request body is not valid JSON/],
  ];
  for (const [method, path] of [['POST', `/v1/jobs/${id}/stop`], ['POST', `/v1/schedules/${name}/pause`],
    ['POST', `/v1/schedules/${name}/run`], ['DELETE', `/v1/schedules/${name}`]]) {
    for (const [raw, message] of refused) {
      const r = await post(method, path, raw);
      assert.equal(r.status, 400, `${method} ${path} ${raw}: ${r.text}`);
      assert.equal(r.body.error.sqlstate, '08P01');
      assert.match(r.body.error.message, message, `${method} ${path} ${raw}`);
    }
  }
  assert.equal(status(), 'queued');
  assert.equal(paused(), 'f');
  assert.equal(psql(`SELECT count(*) FROM bgexec.job WHERE queue = '${name}'`), '0');  // no run
  // Empty and {} are no body.
  let r = await post('POST', `/v1/jobs/${id}/stop`, '{}');
  assert.deepEqual([r.status, r.body.status], [200, 'cancelled'], r.text);
  for (const [raw, message] of refused) {
    r = await post('POST', `/v1/jobs/${id}/retry`, raw);
    assert.equal(r.status, 400, `retry ${raw}: ${r.text}`);
    assert.match(r.body.error.message, message);
  }
  assert.equal(status(), 'cancelled');
  r = await post('POST', `/v1/jobs/${id}/retry`, ' \r\n');
  assert.equal(r.status, 200, r.text);
  assert.equal(status(), 'queued');
  r = await post('POST', `/v1/schedules/${name}/pause`, '{}');
  assert.equal(r.status, 200, r.text);
  assert.equal((await post('POST', `/v1/schedules/${name}/resume`, '{"x":1}')).status, 400);
  assert.equal(paused(), 't');
  assert.equal((await post('POST', `/v1/schedules/${name}/resume`, '')).status, 200);
  assert.equal((await post('DELETE', `/v1/schedules/${name}`, '{}')).status, 200);
  // resume's body is its input: any JSON value, but malformed JSON is 400 before anything happens.
  for (const raw of ['{bad json', '{"a":1}x', '[1,]']) {
    r = await post('POST', `/v1/jobs/${id}/resume`, raw);
    assert.equal(r.status, 400, `resume ${raw}: ${r.text}`);
    assert.match(r.body.error.message, /^request body is not valid JSON/);
  }
});

test('two Authorization headers: 400, neither token is used', async () => {
  const { body: { id } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue: uniq('auth2') } });
  for (const path of [`/v1/jobs/${id}`, `/v1/jobs/${id}/events`, '/v1/jobs']) {
    const out = await rawRequest(`GET ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer token-b\r\n`
      + `Authorization: Bearer ${A}\r\nConnection: close\r\n\r\n`);
    assert.match(out, /^HTTP\/1\.1 400 /, `${path}: ${out.slice(0, 200)}`);
    assert.match(out, /the Authorization header is given more than once/, path);
  }
  const stop = await rawRequest(`POST /v1/jobs/${id}/stop HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${A}\r\n`
    + `Authorization: Bearer ${A}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`);
  assert.match(stop, /^HTTP\/1\.1 400 /);
  assert.equal(psql(`SELECT status FROM bgexec.job WHERE id = ${id}`), 'queued');
});

test('two Last-Event-ID headers: 400, neither resume point is used; an ended stream\'s 204 has no Content-Length', async () => {
  const queue = uniq('lei2');
  const { body: { id } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } });
  const { lease } = claim(queue);
  finish(id, lease, 'completed', {});
  const out = await rawRequest(`GET /v1/jobs/${id}/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${A}\r\n`
    + 'Last-Event-ID: 2\r\nLast-Event-ID: 0\r\nConnection: close\r\n\r\n');
  assert.match(out, /^HTTP\/1\.1 400 /, out.slice(0, 200));
  assert.match(out, /the Last-Event-ID header is given more than once/);
  // RFC 9110 §8.6: a 204 carries no Content-Length
  const ended = await fetch(`${BASE}/v1/jobs/${id}/events`, { headers: { Authorization: `Bearer ${A}`, 'Last-Event-ID': '2' } });
  assert.equal(ended.status, 204);
  assert.equal(ended.headers.get('content-length'), null);
});

test('a request target in absolute form names the same resource as its path (RFC 9112 §3.2.2)', async () => {
  const { body: { id } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue: uniq('absform') } });
  for (const target of [`http://x/v1/jobs/${id}`, `HTTP://gateway.example:8080/v1/jobs/${id}`]) {
    const out = await rawRequest(`GET ${target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${A}\r\nConnection: close\r\n\r\n`);
    assert.match(out, /^HTTP\/1\.1 200 /, `${target}: ${out.slice(0, 200)}`);
    assert.match(out, new RegExp(`"id":${id}`));
  }
  const list = await rawRequest(`GET http://x?limit=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
  assert.match(list, /^HTTP\/1\.1 200 /, list.slice(0, 200)); // the dashboard at "/"
});

test('the event stream\'s ?token=: ambiguous is 400 before any lookup; no valid token is 401, nothing more; a valid one gets the request\'s own error', async () => {
  const queue = uniq('sse-auth');
  const { body: { id } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } });
  const { lease } = claim(queue);
  finish(id, lease, 'completed', {});
  const call = async (target, { method = 'GET', headers = {} } = {}) => {
    const r = await fetch(BASE + target, { method, headers, signal: AbortSignal.timeout(5000) });
    return { status: r.status, text: await r.text(), allow: r.headers.get('allow') };
  };
  const ev = `/v1/jobs/${id}/events`;
  // Two tokens, in either order, or the header beside ?token=: one would win unnoticed.
  for (const [q, headers, msg] of [
    [`token=${A}&token=nope`, {}, /query parameter \\"token\\" is given more than once/],
    [`token=nope&token=${A}`, {}, /query parameter \\"token\\" is given more than once/],
    ['token=nope', { Authorization: `Bearer ${A}` }, /both in the Authorization header and as \?token=/],
    [`token=${A}`, { Authorization: 'Bearer nope' }, /both in the Authorization header and as \?token=/],
  ]) {
    const r = await call(`${ev}?${q}`, { headers });
    assert.equal(r.status, 400, `${q} ${JSON.stringify(headers)}: ${r.text}`);
    assert.match(r.text, msg);
  }
  // No valid token: 401, whatever else is wrong, and the answer names none of it.
  for (const q of ['bogus=1', 'token=nope&bogus=1', 'token=nope&after=1&after=2', 'token=nope&after=x']) {
    const r = await call(`${ev}?${q}`);
    assert.equal(r.status, 401, `${q}: ${r.text}`);
    assert.doesNotMatch(r.text, /bogus|after/, q);
    assert.match(r.text, /missing or unknown bearer token \(Authorization: Bearer <token>, or \?token=\)/, q);
  }
  // A valid token: the request's own error.
  for (const [q, msg] of [
    [`token=${A}&bogus=1`, /unknown query parameter \\"bogus\\"/],
    [`token=${A}&after=1&after=2`, /query parameter \\"after\\" is given more than once/],
    [`token=${A}&after=x`, /after must be an integer from 0 to 2147483647/],
    // empty, as an empty limit= or before= is refused (it replayed from 0)
    [`token=${A}&after=`, /after must be an integer from 0 to 2147483647/],
    // past a seq's range: the message says the range, not "non-negative"
    [`token=${A}&after=2147483648`, /after must be an integer from 0 to 2147483647/],
  ]) {
    const r = await call(`${ev}?${q}`);
    assert.equal(r.status, 400, `${q}: ${r.text}`);
    assert.match(r.text, msg);
  }
  const bad = await call(`/v1/jobs/abc/events?token=${A}`);
  assert.equal(bad.status, 404, bad.text);
  for (const method of ['HEAD', 'POST']) {
    const r = await call(`${ev}?token=${A}`, { method });
    assert.equal(r.status, 405, `${method}: ${r.text}`);
    assert.equal(r.allow, 'GET');
  }
  assert.equal((await call(`${ev}?token=${A}&after=2`)).status, 204, 'the job has ended');
  // A body is refused as on every route that takes none ({"after": 0} was
  // ignored: the stream's 204 said the job was over from seq 2 on).
  const { hostname, port } = new URL(BASE);
  const body = '{"after":0}';
  const raw = await rawRequest(`GET ${ev}?token=${A}&after=2 HTTP/1.1\r\nHost: ${hostname}:${port}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`);
  assert.match(raw, /^HTTP\/1\.1 400 /, raw);
  assert.match(raw, /unknown field \\"after\\"/, raw);
});

test('?token= is no token outside the event stream: 401 on every other /v1 route, nothing done', async () => {
  const queue = uniq('qtoken');
  const { body: { id } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } });
  for (const [method, path, body] of [
    ['GET', `/v1/jobs?token=${A}`], ['GET', `/v1/jobs/${id}?token=${A}`], ['GET', `/v1/queues?token=${A}`],
    ['GET', `/v1/schedules?token=${A}`], ['GET', `/v1/no-such-route?token=${A}`],
    ['POST', `/v1/jobs/${id}/stop?token=${A}`], ['POST', `/v1/jobs?token=${A}`, { kind: 'noop', queue }]]) {
    const r = await api(method, path, { body });
    assert.equal(r.status, 401, `${method} ${path}: ${r.text}`);
    assert.equal(r.body.error.sqlstate, '28000', `${method} ${path}`);
  }
  assert.equal(psql(`SELECT count(*) || ' ' || min(status::text) FROM bgexec.job WHERE queue = '${queue}'`), '1 queued');
});

test('a Transfer-Encoding not ending in chunked is 400 and closes: what follows is never served (no smuggled request)', async () => {
  const queue = uniq('smuggled');
  const inner = JSON.stringify({ kind: 'smuggled', queue });
  const smuggled = `POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${A}\r\nContent-Type: application/json\r\n`
    + `Content-Length: ${Buffer.byteLength(inner)}\r\n\r\n${inner}`;
  for (const coding of ['gzip', 'identity', 'chunked, gzip']) {
    const out = await rawRequest(`GET /v1/queues HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${A}\r\n`
      + `Transfer-Encoding: ${coding}\r\n\r\n${smuggled}`);
    assert.match(out, /^HTTP\/1\.1 400 /, `${coding}: ${out}`);
    assert.equal(out.match(/HTTP\/1\.1 /g).length, 1, `${coding}: ${out}`);
    assert.match(out, /Transfer-Encoding must end in chunked/);
  }
  // a coding before chunked is one the gateway does not decode: 501
  const gz = await rawRequest(`POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${A}\r\n`
    + `Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n${smuggled}`);
  assert.match(gz, /^HTTP\/1\.1 501 /, gz);
  assert.equal(gz.match(/HTTP\/1\.1 /g).length, 1, gz);
  assert.equal(psql(`SELECT count(*) FROM bgexec.job WHERE queue = '${queue}'`), '0');
  // chunked alone is read as before
  const ok = await rawRequest(`POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${A}\r\n`
    + `Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n${Buffer.byteLength(inner).toString(16)}\r\n${inner}\r\n0\r\n\r\n`);
  assert.match(ok, /^HTTP\/1\.1 201 /, ok);
  assert.equal(psql(`SELECT count(*) FROM bgexec.job WHERE queue = '${queue}'`), '1');
});

test('a chunk size line or trailer section without end is 400 at 64 KiB, not held in memory', async () => {
  // With a token: without one the body is not read at all (401).
  const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${process.env.BGEXEC_GW_PID}/status`, 'utf8'))[1]);
  const before = rss();
  for (const [name, start, unit] of [
    ['a chunk extension', '1;', 'a=b;'.repeat(256)],
    ['a chunk size of zeros', '', '0'.repeat(1024)],
    ['a trailer section', '0\r\n', `X-T: ${'a'.repeat(1000)}\r\n`],
  ]) {
    const sock = net.connect(Number(new URL(BASE).port), '127.0.0.1');
    let got = '';
    let failed = false;
    sock.on('data', (d) => { got += d; });
    sock.on('error', () => { failed = true; });  // EPIPE once it closed
    const closed = new Promise((resolve) => sock.on('close', resolve));
    sock.write(`POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${A}\r\nTransfer-Encoding: chunked\r\n\r\n${start}`);
    // Up to 100 MB, a write at a time with the answer read between them:
    // past 64 KiB the gateway answers and closes, and bytes still arriving
    // then reset the connection, which drops an answer not read yet.
    for (let sent = 0; sent < 100 * 1024 * 1024 && !got && !failed; sent += unit.length) {
      if (!sock.write(unit)) await new Promise((r) => sock.once('drain', r));
      await new Promise((r) => setImmediate(r));
    }
    if (!failed) sock.end();
    await closed;
    const out = got;
    assert.match(out, /^HTTP\/1\.1 400 /, `${name}: ${out.slice(0, 200)}`);
    assert.match(out, /buffer overflow/, name);
  }
  assert.ok(rss() - before < 50 * 1024, `the gateway grew from ${before} to ${rss()} KiB`);
  assert.equal((await api('GET', '/v1/queues', { token: A })).status, 200);
});

test('a request line and headers up to 64 KiB are read, as the README says; past it 400', async () => {
  // A long filter: 30 000 bytes of query string (the limit was 16 KiB).
  const long = await api('GET', `/v1/jobs?queue=${'q'.repeat(30000)}`, { token: A });
  assert.notEqual(long.status, 400, long.text);
  const big = await api('GET', '/v1/queues', { token: A, headers: { 'X-Big': 'b'.repeat(40000) } });
  assert.equal(big.status, 200, big.text);
  const sock = net.connect(Number(new URL(BASE).port), '127.0.0.1');
  let got = '';
  sock.on('data', (d) => { got += d; });
  sock.on('error', () => {});
  const closed = new Promise((resolve) => sock.on('close', resolve));
  sock.write(`GET /v1/queues HTTP/1.1\r\nHost: x\r\nX-Big: ${'b'.repeat(70 * 1024)}\r\n\r\n`);
  await closed;
  assert.match(got, /^HTTP\/1\.1 400 /, got.slice(0, 200));
});

// Writes a request and keeps the socket open (no FIN): what the gateway
// answers within `ms`, before any more is sent.
function answerBeforeBody(bytes, ms = 3000) {
  const { hostname, port } = new URL(BASE);
  return new Promise((resolve) => {
    const sock = net.connect(Number(port), hostname);
    let out = '';
    const done = () => { sock.destroy(); resolve(out); };
    sock.on('data', (d) => { out += d; if (/\r\n\r\n[\s\S]*\}\s*$/.test(out)) done(); });
    sock.on('error', done);
    sock.on('close', done);
    sock.setTimeout(ms, done);
    sock.write(bytes);
  });
}

test('a body is read only from a request that may send one: 401 and 413 come before it', async () => {
  const before = count();
  // /v1 without a valid token: 401 before its body, and the connection
  // closed; over 1 MiB too (it was 413 "larger than 64 KiB").
  for (const auth of ['', 'Authorization: Bearer wrong\r\n']) {
    for (const length of [1 << 20, (1 << 20) + 1]) {
      const out = await answerBeforeBody(`POST /v1/jobs HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\n` +
        `Content-Length: ${length}\r\n\r\n`);
      assert.match(out, /^HTTP\/1\.1 401 /, JSON.stringify(out.slice(0, 120)));
      assert.match(out, /\r\nConnection: close\r\n/i);
    }
    const chunked = await answerBeforeBody('POST /v1/jobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n');
    assert.match(chunked, /^HTTP\/1\.1 401 /, JSON.stringify(chunked.slice(0, 120)));
  }
  // And no 100 Continue to invite it.
  const invited = await answerBeforeBody('POST /v1/jobs HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 10\r\n\r\n');
  assert.match(invited, /^HTTP\/1\.1 401 /, JSON.stringify(invited.slice(0, 120)));
  // Outside /v1 (no route there takes a body): 64 KiB at most.
  const big = await answerBeforeBody(`POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: ${64 * 1024 + 1}\r\n\r\n`);
  assert.match(big, /^HTTP\/1\.1 413 /, JSON.stringify(big.slice(0, 120)));
  assert.match(big, /larger than 64 KiB \(without a token\)/);
  const chunks = await rawRequest('GET /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n' +
    `10000\r\n${' '.repeat(0x10000)}\r\n1\r\n \r\n0\r\n\r\n`);
  assert.match(chunks, /^HTTP\/1\.1 413 /, JSON.stringify(chunks.slice(0, 120)));
  const small = await rawRequest('GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}');
  assert.match(small, /^HTTP\/1\.1 200 /, JSON.stringify(small.slice(0, 120)));
  // With a token, 1 MiB at most, refused before it is sent.
  const over = await answerBeforeBody(`POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${A}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${(1 << 20) + 1}\r\n\r\n`);
  assert.match(over, /^HTTP\/1\.1 413 /, JSON.stringify(over.slice(0, 120)));
  assert.match(over, /larger than 1 MiB"/);
  // With a token, a body as before: the job is submitted.
  const queue = uniq('body-token');
  const body = JSON.stringify({ kind: 'noop', queue });
  const ok = await rawRequest(`POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${A}\r\nContent-Type: application/json\r\n` +
    `Expect: 100-continue\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`);
  assert.match(ok, /HTTP\/1\.1 201 /, JSON.stringify(ok.slice(0, 200)));
  assert.equal(count(), before + 1);
});

test('an HTTP/1.1 request without Host or with two, or whose target is not a path, is 400', async () => {
  for (const raw of ['GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n',
    'GET /metrics HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n',
    'GET metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
    `GET v1/queues HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${A}\r\nConnection: close\r\n\r\n`]) {
    const out = await rawRequest(raw);
    assert.match(out, /^HTTP\/1\.1 400 /, JSON.stringify(raw));
    assert.match(out, /Host header|request target must be a path/, JSON.stringify(raw));
  }
  // HTTP/1.0 has no Host to require.
  const old = await rawRequest('GET /metrics HTTP/1.0\r\n\r\n');
  assert.match(old, /^HTTP\/1\.0 200 /, JSON.stringify(old.slice(0, 80)));
});

test('a bad ?after= is 400 with a Last-Event-ID too; a query name with a control character is only unknown', async () => {
  const { body: { id } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue: uniq('after-hdr') } });
  for (const q of ['abc', '', '-1']) {
    const r = await fetch(`${BASE}/v1/jobs/${id}/events?after=${q}`,
      { headers: { Authorization: `Bearer ${A}`, 'Last-Event-ID': '0' }, signal: AbortSignal.timeout(5000) });
    assert.equal(r.status, 400, q);
    assert.match((await r.json()).error.message, /^after must be an integer from 0 to 2147483647/);
  }
  const r = await api('GET', '/v1/jobs?%01repeated%20limit=1', { token: A });
  assert.equal(r.status, 400, r.text);
  assert.match(r.body.error.message, /^unknown query parameter "\uFFFDrepeated limit"/);
});

test('a schedule route checks the method before the name in the path', async () => {
  for (const [method, path] of [['PATCH', '/v1/schedules/a%00'], ['GET', '/v1/schedules/%ff/run']]) {
    const r = await api(method, path, { token: A });
    assert.equal(r.status, 405, `${method} ${path}: ${r.text}`);
  }
});
