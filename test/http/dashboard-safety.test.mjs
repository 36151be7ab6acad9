// The dashboard against a hostile or hurried user: another site framing it
// (its buttons act with the token the page keeps), the headers of every
// file and answer, older pages of the job list kept through the 3 s
// refresh, and a slow answer for a job the page has left never rendered
// into the next job's page.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { once } from 'node:events';
import { rmSync } from 'node:fs';
import { launch } from './browser.mjs';
import { api, psql, claim, appendEvent, finish, sleep, uniq, A, BASE } from './lib.mjs';

async function login(page) {
  await page.goto(BASE + '/');
  await page.fill('#token', A);
  await page.click('#save-token');
  await page.waitForSelector('#jobs tbody tr');
}

test('dashboard headers: no framing by another site, a script policy, nosniff on every answer', async () => {
  const csp = (await fetch(BASE + '/')).headers.get('content-security-policy') ?? '';
  for (const path of ['/', '/index.html', '/app.js', '/app.css']) {
    const res = await fetch(BASE + path);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-security-policy') ?? '', /frame-ancestors 'none'/, path);
    assert.match(res.headers.get('content-security-policy') ?? '', /script-src 'self'/, path);
    assert.equal(res.headers.get('x-frame-options'), 'DENY', path);
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff', path);
  }
  assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
  // The icon the browser asks for with the page: none, without an error
  // (a 404 in the console at every load)
  const icon = await fetch(BASE + '/favicon.ico');
  assert.equal(icon.status, 204);
  assert.equal(await icon.text(), '');
  assert.equal(icon.headers.get('x-content-type-options'), 'nosniff');
  assert.equal((await fetch(BASE + '/favicon.ico', { method: 'POST' })).status, 405);
  // API answers (errors too), metrics and the event stream
  for (const [path, token] of [['/v1/queues', A], ['/v1/jobs/999999999', A], ['/v1/queues', undefined], ['/metrics', undefined]]) {
    const res = await api('GET', path, { token });
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff', `${path} ${res.status}`);
  }
  const queue = uniq('hdr');
  const { body: { id } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } });
  const ac = new AbortController();
  const res = await fetch(`${BASE}/v1/jobs/${id}/events`, { headers: { Authorization: `Bearer ${A}` }, signal: ac.signal });
  assert.equal(res.headers.get('content-type'), 'text/event-stream');
  assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
  ac.abort();
});

test('dashboard: a page of another origin cannot frame it, and it runs under its own policy', { timeout: 60000 }, async () => {
  // The attacker's page: the dashboard in a frame, where a click could land
  // on its stop, delete or pause buttons.
  const evil = http.createServer((req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/html' });
    res.end(`<!doctype html><iframe id="f" src="${BASE}/" width="800" height="600"></iframe>`);
  });
  evil.listen(0, '127.0.0.1');
  await once(evil, 'listening');
  const { browser, profile } = await launch();
  try {
    const page = await browser.newPage();
    const violations = [];
    page.on('console', (m) => { if (/Content Security Policy|Refused to/i.test(m.text())) violations.push(m.text()); });
    // localhost and 127.0.0.1 are two origins
    await page.goto(`http://localhost:${evil.address().port}/`);
    await sleep(1500);
    const framed = page.frames().filter((f) => f !== page.mainFrame());
    for (const f of framed) {
      const hasDashboard = await f.evaluate(() => !!document.querySelector('#token')).catch(() => false);
      assert.equal(hasDashboard, false, `the dashboard rendered in a frame of another origin (${f.url()})`);
    }
    violations.length = 0;  // the frame's refusal is reported too

    // The page itself works under the policy: home, a job page and its stream.
    await login(page);
    const queue = uniq('csp');
    const { body: { id } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } });
    const { lease } = claim(queue);
    appendEvent(id, lease, 'log', { line: 'under the policy' });
    await page.goto(`${BASE}/#/jobs/${id}`);
    await page.waitForSelector('#events li[data-kind="log"]');
    assert.deepEqual(violations, []);
  } finally {
    await browser.close();
    rmSync(profile, { recursive: true, force: true });
    evil.close();
  }
});

test('dashboard: older pages of the job list stay through the 3 s refresh, and the next older click goes on', { timeout: 60000 }, async () => {
  const queue = uniq('paging');
  psql(`SET ROLE tenant_a; SELECT count(bgexec.submit('noop', '{}', '${queue}')) FROM generate_series(1, 120)`);
  assert.equal((await api('GET', `/v1/jobs?queue=${queue}&limit=500`, { token: A })).body.jobs.length, 120);
  const { browser, profile } = await launch();
  try {
    const page = await browser.newPage();
    await login(page);
    await page.fill('#f-queue', queue);
    await page.click('#filters button');
    const rows = () => page.$$eval('#jobs tbody tr', (t) => t.map((r) => Number(r.dataset.id)));
    await page.waitForFunction(() => document.querySelectorAll('#jobs tbody tr').length === 50);
    await page.click('#more');
    await page.waitForFunction(() => document.querySelectorAll('#jobs tbody tr').length === 100);
    await sleep(4000);  // a refresh or more
    assert.equal((await rows()).length, 100, 'the refresh put the first page back');
    await page.click('#more');
    await page.waitForFunction(() => document.querySelectorAll('#jobs tbody tr').length === 120);
    const ids = await rows();
    assert.equal(new Set(ids).size, 120);
    assert.deepEqual(ids, [...ids].sort((x, y) => y - x));
    assert.equal(await page.isHidden('#more'), true);
    // filter starts over from the newest
    await page.click('#filters button');
    await page.waitForFunction(() => document.querySelectorAll('#jobs tbody tr').length === 50);
  } finally {
    await browser.close();
    rmSync(profile, { recursive: true, force: true });
  }
});

test('dashboard: a slow answer for a job the page has left never renders into the next job\'s page', { timeout: 60000 }, async () => {
  const qa = uniq('nav-a');
  const qb = uniq('nav-b');
  const { body: { id: a } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue: qa } });
  const { body: { id: b } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue: qb } });
  const { lease } = claim(qa);
  appendEvent(a, lease, 'log', { line: 'job a only' });
  const { browser, profile } = await launch();
  try {
    const page = await browser.newPage();
    await login(page);
    // Job a's answer is held until the page has moved on to job b.
    let release;
    const held = new Promise((r) => { release = r; });
    await page.route(`**/v1/jobs/${a}`, async (route) => { await held; await route.continue(); });
    await page.evaluate((id) => { location.hash = `#/jobs/${id}`; }, a);
    await sleep(300);
    await page.evaluate((id) => { location.hash = `#/jobs/${id}`; }, b);
    await page.waitForFunction(() => document.querySelector('#job-status').textContent === 'queued');
    release();
    await sleep(1500);
    assert.equal(await page.textContent('#job-id'), String(b));
    assert.equal(await page.textContent('#job-status'), 'queued');
    assert.equal(await page.textContent('#job-fields dd#f-queue'), qb);
    assert.deepEqual(await page.$$eval('#events li', (l) => l.map((x) => x.textContent)), []);
    assert.match(await page.evaluate(() => source && source.url), new RegExp(`/v1/jobs/${b}/events`));
    // and home: a job answer that comes after it opens no stream
    await page.route(`**/v1/jobs/${b}`, async (route) => { await sleep(1000); await route.continue(); });
    await page.evaluate((id) => { location.hash = `#/jobs/${id}`; }, a);
    await page.evaluate((id) => { location.hash = `#/jobs/${id}`; }, b);
    await page.evaluate(() => { location.hash = '#/'; });
    await sleep(2000);
    assert.equal(await page.evaluate(() => source), null);
    assert.equal(await page.isHidden('#job'), true);
  } finally {
    await browser.close();
    rmSync(profile, { recursive: true, force: true });
  }
});

test('dashboard: a workflow of 2000 steps is replayed in seconds, its steps table whole', { timeout: 90000 }, async () => {
  const queue = uniq('ui-steps');
  const { body: { id } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } });
  const { lease } = claim(queue);
  // 4000 step events (seq 2..4001), then completed
  psql(`SELECT bgexec.append_events(${id}, ${lease}, (SELECT jsonb_agg(jsonb_build_object(
          'kind', CASE WHEN i % 2 = 0 THEN 'step_started' ELSE 'step_completed' END,
          'data', jsonb_build_object('step', 'step-' || (i / 2), 'output', '{}'::jsonb)) ORDER BY i)
          FROM generate_series(0, 3999) i))`);
  finish(id, lease, 'completed', {});
  const { browser, profile } = await launch();
  try {
    const page = await browser.newPage();
    await login(page);
    const t0 = Date.now();
    await page.evaluate((j) => { location.hash = `#/jobs/${j}`; }, id);
    // a render of the whole table per step event took 30 s here
    await page.waitForSelector('#events li[data-kind="completed"]', { timeout: 15000 });
    await page.waitForFunction(() => document.querySelectorAll('#steps tbody tr').length === 2000, null, { timeout: 5000 });
    assert.ok(Date.now() - t0 < 15000);
    assert.equal(await page.textContent('#steps tr[data-step="step-1999"] td:nth-child(2)'), 'completed');
    assert.equal(await page.$$eval('#events li', (l) => l.length), 4002);
  } finally {
    await browser.close();
    rmSync(profile, { recursive: true, force: true });
  }
});

test('dashboard: a job page whose stream is refused (503) follows it again, not left "(closed)"', { timeout: 60000 }, async () => {
  const queue = uniq('refused');
  const { body: { id } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } });
  const { browser, profile } = await launch();
  try {
    const page = await browser.newPage();
    await login(page);
    // The job's first two streams are refused, as a gateway whose database
    // is away refuses them; EventSource does not try again after a 503.
    let refused = 0;
    await page.route(`**/v1/jobs/${id}/events*`, async (route) => {
      if (refused < 2) {
        refused++;
        await route.fulfill({ status: 503, contentType: 'application/json',
          body: '{"error": {"sqlstate": "57P03", "message": "the database is not answering"}}' });
      } else {
        await route.continue();
      }
    });
    await page.evaluate((j) => { location.hash = `#/jobs/${j}`; }, id);
    await page.waitForFunction(() => document.querySelector('#stream-state').textContent === '(closed)');
    const { lease } = claim(queue);
    appendEvent(id, lease, 'log', { line: 'after the outage' });
    await page.waitForSelector('#events li[data-kind="log"]', { timeout: 20000 });
    assert.equal(refused, 2);
    assert.deepEqual(await page.$$eval('#events li', (l) => l.map((x) => x.dataset.kind)), ['started', 'log']);
    assert.equal(await page.textContent('#stream-state'), '(live)');
  } finally {
    await browser.close();
    rmSync(profile, { recursive: true, force: true });
  }
});
