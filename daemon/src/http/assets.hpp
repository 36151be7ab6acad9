#pragma once
// The dashboard served at GET /: one HTML page, a stylesheet and a small
// vanilla script, embedded as raw strings (no build step, no npm).  The page
// talks to the same /v1 API as any client, with the bearer token kept in
// localStorage; the live event stream uses EventSource with ?token= because
// browsers cannot add an Authorization header to it.

namespace bgexec::http::assets {

inline constexpr const char* index_html = R"BGX(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>bgexec</title>
<link rel="stylesheet" href="/app.css">
</head>
<body>
<header>
  <h1><a href="#/">bgexec</a></h1>
  <form id="token-form">
    <label>token <input id="token" type="password" autocomplete="off" placeholder="bearer token"></label>
    <button id="save-token" type="submit">use</button>
  </form>
  <span id="status-line"></span>
</header>
<main>
  <section id="home">
    <h2>Queues</h2>
    <table id="queues"><thead><tr><th>queue</th><th>paused</th><th>queued</th><th>running</th><th>suspended</th>
      <th>completed</th><th>failed</th><th>cancelled</th><th>timed out</th><th>oldest queued (s)</th><th>limits</th><th>workers</th><th></th></tr></thead>
      <tbody></tbody></table>
    <p id="q-msg"></p>
    <h2>Workers</h2>
    <table id="workers"><thead><tr><th>worker</th><th>host</th><th>pid</th><th>queues</th><th>slots</th><th>in flight</th>
      <th>last heartbeat</th></tr></thead>
      <tbody></tbody></table>
    <h2>Schedules</h2>
    <table id="schedules"><thead><tr><th>name</th><th>cron</th><th>time zone</th><th>kind</th><th>queue</th><th>next run</th>
      <th>payload</th><th>last run</th><th>last job</th><th>last error</th><th></th></tr></thead>
      <tbody></tbody></table>
    <form id="schedule-form">
      <label>name <input id="s-name" required placeholder="nightly-export"></label>
      <label>cron <input id="s-cron" required placeholder="0 3 * * *"></label>
      <label>kind <input id="s-kind" required placeholder="workflow"></label>
      <label>queue <input id="s-queue" placeholder="default"></label>
      <label>time zone <input id="s-time-zone" placeholder="UTC"></label>
      <label><input id="s-overlap" type="checkbox" checked> overlap</label>
      <label>payload <textarea id="s-payload" rows="1" placeholder='{"key": "value"}'></textarea></label>
      <button id="s-save" type="submit">create schedule</button>
      <button id="s-clear" type="button">clear</button>
      <span id="s-msg"></span>
    </form>
    <h2>Recent jobs</h2>
    <form id="filters">
      <label>queue <input id="f-queue" placeholder="any"></label>
      <label>status <select id="f-status"><option value="">any</option><option>queued</option><option>running</option>
        <option>suspended</option><option>completed</option><option>failed</option><option>cancelled</option>
        <option>timed_out</option></select></label>
      <button type="submit">filter</button>
    </form>
    <table id="jobs"><thead><tr><th>id</th><th>kind</th><th>queue</th><th>status</th><th>attempt</th><th>created</th></tr></thead>
      <tbody></tbody></table>
    <button id="more" hidden>older</button>
  </section>
  <section id="job" hidden>
    <h2>Job <span id="job-id"></span> <span id="job-status" class="status"></span></h2>
    <p id="job-note" class="error" hidden></p>
    <div id="job-waiting" class="waiting" hidden>
      <p id="job-waiting-text"></p>
      <div class="actions">
        <input id="resume-input" placeholder='resume input JSON, e.g. {"approved": true}'>
        <button id="btn-resume">resume</button>
      </div>
    </div>
    <div class="actions">
      <button id="btn-stop">stop</button>
      <button id="btn-retry">retry</button>
    </div>
    <dl id="job-fields"></dl>
    <h3>Steps</h3>
    <table id="steps"><thead><tr><th>step</th><th>state</th><th>output / error</th></tr></thead><tbody></tbody></table>
    <h3>Events <span id="stream-state"></span></h3>
    <ol id="events"></ol>
  </section>
</main>
<script src="/app.js"></script>
</body>
</html>
)BGX";

inline constexpr const char* app_css = R"BGX(
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #222; }
header { display: flex; gap: 1em; align-items: center; padding: .5em 1em; background: #1f2937; color: #fff; }
header a { color: #fff; text-decoration: none; }
header h1 { font-size: 1.2em; margin: 0; }
main { padding: 1em; }
table { border-collapse: collapse; margin-bottom: 1em; }
th, td { border-bottom: 1px solid #ddd; padding: .25em .6em; text-align: left; vertical-align: top; }
tr[data-id] { cursor: pointer; }
tr[data-id]:hover { background: #f3f4f6; }
.status { font-size: .8em; padding: .1em .5em; border-radius: .5em; background: #e5e7eb; }
.s-completed { background: #bbf7d0; } .s-failed, .s-timed_out { background: #fecaca; }
.s-running { background: #bfdbfe; } .s-cancelled { background: #e5e7eb; } .s-suspended { background: #fde68a; }
#events { font-family: ui-monospace, monospace; font-size: 12px; }
#events li { white-space: pre-wrap; }
.actions { display: flex; gap: .5em; margin-bottom: 1em; }
#resume-input { flex: 1; max-width: 30em; }
.waiting { background: #fef3c7; border: 1px solid #f59e0b; border-radius: .4em; padding: .5em 1em; margin-bottom: 1em; max-width: 50em; }
.waiting p { margin: 0 0 .5em; font-weight: 600; white-space: pre-wrap; }
.waiting .actions { margin-bottom: 0; }
#steps td.detail { font-family: ui-monospace, monospace; font-size: 12px; white-space: pre-wrap; }
#schedule-form { display: flex; flex-wrap: wrap; gap: .5em 1em; align-items: center; margin-bottom: 1.5em; }
#schedules td.payload { max-width: 16em; overflow: hidden; text-overflow: ellipsis; white-space: nowrap;
  font-family: ui-monospace, monospace; font-size: 12px; }
#s-payload { vertical-align: top; width: 20em; font-family: ui-monospace, monospace; }
.error { color: #b91c1c; }
dl { display: grid; grid-template-columns: max-content auto; gap: .1em 1em; }
dt { color: #666; } dd { margin: 0; font-family: ui-monospace, monospace; white-space: pre-wrap; }
)BGX";

inline constexpr const char* app_js = R"BGX('use strict';
// bgexec dashboard: vanilla JS over the /v1 API.
const $ = (s) => document.querySelector(s);
let token = localStorage.getItem('bgexec.token') || '';
let source = null;      // EventSource of the open job page
let beforeCursor = null;
let refreshTimer = null;
// Bumped by every route(): what a job page asked for before the page moved
// on (another job, home) is dropped when it answers, so a slow answer for
// one job never renders into, or opens its event stream on, another's page.
let view = 0;

// A time as the page shows it: the API's UTC ISO 8601 to the second
// (2026-12-07T03:00:00Z; the API gives the microseconds).
function when(t) {
  return typeof t === 'string' ? t.replace(/\.\d+Z$/, 'Z') : t;
}
function esc(v) {
  return String(v ?? '').replace(/[&<>"']/g, (c) => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}[c]));
}
function say(msg, isError) {
  const el = $('#status-line');
  el.textContent = msg || '';
  el.className = isError ? 'error' : '';
}
// JSON with its numbers as written: the API answers 19.90 and
// 123456789012345678901234567890 as stored, and a plain JSON.parse made
// them 19.9 and 1.2345678901234568e+29, which saving a schedule or a
// resume input then wrote back.  A number that would not print as written
// becomes JSON.rawJSON of its text, which JSON.stringify writes as it
// was (browsers without rawJSON parse as before).
function parseJson(text) {
  if (typeof JSON.rawJSON !== 'function') return JSON.parse(text);
  return JSON.parse(text, (k, v, ctx) =>
    typeof v === 'number' && ctx && typeof ctx.source === 'string' && String(v) !== ctx.source ? JSON.rawJSON(ctx.source) : v);
}
async function api(method, path, body) {
  const opts = {method, headers: {'Authorization': 'Bearer ' + token}};
  if (body !== undefined) { opts.headers['Content-Type'] = 'application/json'; opts.body = JSON.stringify(body); }
  const res = await fetch(path, opts);
  const data = await res.text().then(parseJson).catch(() => ({}));
  if (!res.ok) {
    const e = new Error((data.error && data.error.message) || res.statusText);
    e.status = res.status;
    throw e;
  }
  return data;
}

async function loadQueues() {
  const {queues} = await api('GET', '/v1/queues');
  // jobs queued and no live worker to claim them: the workers cell in red
  const unserved = (q) => q.workers === 0 && q.queued > 0;
  // configure_queue's caps, those set: what holds its jobs back
  const limits = (q) => [q.max_queued != null && `queued ≤ ${q.max_queued}`,
    q.max_running != null && `running ≤ ${q.max_running}`,
    q.max_running_per_key != null && `per key ≤ ${q.max_running_per_key}`,
    q.rate_limit != null && `${q.rate_limit} per ${q.rate_period}`].filter(Boolean).join(', ');
  $('#queues tbody').innerHTML = queues.map((q) => `<tr data-queue="${esc(q.queue)}"><td>${esc(q.queue)}</td><td>${q.paused ? 'yes' : ''}</td>
    <td class="c-queued">${q.queued}</td><td class="c-running">${q.running}</td><td>${q.suspended}</td><td class="c-completed">${q.completed}</td>
    <td>${q.failed}</td><td>${q.cancelled}</td><td>${q.timed_out}</td>
    <td>${q.oldest_queued_seconds == null ? '' : Math.round(q.oldest_queued_seconds)}</td><td class="c-limits">${esc(limits(q))}</td>
    ${unserved(q) ? '<td class="c-workers error" title="no live worker claims from this queue">' : '<td class="c-workers">'}${esc(q.workers ?? '')}</td>
    <td><button data-act="${q.paused ? 'resume' : 'pause'}">${q.paused ? 'resume' : 'pause'}</button>${q.failed + q.timed_out > 0
      ? ` <button data-act="retry-failed" title="queue your failed and timed-out jobs of this queue again">retry failed</button>` : ''}</td></tr>`).join('');
}
// POST /v1/jobs/retry, batch after batch (next_after): the token's failed
// and timed-out jobs of the queue queued again (a tenant's own: the counts
// are every tenant's, so it may be fewer).  A batch the queue's max_queued
// refuses ends it, the batches before it kept and counted.
async function retryQueue(name) {
  if (!confirm(`Queue the failed and timed-out jobs of ${name} again?`)) return;
  const el = $('#q-msg');
  let retried = 0, matched = 0, after = 0;
  try {
    for (;;) {
      const r = await api('POST', '/v1/jobs/retry', {queue: name, after});
      retried += r.retried;
      matched += r.matched;
      if (r.next_after == null) break;
      after = r.next_after;
    }
    el.textContent = `queued again ${retried} of ${matched} failed or timed-out jobs of ${name}`;
    el.className = '';
  } catch (e) {
    el.textContent = `retry ${name}: ${e.message}` + (retried ? ` (queued again ${retried} before it)` : '');
    el.className = 'error';
  }
  await loadQueues().catch((e) => say(e.message, true));
}
// POST /v1/queues/{name}/pause|resume: an administrator's token may (the
// server refuses a tenant's, 403, and its message is shown as it came).
async function queueAction(name, act) {
  const el = $('#q-msg');
  try {
    const r = await api('POST', `/v1/queues/${encodeURIComponent(name)}/${act}`);
    el.textContent = `${r.paused ? 'paused' : 'resumed'} ${r.name}`;
    el.className = '';
  } catch (e) {
    el.textContent = `${act} ${name}: ${e.message}`;
    el.className = 'error';
  }
  await loadQueues().catch((e) => say(e.message, true));
}
async function loadWorkers() {
  const {workers} = await api('GET', '/v1/workers');
  $('#workers tbody').innerHTML = workers.map((w) => `<tr data-worker="${esc(w.id)}"><td>${esc(w.id)}</td><td>${esc(w.host)}</td>
    <td>${esc(w.pid)}</td><td>${esc((w.queues || []).join(', '))}</td><td>${esc(w.concurrency)}</td>
    <td class="c-in-flight">${esc(w.in_flight)}</td><td>${esc(w.heartbeat_at)}</td></tr>`).join('');
}
const schedules = new Map();  // name -> row of GET /v1/schedules, for its edit button
let editing = null;           // the row the schedule form replaces, null for a new schedule
async function loadSchedules() {
  const {schedules: rows} = await api('GET', '/v1/schedules');
  schedules.clear();
  for (const s of rows) schedules.set(s.name, s);
  $('#schedules tbody').innerHTML = rows.map((s) => `<tr data-schedule="${esc(s.name)}"><td>${esc(s.name)}</td>
    <td>${esc(s.cron)}</td><td>${esc(s.time_zone)}</td><td>${esc(s.kind)}</td><td>${esc(s.queue)}</td><td>${s.paused ? '<span class="status s-suspended">paused</span>' : esc(when(s.next_run_at))}</td>
    <td class="payload" title="${esc(JSON.stringify(s.payload))}">${esc(JSON.stringify(s.payload))}</td>
    <td>${esc(s.last_run_at ?? '')}</td><td>${s.last_job_id == null ? '' : `<a href="#/jobs/${s.last_job_id}">${s.last_job_id}</a>`}</td>
    <td class="error">${esc(s.last_error ?? '')}</td>
    <td><button data-act="edit">edit</button> <button data-act="run">run now</button>
      <button data-act="${s.paused ? 'resume' : 'pause'}">${s.paused ? 'resume' : 'pause'}</button>
      <button data-act="delete">delete</button></td></tr>`).join('');
}
function scheduleMsg(msg, isError) {
  const el = $('#s-msg');
  el.textContent = msg || '';
  el.className = isError ? 'error' : '';
}
function resetScheduleForm() {
  editing = null;
  $('#schedule-form').reset();
  $('#s-name').readOnly = false;
  $('#s-time-zone').value = Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
  $('#s-save').textContent = 'create schedule';
}
function editSchedule(s) {
  editing = s;
  $('#s-name').value = s.name;
  $('#s-name').readOnly = true;  // another name would be another schedule
  $('#s-cron').value = s.cron;
  $('#s-kind').value = s.kind;
  $('#s-queue').value = s.queue;
  $('#s-time-zone').value = s.time_zone;
  $('#s-overlap').checked = s.overlap;
  $('#s-payload').value = JSON.stringify(s.payload);
  $('#s-save').textContent = 'save schedule';
  scheduleMsg('');
  $('#s-cron').focus();
}
// PUT /v1/schedules/{name} from the form; on an error the form keeps its
// values and shows the server's message as it came.
async function saveSchedule() {
  const name = $('#s-name').value.trim();
  const body = {cron: $('#s-cron').value.trim(), kind: $('#s-kind').value.trim(), overlap: $('#s-overlap').checked};
  for (const [f, id] of [['queue', '#s-queue'], ['time_zone', '#s-time-zone']]) {
    if ($(id).value.trim()) body[f] = $(id).value.trim();
  }
  const text = $('#s-payload').value.trim();
  if (text) {
    try { body.payload = parseJson(text); } catch (e) { scheduleMsg('payload is not valid JSON: ' + e.message, true); return; }
    if (body.payload === null || typeof body.payload !== 'object' || Array.isArray(body.payload)) {
      scheduleMsg('payload must be a JSON object', true);
      return;
    }
  }
  // A replacement keeps the fields the form does not show.
  if (editing) {
    for (const f of ['priority', 'max_attempts', 'timeout', 'concurrency_key']) if (editing[f] != null) body[f] = editing[f];
  } else if (schedules.has(name) && !confirm(`Replace schedule ${name}?`)) {
    return;
  }
  try {
    const r = await api('PUT', '/v1/schedules/' + encodeURIComponent(name), body);
    resetScheduleForm();
    scheduleMsg(`saved ${r.name}, next run ${when(r.next_run_at)}`);
  } catch (e) { scheduleMsg(e.message, true); return; }
  await loadSchedules().catch((e) => say(e.message, true));
}
async function deleteSchedule(name) {
  if (!confirm(`Delete schedule ${name}?`)) return;
  try {
    await api('DELETE', '/v1/schedules/' + encodeURIComponent(name));
    if (editing && editing.name === name) resetScheduleForm();
    scheduleMsg(`deleted ${name}`);
  } catch (e) { scheduleMsg(e.message, true); }
  await loadSchedules().catch((e) => say(e.message, true));
}
// POST /v1/schedules/{name}/pause, /resume (which answers the next run) or
// /run (the job it submitted now).
async function scheduleAction(name, act) {
  try {
    const r = await api('POST', `/v1/schedules/${encodeURIComponent(name)}/${act}`);
    scheduleMsg(act === 'pause' ? `paused ${name}`
      : act === 'resume' ? `resumed ${name}, next run ${when(r.next_run_at)}` : `ran ${name}: job ${r.id}`);
  } catch (e) { scheduleMsg(e.message, true); }
  await loadSchedules().catch((e) => say(e.message, true));
}
function jobRow(j) {
  return `<tr data-id="${j.id}"><td>${j.id}</td><td>${esc(j.kind)}</td><td>${esc(j.queue)}</td>
    <td><span class="status s-${esc(j.status)}">${esc(j.status)}</span></td><td>${j.attempt}/${j.max_attempts}</td>
    <td>${esc(when(j.created_at))}</td></tr>`;
}
// The list of recent jobs.  Once older pages are shown (the older button),
// the 3 s refresh (auto) leaves the list alone: it replaced them with the
// first page, and the next older click fetched page two again; filter
// starts over.  Only the newest load renders (an older answer is dropped),
// and the refresh does not start one while another is on its way.
let jobsSeq = 0, jobsLoading = 0, jobsPaged = false;
async function loadJobs(append, auto) {
  if (auto && (jobsPaged || jobsLoading)) return;
  const mine = ++jobsSeq;
  jobsLoading++;
  try {
    const q = new URLSearchParams({limit: '50'});
    if ($('#f-queue').value) q.set('queue', $('#f-queue').value);
    if ($('#f-status').value) q.set('status', $('#f-status').value);
    if (append && beforeCursor) q.set('before', beforeCursor);
    const {jobs, next_before} = await api('GET', '/v1/jobs?' + q);
    if (mine !== jobsSeq) return;
    const html = jobs.map(jobRow).join('');
    if (append) $('#jobs tbody').insertAdjacentHTML('beforeend', html); else $('#jobs tbody').innerHTML = html;
    jobsPaged = !!append;
    beforeCursor = next_before;
    $('#more').hidden = next_before == null;
  } finally {
    jobsLoading--;
  }
}
// One refresh at a time: with slow answers (a long schedule list, a busy
// database) a refresh every 3 s otherwise piled requests up.
let homeBusy = false;
async function refreshHome() {
  if (homeBusy) return;
  homeBusy = true;
  try { await Promise.all([loadQueues(), loadWorkers(), loadSchedules(), loadJobs(false, true)]); say(''); } catch (e) { say(e.message, true); }
  finally { homeBusy = false; }
}

let job = null;        // the open job page's row, as last fetched
let waitingAt = null;  // data of its newest suspended event, until a resumed or ending one
// A suspension hands its run's attempt back (the job row counts attempts
// used): a suspended job that ran once says attempt 0 beside the
// started_at of that run, which reads as a job that never ran.
function attemptText(j) {
  if (j.status !== 'suspended' || typeof j.attempt !== 'number') return j.attempt;
  return `${j.attempt} of ${j.max_attempts} used (a run that suspends gives its attempt back: the resumed run is attempt ${j.attempt + 1})`;
}
function renderJob(j) {
  job = j;
  $('#job-status').textContent = j.status;
  $('#job-status').className = 'status s-' + j.status;
  const fields = ['kind', 'queue', 'owner', 'priority', 'attempt', 'max_attempts', 'created_at', 'started_at',
    'finished_at', 'payload', 'result', 'error'];
  const value = (f) => f === 'attempt' ? attemptText(j) : typeof j[f] === 'object' && j[f] !== null ? JSON.stringify(j[f], null, 1) : f.endsWith('_at') ? when(j[f]) : j[f];
  $('#job-fields').innerHTML = fields.map((f) => `<dt>${f}</dt><dd id="f-${f}">${esc(value(f))}</dd>`).join('');
  $('#btn-stop').disabled = !['queued', 'running', 'suspended'].includes(j.status);
  $('#btn-resume').disabled = j.status !== 'suspended';
  $('#btn-retry').disabled = !['failed', 'cancelled', 'timed_out'].includes(j.status);
  renderWaiting();
  noteJob(j);
}
// A suspended job says what it waits for, with the resume control: the
// step and prompt of its newest suspended event (a workflow's approval
// step), as text.
function renderWaiting() {
  const on = !!job && job.status === 'suspended';
  $('#job-waiting').hidden = !on;
  if (!on) return;
  const w = waitingAt || {};
  const p = w.prompt;
  const prompt = p == null || p === '' ? '' : ': ' + (typeof p === 'string' ? `"${p}"` : JSON.stringify(p));
  $('#job-waiting-text').textContent =
    (typeof w.step === 'string' && w.step ? `Waiting for approval at step ${w.step}` : 'Waiting for resume') + prompt;
}
// A queued job nothing will claim (its queue paused, or no live worker's)
// says so, as the CLI's status does; any other status hides the note.  Only
// the latest render's answer is shown (an older one may come back later).
let noteSeq = 0;
async function noteJob(j) {
  const mine = ++noteSeq;
  let text = '';
  if (j.status === 'queued') {
    try {
      const q = (await api('GET', '/v1/queues')).queues.find((x) => x.queue === j.queue);
      if (q && q.paused) text = `queue ${j.queue} is paused: no worker claims its jobs until it is resumed`;
      else if (q && q.workers === 0) text = `no live worker claims from queue ${j.queue}`;
    } catch { /* only a note */ }
    if (mine !== noteSeq) return;
  }
  $('#job-note').textContent = text;
  $('#job-note').hidden = !text;
}
const steps = new Map();
// The steps table is built whole, so a render per step event was quadratic:
// a replay of a 2000-step workflow took the page 30 s.  Step events mark it
// stale; it is rebuilt at most every 100 ms, and once after the last.
let stepsTimer = null;
function stepsChanged() {
  if (!stepsTimer) stepsTimer = setTimeout(() => { stepsTimer = null; renderSteps(); }, 100);
}
function renderSteps() {
  $('#steps tbody').innerHTML = [...steps.entries()].map(([id, s]) =>
    `<tr data-step="${esc(id)}"><td>${esc(id)}</td><td>${esc(s.state)}</td><td class="detail">${esc(s.text)}</td></tr>`).join('');
}
function onEvent(ev) {
  const li = document.createElement('li');
  li.dataset.seq = ev.seq;
  li.dataset.kind = ev.kind;
  li.textContent = `#${ev.seq} ${when(ev.created_at)} ${ev.kind} ${JSON.stringify(ev.data)}`;
  $('#events').appendChild(li);
  // A step event stays at hand: a rewound log rebuilds the steps from those kept.
  if (stepOf(ev)) { li.ev = ev; stepsChanged(); renderWaiting(); }
}
const terminalKinds = ['completed', 'failed', 'cancelled', 'timed_out'];
const endKinds = [...terminalKinds, 'suspended'];  // where the server ends the stream
// An event's mark on the steps table (and on waitingAt); whether it left one.
// An approval step writes no step event: its suspended {"step", "prompt"}
// shows it waiting, its resumed {"step", "input"} approved (the input is
// its output), and an ending while it waits (a stop) ends it.
function stepOf(ev) {
  const d = ev.data || {};
  const step = typeof d.step === 'string' && d.step ? d.step : null;
  if (ev.kind === 'suspended') {
    waitingAt = d;
    if (step) steps.set(step, {state: 'waiting for approval', text: typeof d.prompt === 'string' ? d.prompt : d.prompt == null ? '' : JSON.stringify(d.prompt)});
    return true;
  }
  if (ev.kind === 'resumed') {
    waitingAt = null;
    if (step) steps.set(step, {state: 'approved', text: JSON.stringify(d.input ?? null, null, 2)});
    return true;
  }
  if (terminalKinds.includes(ev.kind)) {
    waitingAt = null;
    for (const [k, s] of steps) if (s.state === 'waiting for approval') steps.set(k, {state: `not approved: ${ev.kind}`, text: s.text});
    return true;
  }
  if (!ev.kind.startsWith('step_') || !step) return false;
  const state = ev.kind === 'step_completed' && d.skipped === true ? 'skipped' : ev.kind.slice(5);
  const detail = d.output ?? d.error ?? null;
  steps.set(step, {state, text: detail === null ? '' : JSON.stringify(detail)});
  return true;
}
async function showJob(id) {
  const mine = view;
  $('#home').hidden = true; $('#job').hidden = false;
  $('#job-id').textContent = id;
  $('#events').innerHTML = ''; steps.clear(); renderSteps();
  job = null; waitingAt = null; renderWaiting();
  if (source) { source.close(); source = null; }
  let j;
  try { j = await api('GET', '/v1/jobs/' + id); } catch (e) { if (mine === view) say(e.message, true); return; }
  if (mine !== view) return;  // the page moved on meanwhile
  renderJob(j);
  follow(id, 0);
}
// The server decides where the stream ends: after the job's newest event,
// when that is terminal or suspended.  An older one (failed, then retried;
// suspended, then resumed) is followed by more, so the page never closes the
// stream itself.  When the server closes it, EventSource reconnects once
// with Last-Event-ID: new events if the job went on meanwhile, else 204,
// which leaves it CLOSED.  Closed any other way before an ending event (a
// 503 while the database is away, a gateway restarting), EventSource does
// not try again, and the page stayed "(closed)" until reloaded: it follows
// again from its last event while it shows the job, 1 s later, then 2, 4,
// up to 30 s apart.
function follow(id, after, attempt = 0) {
  if (source) source.close();
  const es = new EventSource(`/v1/jobs/${id}/events?token=${encodeURIComponent(token)}&after=${after}`);
  source = es;
  let lastKind = null;
  $('#stream-state').textContent = '(live)';
  // One job refresh at a time, and one more after it for the events that
  // came meanwhile: a GET per event sent thousands at once on a long log,
  // and their answers could render the status out of order.
  let refreshing = false, again = false;
  const refresh = async () => {
    if (refreshing) { again = true; return; }
    refreshing = true;
    do {
      again = false;
      try {
        const j = await api('GET', '/v1/jobs/' + id);
        if (source === es) renderJob(j);
      } catch (e) { say(e.message, true); }
    } while (again && source === es);
    refreshing = false;
  };
  const handler = (m) => {
    const ev = parseJson(m.data);
    onEvent(ev);
    lastKind = ev.kind;
    $('#stream-state').textContent = ev.kind === 'suspended' ? '(waiting for resume)'
      : terminalKinds.includes(ev.kind) ? '(ended)' : '(live)';
    refresh();
  };
  for (const k of ['started', 'step_started', 'step_completed', 'step_failed', 'log', 'progress', 'stop_requested',
    'suspended', 'resumed', 'retry_scheduled', 'rescheduled', 'worker_lost', 'completed', 'failed', 'cancelled',
    'timed_out']) {
    es.addEventListener(k, handler);
  }
  // The job's log was rewound (an asynchronous failover lost its newest
  // events; new ones take their seqs): the lost ones leave the page, and
  // the steps they told of with them (a step shown running for ever).
  es.addEventListener('rewound', (m) => {
    const r = parseJson(m.data);
    for (const li of [...$('#events').children]) if (Number(li.dataset.seq) > r.resume) li.remove();
    steps.clear(); waitingAt = null;
    for (const li of $('#events').children) if (li.ev) stepOf(li.ev);
    stepsChanged(); renderWaiting();
    say(`job ${id}'s events after ${r.resume} were lost in a failover; the new ones follow`, true);
  });
  es.onopen = () => { attempt = 0; };
  es.onerror = () => {
    if (es.readyState !== EventSource.CLOSED) return;
    if (lastKind === 'suspended') { awaitResume(id, es); return; }
    if (endKinds.includes(lastKind)) return;
    $('#stream-state').textContent = '(closed)';
    setTimeout(() => { if (source === es) follow(id, lastSeq(), attempt + 1); }, Math.min(30000, 1000 * 2 ** attempt));
  };
}
// The server ends the stream at a suspension, but the job goes on once
// resumed (from this page, the CLI, the API): while the page shows it, it
// asks for the job every 3 s and follows it on from its last event once it
// is no longer suspended or has events past the page's (resumed and
// suspended again meanwhile).
function awaitResume(id, es) {
  setTimeout(async () => {
    if (source !== es) return;
    let j = null;
    try { j = await api('GET', '/v1/jobs/' + id); } catch { /* asked again */ }
    if (source !== es) return;
    if (j && (j.status !== 'suspended' || j.last_seq > lastSeq())) follow(id, lastSeq());
    else awaitResume(id, es);
  }, 3000);
}
function lastSeq() {
  const items = $('#events').children;
  return items.length ? Number(items[items.length - 1].dataset.seq) : 0;
}
async function act(what) {
  const mine = view;
  const id = $('#job-id').textContent;
  let body;
  if (what === 'resume' && $('#resume-input').value.trim()) {
    try { body = parseJson($('#resume-input').value); } catch (e) { say('resume input is not JSON', true); return; }
  }
  try {
    const r = await api('POST', `/v1/jobs/${id}/${what}`, body);
    say(what === 'resume' ? `resumed job ${id}` : what === 'retry' ? `job ${id} queued again`
      : r.status === 'running' ? `stop requested: job ${id}'s worker is stopping it` : `job ${id} ${r.status}`);
    const j = await api('GET', '/v1/jobs/' + id);
    if (mine !== view) return;
    renderJob(j);
    if ((!source || source.readyState === EventSource.CLOSED) && (what === 'resume' || what === 'retry')) follow(id, lastSeq());
  } catch (e) { say(`${what}: ${e.message}`, true); }
}

function route() {
  view++;
  clearInterval(refreshTimer);
  const m = location.hash.match(/^#\/jobs\/(\d+)$/);
  if (m) { showJob(m[1]); return; }
  if (source) { source.close(); source = null; }
  $('#home').hidden = false; $('#job').hidden = true;
  refreshHome();
  refreshTimer = setInterval(refreshHome, 3000);
}

$('#token').value = token;
$('#token-form').addEventListener('submit', (e) => {
  e.preventDefault();
  token = $('#token').value.trim();
  localStorage.setItem('bgexec.token', token);
  route();
});
$('#filters').addEventListener('submit', (e) => { e.preventDefault(); loadJobs(false).catch((x) => say(x.message, true)); });
$('#more').addEventListener('click', () => loadJobs(true).catch((x) => say(x.message, true)));
resetScheduleForm();
$('#schedule-form').addEventListener('submit', (e) => { e.preventDefault(); saveSchedule(); });
$('#s-clear').addEventListener('click', () => { resetScheduleForm(); scheduleMsg(''); });
$('#queues tbody').addEventListener('click', (e) => {
  const b = e.target.closest('button[data-act]');
  if (!b) return;
  const name = b.closest('tr').dataset.queue;
  if (b.dataset.act === 'retry-failed') retryQueue(name);
  else queueAction(name, b.dataset.act);
});
$('#schedules tbody').addEventListener('click', (e) => {
  const b = e.target.closest('button[data-act]');
  if (!b) return;
  const name = b.closest('tr').dataset.schedule;
  if (b.dataset.act === 'delete') deleteSchedule(name);
  else if (['pause', 'resume', 'run'].includes(b.dataset.act)) scheduleAction(name, b.dataset.act);
  else if (schedules.has(name)) editSchedule(schedules.get(name));
});
$('#jobs tbody').addEventListener('click', (e) => {
  const tr = e.target.closest('tr[data-id]');
  if (tr) location.hash = '#/jobs/' + tr.dataset.id;
});
for (const a of ['stop', 'resume', 'retry']) $('#btn-' + a).addEventListener('click', () => act(a));
window.addEventListener('hashchange', route);
if (token) route(); else say('enter a token');
)BGX";

}  // namespace bgexec::http::assets
