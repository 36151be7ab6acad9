// The dashboard in headless Chromium: watch a job complete live, stop another;
// create, edit, pause, resume, run and delete a schedule through its form;
// pause and resume a queue with an administrator's token, refused for a
// tenant's; a job suspended at an approval shown waiting, approved, and
// followed past each resume.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import { launch } from './browser.mjs';
import { api, psql, claim, appendEvent, finish, sleep, uniq, startGateway, A, B, BASE } from './lib.mjs';

test('dashboard: live job page, the stop button, a job past an old terminal event', { timeout: 90000 }, async () => {
  const { browser, profile } = await launch();
  try {
    const page = await browser.newPage();
    const queue = uniq('ui');
    const { body: { id: live } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'workflow', queue,
      payload: { steps: [{ id: 'build', run: ['true'] }, { id: 'ship', needs: ['build'], run: ['true'] }] } } });
    const otherQueue = uniq('ui2');
    const { body: { id: other } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue: otherQueue } });

    // A live worker, its id escaped as text (the table is built as HTML).
    const worker = uniq('ui-worker') + '<i>';
    psql(`SELECT bgexec.register_worker('${worker}', '{${queue}}', 2, '{"host": "ui-host", "pid": 77}')`);

    const schedule = uniq('ui-nightly');
    const put = await api('PUT', `/v1/schedules/${schedule}`, { token: A, body: { cron: '0 3 * * *', kind: 'noop', queue } });
    assert.equal(put.status, 200, put.text);

    await page.goto(BASE + '/');
    await page.fill('#token', A);
    await page.click('#save-token');
    await page.waitForSelector(`#queues tr[data-queue="${queue}"]`);
    // The home page lists the live workers.
    await page.waitForFunction((id) => [...document.querySelectorAll('#workers tbody tr')]
      .some((tr) => tr.cells[0].textContent === id && tr.cells[1].textContent === 'ui-host'), worker);
    psql(`SELECT bgexec.deregister_worker('${worker}')`);
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
    // a step whose "if" was false: skipped, not completed
    appendEvent(live, lease, 'step_started', { step: 'notify' });
    appendEvent(live, lease, 'step_completed', { step: 'notify', output: null, skipped: true });
    finish(live, lease, 'completed', { shipped: true });
    await page.waitForSelector('#events li[data-kind="completed"]');
    await page.waitForFunction(() => document.querySelector('#job-status').textContent === 'completed');
    const kinds = await page.$$eval('#events li', (lis) => lis.map((li) => li.dataset.kind));
    assert.deepEqual(kinds, ['started', 'step_started', 'log', 'step_completed', 'step_started', 'step_completed',
      'step_started', 'step_completed', 'completed']);
    // the steps table is rebuilt at most every 100 ms: wait for its last rebuild
    await page.waitForFunction(() => document.querySelector('#steps tr[data-step="notify"] td:nth-child(2)')?.textContent === 'skipped');
    const steps = await page.$$eval('#steps tbody tr', (trs) => trs.map((tr) => [tr.dataset.step, tr.children[1].textContent]));
    assert.deepEqual(steps, [['build', 'completed'], ['ship', 'completed'], ['notify', 'skipped']]);
    assert.equal(await page.textContent('#stream-state'), '(ended)');

    // The other job: open it and press stop.
    await page.goto(`${BASE}/#/jobs/${other}`);
    await page.waitForFunction(() => document.querySelector('#job-status').textContent === 'queued');
    // queued where no live worker claims: the page says so, until it is not queued
    await page.waitForFunction((q) => document.querySelector('#job-note').textContent === `no live worker claims from queue ${q}`
      && !document.querySelector('#job-note').hidden, otherQueue);
    await page.click('#btn-stop');
    await page.waitForFunction(() => document.querySelector('#job-status').textContent === 'cancelled');
    await page.waitForFunction(() => document.querySelector('#job-note').hidden);
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

test('dashboard: a long log is followed with a few job refreshes, not one per event', { timeout: 90000 }, async () => {
  const { browser, profile } = await launch();
  try {
    const queue = uniq('ui-long');
    const { body: { id } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } });
    const { lease } = claim(queue);
    psql(`SELECT count(bgexec.append_event(${id}, ${lease}, 'log', jsonb_build_object('i', i)))
            FROM generate_series(1, 998) i`);
    finish(id, lease, 'completed', {}); // seq 1000
    const page = await browser.newPage();
    let gets = 0;
    page.on('request', (r) => { if (new URL(r.url()).pathname === `/v1/jobs/${id}`) gets++; });
    await page.goto(BASE + '/');
    await page.fill('#token', A);
    await page.click('#save-token');
    await page.goto(`${BASE}/#/jobs/${id}`);
    await page.waitForSelector('#events li[data-kind="completed"]', { timeout: 30000 });
    await page.waitForFunction(() => document.querySelector('#job-status').textContent === 'completed');
    await sleep(500);
    // one GET per event was 1000 and more
    assert.ok(gets < 50, `${gets} GETs of the job for 1000 events`);
  } finally {
    await browser.close();
    rmSync(profile, { recursive: true, force: true });
  }
});

test('dashboard: a rewound log drops the lost events and the steps they told of', { timeout: 90000 }, async () => {
  const { browser, profile } = await launch();
  try {
    const queue = uniq('ui-rewind');
    const { body: { id } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } });
    const { lease } = claim(queue); // 1 started
    appendEvent(id, lease, 'step_started', { step: 'a' }); // 2
    appendEvent(id, lease, 'step_completed', { step: 'a', output: 1 }); // 3
    appendEvent(id, lease, 'step_started', { step: 'b' }); // 4
    const page = await browser.newPage();
    await page.goto(BASE + '/');
    await page.fill('#token', A);
    await page.click('#save-token');
    await page.goto(`${BASE}/#/jobs/${id}`);
    await page.waitForSelector('#events li[data-seq="4"]');
    await page.waitForFunction(() => document.querySelector('#steps tr[data-step="b"] td:nth-child(2)')?.textContent === 'started');
    // An asynchronous failover that kept events 1-2 only, played as e2e 82
    // plays it; the job's next events take seqs 3 and 4 again.  The stream
    // finds it at its next poll and says `rewound` to 2.
    psql(`BEGIN; DELETE FROM bgexec.job_event WHERE job_id = ${id} AND seq > 2;
          UPDATE bgexec.job SET last_seq = 2 WHERE id = ${id}; COMMIT`);
    appendEvent(id, lease, 'step_failed', { step: 'a', error: { message: 'disk full' } }); // 3
    finish(id, lease, 'failed', { message: 'disk full' }); // 4
    await page.waitForSelector('#events li[data-kind="failed"]', { timeout: 20000 });
    await page.waitForFunction(() => document.querySelector('#job-status').textContent === 'failed');
    const kinds = await page.$$eval('#events li', (lis) => lis.map((li) => `${li.dataset.seq} ${li.dataset.kind}`));
    assert.deepEqual(kinds, ['1 started', '2 step_started', '3 step_failed', '4 failed']);
    await sleep(300); // the steps table is rebuilt at most every 100 ms
    const steps = await page.$$eval('#steps tbody tr', (trs) => trs.map((tr) => [tr.dataset.step, tr.children[1].textContent]));
    // Step b's start was lost: it is not shown running for ever.
    assert.deepEqual(steps, [['a', 'failed']]);
  } finally {
    await browser.close();
    rmSync(profile, { recursive: true, force: true });
  }
});

test('dashboard: a job suspended at an approval: the banner, the waiting and approved steps, and following it past a resume', { timeout: 90000 }, async () => {
  const { browser, profile } = await launch();
  try {
    const queue = uniq('ui-approval');
    const { body: { id } } = await api('POST', '/v1/jobs', { token: A, body: { kind: 'workflow', queue, payload: { steps: [
      { id: 'a', run: ['true'] },
      { id: 'g', needs: ['a'], approval: { prompt: 'go?' } },
      { id: 'h', needs: ['g'], approval: { prompt: 'ship <b>it</b>?' } }] } } });
    let c = claim(queue); // 1 started
    appendEvent(id, c.lease, 'step_started', { step: 'a' }); // 2
    appendEvent(id, c.lease, 'step_completed', { step: 'a', output: 'built' }); // 3
    assert.equal(finish(id, c.lease, 'suspended', { step: 'g', prompt: 'go?' }), 'suspended'); // 4

    const page = await browser.newPage();
    await page.goto(BASE + '/');
    await page.fill('#token', A);
    await page.click('#save-token');
    await page.goto(`${BASE}/#/jobs/${id}`);
    await page.waitForSelector('#events li[data-kind="suspended"]');
    await page.waitForFunction(() => document.querySelector('#job-status').textContent === 'suspended');
    // what it waits for, said plainly, next to the resume control
    await page.waitForFunction(() => !document.querySelector('#job-waiting')?.hidden);
    assert.equal(await page.textContent('#job-waiting-text'), 'Waiting for approval at step g: "go?"');
    assert.equal(await page.$$eval('#job-waiting #btn-resume, #job-waiting #resume-input', (els) => els.length), 2);
    // suspended is no end: the server closed the stream, and the page waits for the resume
    await page.waitForFunction(() => source.readyState === EventSource.CLOSED, null, { timeout: 10000 });
    assert.equal(await page.textContent('#stream-state'), '(waiting for resume)');
    // the approval step is listed, with its prompt as text
    const rows = () => page.$$eval('#steps tbody tr', (trs) => trs.map((tr) => [tr.dataset.step, tr.children[1].textContent, tr.children[2].textContent]));
    await page.waitForFunction(() => document.querySelector('#steps tr[data-step="g"]'));
    assert.deepEqual(await rows(), [['a', 'completed', '"built"'], ['g', 'waiting for approval', 'go?']]);
    // the attempt the suspension handed back is not shown as attempt 0 of a started job
    assert.equal(await page.textContent('#f-attempt'), '0 of 1 used (a run that suspends gives its attempt back: the resumed run is attempt 1)');

    // Resume from the page: the answer is a sentence, the page follows the job on.
    await page.fill('#resume-input', '{"approved": true, "note": "<i>ok</i>"}');
    await page.click('#btn-resume');
    await page.waitForFunction((id) => document.querySelector('#status-line').textContent === `resumed job ${id}`, id);
    await page.waitForSelector('#events li[data-kind="resumed"]');
    await page.waitForFunction(() => document.querySelector('#job-waiting').hidden);
    await page.waitForFunction(() => document.querySelector('#steps tr[data-step="g"] td:nth-child(2)')?.textContent === 'approved');
    assert.deepEqual(await rows(), [['a', 'completed', '"built"'], ['g', 'approved', '{\n  "approved": true,\n  "note": "<i>ok</i>"\n}']]);
    assert.equal(await page.textContent('#stream-state'), '(live)');
    c = claim(queue); // 6 started
    await page.waitForSelector('#events li[data-seq="6"][data-kind="started"]');
    await page.waitForFunction(() => document.querySelector('#f-attempt').textContent === '1');
    assert.equal(finish(id, c.lease, 'suspended', { step: 'h', prompt: 'ship <b>it</b>?' }), 'suspended'); // 7
    await page.waitForFunction(() => document.querySelector('#job-waiting-text')?.textContent === 'Waiting for approval at step h: "ship <b>it</b>?"');
    assert.equal(await page.$$eval('#job-waiting b, #steps b, #steps i', (els) => els.length), 0);
    await page.waitForFunction(() => document.querySelector('#stream-state').textContent === '(waiting for resume)');

    // Resumed elsewhere (the API, the CLI): the page notices and follows on.
    await page.waitForFunction(() => source.readyState === EventSource.CLOSED, null, { timeout: 10000 });
    assert.equal((await api('POST', `/v1/jobs/${id}/resume`, { token: A, body: null })).status, 200); // 8
    await page.waitForSelector('#events li[data-seq="8"][data-kind="resumed"]', { timeout: 15000 });
    await page.waitForFunction(() => document.querySelector('#steps tr[data-step="h"] td:nth-child(2)')?.textContent === 'approved');
    assert.equal(await page.textContent('#steps tr[data-step="h"] td:nth-child(3)'), 'null');
    c = claim(queue); // 9
    finish(id, c.lease, 'completed', { done: true }); // 10
    await page.waitForSelector('#events li[data-seq="10"][data-kind="completed"]');
    await page.waitForFunction(() => document.querySelector('#stream-state').textContent === '(ended)');
    assert.equal(await page.$$eval('#events li', (lis) => lis.length), 10);
  } finally {
    await browser.close();
    rmSync(profile, { recursive: true, force: true });
  }
});

test('dashboard: schedule form creates, refuses bad input, edits, pauses, resumes, runs and deletes; text stays text', { timeout: 90000 }, async () => {
  // The browser's zone is the form's default time zone.
  const { browser, profile } = await launch({ timezoneId: 'Asia/Tokyo' });
  try {
    const page = await browser.newPage();
    await page.addInitScript(() => { window.injected = 0; });
    // confirm() answers: no, unless accept is set.
    const dialogs = [];
    let accept = false;
    page.on('dialog', (d) => { dialogs.push(d.message()); return accept ? d.accept() : d.dismiss(); });
    const asked = async () => {  // the dialogs shown since the last call
      for (let i = 0; i < 100 && !dialogs.length; i++) await sleep(20);
      return dialogs.splice(0);
    };
    const name = uniq('ui-sched');
    const queue = uniq('uis');
    const row = `#schedules tr[data-schedule="${name}"]`;
    const cell = (n) => page.textContent(`${row} td:nth-child(${n})`);
    const msg = () => page.textContent('#s-msg');
    const stored = () => psql(`SELECT count(*) FROM bgexec.schedule WHERE name = '${name}'`);
    const submit = async (fields) => {
      for (const [id, value] of Object.entries(fields)) await page.fill(`#s-${id}`, value);
      await page.click('#s-save');
    };
    // Waits for the form's message to change from `before`; returns it and whether it is an error.
    const answer = async (before) => {
      await page.waitForFunction((b) => document.querySelector('#s-msg').textContent !== b, before);
      return { text: await msg(), error: await page.$eval('#s-msg', (el) => el.className === 'error') };
    };

    await page.goto(BASE + '/');
    await page.fill('#token', A);
    await page.click('#save-token');
    await page.waitForSelector('#schedules thead');
    assert.equal(await page.inputValue('#s-time-zone'), 'Asia/Tokyo');
    assert.equal(await page.isChecked('#s-overlap'), true);

    // A bad cron: the server's message as it came, nothing stored, the form kept.
    await submit({ name, cron: '0 25 * * *', kind: 'noop', queue });
    let a = await answer('');
    const expected = (await api('PUT', `/v1/schedules/${name}`, { token: A,
      body: { cron: '0 25 * * *', kind: 'noop', queue, time_zone: 'Asia/Tokyo', overlap: true } })).body.error.message;
    assert.match(expected, /^cron hour field "25" is not valid/);
    assert.deepEqual(a, { text: expected, error: true });
    assert.equal(stored(), '0');
    assert.equal(await page.inputValue('#s-cron'), '0 25 * * *');
    // A payload that is not JSON, or not an object, is caught before any request.
    await submit({ cron: '0 3 * * *', payload: '{oops' });
    a = await answer(a.text);
    assert.match(a.text, /^payload is not valid JSON: /);
    assert.ok(a.error);
    await submit({ payload: '[1]' });
    a = await answer(a.text);
    assert.deepEqual(a, { text: 'payload must be a JSON object', error: true });
    // An unknown zone; HTML in the message is shown as text.
    await submit({ payload: '', 'time-zone': '<img src=x onerror="window.injected=1">' });
    a = await answer(a.text);
    assert.deepEqual(a, { text: 'time_zone "<img src=x onerror="window.injected=1">" is not known', error: true });
    assert.equal(await page.$$eval('#s-msg *', (els) => els.length), 0);
    assert.equal(stored(), '0');
    assert.equal(await page.$$eval(row, (trs) => trs.length), 0);

    // Created: the row with its next run; HTML in the payload stays text.
    await page.uncheck('#s-overlap');
    await submit({ 'time-zone': 'Asia/Tokyo', payload: '{"note": "<b>x</b>"}' });
    await page.waitForSelector(row);
    a = await answer(a.text);
    assert.ok(!a.error, a.text);
    const got = (await api('GET', `/v1/schedules/${name}`, { token: A })).body;
    assert.equal(got.cron, '0 3 * * *');
    assert.equal(got.time_zone, 'Asia/Tokyo');
    assert.equal(got.overlap, false);
    assert.deepEqual(got.payload, { note: '<b>x</b>' });
    assert.match(a.text, new RegExp(`^saved ${name}, next run \\d{4}-\\d\\d-\\d\\dT18:00:00Z$`));  // 03:00 in Tokyo
    assert.equal(await cell(6), got.next_run_at.replace(/\.000000Z$/, 'Z'));  // shown to the second
    assert.equal(await cell(7), '{"note":"<b>x</b>"}');
    assert.equal(await page.inputValue('#s-name'), '');  // the form is cleared
    assert.equal(await page.inputValue('#s-time-zone'), 'Asia/Tokyo');

    // A last error and fields the form does not show, set behind its back:
    // the error shows as text at the next refresh.
    psql(`UPDATE bgexec.schedule SET last_error = '<b>boom</b>', last_run_at = '2020-01-01 03:00Z',
      priority = 5, max_attempts = 3, timeout = '1 minute', concurrency_key = 'k' WHERE name = '${name}'`);
    await page.waitForFunction((sel) => document.querySelector(sel)?.textContent === '<b>boom</b>',
      `${row} td:nth-child(10)`);
    assert.equal(await cell(8), (await api('GET', `/v1/schedules/${name}`, { token: A })).body.last_run_at);
    assert.equal(await page.$$eval('#schedules b', (els) => els.length), 0);

    // The same name from a blank form asks before replacing; no replaces nothing.
    accept = false;
    await submit({ name, cron: '@daily', kind: 'noop' });
    assert.deepEqual(await asked(), [`Replace schedule ${name}?`]);
    assert.equal((await api('GET', `/v1/schedules/${name}`, { token: A })).body.cron, '0 3 * * *');
    await page.click('#s-clear');
    assert.equal(await page.inputValue('#s-name'), '');

    // Edit: the form takes the row; saving replaces it and keeps the rest.
    await page.click(`${row} button[data-act="edit"]`);
    assert.equal(await page.inputValue('#s-name'), name);
    assert.equal(await page.$eval('#s-name', (el) => el.readOnly), true);
    assert.equal(await page.inputValue('#s-cron'), '0 3 * * *');
    assert.equal(await page.inputValue('#s-kind'), 'noop');
    assert.equal(await page.inputValue('#s-queue'), queue);
    assert.equal(await page.inputValue('#s-time-zone'), 'Asia/Tokyo');
    assert.equal(await page.isChecked('#s-overlap'), false);
    assert.deepEqual(JSON.parse(await page.inputValue('#s-payload')), { note: '<b>x</b>' });
    await submit({ cron: '30 4 * * *' });
    await page.waitForFunction((sel) => document.querySelector(sel)?.textContent === '30 4 * * *', `${row} td:nth-child(2)`);
    const edited = (await api('GET', `/v1/schedules/${name}`, { token: A })).body;
    assert.equal(edited.last_error, null);  // replacing clears it
    assert.deepEqual([edited.priority, edited.max_attempts, edited.timeout, edited.concurrency_key, edited.overlap],
      [5, 3, '00:01:00', 'k', false]);
    assert.deepEqual(edited.payload, { note: '<b>x</b>' });
    assert.equal(await cell(10), '');
    assert.equal(await page.$eval('#s-name', (el) => el.readOnly), false);
    // Numbers as stored, through the row, the form and a save: a plain
    // JSON.parse made 19.90 19.9 and the 30 digits 1.2345678901234568e+29,
    // and saving the edited schedule stored those.
    psql(`UPDATE bgexec.schedule SET payload = '{"note": "<b>x</b>", "price": 19.90, "big": 123456789012345678901234567890}'
      WHERE name = '${name}'`);
    await page.waitForFunction((sel) => document.querySelector(sel)?.textContent.includes('19.90'), `${row} td:nth-child(7)`);
    assert.equal(await cell(7), '{"big":123456789012345678901234567890,"note":"<b>x</b>","price":19.90}');
    await page.click(`${row} button[data-act="edit"]`);
    assert.equal(await page.inputValue('#s-payload'), '{"big":123456789012345678901234567890,"note":"<b>x</b>","price":19.90}');
    await submit({ cron: '30 4 * * *' });
    await page.waitForFunction((n) => document.querySelector('#s-msg').textContent.startsWith(`saved ${n}`), name);
    assert.equal(psql(`SELECT payload::text FROM bgexec.schedule WHERE name = '${name}'`),
      '{"big": 123456789012345678901234567890, "note": "<b>x</b>", "price": 19.90}');

    // Pause: the row says so and offers resume, which answers the next run.
    await page.click(`${row} button[data-act="pause"]`);
    await page.waitForSelector(`${row} button[data-act="resume"]`);
    assert.equal(await cell(6), 'paused');
    assert.equal(await msg(), `paused ${name}`);
    assert.equal((await api('GET', `/v1/schedules/${name}`, { token: A })).body.paused, true);
    await page.click(`${row} button[data-act="resume"]`);
    await page.waitForSelector(`${row} button[data-act="pause"]`);
    assert.match(await msg(), new RegExp(`^resumed ${name}, next run \\d{4}-\\d\\d-\\d\\dT19:30:00Z$`));  // 04:30 in Tokyo
    assert.equal((await api('GET', `/v1/schedules/${name}`, { token: A })).body.paused, false);

    // Run now: its job, shown as the last job.
    await page.click(`${row} button[data-act="run"]`);
    await page.waitForFunction((sel) => /^ran /.test(document.querySelector(sel)?.textContent), '#s-msg');
    const ranId = (await api('GET', `/v1/schedules/${name}`, { token: A })).body.last_job_id;
    assert.equal(await msg(), `ran ${name}: job ${ranId}`);
    await page.waitForSelector(`${row} a[href="#/jobs/${ranId}"]`);

    // Delete asks first: dismissed keeps it, accepted removes it.
    await page.click(`${row} button[data-act="delete"]`);
    assert.deepEqual(await asked(), [`Delete schedule ${name}?`]);
    await sleep(300);
    assert.equal(stored(), '1');
    accept = true;
    await page.click(`${row} button[data-act="delete"]`);
    assert.deepEqual(await asked(), [`Delete schedule ${name}?`]);
    await page.waitForFunction((sel) => !document.querySelector(sel), row);
    assert.equal((await api('GET', `/v1/schedules/${name}`, { token: A })).status, 404);
    assert.equal(await msg(), `deleted ${name}`);
    assert.equal(await page.evaluate(() => window.injected), 0);
  } finally {
    await browser.close();
    rmSync(profile, { recursive: true, force: true });
  }
});

test('dashboard: a queue\'s pause and resume buttons (a tenant\'s token refused, nothing changed) and its retry failed button (the token\'s own jobs)', { timeout: 90000 }, async (t) => {
  const tokens = `${process.env.BGEXEC_WORK}/${uniq('ui-admin-tokens')}.json`;
  writeFileSync(tokens, JSON.stringify({ 'token-a': 'tenant_a', 'token-admin': 'postgres' }));
  const gw = await startGateway(0, ['--tokens', tokens]);
  t.after(() => gw.kill());
  const { browser, profile } = await launch();
  try {
    const page = await browser.newPage();
    const queue = uniq('ui-q') + ':x';  // a name the path must escape
    assert.equal((await api('POST', '/v1/jobs', { token: A, body: { kind: 'noop', queue } })).status, 201);
    const row = `#queues tr[data-queue="${queue}"]`;
    const paused = () => psql(`SELECT coalesce((SELECT paused::text FROM bgexec.queue WHERE name = '${queue}'), 'no row')`);
    const msg = async (before) => {
      await page.waitForFunction((b) => document.querySelector('#q-msg').textContent !== b, before);
      return { text: await page.textContent('#q-msg'), error: await page.$eval('#q-msg', (el) => el.className === 'error') };
    };
    const useToken = async (token) => {
      await page.fill('#token', token);
      await page.click('#save-token');
    };

    await page.goto(gw.url + '/');
    await useToken(A);
    await page.waitForSelector(`${row} button[data-act="pause"]`);
    // A tenant's token: the server's refusal, shown; the queue unchanged.
    await page.click(`${row} button[data-act="pause"]`);
    const refused = await msg('');
    assert.equal(refused.error, true);
    assert.ok(refused.text.startsWith(`pause ${queue}: `) && refused.text.includes('permission denied'), refused.text);
    assert.equal(paused(), 'no row');
    assert.equal(await page.textContent(`${row} td:nth-child(2)`), '');
    // Its job is queued and no live worker claims from it: 0, in red.
    assert.equal(await page.textContent(`${row} td.c-workers`), '0');
    assert.equal(await page.$eval(`${row} td.c-workers`, (el) => el.className), 'c-workers error');

    // An administrator's: paused, then resumed, each shown in the table.
    await useToken('token-admin');
    await page.click(`${row} button[data-act="pause"]`);
    await page.waitForSelector(`${row} button[data-act="resume"]`);
    assert.deepEqual(await msg(refused.text), { text: `paused ${queue}`, error: false });
    assert.equal(await page.textContent(`${row} td:nth-child(2)`), 'yes');
    assert.equal(paused(), 'true');
    await page.click(`${row} button[data-act="resume"]`);
    await page.waitForSelector(`${row} button[data-act="pause"]`);
    assert.deepEqual(await msg(`paused ${queue}`), { text: `resumed ${queue}`, error: false });
    assert.equal(await page.textContent(`${row} td:nth-child(2)`), '');
    assert.equal(paused(), 'false');
    // Its caps, those set, in the limits cell.
    assert.equal(await page.textContent(`${row} td.c-limits`), '');
    psql(`SELECT bgexec.configure_queue('${queue}', max_running => 4, max_running_per_key => 1, rate_limit => 10, rate_period => '2 s')`);
    await page.waitForFunction((sel) => document.querySelector(sel)?.textContent !== '', `${row} td.c-limits`);
    assert.equal(await page.textContent(`${row} td.c-limits`), 'running ≤ 4, per key ≤ 1, 10 per 00:00:02');

    // retry failed: the token's failed jobs of the queue queued again, a
    // batch at a time; another tenant's stay failed
    const failedQueue = uniq('ui-rq');
    const ids = [];
    for (const token of [A, A, B]) {
      ids.push((await api('POST', '/v1/jobs', { token, body: { kind: 'noop', queue: failedQueue } })).body.id);
      const c = claim(failedQueue);
      finish(c.job, c.lease, 'failed', { error: { message: 'broke' } });
    }
    const statuses = () => psql(`SELECT string_agg(owner || ':' || status, ' ' ORDER BY id) FROM bgexec.job WHERE queue = '${failedQueue}'`);
    assert.equal(statuses(), 'tenant_a:failed tenant_a:failed tenant_b:failed');
    const frow = `#queues tr[data-queue="${failedQueue}"]`;
    await useToken(A);
    await page.waitForSelector(`${frow} button[data-act="retry-failed"]`);
    // no button on a queue without failed or timed-out jobs
    assert.equal(await page.$(`${row} button[data-act="retry-failed"]`), null);
    let asked = '';
    page.once('dialog', (d) => { asked = d.message(); d.dismiss(); });
    const shown = await page.textContent('#q-msg');
    await page.click(`${frow} button[data-act="retry-failed"]`);
    await sleep(300);
    assert.equal(asked, `Queue the failed and timed-out jobs of ${failedQueue} again?`);
    assert.equal(statuses(), 'tenant_a:failed tenant_a:failed tenant_b:failed');  // declined: nothing
    page.once('dialog', (d) => d.accept());
    await page.click(`${frow} button[data-act="retry-failed"]`);
    assert.deepEqual(await msg(shown), { text: `queued again 2 of 2 failed or timed-out jobs of ${failedQueue}`, error: false });
    assert.equal(statuses(), 'tenant_a:queued tenant_a:queued tenant_b:failed');
  } finally {
    await browser.close();
    rmSync(profile, { recursive: true, force: true });
  }
});
