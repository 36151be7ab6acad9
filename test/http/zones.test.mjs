// A time a client sends (run_after) and an interval the gateway shows
// (timeout) mean the same whatever the gateway's session settings: its
// TimeZone, DateStyle and IntervalStyle (PGOPTIONS, the conninfo's
// options, the login role's).  The same "08/12/2026 03:00" was 12 August
// at UTC on one gateway and 8 December 03:00 IST on another; timeout came
// back "00:01:30" from one and "@ 1 min 30 secs" from the other.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { api, psql, startGateway, uniq, A } from './lib.mjs';

const odd = "options='-c timezone=Asia/Kolkata -c datestyle=SQL,DMY -c intervalstyle=postgres_verbose'";

async function bothGateways(fn) {
  const gw = await startGateway(0, ['--db', odd]);
  try {
    await fn([process.env.BGEXEC_URL, gw.url]);
  } finally {
    gw.kill();
  }
}

test('run_after with an offset is the same instant through either gateway', async () => {
  await bothGateways(async (bases) => {
    for (const base of bases) {
      // (times in the future: submit stores a run_after in the past as now())
      for (const [given, stored] of [['2036-12-08T03:00:00+05:30', '2036-12-07T21:30:00.000000Z'],
        ['2036-12-08T03:00:00Z', '2036-12-08T03:00:00.000000Z'],
        ['2036-12-08 03:00:00.5-08:00', '2036-12-08T11:00:00.500000Z'],
        ['2036-08-12t03:00z', '2036-08-12T03:00:00.000000Z']]) {
        const r = await api('POST', '/v1/jobs', { token: A, base, body: { kind: 'noop', queue: uniq('tz'), run_after: given } });
        assert.equal(r.status, 201, `${base} ${given}: ${r.text}`);
        const g = await api('GET', `/v1/jobs/${r.body.id}`, { token: A, base });
        assert.equal(g.body.run_after, stored, `${base} ${given}`);
      }
    }
  });
});

test('run_after without an offset, in a locale form, or a special word is 422 naming run_after, nothing created', async () => {
  await bothGateways(async (bases) => {
    for (const base of bases) {
      const queue = uniq('tzbad');
      for (const given of ['08/12/2026 03:00', '2026-12-08 03:00', '2026-12-08T03:00:00', '2026-12-08',
        'now', 'epoch', 'tomorrow', 'infinity', 'Dec 8 2026 03:00 UTC', '2026-12-08 03:00 Asia/Tokyo',
        '2026-13-01T00:00:00Z', '+', '+-5m', '+5 minutes', '+1e9d', '+40000d']) {
        const r = await api('POST', '/v1/jobs', { token: A, base, body: { kind: 'noop', queue, run_after: given } });
        assert.equal(r.status, 422, `${base} ${given}: ${r.text}`);
        assert.equal(r.body.error.sqlstate, '22007', given);
        assert.match(r.body.error.message, /^run_after must be an RFC 3339 time with an offset or Z/, given);
      }
      assert.equal(psql(`SELECT count(*) FROM bgexec.job WHERE queue = '${queue}'`), '0');
    }
  });
});

test('run_after "+DUR" is after now() on the database clock, a day 86400 s', async () => {
  await bothGateways(async (bases) => {
    for (const base of bases) {
      for (const [given, secs] of [['+300', 300], ['+5m', 300], ['+1.5h', 5400], ['+1d', 86400], ['+250ms', 0.25], ['+0', 0]]) {
        const r = await api('POST', '/v1/jobs', { token: A, base, body: { kind: 'noop', queue: uniq('tzrel'), run_after: given } });
        assert.equal(r.status, 201, `${base} ${given}: ${r.text}`);
        // created_at and now() are the submit's transaction start.
        assert.equal(Number(psql(`SELECT extract(epoch FROM run_after - created_at) FROM bgexec.job WHERE id = ${r.body.id}`)), secs, given);
      }
    }
  });
});

test('timeout reads the same through either gateway, whatever its IntervalStyle', async () => {
  await bothGateways(async (bases) => {
    const ids = [];
    for (const [base, timeout] of [[bases[1], 90], [bases[1], 'P1D'], [bases[0], '1 day 02:03:04.5']]) {
      const r = await api('POST', '/v1/jobs', { token: A, base, body: { kind: 'noop', queue: uniq('tzint'), timeout } });
      assert.equal(r.status, 201, r.text);
      ids.push(r.body.id);
    }
    for (const base of bases) {
      const got = [];
      for (const id of ids) got.push((await api('GET', `/v1/jobs/${id}`, { token: A, base })).body.timeout);
      assert.deepEqual(got, ['00:01:30', '1 day', '1 day 02:03:04.5'], base);
    }
  });
});
