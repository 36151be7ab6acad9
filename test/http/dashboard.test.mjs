// The dashboard in headless Chromium: watch a job complete live, stop another.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { api, claim, appendEvent, finish, sleep, uniq, A, BASE } from './lib.mjs';

// Headless Chromium on a fresh profile directory per run (Playwright passes
// it as --user-data-dir); `options` adds context options.
async function launch(options = {}) {
  const profile = mkdtempSync(join(tmpdir(), 'bgexec-chromium-'));
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    ...options,
  });
  return { browser, profile };
}

test('dashboard: live job page, the stop button, a job past an old terminal event', { timeout: 90000 }, async () => {
  const { browser, profile } = await launch();
  try {
    const page = await browser.newPage();
    const queue = uniq('ui');
    const { body: { id: live } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'workflow', queue,
      payload: { steps: [{ id: 'build', run: ['true'] }, { id: 'ship', needs: ['build'], run: ['true'] }] } } });
    const { body: { id: other } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue: uniq('ui2') } });

    const schedule = uniq('ui-nightly');
    const put = await api('PUT', `/v1/schedules/${schedule}`, { token: A, body: { cron: '0 3 * * *', kind: 'noop', queue } });
    assert.equal(put.status, 200, put.text);

    await page.goto(BASE + '/');
    await page.fill('#token', A);
    await page.click('#save-token');
    await page.waitForSelector(`#queues tr[data-queue="${queue}"]`);
    // The home page lists the token's schedules.
    await page.waitForSelector(`#schedules tr[data-schedule="${schedule}"]`);
    assert.equal(await page.textContent(`#schedules tr[data-schedule="${schedule}"] td:nth-child(2)`), '0 3 * * *');
    await api('DELETE', `/v1/schedules/${schedule}`, { token: A });
    await page.waitForSelector(`#jobs tr[data-id="${live}"]`);
    await page.click(`#jobs tr[data-id="${live}"]`);
    await page.waitForFunction((id) => document.querySelector('#job-id').textContent === String(id), live);
    await page.waitForFunction(() => document.querySelector('#job-status').textContent === 'queued');

    // Drive the job through the SQL worker API while the page watches.
    const { lease } = claim(queue);
    await page.waitForSelector('#events li[data-kind="started"]');
    appendEvent(live, lease, 'step_started', { step: 'build' });
    appendEvent(live, lease, 'log', { step: 'build', line: 'compiling' });
    appendEvent(live, lease, 'step_completed', { step: 'build', output: { artifact: 'a.tgz' } });
    await page.waitForSelector('#steps tr[data-step="build"]');
    await sleep(200);
    appendEvent(live, lease, 'step_started', { step: 'ship' });
    appendEvent(live, lease, 'step_completed', { step: 'ship', output: {} });
    finish(live, lease, 'completed', { shipped: true });
    await page.waitForSelector('#events li[data-kind="completed"]');
    await page.waitForFunction(() => document.querySelector('#job-status').textContent === 'completed');
    const kinds = await page.$$eval('#events li', (lis) => lis.map((li) => li.dataset.kind));
    assert.deepEqual(kinds, ['started', 'step_started', 'log', 'step_completed', 'step_started', 'step_completed', 'completed']);
    const steps = await page.$$eval('#steps tbody tr', (trs) => trs.map((tr) => [tr.dataset.step, tr.children[1].textContent]));
    assert.deepEqual(steps, [['build', 'completed'], ['ship', 'completed']]);
    assert.equal(await page.textContent('#stream-state'), '(ended)');

    // The other job: open it and press stop.
    await page.goto(`${BASE}/#/jobs/${other}`);
    await page.waitForFunction(() => document.querySelector('#job-status').textContent === 'queued');
    await page.click('#btn-stop');
    await page.waitForFunction(() => document.querySelector('#job-status').textContent === 'cancelled');
    await page.waitForSelector('#events li[data-kind="cancelled"]');
    assert.equal((await api('GET', `/v1/jobs/${other}`, { token: A })).body.status, 'cancelled');
    // and retry it from the page
    await page.click('#btn-retry');
    await page.waitForFunction(() => document.querySelector('#job-status').textContent === 'queued');

    // A job whose log holds an old terminal event (failed, then retried by
    // hand): the page follows it past that event, the server ends the stream.
    const rq = uniq('ui3');
    const { body: { id: again } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue: rq } });
    let c = claim(rq); // 1 started
    assert.equal(finish(again, c.lease, 'failed', { retryable: false }), 'failed'); // 2 failed
    assert.equal((await api('POST', `/v1/jobs/${again}/retry`, { token: A })).status, 200); // 3 retry_scheduled
    c = claim(rq); // 4 started
    appendEvent(again, c.lease, 'progress', { pct: 50 }); // 5
    await page.goto(`${BASE}/#/jobs/${again}`);
    await page.waitForSelector('#events li[data-kind="progress"]');
    await page.waitForFunction(() => document.querySelector('#job-status').textContent === 'running');
    assert.deepEqual(await page.$$eval('#events li', (lis) => lis.map((li) => li.dataset.kind)),
      ['started', 'failed', 'retry_scheduled', 'started', 'progress']);
    assert.equal(await page.textContent('#stream-state'), '(live)');
    finish(again, c.lease, 'completed', {});
    await page.waitForSelector('#events li[data-kind="completed"]');
    await page.waitForFunction(() => document.querySelector('#job-status').textContent === 'completed');
    // The server closed the stream; EventSource's reconnect got 204 and stays closed.
    await page.waitForFunction(() => source.readyState === EventSource.CLOSED, null, { timeout: 10000 });
    assert.equal(await page.textContent('#stream-state'), '(ended)');
    assert.equal(await page.$$eval('#events li', (lis) => lis.length), 6);
  } finally {
    await browser.close();
    rmSync(profile, { recursive: true, force: true });
  }
});
