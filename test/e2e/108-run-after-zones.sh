#!/usr/bin/env bash
# `bgexec submit --run-after TIMESTAMP` means one instant whatever the CLI
# session's TimeZone and DateStyle (PGTZ, PGDATESTYLE, PGOPTIONS, the
# role's): ISO 8601 only, an offset-less time read in the user's local zone
# (TZ), not the server session's.  The same '2026-12-08 03:00' was 03:00Z,
# 18:00Z the day before (PGTZ=Asia/Tokyo) or 11:00Z (America/Los_Angeles),
# and '08/12/2026 03:00' August or December by DateStyle.  `bgexec status`
# shows the job's timeout, the same whatever the session's IntervalStyle
# (it showed none).  No worker runs: the jobs stay queued.
source "$(dirname "$0")/lib.sh"
e2e_cluster 58033

# submit_at ENV... -- ARGS: the stored run_after (UTC ISO) of the job the
# CLI submits with ARGS under environment ENV.
submit_at() {
  local envs=() id
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  id=$(env "${envs[@]}" "$BGEXEC" submit noop --queue tz "$@") || fail "submit $* under ${envs[*]} failed"
  sql "SELECT to_char(run_after AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') FROM bgexec.job WHERE id = $id"
}

odd=(PGTZ=Asia/Tokyo PGDATESTYLE=SQL,DMY "PGOPTIONS=-c intervalstyle=postgres_verbose")
# Offset-less: the user's TZ decides, not the session's PGTZ.
# (Times in the future: submit stores a run_after in the past as now().)
for envs in "TZ=UTC" "TZ=UTC ${odd[*]:0:2}"; do
  # shellcheck disable=SC2086
  got=$(submit_at $envs -- --run-after '2036-12-08 03:00')
  [[ $got == 2036-12-08T03:00:00Z ]] || fail "TZ=UTC, '2036-12-08 03:00' under [$envs] was $got"
done
got=$(submit_at TZ=America/New_York "${odd[@]}" -- --run-after '2036-12-08T03:00')
[[ $got == 2036-12-08T08:00:00Z ]] || fail "TZ=America/New_York, '2036-12-08T03:00' was $got"
got=$(submit_at TZ=Asia/Kolkata PGTZ=America/Los_Angeles -- --run-after '2036-07-01 03:00:00.5')
[[ $got == 2036-06-30T21:30:00Z ]] || fail "TZ=Asia/Kolkata, '2036-07-01 03:00:00.5' was $got"
# With an offset, TZ does not matter either.
got=$(submit_at TZ=America/New_York "${odd[@]}" -- --run-after '2036-12-08T03:00:00+05:30')
[[ $got == 2036-12-07T21:30:00Z ]] || fail "'2036-12-08T03:00:00+05:30' was $got"
ok "an ISO time is one instant whatever PGTZ/PGDATESTYLE; offset-less in TZ"

before=$(sql "SELECT count(*) FROM bgexec.job")
for t in '08/12/2026 03:00' '12/08/2026' '2026-12-08' now epoch tomorrow infinity 'Dec 8 2026 03:00' \
  '2026-12-08 03:00 Asia/Tokyo' '2026-02-30 03:00' '2026-12-08T03:00 EST'; do
  set +e
  err=$(env TZ=UTC "${odd[@]}" "$BGEXEC" submit noop --queue tz --run-after "$t" 2>&1 >/dev/null)
  rc=$?
  set -e
  [[ $rc == 2 ]] || fail "--run-after '$t': exit $rc (want 2): $err"
  [[ $err == *--run-after* ]] || fail "--run-after '$t': the error does not name the flag: $err"
done
# A local time a DST change skips or repeats needs an offset.
for t in '2026-03-08 02:30' '2026-11-01 01:30'; do
  set +e
  err=$(TZ=America/New_York "$BGEXEC" submit noop --queue tz --run-after "$t" 2>&1 >/dev/null)
  rc=$?
  set -e
  [[ $rc == 2 && $err == *--run-after*daylight-saving* ]] || fail "--run-after '$t' in New York: exit $rc: $err"
done
[[ $(sql "SELECT count(*) FROM bgexec.job") == "$before" ]] || fail "a refused --run-after created a job"
ok "locale forms, words and DST-ambiguous local times: exit 2 naming --run-after, nothing created"

# +DUR: fixed seconds after now() on the database clock; a day is 86400 s.
for pair in '+90:90' '+1.5h:5400' '+1d:86400' '+1 day:86400' '+2 weeks:1209600'; do
  d=${pair%:*} want=${pair##*:}
  id=$(TZ=UTC PGTZ=America/New_York "$BGEXEC" submit noop --queue tz --run-after "$d") || fail "--run-after '$d' failed"
  got=$(sql "SELECT extract(epoch FROM run_after - created_at)::bigint FROM bgexec.job WHERE id = $id")
  [[ $got == "$want" ]] || fail "--run-after '$d': run_after - created_at = $got s, want $want"
done
ok "+DUR is fixed seconds"

# status shows timeout, in one style whatever the session's IntervalStyle.
id=$("$BGEXEC" submit noop --queue tz --timeout 90s --run-after +1h)
for style in postgres postgres_verbose iso_8601 sql_standard; do
  out=$(PGOPTIONS="-c intervalstyle=$style" "$BGEXEC" status "$id") || true
  grep -qx 'timeout: 00:01:30' <<<"$out" || fail "status under IntervalStyle $style: $out"
  out=$(PGOPTIONS="-c intervalstyle=$style" "$BGEXEC" status "$id" --json) || true
  [[ $(jq -r .timeout <<<"$out") == 00:01:30 ]] || fail "status --json under IntervalStyle $style: $out"
done
id=$("$BGEXEC" submit noop --queue tz --run-after +1h)
out=$("$BGEXEC" status "$id" --json) || true
[[ $(jq -r .timeout <<<"$out") == null ]] || fail "status --json of a job without a timeout: $out"
ok "status shows timeout as 00:01:30 under every IntervalStyle"
