/* bgexec 0.1.0 — durable background jobs and workflows.
 *
 * All single-flight logic lives here: who may run a job (claim), whose lease
 * is alive (heartbeat, reconcile), which write wins (finish, append_event).
 * A lease is CURRENT while job.status = 'running' AND job.lease = <it>; every
 * worker write names its lease and changes nothing when it is not current
 * (DESIGN.md §1.3).  Expiry only makes a lease revocable: reconcile() revokes
 * expired leases, so at any instant at most one lease per job is current
 * (§1.2).  Every time comparison uses now() — the database clock (§1.4).
 *
 * Script order: roles, types, tables, indexes, C functions, internal
 * helpers, worker functions, client functions, views, grants.
 *
 * search_path.  Every PL/pgSQL and SQL function that is not inlined runs with
 * SET search_path = pg_catalog, bgexec, pg_temp.  pg_temp is named, and
 * last: left out, PostgreSQL searches the session's temporary schema FIRST
 * for relations and types, so a client could create pg_temp.text (or jsonb,
 * timestamptz, ...) as a domain whose CHECK calls its own function, and a
 * SECURITY DEFINER body that casts to text would run that function as the
 * extension owner, a superuser.  Functions and operators are never looked up
 * in pg_temp.  Regress "pgtemp" mounts that attack on every function a client
 * or a worker may call.
 */

\echo Use "CREATE EXTENSION bgexec" to load this file. \quit

/* The schema.  CREATE EXTENSION creates bgexec, owned by the installing
 * superuser, unless it exists; then it uses it as it is.  Every SECURITY
 * DEFINER function below resolves names in it and runs as a superuser, so a
 * schema that another role owns, may create in, or has left objects in would
 * let that role plant a function or operator those bodies pick up: refuse
 * such a schema. */
DO $schema$
DECLARE
	v_what pg_catalog.text;
BEGIN
	SELECT x.what INTO v_what FROM (
		SELECT pg_catalog.format('is owned by role %I', r.rolname) AS what
		  FROM pg_catalog.pg_namespace n JOIN pg_catalog.pg_roles r ON r.oid = n.nspowner
		 WHERE n.nspname = 'bgexec' AND NOT r.rolsuper
		UNION ALL
		SELECT CASE WHEN a.grantee = 0 THEN 'grants CREATE to PUBLIC'
		            ELSE pg_catalog.format('grants CREATE to role %I', r.rolname) END
		  FROM pg_catalog.pg_namespace n
		 CROSS JOIN LATERAL pg_catalog.aclexplode(n.nspacl) a
		  LEFT JOIN pg_catalog.pg_roles r ON r.oid = a.grantee
		 WHERE n.nspname = 'bgexec' AND a.privilege_type = 'CREATE'
		   AND a.grantee <> n.nspowner AND NOT coalesce(r.rolsuper, false)
		UNION ALL
		SELECT pg_catalog.format('holds %s, owned by role %I', o.obj, r.rolname)
		  FROM (SELECT c.relnamespace, c.relowner, c.oid::pg_catalog.regclass::pg_catalog.text
		          FROM pg_catalog.pg_class c
		        UNION ALL
		        SELECT p.pronamespace, p.proowner, p.oid::pg_catalog.regprocedure::pg_catalog.text
		          FROM pg_catalog.pg_proc p
		        UNION ALL
		        SELECT o.oprnamespace, o.oprowner, o.oid::pg_catalog.regoperator::pg_catalog.text
		          FROM pg_catalog.pg_operator o
		        UNION ALL
		        -- (a relation's row type goes with it, named above, and an
		        -- array type with its element type, named here or above: a
		        -- domain was named by its array type, d[])
		        SELECT t.typnamespace, t.typowner, t.oid::pg_catalog.regtype::pg_catalog.text
		          FROM pg_catalog.pg_type t
		         WHERE t.typrelid = 0
		           AND NOT EXISTS (SELECT FROM pg_catalog.pg_type e WHERE e.typarray = t.oid)
		        UNION ALL
		        -- and every other kind of object a name in the schema can
		        -- resolve to
		        SELECT c.collnamespace, c.collowner, 'collation ' || c.collname
		          FROM pg_catalog.pg_collation c
		        UNION ALL
		        SELECT c.connamespace, c.conowner, 'conversion ' || c.conname
		          FROM pg_catalog.pg_conversion c
		        UNION ALL
		        SELECT c.opcnamespace, c.opcowner, 'operator class ' || c.opcname
		          FROM pg_catalog.pg_opclass c
		        UNION ALL
		        SELECT f.opfnamespace, f.opfowner, 'operator family ' || f.opfname
		          FROM pg_catalog.pg_opfamily f
		        UNION ALL
		        SELECT c.cfgnamespace, c.cfgowner, 'text search configuration ' || c.cfgname
		          FROM pg_catalog.pg_ts_config c
		        UNION ALL
		        SELECT d.dictnamespace, d.dictowner, 'text search dictionary ' || d.dictname
		          FROM pg_catalog.pg_ts_dict d
		        UNION ALL
		        SELECT x.stxnamespace, x.stxowner, 'statistics object ' || x.stxname
		          FROM pg_catalog.pg_statistic_ext x) o(nsp, owner, obj)
		  JOIN pg_catalog.pg_namespace n ON n.oid = o.nsp
		  JOIN pg_catalog.pg_roles r ON r.oid = o.owner
		 WHERE n.nspname = 'bgexec' AND NOT r.rolsuper) x
	 LIMIT 1;
	IF FOUND THEN
		RAISE EXCEPTION 'schema bgexec %, not a superuser', v_what
			USING ERRCODE = 'insufficient_privilege',
			      HINT = 'Let only superusers own, create in and have objects in schema bgexec (or drop it), then CREATE EXTENSION bgexec.';
	END IF;
END
$schema$;

-- Roles are cluster-wide; create them once, keep them across DROP EXTENSION.
DO $roles$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'bgexec_client') THEN
		CREATE ROLE bgexec_client NOLOGIN;
	END IF;
	IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'bgexec_worker') THEN
		CREATE ROLE bgexec_worker NOLOGIN;
	END IF;
END
$roles$;

/* ---------------------------------------------------------------- types */

CREATE TYPE bgexec.job_status AS ENUM (
	'queued', 'running', 'suspended',
	'completed', 'failed', 'cancelled', 'timed_out');
COMMENT ON TYPE bgexec.job_status IS
	'job states; completed, failed, cancelled and timed_out are terminal';

-- Names of kinds and queues: the tables' CHECK constraints call it, so it
-- comes before them.  C, not a regular expression: PostgreSQL evaluates every
-- CHECK constraint on every UPDATE, and claim and finish update each job.
CREATE FUNCTION bgexec._valid_name(name text, max_len int) RETURNS boolean
	AS 'MODULE_PATHNAME', 'bgexec_valid_name'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION bgexec._valid_name(text, int) IS
	'true when name is 1 to max_len characters of ASCII letters, digits, _ . : -';

-- The row rules of job and job_event, for their CHECK constraints below.
CREATE FUNCTION bgexec._job_valid(status bgexec.job_status, lease bigint, lease_owner text,
                                  lease_expires_at timestamptz, finished_at timestamptz,
                                  result jsonb, attempt int, max_attempts int,
                                  timeout interval, kind text, queue text, last_seq int) RETURNS boolean
	AS 'MODULE_PATHNAME', 'bgexec_job_valid'
	LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION bgexec._job_valid(bgexec.job_status, bigint, text, timestamptz, timestamptz,
                                      jsonb, int, int, interval, text, text, int) IS
	'true when a job row keeps the rules of the CHECK constraint job_valid; raises check_violation naming the rule otherwise';
CREATE FUNCTION bgexec._valid_event_kind(kind text) RETURNS boolean
	AS 'MODULE_PATHNAME', 'bgexec_valid_event_kind'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION bgexec._valid_event_kind(text) IS
	'true for the event kinds of job_event';

-- _cron_next: the first whole minute after `after` that a five-field cron
-- expression matches on the wall clock of time_zone; 22023 naming the field
-- for a bad expression, or the zone.  STABLE: time zone rules come from the
-- server's tz database, which an upgrade may change.
CREATE FUNCTION bgexec._cron_next(expr text, after timestamptz, time_zone text DEFAULT 'UTC')
	RETURNS timestamptz
	AS 'MODULE_PATHNAME', 'bgexec_cron_next'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION bgexec._cron_next(text, timestamptz, text) IS
	'the first whole minute after `after` that a cron expression matches on time_zone''s clock';

/* _interval_within: true when iv is at most lim and each of its parts
 * (months, days, time) lies within -lim..lim.  PostgreSQL adds an interval
 * to a timestamp part by part, so '4000000 mons -119999000 days' is 1000
 * days long but overflows every timestamp it is added to; bounded parts
 * keep now() + iv within three times lim of now().  The queue table's
 * CHECK constraint queue_backoff_sane calls it, so it comes before it.
 * Without SET, so that it is inlined; its body names no type. */
CREATE FUNCTION bgexec._interval_within(iv interval, lim interval) RETURNS boolean
	LANGUAGE sql IMMUTABLE PARALLEL SAFE
	AS $$
	SELECT iv <= lim
	   AND pg_catalog.date_trunc('month', iv) BETWEEN -lim AND lim
	   AND pg_catalog.date_trunc('day', iv) - pg_catalog.date_trunc('month', iv) BETWEEN -lim AND lim
	   AND iv - pg_catalog.date_trunc('day', iv) BETWEEN -lim AND lim
$$;

/* _interval_positive: iv is above zero and no part of it is negative.  An
 * interval compares with 30-day months and 24-hour days but adds calendar
 * months and days: '1 mon -29 days' compares positive, yet added to 31
 * January it ends on 30 January.  Without SET, so that it is inlined. */
CREATE FUNCTION bgexec._interval_positive(iv interval) RETURNS boolean
	LANGUAGE sql IMMUTABLE PARALLEL SAFE
	AS $$
	SELECT iv > interval '0'
	   AND pg_catalog.date_trunc('month', iv) >= interval '0'
	   AND pg_catalog.date_trunc('day', iv) >= pg_catalog.date_trunc('month', iv)
	   AND iv >= pg_catalog.date_trunc('day', iv)
$$;

/* _interval_zero: iv is zero in every part: the timeout that means none,
 * whatever the queue's default (submit, submit_many, schedule), and the
 * default_timeout that removes a queue's.  '1 mon -30 days' compares equal
 * to zero but is not: added to 31 January 2025 it ends on 29 January.
 * Without SET, so that it is inlined. */
CREATE FUNCTION bgexec._interval_zero(iv interval) RETURNS boolean
	LANGUAGE sql IMMUTABLE PARALLEL SAFE
	AS $$
	SELECT pg_catalog.date_trunc('month', iv) = interval '0'
	   AND pg_catalog.date_trunc('day', iv) = interval '0'
	   AND iv = interval '0'
$$;

/* _exact: iv as an exact duration, its months and days turned into time
 * as extract(epoch) counts them (and _backoff, the CLI's and the gateway's
 * +DUR): a day is 24 hours, a month 30 days, a year 365.25 days.  (As
 * intervals compare, a year is 360 days: '100 years', the longest timeout,
 * is 36525 days long.)  PostgreSQL adds an interval's days and months to a
 * timestamptz on the calendar of the session's TimeZone: '1 day' across a
 * change of daylight saving time is 23 or 25 hours, and '1 mon' 28 to 31
 * days, so a deadline (or lease, backoff, retention cut) computed in a
 * worker's session depended on that worker's TimeZone.  Every instant the
 * extension computes from a user's interval adds this instead (cron
 * schedules alone keep their zone's calendar, as documented).  Exact to
 * the microsecond (no float8 round trip).  Without SET, so that it is
 * inlined; the types its body names are qualified. */
CREATE FUNCTION bgexec._exact(iv interval) RETURNS interval
	LANGUAGE sql IMMUTABLE PARALLEL SAFE
	AS $$
	SELECT (iv - pg_catalog.date_trunc('day', iv))
	       + pg_catalog.make_interval(hours => (pg_catalog.date_part('year', iv) * 8766
	                                             + pg_catalog.date_part('month', iv) * 720
	                                             + pg_catalog.date_part('day', iv) * 24)::pg_catalog.int4)
$$;

/* --------------------------------------------------------------- tables */

CREATE SEQUENCE bgexec.lease_seq AS bigint CACHE 1;
COMMENT ON SEQUENCE bgexec.lease_seq IS
	'source of fencing tokens: every claim takes a fresh, never reused lease';
/* Never reused across DROP EXTENSION and CREATE EXTENSION either: a worker
 * still running a job of the dropped extension holds its lease, and the
 * new extension's jobs reuse ids from 1, so a lease that started at 1 again
 * let that worker's finish land on another job of the same id.  The first
 * lease is the microseconds since 1970, beyond any lease an earlier
 * extension in this database handed out unless it took more than one a
 * microsecond on average over its whole life. */
SELECT pg_catalog.setval('bgexec.lease_seq',
	(extract(epoch FROM pg_catalog.clock_timestamp()) * 1000000)::bigint, false);

/* Nor after a failover or a restore.  A promoted standby knows lease_seq
 * as far as WAL reached it (a sequence logs 32 values ahead): after an
 * asynchronous failover it handed out again leases the old primary gave in
 * transactions it never received, and a worker of the old primary still
 * holding one had its finish accepted on the job claimed again under the
 * same number.  A copy of the data directory started as it is (a file
 * system or VM snapshot, a base backup without recovery.signal) recovers
 * to the copy's point on the same timeline, with the same effect.  So
 * claim and register_worker first call _lease_guard, which on a WAL
 * timeline or a server start not yet checked moves lease_seq past every
 * lease of the old one (a promotion starts a timeline; a copy, like any
 * restart, a server start).  lease_seq is not dumped: a restore's CREATE
 * EXTENSION seeds it afresh, past the leases of the jobs it restores.
 * lease_epoch holds the timeline (0: not known) and the server start it was
 * last moved on; not dumped either. */
CREATE TABLE bgexec.lease_epoch (
	one      boolean PRIMARY KEY DEFAULT true CONSTRAINT lease_epoch_one_row CHECK (one),
	timeline bigint NOT NULL,
	started  timestamptz
);
COMMENT ON TABLE bgexec.lease_epoch IS 'the WAL timeline and server start lease_seq was last moved past every earlier lease on (one row)';

CREATE FUNCTION bgexec._lease_timeline_unchecked() RETURNS bigint
	AS 'MODULE_PATHNAME', 'bgexec_lease_timeline_unchecked'
	LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION bgexec._lease_timeline_unchecked() IS
	'the timeline new WAL is written on, when this backend has not checked lease_seq for it; else NULL';
CREATE FUNCTION bgexec._lease_timeline_checked(timeline bigint) RETURNS void
	AS 'MODULE_PATHNAME', 'bgexec_lease_timeline_checked'
	LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION bgexec._lease_timeline_checked(bigint) IS
	'marks the timeline checked for this backend, as of the commit';

INSERT INTO bgexec.lease_epoch (timeline, started)
VALUES (coalesce(bgexec._lease_timeline_unchecked(), 0), pg_catalog.pg_postmaster_start_time());

/* _lease_guard: before a lease is taken from lease_seq (claim,
 * register_worker).  Once per backend and timeline it reads lease_epoch;
 * when that names another timeline or server start (a backend lives within
 * one server start), under a lock, it moves lease_seq to
 * the microseconds since 1970 (as CREATE EXTENSION seeds it: past every
 * lease unless more than one a microsecond was taken on average since)
 * unless it is past them already, and records the timeline.  Claim calls
 * it only when _lease_timeline_unchecked() is not NULL: otherwise one C
 * call per claim. */
CREATE FUNCTION bgexec._lease_guard() RETURNS void
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
DECLARE
	v_tli bigint := bgexec._lease_timeline_unchecked();
BEGIN
	IF v_tli IS NULL THEN
		RETURN;
	END IF;
	IF NOT EXISTS (SELECT 1 FROM bgexec.lease_epoch e
	                WHERE e.timeline = v_tli AND e.started = pg_catalog.pg_postmaster_start_time()) THEN
		PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('bgexec.lease_seq'));
		IF NOT EXISTS (SELECT 1 FROM bgexec.lease_epoch e
		                WHERE e.timeline = v_tli AND e.started = pg_catalog.pg_postmaster_start_time()) THEN
			PERFORM pg_catalog.setval('bgexec.lease_seq',
				greatest((SELECT s.last_value FROM bgexec.lease_seq s),
				         (extract(epoch FROM pg_catalog.clock_timestamp()) * 1000000)::bigint));
			UPDATE bgexec.lease_epoch SET timeline = v_tli, started = pg_catalog.pg_postmaster_start_time();
		END IF;
	END IF;
	PERFORM bgexec._lease_timeline_checked(v_tli);
END
$$;

CREATE TABLE bgexec.queue (
	name                 text PRIMARY KEY,
	paused               boolean NOT NULL DEFAULT false,
	max_queued           int,
	max_running          int,
	max_running_per_key  int,
	retry_base           interval NOT NULL DEFAULT '1 second',
	retry_cap            interval NOT NULL DEFAULT '10 minutes',
	-- At most rate_limit claims per rate_period, fleet-wide: a token bucket
	-- of rate_limit tokens, refilled at rate_limit per rate_period.
	-- rate_tokens as of rate_at (NULL: full) is claim's, under the queue's
	-- claim lock.
	rate_limit           int,
	rate_period          interval NOT NULL DEFAULT '1 second',
	rate_tokens          float8,
	rate_at              timestamptz,
	-- What a job submitted to the queue without max_attempts or timeout
	-- gets (NULL: max_attempts 1, at most once; no timeout).  Read when the
	-- job is submitted (a schedule's, when it fires), never after.
	default_max_attempts int,
	default_timeout      interval,
	CONSTRAINT queue_name_valid CHECK (bgexec._valid_name(name, 63)),
	CONSTRAINT queue_caps_positive CHECK (
		coalesce(max_queued, 1) >= 0 AND coalesce(max_running, 1) >= 0
		AND coalesce(max_running_per_key, 1) >= 0 AND coalesce(rate_limit, 1) >= 0),
	-- The bucket finite (NaN sorts above Infinity): a row written past the
	-- functions with rate_at at ±infinity failed every claim of the queue,
	-- and of every other queue its workers claim from with it.
	CONSTRAINT queue_bucket_finite CHECK (
		(rate_tokens IS NULL OR (rate_tokens >= 0 AND rate_tokens < 'Infinity'::float8))
		AND (rate_at IS NULL OR isfinite(rate_at))),
	-- at least a millisecond (no part negative, as below), at most a day
	CONSTRAINT queue_rate_sane CHECK (
		rate_period >= interval '1 millisecond' AND bgexec._interval_positive(rate_period)
		AND bgexec._interval_within(rate_period, interval '1 day')),
	-- the backoff adds at most retry_cap to now()
	-- (no part negative: '1 mon -29 days' compares as a day, yet added to
	-- 31 January it ends on 30 January, and the backoff is computed with it)
	CONSTRAINT queue_backoff_sane CHECK (
		retry_base > interval '0' AND retry_cap >= retry_base
		AND bgexec._interval_positive(retry_base) AND bgexec._interval_positive(retry_cap)
		AND bgexec._interval_within(retry_cap, interval '100 years')),
	-- as submit checks a job's own max_attempts and timeout
	CONSTRAINT queue_defaults_sane CHECK (
		coalesce(default_max_attempts, 1) >= 1
		AND (default_timeout IS NULL
		     OR (bgexec._interval_positive(default_timeout)
		         AND bgexec._interval_within(default_timeout, interval '100 years'))))
);
COMMENT ON TABLE bgexec.queue IS
	'per-queue settings; a queue without a row has no caps, default backoff and no job defaults';

CREATE TABLE bgexec.job (
	id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	queue              text NOT NULL DEFAULT 'default',
	kind               text NOT NULL,
	owner              name NOT NULL,
	priority           int NOT NULL DEFAULT 0,
	status             bgexec.job_status NOT NULL DEFAULT 'queued',
	payload            jsonb NOT NULL DEFAULT '{}',
	result             jsonb,
	error              jsonb,
	attempt            int NOT NULL DEFAULT 0,
	max_attempts       int NOT NULL DEFAULT 1,
	run_after          timestamptz NOT NULL DEFAULT now(),
	timeout            interval,
	deadline           timestamptz,
	idempotency_key    text,
	-- unique while active: at most one queued, running or suspended job
	-- of an owner holds a key (job_unique_idx)
	unique_key         text,
	concurrency_key    text,
	lease              bigint,
	lease_owner        text,
	lease_expires_at   timestamptz,
	stop_requested_at  timestamptz,
	last_seq           int NOT NULL DEFAULT 0,
	created_at         timestamptz NOT NULL DEFAULT now(),
	started_at         timestamptz,
	finished_at        timestamptz,
	-- Every rule of a job row, in C (extension/checks.c: one call instead of
	-- seven expressions that PostgreSQL prepares again for every statement
	-- that writes jobs).  A broken rule raises check_violation (23514) naming
	-- it, as a constraint of that name would:
	--   job_kind_valid     kind: 1 to 128 of [A-Za-z0-9_.:-]
	--   job_queue_valid    queue: 1 to 63 of [A-Za-z0-9_.:-]
	--   job_attempts_valid max_attempts >= 1 AND attempt from 0 to 2147483646
	--   job_last_seq_valid last_seq from 0 to 2100000000 (claim and the
	--     appends add to both: one row at the int's end failed every claim
	--     of its queue; claim leaves a job at 2000000000 or more queued,
	--     and attempt at 2147483646)
	--   job_timeout_positive  timeout IS NULL OR timeout > interval '0', each
	--     of its parts (months, days, time) within 100 years
	--   job_running_has_lease (invariant 2) a running job holds exactly one
	--     lease: (status = 'running') = (lease IS NOT NULL), and lease,
	--     lease_owner and lease_expires_at are all set or all NULL
	--   job_terminal_has_finished_at (invariant 5) terminal states, and only
	--     they, carry finished_at
	--   job_completed_has_result  status <> 'completed' OR result IS NOT NULL
	CONSTRAINT job_valid CHECK (bgexec._job_valid(status, lease, lease_owner, lease_expires_at,
	                                             finished_at, result, attempt, max_attempts,
	                                             timeout, kind, queue, last_seq))
) WITH (fillfactor = 70,
        -- No parallel plan: every reader of the table wants a few rows
        -- (a LIMIT 50 listing, a count per queue through a partial index).
        -- Under Gather Merge a LIMIT waited for every worker's next row,
        -- and a worker whose share of the primary key held none of a
        -- tenant's matches walked it to the table's start: a listing of 51
        -- rows read all 2.1 M (3 s, 15 ms without workers); queue_stats,
        -- which the dashboard reads every 3 s, spent 0.1-0.3 s starting
        -- workers for a 20 ms scan.  A full scan of a rare queue (no index)
        -- is no slower on a busy 2-core host without them.
        parallel_workers = 0,
        autovacuum_vacuum_scale_factor = 0.02,
        autovacuum_vacuum_cost_delay = 0,
        autovacuum_analyze_scale_factor = 0.05);
COMMENT ON TABLE bgexec.job IS
	'one row per submitted job; status moves only through the bgexec functions';

CREATE TABLE bgexec.job_event (
	job_id      bigint NOT NULL,  -- a job's events go with it: job_deleted trigger
	seq         int NOT NULL,
	kind        text NOT NULL,
	data        jsonb NOT NULL DEFAULT '{}',
	created_at  timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (job_id, seq),
	-- invariant 6: seq counts from 1
	CONSTRAINT job_event_seq_positive CHECK (seq >= 1),
	-- the kinds of DESIGN.md §2, in C (extension/checks.c)
	CONSTRAINT job_event_kind_valid CHECK (bgexec._valid_event_kind(kind))
) WITH (autovacuum_vacuum_scale_factor = 0.05);
COMMENT ON TABLE bgexec.job_event IS
	'append-only event log per job; seq is gapless (1, 2, 3, ...) and is every reader''s resume cursor';

CREATE TABLE bgexec.worker (
	id            text PRIMARY KEY,
	host          text,
	pid           int,
	queues        text[] NOT NULL DEFAULT '{}',
	concurrency   int NOT NULL DEFAULT 1,
	info          jsonb NOT NULL DEFAULT '{}',
	started_at    timestamptz NOT NULL DEFAULT now(),
	heartbeat_at  timestamptz NOT NULL DEFAULT now(),
	stopped_at    timestamptz,
	-- true: stopped_at was set by the row's own process (deregister_worker
	-- naming it in process), whose stop is final: no heartbeat clears it,
	-- only register_worker.  false: set by someone else (deregister_worker
	-- by id alone: by hand, an older daemon), which a heartbeat of the
	-- worker, still running, clears.  A heartbeat of the process, sent
	-- before its deregister and committed after it, set stopped_at NULL
	-- again: the stopped worker looked alive until its heartbeat went stale.
	stopped_by_self boolean NOT NULL DEFAULT false,
	-- lease_seq when this process registered: every lease at or below it
	-- was handed out before, perhaps to the id's previous process, and
	-- unclaim never gives its job back (NULL: registered by an older
	-- bgexec, started_at alone decides).
	lease_floor   bigint,
	CONSTRAINT worker_concurrency_positive CHECK (concurrency >= 1)
) WITH (fillfactor = 50);
COMMENT ON TABLE bgexec.worker IS 'worker daemons, upserted by register_worker, kept fresh by heartbeat';

/* schedule: recurring jobs.  Each row submits a job as its owner whenever
 * next_run_at comes (reconcile() fires due rows, so the watchdog or any
 * worker does), then moves next_run_at to the cron expression's next minute
 * after now.  Rows are created only by schedule(), which checks the job
 * fields as submit() does, paused and resumed by pause_schedule() and
 * resume_schedule(), run at once by run_schedule(), and deleted by
 * unschedule(). */
CREATE TABLE bgexec.schedule (
	owner           name NOT NULL,
	name            text NOT NULL,
	cron            text NOT NULL,
	kind            text NOT NULL,
	payload         jsonb NOT NULL DEFAULT '{}',
	queue           text NOT NULL DEFAULT 'default',
	priority        int NOT NULL DEFAULT 0,
	max_attempts    int,                   -- NULL: the queue's default when it fires, else 1
	timeout         interval,              -- NULL: the queue's default when it fires, else none; 0: none
	concurrency_key text,
	time_zone       text NOT NULL DEFAULT 'UTC',   -- whose wall clock cron reads
	overlap         boolean NOT NULL DEFAULT true, -- false: skip a tick while the last job is unfinished
	paused          boolean NOT NULL DEFAULT false, -- true: fires nothing until resume_schedule()
	next_run_at     timestamptz NOT NULL,
	last_run_at     timestamptz,           -- the tick last fired (its due time)
	last_job_id     bigint,                -- the job it submitted
	last_error      text,                  -- why the last due tick submitted nothing
	created_at      timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (owner, name)
);
CREATE INDEX schedule_due_idx ON bgexec.schedule (next_run_at) WHERE NOT paused;
COMMENT ON TABLE bgexec.schedule IS 'recurring jobs: a job submitted as owner at each minute the cron expression matches on time_zone''s clock';

/* queue_count: how many jobs of each queue are in each terminal status, so
 * that queue_stats need not count the retained history (it read every row:
 * 0.5 s at 1M jobs, on every refresh of the dashboard).  Queued, running and
 * suspended jobs are counted through their partial indexes instead.
 * Append-only deltas, written in the transaction of every change: _terminal
 * and finish_many add, retry and the job_deleted trigger subtract, TRUNCATE
 * empties it.  Inserts only, so a count never makes two transactions wait
 * for each other (an upsert of one row per queue would serialize every
 * finisher of a queue on that row lock, and cross-queue transactions could
 * deadlock on them).  Readers sum the rows; reconcile folds them into one
 * row per (queue, status) once there are more than a few hundred
 * (_compact_counts).  Jobs inserted or re-statused by hand, outside the
 * bgexec functions, are not counted: _recount() rebuilds the table. */
CREATE TABLE bgexec.queue_count (
	queue   text NOT NULL,
	status  bgexec.job_status NOT NULL,
	n       bigint NOT NULL
);
COMMENT ON TABLE bgexec.queue_count IS
	'terminal jobs per queue and status, as deltas summed by queue_stats; kept by the bgexec functions';

/* -------------------------------------------------------------- indexes */

-- The claim scan: only queued rows are indexed, so the index stays the size
-- of the runnable set whatever the size of the finished history.
CREATE INDEX job_runnable_idx ON bgexec.job (queue, priority DESC, run_after, id)
	WHERE status = 'queued';
-- The claim scan of a queue with max_running_per_key whose keys at their
-- cap hold a backlog: one range per key (keyless jobs last, NULLS LAST), so
-- that the claim reads the keys below their cap and skips the capped keys'
-- backlogs, which job_runnable_idx has interleaved with everything else (a
-- filter there read all 20 000 jobs of a capped key on every claim).  Like
-- job_runnable_idx, only queued rows: a claim's or finish's new row version
-- adds no entry; a submit and a re-queue add one.
CREATE INDEX job_runnable_key_idx ON bgexec.job (queue, concurrency_key, priority DESC, run_after, id)
	WHERE status = 'queued';
-- Heartbeat, append_event and finish look jobs up by lease (running only).
CREATE UNIQUE INDEX job_lease_idx ON bgexec.job (lease) WHERE status = 'running';
-- reconcile: expired leases and passed deadlines among running jobs.  Their
-- predicates name the lease columns, not status (the same rows: invariant 2's
-- CHECK), so that reconcile's queries, which name them too, can use no other
-- partial index: with "status = 'running'" the planner could also read
-- job_running_key_idx whole and filter it, and did (bench/README.md).
CREATE INDEX job_running_expiry_idx ON bgexec.job (lease_expires_at)
	WHERE lease_expires_at IS NOT NULL;
CREATE INDEX job_running_deadline_idx ON bgexec.job (deadline)
	WHERE lease IS NOT NULL AND deadline IS NOT NULL;
-- Per-key fairness caps count running jobs by key.
CREATE INDEX job_running_key_idx ON bgexec.job (queue, concurrency_key)
	WHERE status = 'running';
-- Idempotency is scoped per owner (invariant: one row per owner + key).
CREATE UNIQUE INDEX job_idempotency_idx ON bgexec.job (owner, idempotency_key)
	WHERE idempotency_key IS NOT NULL;
-- Unique while active: one job per owner + unique_key among the queued,
-- running and suspended ones; a job that ends frees its key (its new row
-- version has no entry).  Jobs without a key have no entry either.
CREATE UNIQUE INDEX job_unique_idx ON bgexec.job (owner, unique_key)
	WHERE unique_key IS NOT NULL AND status IN ('queued', 'running', 'suspended');
-- purge / retention walk terminal jobs by age; /metrics counts the jobs
-- finished since its previous scrape.
CREATE INDEX job_finished_idx ON bgexec.job (finished_at) WHERE finished_at IS NOT NULL;
-- /metrics counts suspended jobs without reading the history (queued and
-- running ones it counts through the indexes above).  Only suspended rows
-- have an entry; A/B with the claim+finish harness: no measurable cost.
CREATE INDEX job_suspended_idx ON bgexec.job (queue) WHERE status = 'suspended';
-- retry of many (`bgexec retry --queue Q`, POST /v1/jobs/retry, the
-- dashboard's "retry failed") takes the jobs that ended badly by id, a
-- batch at a time, of one queue or of all: in this order a batch reads
-- those jobs alone, not the retained history before them (_retry_batch,
-- core/many.hpp).
-- Not (status, queue, id): status is no index condition under row-level
-- security (enum equality is not leakproof), and without a queue a client's
-- batch read the table.  Only jobs that ended badly have entries, so claim
-- and finish to completed add none, and no update that was HOT stops being
-- one: status is in other predicates already.
CREATE INDEX job_ended_badly_idx ON bgexec.job (queue, id)
	WHERE status IN ('failed', 'cancelled', 'timed_out');
CREATE INDEX job_ended_badly_id_idx ON bgexec.job (id)
	WHERE status IN ('failed', 'cancelled', 'timed_out');
-- No (owner, id) index: every claim and finish is a non-HOT update that
-- would add an entry to it (owner is a 64-byte name); without it the
-- claim+finish harness runs 14-19 % faster (bench/README.md).  A tenant's listing walks the primary key
-- backwards under row-level security; README "Tuning" has the index to add
-- when many tenants of very different sizes share one database.

/* A job's events go with it.  Not a foreign key: its check ran a query
 * with a row lock for every event inserted (two per job on the hot path;
 * without it the claim+finish harness runs 15-20 % faster, bench/README.md),
 * and every insert already happens inside a bgexec function that holds the
 * job's row lock.
 * The cascade is kept, per statement, for DELETE and TRUNCATE of jobs, and
 * so are the terminal counts of queue_count. */
CREATE FUNCTION bgexec._job_deleted() RETURNS trigger
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
BEGIN
	IF TG_OP = 'TRUNCATE' THEN
		TRUNCATE bgexec.job_event, bgexec.queue_count;
	ELSE
		DELETE FROM bgexec.job_event e USING gone g WHERE e.job_id = g.id;
		INSERT INTO bgexec.queue_count (queue, status, n)
		SELECT g.queue, g.status, -count(*) FROM gone g
		 WHERE bgexec._is_terminal(g.status)
		 GROUP BY g.queue, g.status;
	END IF;
	RETURN NULL;
END
$$;
CREATE TRIGGER job_deleted AFTER DELETE ON bgexec.job
	REFERENCING OLD TABLE AS gone
	FOR EACH STATEMENT EXECUTE FUNCTION bgexec._job_deleted();
CREATE TRIGGER job_truncated AFTER TRUNCATE ON bgexec.job
	FOR EACH STATEMENT EXECUTE FUNCTION bgexec._job_deleted();

/* ---------------------------------------------------------- C functions */

-- _caller, _owner and _can_see are PARALLEL RESTRICTED: a parallel worker
-- has none of the leader's record of the SECURITY DEFINER calls it is in
-- (caller.c), and named the session's outer role where the leader named
-- the function's owner.
CREATE FUNCTION bgexec._caller() RETURNS name
	AS 'MODULE_PATHNAME', 'bgexec_caller'
	LANGUAGE C STABLE PARALLEL RESTRICTED;
COMMENT ON FUNCTION bgexec._caller() IS
	'the role the session acts as (SET ROLE target or session user), even inside SECURITY DEFINER functions';

CREATE FUNCTION bgexec._owner() RETURNS name
	AS 'MODULE_PATHNAME', 'bgexec_owner'
	LANGUAGE C STABLE PARALLEL RESTRICTED;
COMMENT ON FUNCTION bgexec._owner() IS
	'the owner of a job submitted now: _caller(), refused (42501) when it is the group role bgexec_client or bgexec_worker';

/* _act_as(role): SET LOCAL ROLE role, fixed until the transaction ends
 * (extension/act_as.c): a worker's sql step runs the owner's statement after
 * it, and the statement can then neither SET ROLE nor RESET ROLE to another
 * role the worker's login may become. */
CREATE FUNCTION bgexec._act_as(role name) RETURNS void
	AS 'MODULE_PATHNAME', 'bgexec_act_as'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION bgexec._act_as(name) IS
	'SET LOCAL ROLE for the rest of the transaction, which can then not change role again (sql steps)';

/* _step_session(job_id, lease): marks this transaction as the sql step of
 * the job under the lease, until it ends, then refuses (55000) unless the
 * job is running under that lease; _end_step_sessions(job_id, lease)
 * terminates the sessions so marked when its transaction commits
 * (reconcile, when it takes the lease back; finish, finish_many and
 * unclaim, when the job leaves running under it): the statement of a
 * worker that stopped answering, or one that outlasted its cancel and its
 * closed session, does not run on beside the job's next attempt
 * (extension/step_session.c).  Returns false when bgexec is not preloaded
 * (nothing marked).  SECURITY DEFINER for its read of the job row, which
 * row-level security hides from the worker's role. */
CREATE FUNCTION bgexec._step_session(job_id bigint, lease bigint) RETURNS boolean
	AS 'MODULE_PATHNAME', 'bgexec_step_session'
	LANGUAGE C VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, bgexec, pg_temp;
COMMENT ON FUNCTION bgexec._step_session(bigint, bigint) IS
	'marks this transaction as a sql step of the job under the lease, ended when reconcile takes the lease back';
/* _secret_step(): for the rest of the transaction, the server's log quotes
 * nothing of it: a sql step whose parameters hold a secret.  An error's
 * message can quote a parameter (invalid input syntax for type integer:
 * "<the secret>"), and the server logs errors (log_min_messages, WARNING
 * by default); its CONTEXT quotes the parameters
 * (log_parameter_max_length_on_error), and so do the lines of
 * log_statement and log_min_duration_statement (log_parameter_max_length).
 * So: errors, warnings and notices are not logged (the job's events keep
 * the error, masked), LOG lines (statements, durations, connections) are,
 * without parameters.  Two of the settings need a superuser, hence
 * SECURITY DEFINER; granted to bgexec_worker, called before _act_as (the
 * owner's role cannot call it).  set_config(…, true) in a function lasts
 * to the transaction's end: its SET clause names only search_path. */
CREATE FUNCTION bgexec._secret_step() RETURNS void
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
BEGIN
	PERFORM pg_catalog.set_config('log_min_messages', 'log', true);
	PERFORM pg_catalog.set_config('log_parameter_max_length', '0', true);
	PERFORM pg_catalog.set_config('log_parameter_max_length_on_error', '0', true);
END
$$;
COMMENT ON FUNCTION bgexec._secret_step() IS
	'for the rest of the transaction, the server log quotes nothing of it (a sql step with a secret parameter)';
CREATE FUNCTION bgexec._end_step_sessions(job_id bigint, lease bigint) RETURNS int
	AS 'MODULE_PATHNAME', 'bgexec_end_step_sessions'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION bgexec._end_step_sessions(bigint, bigint) IS
	'terminates the sql step sessions of the job under the lease when this transaction commits; how many (reconcile, finish, unclaim)';
/* The same for each job and lease at one position of the arrays, in one
 * call: finish_many's, for the jobs its batch completed.  With no sql step
 * session marked anywhere its commit reads one counter. */
CREATE FUNCTION bgexec._end_step_sessions(job_ids bigint[], leases bigint[]) RETURNS int
	AS 'MODULE_PATHNAME', 'bgexec_end_step_sessions_many'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION bgexec._end_step_sessions(bigint[], bigint[]) IS
	'terminates the sql step sessions of the jobs under the leases when this transaction commits; how many (finish_many)';

/* _step_mark(): the job and lease _step_session marked this transaction
 * with, once (55000 when not marked, or the second time).  For
 * _step_completed only: granted to no one. */
CREATE FUNCTION bgexec._step_mark(OUT job_id bigint, OUT lease bigint) RETURNS record
	AS 'MODULE_PATHNAME', 'bgexec_step_mark'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION bgexec._step_mark() IS
	'the job and lease this transaction was marked with as a sql step, once (_step_completed)';

CREATE FUNCTION bgexec._json_fits(value jsonb, max_depth int, what text DEFAULT NULL) RETURNS boolean
	AS 'MODULE_PATHNAME', 'bgexec_json_fits'
	LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION bgexec._json_fits(jsonb, int, text) IS
	'whether a worker can read the value back: its numbers within a double''s range, at most max_depth containers nested; with what given, raises (22003, 54000) naming it instead of returning false';

CREATE FUNCTION bgexec._raw_bytes(value jsonb) RETURNS bigint
	AS 'MODULE_PATHNAME', 'bgexec_raw_bytes'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION bgexec._raw_bytes(jsonb) IS
	'the value''s size detoasted and decompressed, from its header (the gateway''s page of jobs is cut by it)';

CREATE FUNCTION bgexec._json_prefix(value jsonb, n int) RETURNS text
	AS 'MODULE_PATHNAME', 'bgexec_json_prefix'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION bgexec._json_prefix(jsonb, int) IS
	'left(value::text, n), written token by token up to those n characters: bgexec status prints a few kB of a result of many MB without the server writing all of it as text';

CREATE FUNCTION bgexec._jsonb_object(keys text[], vals jsonb[]) RETURNS jsonb
	AS 'MODULE_PATHNAME', 'bgexec_jsonb_object'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION bgexec._jsonb_object(text[], jsonb[]) IS
	'the object {keys[i]: vals[i]} with each value copied in as stored: jsonb_build_object and jsonb_object_agg rebuild every value, about 640 bytes of memory per JSON value';

CREATE FUNCTION bgexec._unknown_key(value jsonb, known text[]) RETURNS text
	AS 'MODULE_PATHNAME', 'bgexec_unknown_key'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION bgexec._unknown_key(jsonb, text[]) IS
	'the first key of the object value not in known; NULL when there is none or value is no object (submit_many elements, append_events events)';

CREATE FUNCTION bgexec._finish_item_error(item jsonb) RETURNS text
	AS 'MODULE_PATHNAME', 'bgexec_finish_item_error'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION bgexec._finish_item_error(jsonb) IS
	'why item is no finish_many item (its first fault, the field named), or NULL when it is one';

CREATE FUNCTION bgexec._body_over(outcome text, body jsonb) RETURNS jsonb
	AS 'MODULE_PATHNAME', 'bgexec_body_over'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION bgexec._body_over(text, jsonb) IS
	'NULL when a finish body is at most bgexec.max_result_bytes as jsonb (read from its header), else the 54000 error the job fails with instead';

CREATE FUNCTION bgexec._over_result_limit(value jsonb) RETURNS boolean
	AS 'MODULE_PATHNAME', 'bgexec_over_result_limit'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION bgexec._over_result_limit(jsonb) IS
	'whether value is past bgexec.max_result_bytes as jsonb, read from its header (finish_many''s items: within it, no body is past it)';

CREATE FUNCTION bgexec._item_over(item jsonb) RETURNS jsonb
	AS 'MODULE_PATHNAME', 'bgexec_item_over'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION bgexec._item_over(jsonb) IS
	'NULL when a finish_many item''s body is at most bgexec.max_result_bytes as jsonb, else the item that fails its job with the 54000 error instead';

CREATE FUNCTION bgexec._validate_payload(kind text, payload jsonb) RETURNS void
	AS 'MODULE_PATHNAME', 'bgexec_validate_payload'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION bgexec._validate_payload(text, jsonb) IS
	'raises 22023/54000 naming the field when a payload (or workflow DAG) is invalid';

/* Targeted wake-ups of idle workers (extension/wake.c).  A NOTIFY on
 * PostgreSQL 15 wakes every listening backend of the database, whatever its
 * channel; workers wait in await_work (await_claim) instead, and a commit that made jobs
 * runnable wakes one waiting worker per job (as many as their free slots
 * need).  _jobs_ready also sends the contract's NOTIFY bgexec_jobs, for
 * anyone else listening and for workers on a server without the module
 * preloaded.  _jobs_due records jobs due later (run_after, a retry's
 * backoff): a waiting worker is woken when they are due, not at its poll. */
CREATE FUNCTION bgexec._jobs_ready(queue text, jobs bigint) RETURNS void
	AS 'MODULE_PATHNAME', 'bgexec_jobs_ready'
	LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION bgexec._jobs_ready(text, bigint) IS
	'NOTIFY bgexec_jobs, queue; at commit, wakes waiting workers of the queue for that many jobs';

CREATE FUNCTION bgexec._jobs_due(queue text, at timestamptz, jobs bigint) RETURNS void
	AS 'MODULE_PATHNAME', 'bgexec_jobs_due'
	LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION bgexec._jobs_due(text, timestamptz, bigint) IS
	'at commit, records that the queue has that many jobs runnable at that time: a waiting worker is woken then';

/* _running_ended: running jobs of a queue with caps (max_running,
 * max_running_per_key) stopped running (finished, suspended, requeued): as
 * many of its queued jobs may now be claimable, which no submit announces.
 * Wakes waiting workers of the queue for them (and sends the NOTIFY).  No-op
 * for a queue without caps: its jobs never wait for a running one. */
CREATE FUNCTION bgexec._running_ended(p_queues text[]) RETURNS void
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
BEGIN
	PERFORM bgexec._jobs_ready(q.name, e.n)
	   FROM (SELECT qn, count(*) AS n FROM unnest(p_queues) AS qn GROUP BY qn) e
	   JOIN bgexec.queue q ON q.name = e.qn
	  WHERE q.max_running IS NOT NULL OR q.max_running_per_key IS NOT NULL;
END
$$;

CREATE FUNCTION bgexec._wake_stop(worker_id text) RETURNS void
	AS 'MODULE_PATHNAME', 'bgexec_wake_stop'
	LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION bgexec._wake_stop(text) IS
	'at commit, wakes the waiting await_work calls of that worker with stop = true';

CREATE FUNCTION bgexec.await_work(worker_id text, queues text[], free int, timeout interval,
                                  pass_on boolean DEFAULT false,
                                  OUT jobs boolean, OUT stop boolean)
	AS 'MODULE_PATHNAME', 'bgexec_await_work'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION bgexec.await_work(text, text[], int, interval, boolean) IS
	'waits up to timeout until this worker is picked to claim jobs of its queues, or to stop one of its jobs';

/* ----------------------------------------------------- internal helpers */

-- _can_see: the caller owns the job, or is a superuser.
CREATE FUNCTION bgexec._can_see(job_owner name) RETURNS boolean
	LANGUAGE sql STABLE PARALLEL RESTRICTED
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
	SELECT job_owner = bgexec._caller()
	    OR coalesce((SELECT rolsuper FROM pg_catalog.pg_roles
	                  WHERE rolname = bgexec._caller()), false)
$$;

/* _notify_event: NOTIFY bgexec_events "job:seq" unless the session turned
 * bgexec.notify_events off.  The payload means "the job's log now reaches
 * seq"; readers replay from their own cursor, so a batch notifies once, for
 * its last event: NOTIFY costs per committing transaction, and per event it
 * cost 2.5x the throughput of 10-event batches (README).
 * A single-expression SQL function without SET, so PostgreSQL inlines it into
 * the calling statement (finish_many calls it once per completed job, where a
 * plpgsql call cost more than the notification); its callers pin search_path
 * and its names are qualified anyway. */
CREATE FUNCTION bgexec._notify_event(p_job bigint, p_seq int) RETURNS void
	LANGUAGE sql VOLATILE
	AS $$
	SELECT CASE WHEN coalesce(pg_catalog.current_setting('bgexec.notify_events', true), 'on')
	                 OPERATOR(pg_catalog.<>) 'off'
	            THEN pg_catalog.pg_notify('bgexec_events',
	                     p_job::pg_catalog.text OPERATOR(pg_catalog.||) ':'
	                     OPERATOR(pg_catalog.||) p_seq::pg_catalog.text)
	       END
$$;

/* _event: appends one event to a job the caller has already locked (by the
 * UPDATE that bumped last_seq), and wakes event tails.  The caller passes the
 * seq it reserved, so the seq is gapless: reservation and insert commit or
 * roll back together (invariant 6). */
CREATE FUNCTION bgexec._event(p_job bigint, p_seq int, p_kind text, p_data jsonb)
	RETURNS int
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
BEGIN
	INSERT INTO bgexec.job_event (job_id, seq, kind, data)
	VALUES (p_job, p_seq, p_kind, coalesce(p_data, '{}'));
	PERFORM bgexec._notify_event(p_job, p_seq);
	RETURN p_seq;
END
$$;

/* _backoff: exponential backoff with full jitter on the DB clock:
 * uniform in [0, min(cap, base * 2^(attempt-1))], computed as cap times a
 * fraction of at most 1: base * 2^(attempt-1) / cap in seconds, as double
 * precision (the exponent capped at 62), then capped at 1.  As an interval,
 * base * 2^(attempt-1) overflowed (22008) long before the cap applied (a
 * base of a year at the 29th attempt), and failed the finish and every
 * reconcile() that met the job.  retry_cap is at most 100 years, each of
 * its parts too (queue_backoff_sane), and so is the delay. */
CREATE FUNCTION bgexec._backoff(p_queue text, p_attempt int) RETURNS interval
	LANGUAGE sql VOLATILE
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
	SELECT bgexec._exact(b.cap) * (random() * CASE WHEN b.cap_s <= 0 THEN 1 ELSE
	         least(1, greatest(0, b.base_s * power(2, least(greatest(p_attempt, 1) - 1, 62))
	                              / b.cap_s)) END)
	  FROM (SELECT coalesce(q.retry_cap, interval '10 minutes') AS cap,
	               date_part('epoch', coalesce(q.retry_cap, interval '10 minutes')) AS cap_s,
	               date_part('epoch', coalesce(q.retry_base, interval '1 second')) AS base_s
	          FROM (SELECT 1) one
	          LEFT JOIN bgexec.queue q ON q.name = p_queue) b
$$;

-- _is_terminal: true for the four terminal statuses.  Without SET, so that
-- it is inlined; its body names no type.
CREATE FUNCTION bgexec._is_terminal(s bgexec.job_status) RETURNS boolean
	LANGUAGE sql IMMUTABLE PARALLEL SAFE
	AS $$ SELECT s IN ('completed', 'failed', 'cancelled', 'timed_out') $$;

-- _count: adds delta to the terminal count of (queue, status), in the
-- caller's transaction.
CREATE FUNCTION bgexec._count(p_queue text, p_status bgexec.job_status, p_delta bigint)
	RETURNS void
	LANGUAGE sql VOLATILE
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
	INSERT INTO bgexec.queue_count (queue, status, n) VALUES (p_queue, p_status, p_delta)
$$;

/* _compact_counts: folds queue_count into one row per (queue, status) when
 * it holds more than p_min_rows rows and folding would take away at least
 * half of them.  Run by reconcile.  Folded, the table keeps a row per
 * (queue, terminal status): past 86 queues with history that is over 256
 * rows, and every reconcile deleted and wrote them all again, folding
 * nothing (4 MB of WAL a call at 10 000 queues, on an idle system).  One
 * compactor at a time (the others skip); its DELETE takes only the rows
 * its snapshot sees, so deltas committed meanwhile stay for the next one. */
CREATE FUNCTION bgexec._compact_counts(p_min_rows int DEFAULT 256) RETURNS boolean
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
DECLARE
	v_rows bigint;
	v_groups bigint;
BEGIN
	-- The distinct count is a sort: only past the threshold, where it
	-- decides; below it (the common case) one cheap count answers.
	SELECT count(*) INTO v_rows FROM bgexec.queue_count;
	IF v_rows <= p_min_rows THEN
		RETURN false;
	END IF;
	SELECT count(DISTINCT (c.queue, c.status)) INTO v_groups FROM bgexec.queue_count c;
	IF v_rows < 2 * v_groups
	   OR NOT pg_catalog.pg_try_advisory_xact_lock(pg_catalog.hashtext('bgexec.queue_count')) THEN
		RETURN false;
	END IF;
	WITH gone AS (DELETE FROM bgexec.queue_count RETURNING queue, status, n)
	INSERT INTO bgexec.queue_count (queue, status, n)
	SELECT g.queue, g.status, sum(g.n) FROM gone g
	 GROUP BY g.queue, g.status HAVING sum(g.n) <> 0;
	RETURN true;
END
$$;

/* _check_lease_for: raises 22023 naming lease_for unless it is positive
 * and at most a day.  A lease is renewed by heartbeats every few seconds
 * and a lost worker's job waits for it to expire: a day is already long;
 * a lease of 300000 years overflowed now() + lease_for (22008).  Two
 * comparisons: claim and heartbeat call it on every call. */
CREATE FUNCTION bgexec._check_lease_for(lease_for interval) RETURNS void
	LANGUAGE plpgsql IMMUTABLE
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
BEGIN
	-- Each part bounded too: '100 years -35999 days' compares as a day, and
	-- made a lease of 525 days (or a timestamp out of range in the claim).
	IF lease_for IS NULL OR NOT bgexec._interval_positive(lease_for)
	   OR NOT bgexec._interval_within(lease_for, interval '1 day') THEN
		RAISE EXCEPTION 'lease_for must be a positive interval of at most 1 day'
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = format('lease_for was %s', coalesce(lease_for::text, 'null'));
	END IF;
END
$$;

/* _check_submit: every argument check of submit, raising 22023/54000
 * naming the field, else true; shared by submit and the set-based
 * submit_many (which filters on the result, so the call is never pruned).
 * Every value a claim later computes with is bounded here, so no job can
 * make the claims that reach it fail: the running-key index takes
 * concurrency_key only when the job runs (512 characters fit its entry),
 * and the deadline is the start plus timeout.  run_after is finite: an
 * infinite one would never run, and queue_stats subtracts the oldest one
 * from now().  NULL run_after means now(), and so does one in the past:
 * the three INSERTs store greatest(run_after, now()).  Claims take a
 * priority's jobs in run_after order, so a back-dated job went ahead of
 * every job already queued at its priority, a queue it was never in (and
 * showed in queue_stats' oldest_queued_age as waiting since then). */
CREATE FUNCTION bgexec._check_submit(
	p_kind text, p_payload jsonb, p_queue text, p_priority int,
	p_run_after timestamptz, p_max_attempts int, p_timeout interval,
	p_idempotency_key text, p_concurrency_key text, p_unique_key text DEFAULT NULL)
	RETURNS boolean
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
BEGIN
	IF p_kind IS NULL OR NOT bgexec._valid_name(p_kind, 128) THEN
		RAISE EXCEPTION 'kind must be 1-128 characters: ASCII letters, digits, _ . : -'
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = format('kind was %L', p_kind);
	END IF;
	IF p_queue IS NULL OR NOT bgexec._valid_name(p_queue, 63) THEN
		RAISE EXCEPTION 'queue must be 1-63 characters: ASCII letters, digits, _ . : -'
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = format('queue was %L', p_queue);
	END IF;
	IF p_payload IS NULL THEN
		RAISE EXCEPTION 'payload must be a JSON object'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF p_priority IS NULL THEN
		RAISE EXCEPTION 'priority must not be null'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF NOT isfinite(p_run_after) THEN
		RAISE EXCEPTION 'run_after must be a finite timestamp'
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = format('run_after was %s', p_run_after);
	END IF;
	-- NULL max_attempts or timeout: the queue's default (_submit_one); a
	-- timeout of 0: none, whatever the queue's default
	IF p_max_attempts < 1 THEN
		RAISE EXCEPTION 'max_attempts must be at least 1'
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = format('max_attempts was %s', p_max_attempts);
	END IF;
	IF p_timeout IS NOT NULL AND NOT bgexec._interval_zero(p_timeout)
	   AND (NOT bgexec._interval_positive(p_timeout)
	        OR NOT bgexec._interval_within(p_timeout, interval '100 years')) THEN
		RAISE EXCEPTION 'timeout must be a positive interval of at most 100 years, or 0 for none'
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = format('timeout was %s', p_timeout);
	END IF;
	IF p_idempotency_key IS NOT NULL AND length(p_idempotency_key) NOT BETWEEN 1 AND 512 THEN
		RAISE EXCEPTION 'idempotency_key must be 1-512 characters'
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = format('idempotency_key has %s characters', length(p_idempotency_key));
	END IF;
	IF p_concurrency_key IS NOT NULL AND length(p_concurrency_key) NOT BETWEEN 1 AND 512 THEN
		RAISE EXCEPTION 'concurrency_key must be 1-512 characters'
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = format('concurrency_key has %s characters', length(p_concurrency_key));
	END IF;
	IF p_unique_key IS NOT NULL AND length(p_unique_key) NOT BETWEEN 1 AND 512 THEN
		RAISE EXCEPTION 'unique_key must be 1-512 characters'
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = format('unique_key has %s characters', length(p_unique_key));
	END IF;
	-- One key or the other: a job kept once per key for good, or once per
	-- key while active; both at once has no single job to return.
	IF p_unique_key IS NOT NULL AND p_idempotency_key IS NOT NULL THEN
		RAISE EXCEPTION 'idempotency_key and unique_key cannot both be given'
			USING ERRCODE = 'invalid_parameter_value',
			      HINT = 'idempotency_key: one job per key for good; unique_key: one job per key while it is queued, running or suspended';
	END IF;
	PERFORM bgexec._validate_payload(p_kind, p_payload);
	RETURN true;
END
$$;

/* _require_read_committed: raises feature_not_supported (0A000) unless the
 * transaction is READ COMMITTED.  The caps (max_queued, max_running,
 * max_running_per_key) are counted after the queue's advisory lock, and only
 * a READ COMMITTED statement sees what the lock's previous holder committed:
 * under REPEATABLE READ or SERIALIZABLE the count reads the transaction's
 * snapshot, taken before the lock, and went past the cap (isolation
 * caps-repeatable-read).  Queues without caps take any isolation level. */
CREATE FUNCTION bgexec._require_read_committed(p_queue text, p_what text) RETURNS void
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
BEGIN
	IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
		RAISE EXCEPTION 'queue "%" has caps: % it only in a READ COMMITTED transaction', p_queue, p_what
			USING ERRCODE = 'feature_not_supported',
			      DETAIL = format('transaction_isolation is %s', pg_catalog.current_setting('transaction_isolation')),
			      HINT = 'BEGIN ISOLATION LEVEL READ COMMITTED, or ALTER ROLE ... SET default_transaction_isolation = ''read committed''';
	END IF;
END
$$;

/* _submit_one: submit() for an already identified owner, every case
 * (submit() itself takes the common one in fewer calls; cron, submit_many).
 * Locks: with a max_queued cap, an advisory lock per queue serializes
 * admission so the cap is exact under concurrency.  Idempotency: the unique
 * index (owner, idempotency_key) makes a concurrent duplicate wait for the
 * first and then return its id — before any cap check, so a client retrying
 * with its key gets its job back even from a full queue.  A unique key
 * (job_unique_idx) does the same among the key's active jobs only. */
CREATE FUNCTION bgexec._submit_one(
	p_owner name, p_kind text, p_payload jsonb, p_queue text, p_priority int,
	p_run_after timestamptz, p_max_attempts int, p_timeout interval,
	p_idempotency_key text, p_concurrency_key text,
	p_count_cap boolean DEFAULT true, p_unique_key text DEFAULT NULL)
	RETURNS bigint
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, bgexec, pg_temp
	SET enable_seqscan = off
	SET jit = off
	AS $$
-- p_count_cap false: the caller holds the queue's admission lock and counts
-- the queue itself, once, after all its jobs are in (submit_many): the
-- count reads up to max_queued + 1 index entries, so once per job it cost
-- the queue's backlog per job, under the lock (500 jobs into a queue with
-- 6 500 queued: 2-3 s).
-- Its text comparisons name the default collation: called with an owner
-- of type name (collation "C", as from submit_many and schedules), the
-- function's input collation was "C", which no index of the job table
-- has, and the idempotency lookup and the max_queued count filtered every
-- row of the owner's keyed jobs, or of the runnable index (a one-element
-- submit_many into a capped queue beside 332 000 queued jobs: 27 ms).
DECLARE
	v_id bigint;
	v_cap int;
	v_depth bigint;
	v_max_attempts int;
	v_timeout interval;
BEGIN
	PERFORM bgexec._check_submit(p_kind, p_payload, p_queue, p_priority, p_run_after,
	                             p_max_attempts, p_timeout, p_idempotency_key,
	                             p_concurrency_key, p_unique_key);

	-- A NULL max_attempts or timeout is the queue's default (checked by
	-- queue_defaults_sane), else 1 and none; a timeout of 0 is none.
	SELECT max_queued, default_max_attempts, default_timeout INTO v_cap, v_max_attempts, v_timeout
	  FROM bgexec.queue WHERE name = p_queue COLLATE "default";
	v_max_attempts := coalesce(p_max_attempts, v_max_attempts, 1);
	v_timeout := CASE WHEN p_timeout IS NULL THEN v_timeout
	                  WHEN bgexec._interval_zero(p_timeout) THEN NULL ELSE p_timeout END;
	-- Same owner + same key: the existing job, read in the snapshot,
	-- without waiting for the queue's lock, from a transaction the cap
	-- refuses, or for a transaction that holds the job's row (a stop() not
	-- committed, a worker's claim): the insert's ON CONFLICT below waits for
	-- any transaction writing a row with the key, and under REPEATABLE READ
	-- then failed with 40001 on a job changed since the snapshot, however
	-- old the key.  Not under SERIALIZABLE outside capped queues: there
	-- this read takes a predicate lock on the key index's page, and two
	-- transactions each submitting neighbouring keys ('order-1',
	-- 'order-2'...) failed one another with 40001 (isolation
	-- submit-serializable-keys); the ON CONFLICT finds the job.
	IF p_idempotency_key IS NOT NULL
	   AND (v_cap IS NOT NULL
	        OR pg_catalog.current_setting('transaction_isolation') <> 'serializable') THEN
		SELECT id INTO v_id FROM bgexec.job
		 WHERE owner = p_owner AND idempotency_key = p_idempotency_key COLLATE "default";
		IF FOUND THEN
			RETURN v_id;
		END IF;
	END IF;
	-- The same for a unique key: its active job, read in the snapshot.
	IF p_unique_key IS NOT NULL
	   AND (v_cap IS NOT NULL
	        OR pg_catalog.current_setting('transaction_isolation') <> 'serializable') THEN
		SELECT id INTO v_id FROM bgexec.job
		 WHERE owner = p_owner AND unique_key = p_unique_key COLLATE "default"
		   AND status IN ('queued', 'running', 'suspended');
		IF FOUND THEN
			RETURN v_id;
		END IF;
	END IF;
	IF v_cap IS NOT NULL THEN
		PERFORM bgexec._require_read_committed(p_queue, 'submit to');
		PERFORM pg_catalog.pg_advisory_xact_lock(
			pg_catalog.hashtext('bgexec.queue'), pg_catalog.hashtext(p_queue));
	END IF;

	-- Insert first, count after: a concurrent duplicate key waits here for the
	-- first submitter and then returns its job, even when the queue is full.
	IF p_unique_key IS NOT NULL THEN
		-- Unique while active: the insert waits for a transaction writing
		-- an active job with the key (a concurrent submit, or a finish or
		-- stop of the key's job) and conflicts if that job is still active
		-- when it commits.  The key's job read next can have ended since
		-- (its finish committed between the two statements): then the key
		-- is free and the insert is tried again, so the call returns the
		-- active job or a new one, never nothing.  Under REPEATABLE READ a
		-- conflict with a job the snapshot does not see raises 40001 in the
		-- insert, as for an idempotency key.
		LOOP
			INSERT INTO bgexec.job (queue, kind, owner, priority, payload, max_attempts,
			                        run_after, timeout, unique_key, concurrency_key)
			VALUES (p_queue, p_kind, p_owner, p_priority, p_payload, v_max_attempts,
			        greatest(p_run_after, now()), v_timeout, p_unique_key, p_concurrency_key)
			ON CONFLICT (owner, unique_key)
			   WHERE unique_key IS NOT NULL AND status IN ('queued', 'running', 'suspended')
			DO NOTHING
			RETURNING id INTO v_id;
			EXIT WHEN v_id IS NOT NULL;
			SELECT id INTO v_id FROM bgexec.job
			 WHERE owner = p_owner AND unique_key = p_unique_key COLLATE "default"
			   AND status IN ('queued', 'running', 'suspended');
			IF FOUND THEN
				RETURN v_id;
			END IF;
		END LOOP;
	ELSE
		INSERT INTO bgexec.job (queue, kind, owner, priority, payload, max_attempts,
		                        run_after, timeout, idempotency_key, concurrency_key)
		VALUES (p_queue, p_kind, p_owner, p_priority, p_payload, v_max_attempts,
		        greatest(p_run_after, now()), v_timeout, p_idempotency_key, p_concurrency_key)
		ON CONFLICT (owner, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
		RETURNING id INTO v_id;

		IF v_id IS NULL THEN
			-- The key's job: one committed before, or by a concurrent submit
			-- this insert waited for.
			SELECT id INTO STRICT v_id FROM bgexec.job
			 WHERE owner = p_owner AND idempotency_key = p_idempotency_key COLLATE "default";
			RETURN v_id;
		END IF;
	END IF;

	IF v_cap IS NOT NULL AND p_count_cap THEN
		-- Under the queue's lock, so concurrent submitters count one another.
		SELECT count(*) INTO v_depth FROM (
			SELECT 1 FROM bgexec.job
			 WHERE queue = p_queue COLLATE "default" AND status = 'queued' LIMIT v_cap::bigint + 1) d;
		IF v_depth > v_cap THEN
			RAISE EXCEPTION 'queue "%" is full (max_queued %)', p_queue, v_cap
				USING ERRCODE = 'configuration_limit_exceeded',
				      HINT = 'retry later, or raise the cap with bgexec.configure_queue()';
		END IF;
	END IF;

	-- NOTIFY only for a job runnable now (identical NOTIFYs coalesce within
	-- a transaction); a job due later wakes a waiting worker when it is due.
	IF p_run_after IS NULL OR p_run_after <= now() THEN
		PERFORM bgexec._jobs_ready(p_queue, 1);
	ELSE
		PERFORM bgexec._jobs_due(p_queue, p_run_after, 1);
	END IF;
	RETURN v_id;
END
$$;

/* _terminal: moves a locked, non-terminal job to a terminal status with its
 * result/error and exactly one terminal event, in the caller's transaction
 * (invariant 5).  The caller must hold the row lock and must have checked the
 * job is not terminal. */
CREATE FUNCTION bgexec._terminal(p_job bigint, p_status bgexec.job_status,
                                 p_result jsonb, p_error jsonb,
                                 p_was_running boolean DEFAULT true)
	RETURNS bgexec.job_status
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
DECLARE
	v_seq int;
	v_queue text;
BEGIN
	UPDATE bgexec.job
	   SET status = p_status,
	       result = p_result,
	       error = p_error,
	       finished_at = now(),
	       lease = NULL, lease_owner = NULL, lease_expires_at = NULL,
	       last_seq = last_seq + 1
	 WHERE id = p_job AND NOT bgexec._is_terminal(status)
	RETURNING last_seq, queue INTO v_seq, v_queue;
	IF v_seq IS NULL THEN
		RETURN NULL;
	END IF;
	PERFORM bgexec._count(v_queue, p_status, 1);
	IF p_was_running THEN  -- a queued or suspended job frees no running slot
		PERFORM bgexec._running_ended(ARRAY[v_queue]);
	END IF;
	PERFORM bgexec._event(p_job, v_seq, p_status::text,
		CASE WHEN p_status = 'completed' THEN _jsonb_object('{result}', ARRAY[p_result])
		     ELSE _jsonb_object('{error}', ARRAY[p_error]) END);
	RETURN p_status;
END
$$;

/* _requeue: a running job the caller has locked goes back to queued for
 * another attempt: lease released, error kept, run_after pushed by the
 * backoff, event retry_scheduled, workers woken.
 * The error's retry_after, a JSON number of seconds >= 0, is the delay
 * instead of the queue's backoff (a job saying "try again in 10 minutes":
 * a remote rate limit), at most 30 days (2592000 s; more is 30 days).  Any
 * other value (a string, a negative number, null) is ignored, the backoff
 * applying: a failure's report is never refused for a hint about its
 * retry (refused, the job stayed running until its lease expired, and a
 * worker's whole finish_many batch with it).  Read only here, on the
 * failed path: a completion does no more work. */
CREATE FUNCTION bgexec._requeue(p_job bigint, p_queue text, p_attempt int, p_error jsonb)
	RETURNS bgexec.job_status
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
DECLARE
	v_delay interval;
	v_seq int;
BEGIN
	IF jsonb_typeof(p_error->'retry_after') = 'number'
	   AND (p_error->>'retry_after')::numeric >= 0 THEN
		v_delay := least((p_error->>'retry_after')::numeric, 2592000)::float8 * interval '1 second';
	ELSE
		v_delay := bgexec._backoff(p_queue, p_attempt);
	END IF;
	UPDATE bgexec.job x
	   SET status = 'queued', lease = NULL, lease_owner = NULL,
	       lease_expires_at = NULL, deadline = NULL, error = p_error,
	       run_after = now() + v_delay, last_seq = x.last_seq + 1
	 WHERE x.id = p_job
	RETURNING x.last_seq INTO v_seq;
	PERFORM bgexec._event(p_job, v_seq, 'retry_scheduled',
		jsonb_build_object('attempt', p_attempt, 'error', p_error,
		                   'delay_ms', round(extract(epoch FROM v_delay) * 1000)));
	IF v_delay <= interval '0' THEN
		PERFORM bgexec._jobs_ready(p_queue, 1);
	ELSE  -- a waiting worker is woken when the backoff has passed
		PERFORM bgexec._jobs_due(p_queue, now() + v_delay, 1);
		PERFORM bgexec._running_ended(ARRAY[p_queue]);
	END IF;
	RETURN 'queued';
END
$$;

/* _retention: deletes up to p_batch terminal jobs finished before
 * now() - p_older_than, oldest first, passing over rows another transaction
 * holds (events go with them: job_deleted).  Used by the watchdog
 * (bgexec.retention) in small batches so vacuum keeps up, and by purge()
 * with max_jobs for a superuser (a client's batch is its own, in purge).
 * p_statuses (purge's statuses): of those terminal statuses only (NULL:
 * all).
 * The batch's ids as an array, deleted by key: planned for an unknown
 * LIMIT, a join of the batch with the table was estimated at a tenth of
 * the finished jobs and hashed the whole table for each batch of 1000
 * (3 s a batch at 3 million jobs, the watchdog's tick included). */
CREATE FUNCTION bgexec._retention(p_older_than interval, p_batch int DEFAULT 1000,
                                  p_statuses bgexec.job_status[] DEFAULT NULL)
	RETURNS bigint
	LANGUAGE sql VOLATILE
	SET search_path = pg_catalog, bgexec, pg_temp
	SET enable_seqscan = off
	SET jit = off
	AS $$
	WITH gone AS (
		DELETE FROM bgexec.job j
		 WHERE j.id = ANY (ARRAY(
			SELECT id FROM bgexec.job
			 WHERE finished_at < now() - bgexec._exact(p_older_than)
			   AND (p_statuses IS NULL OR status = ANY (p_statuses))
			 ORDER BY finished_at
			 LIMIT p_batch
			   FOR UPDATE SKIP LOCKED))
		RETURNING 1)
	SELECT count(*) FROM gone
$$;

/* ----------------------------------------------------- worker functions */

/* Plans.  PL/pgSQL keeps a function's plans for the life of the session, and
 * a plan made while bgexec.job was small stays until the next vacuum or
 * analyze of it (autovacuum looks once a minute): a worker that connected
 * to a fresh install read the whole table in claim, heartbeat and
 * finish_many once a burst of jobs arrived (97 ms per claim of 64 at 300 000
 * jobs; the first minute of the soak drained almost nothing).  So every
 * function that reaches jobs or events by key runs with enable_seqscan =
 * off, and without JIT: the penalty that disables a path counts in the
 * cost of the statements that have no other (queue_count has no index),
 * which then crossed jit_above_cost.  Regress "plans" holds them to it. */

-- _pid: a pid as the workers send it (register_worker's info.pid and
-- info.replaces, claim's and heartbeat's process.pid): an integral JSON
-- number in int's range, 7 and 7.0 alike, as an int; NULL for anything
-- else (the callers refuse it, naming the field).  A CASE, so that no cast
-- is tried on a value that is not a number.  Without SET, so that it is
-- inlined; the types its body names are qualified.
CREATE FUNCTION bgexec._pid(v jsonb) RETURNS int
	LANGUAGE sql IMMUTABLE PARALLEL SAFE
	AS $$
	SELECT CASE WHEN pg_catalog.jsonb_typeof(v) IS DISTINCT FROM 'number' THEN NULL
	            WHEN v::pg_catalog.numeric NOT BETWEEN -2147483648 AND 2147483647 THEN NULL
	            WHEN v::pg_catalog.numeric <> pg_catalog.trunc(v::pg_catalog.numeric) THEN NULL
	            ELSE v::pg_catalog.numeric::pg_catalog.int4 END
$$;

-- _lease_s: a worker row's lease in seconds, from the info it registered
-- with (lease_s, a positive number, register_worker checks it); 30, the
-- daemon's default, if none.  Bounded to a microsecond..a day for a row
-- written by hand: make_interval reads it as a double, and 1e-400 failed
-- every later registration of the id (22003).
CREATE FUNCTION bgexec._lease_s(info jsonb) RETURNS numeric
	LANGUAGE sql IMMUTABLE PARALLEL SAFE
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
	SELECT CASE WHEN jsonb_typeof(info->'lease_s') = 'number' AND (info->>'lease_s')::numeric > 0
	            THEN greatest(least((info->>'lease_s')::numeric, 86400), 0.000001) ELSE 30 END
$$;

/* _silent_since: a worker not stopped whose last heartbeat is at or before
 * this is silent: it heartbeats three times a lease, idle too, so one
 * silent for a minute and a whole lease is gone (worker_stats' alive,
 * _retire_workers). */
CREATE FUNCTION bgexec._silent_since(info jsonb) RETURNS timestamptz
	LANGUAGE sql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
	SELECT now() - greatest(interval '1 minute', make_interval(secs => bgexec._lease_s(info)))
$$;

/* _retire_workers: deletes the rows of workers gone longer than
 * p_older_than: stopped, or silent for a minute and a whole lease (a live
 * worker heartbeats three times a lease, idle too: a worker with a lease
 * of an hour is not deleted between two heartbeats), their last sign of life
 * (heartbeat or stop) older than that, and no running job under their id
 * (a lease that expired waits for reconcile, which names the worker in its
 * error).  With the default id (host:pid) every start of a worker adds a
 * row, and a worker killed or lost never marks its own row stopped; the
 * watchdog calls this beside _retention (bgexec.retention).  A process that
 * is only frozen finds its row gone at its next heartbeat and registers
 * again, as when an operator deletes it.
 * A last sign of life more than a lease ahead of now() was written before a
 * step of the server's clock back, and none since (a live worker
 * heartbeats three times a lease, writing now()): not alive in
 * worker_stats, and retired at once, gone since a time the row cannot
 * tell.  Aged as the others, it stayed until the clock caught up (a
 * step of a day: a day).
 * A claim in flight under the id (uncommitted: its running jobs not seen
 * yet) keeps the row: the claim holds the id's claim lock shared until it
 * commits, and a row deleted under it left the claim's jobs running under
 * an id without a row, which unclaim (it joins the row) could no longer
 * give back should the claim's reply be lost.  Tried on the rows found
 * gone only (the CTE is materialized), so a live worker's claims never
 * wait for the watchdog. */
CREATE FUNCTION bgexec._retire_workers(p_older_than interval) RETURNS bigint
	LANGUAGE sql VOLATILE
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
	WITH gone_quiet AS MATERIALIZED (
		SELECT w.id FROM bgexec.worker w
		 WHERE (greatest(w.heartbeat_at, w.stopped_at) < now() - bgexec._exact(p_older_than)
		        AND (w.stopped_at IS NOT NULL OR w.heartbeat_at <= bgexec._silent_since(w.info))
		        OR greatest(w.heartbeat_at, w.stopped_at)
		           > now() + make_interval(secs => bgexec._lease_s(w.info)))
		   AND NOT EXISTS (SELECT 1 FROM bgexec.job j
		                    WHERE j.status = 'running' AND j.lease_owner = w.id)
		   FOR UPDATE OF w SKIP LOCKED),
	doomed AS MATERIALIZED (
		SELECT g.id FROM gone_quiet g
		 WHERE pg_catalog.pg_try_advisory_xact_lock(
		           pg_catalog.hashtext('bgexec.claim.worker'), pg_catalog.hashtext(g.id))),
	gone AS (DELETE FROM bgexec.worker w USING doomed WHERE w.id = doomed.id RETURNING 1)
	SELECT count(*) FROM gone
$$;
COMMENT ON FUNCTION bgexec._retire_workers(interval) IS
	'deletes the rows of workers gone (stopped, or silent for a minute and a lease, with no running job) longer than the interval; the watchdog''s retention';

CREATE FUNCTION bgexec.register_worker(worker_id text, queues text[],
                                       concurrency int, info jsonb DEFAULT '{}')
	RETURNS void
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
DECLARE
	v_bad text;
	v_holder bgexec.worker;
BEGIN
	IF worker_id IS NULL OR length(worker_id) NOT BETWEEN 1 AND 200 THEN
		RAISE EXCEPTION 'worker_id must be 1-200 characters'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF concurrency IS NULL OR concurrency < 1 THEN
		RAISE EXCEPTION 'concurrency must be at least 1'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	-- The queues it claims from, as claim and await_work take them.
	IF queues IS NULL THEN
		RAISE EXCEPTION 'queues must not be null'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF array_ndims(queues) > 1 THEN
		RAISE EXCEPTION 'queues must be a one-dimensional array'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	SELECT q INTO v_bad FROM unnest(queues) AS q
	 WHERE NOT coalesce(bgexec._valid_name(q, 63), false) LIMIT 1;
	IF FOUND THEN
		RAISE EXCEPTION 'queues: each queue must be 1-63 characters: ASCII letters, digits, _ . : -'
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = format('queue was %s', coalesce(quote_literal(v_bad), 'null'));
	END IF;
	-- host and pid are read from info: an object (null: {}), with a string
	-- host and an integer pid.
	IF jsonb_typeof(info) <> 'object' THEN
		RAISE EXCEPTION 'info must be a JSON object'
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = format('info was %s', info);
	END IF;
	IF coalesce(jsonb_typeof(info->'pid'), 'null') <> 'null' AND bgexec._pid(info->'pid') IS NULL THEN
		RAISE EXCEPTION 'info.pid must be an integer'
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = format('pid was %s', info->'pid');
	END IF;
	IF coalesce(jsonb_typeof(info->'host'), 'null') NOT IN ('null', 'string') THEN
		RAISE EXCEPTION 'info.host must be a string'
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = format('host was %s', info->'host');
	END IF;
	-- The daemon's --lease: how long the id stays held after its last
	-- heartbeat.  Bounded as claim's lease_for (_lease_s reads it as a
	-- double: 1e-400 failed every later registration of the id, 22003).
	IF coalesce(jsonb_typeof(info->'lease_s'), 'null') <> 'null'
	   AND (CASE WHEN jsonb_typeof(info->'lease_s') <> 'number' THEN true
	             ELSE (info->'lease_s')::numeric NOT BETWEEN 0.000001 AND 86400 END) THEN
		RAISE EXCEPTION 'info.lease_s must be a number of seconds from 0.000001 to 86400'
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = format('lease_s was %s', info->'lease_s');
	END IF;
	IF coalesce(jsonb_typeof(info->'replaces'), 'null') <> 'null' AND bgexec._pid(info->'replaces') IS NULL THEN
		RAISE EXCEPTION 'info.replaces must be an integer'
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = format('replaces was %s', info->'replaces');
	END IF;
	-- No claim of the id is in flight from here to commit: claims hold this
	-- lock shared (claim), so a process that had the id and does not know
	-- it lost it either claimed before (its leases are below lease_floor,
	-- which unclaim respects) or claims after this commits, and then sees
	-- the new row and is refused (_check_process).  A claim is short; so
	-- is the wait.  lease_floor comes from lease_seq: guarded first, before
	-- this lock, in the order claim takes both.
	PERFORM bgexec._lease_guard();
	PERFORM pg_catalog.pg_advisory_xact_lock(
		pg_catalog.hashtext('bgexec.claim.worker'), pg_catalog.hashtext(worker_id));
	-- One live process per worker id: leases, heartbeat and unclaim go by the
	-- id, and a second process under it had the first's jobs given back
	-- (unclaim) and run again beside it.  The row is taken over when its
	-- process stopped (deregister_worker), names none (host or pid null: by
	-- hand), is the caller (same host and pid: registering again), missed
	-- its lease (no heartbeat for its lease_s, 30 s if unknown), or is the
	-- pid the caller found gone on its own host (info.replaces: a worker
	-- restarted after a kill -9).  Else 55006, nothing changed.
	INSERT INTO bgexec.worker AS w (id, host, pid, queues, concurrency, info,
	                                started_at, heartbeat_at, stopped_at, stopped_by_self, lease_floor)
	VALUES (worker_id, info->>'host', bgexec._pid(info->'pid'), coalesce(queues, '{}'),
	        concurrency, coalesce(info, '{}'), now(), now(), NULL, false,
	        pg_catalog.nextval('bgexec.lease_seq'))
	ON CONFLICT (id) DO UPDATE
	   SET host = excluded.host, pid = excluded.pid, queues = excluded.queues,
	       concurrency = excluded.concurrency, info = excluded.info,
	       started_at = now(), heartbeat_at = now(), stopped_at = NULL,
	       stopped_by_self = false, lease_floor = excluded.lease_floor
	 WHERE w.stopped_at IS NOT NULL OR w.host IS NULL OR w.pid IS NULL
	    OR (w.host = excluded.host AND w.pid = excluded.pid)
	    OR w.heartbeat_at < now() - make_interval(secs => bgexec._lease_s(w.info))
	    -- (a heartbeat more than a lease ahead: written before a step of the
	    -- clock back, which would keep the id held for the step's length)
	    OR w.heartbeat_at > now() + make_interval(secs => bgexec._lease_s(w.info))
	    OR (w.host = excluded.host AND w.pid = bgexec._pid(excluded.info->'replaces'));
	IF NOT FOUND THEN
		SELECT * INTO v_holder FROM bgexec.worker w WHERE w.id = register_worker.worker_id;
		RAISE EXCEPTION 'worker id "%" is in use by a live worker', worker_id
			USING ERRCODE = 'object_in_use',
			      -- (a heartbeat_at written at infinity, past the functions,
			      -- failed this message with 22008 instead)
			      DETAIL = format('pid %s on host %s, last heartbeat %s (its lease: %s s)',
			                      v_holder.pid, v_holder.host,
			                      CASE WHEN isfinite(v_holder.heartbeat_at)
			                           THEN round(extract(epoch FROM now() - v_holder.heartbeat_at)::numeric, 1) || ' s ago'
			                           ELSE 'at ' || v_holder.heartbeat_at END,
			                      bgexec._lease_s(v_holder.info)::float8),
			      HINT = 'give each worker process its own id; a worker that is gone frees its id once it misses its lease';
	END IF;
END
$$;
COMMENT ON FUNCTION bgexec.register_worker(text, text[], int, jsonb) IS
	'upserts a worker row (host and pid are read from info)';

/* deregister_worker: marks the row stopped, with process given only while
 * the row names that process, checked in the UPDATE itself: a process
 * that read its own row and then called this by id alone, while another
 * process was taking the id over, waited for that registration's row lock
 * and then marked the new process's row stopped -- and the id was another
 * process's to take at once, from a live worker.
 * With process given (the process stopping itself) the stop is final
 * (stopped_by_self): a heartbeat of that process in flight, committed after
 * this, leaves the row stopped (it set stopped_at NULL again, and the
 * worker looked alive until its heartbeat went stale); only register_worker
 * clears it.  By id alone (by hand, an older daemon) a heartbeat of the
 * worker, still running, marks it live again, as before: the row names a
 * process that may well be running, whose id another process could
 * otherwise take at once.  A row its process stopped keeps
 * stopped_by_self when stopped again by id. */
CREATE FUNCTION bgexec.deregister_worker(worker_id text, process jsonb DEFAULT NULL) RETURNS void
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER  -- not sql: see append_event
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
BEGIN
	IF worker_id IS NULL OR length(worker_id) NOT BETWEEN 1 AND 200 THEN
		RAISE EXCEPTION 'worker_id must be 1-200 characters' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	PERFORM bgexec._check_process(NULL, process, false);  -- its shape only
	UPDATE bgexec.worker w SET stopped_at = now(),
	       stopped_by_self = w.stopped_by_self OR deregister_worker.process IS NOT NULL
	 WHERE w.id = deregister_worker.worker_id
	   AND (deregister_worker.process IS NULL
	        OR (w.host IS NOT DISTINCT FROM deregister_worker.process->>'host'
	            AND w.pid = bgexec._pid(deregister_worker.process->'pid')));
END
$$;
COMMENT ON FUNCTION bgexec.deregister_worker(text, jsonb) IS
	'marks a worker stopped (clean shutdown), with process given only while its row names that process; its running leases are left to expire or finish';

/* _check_process: refuses a claim or an unclaim sent by a process that no
 * longer holds its worker id.  register_worker hands an id to another
 * process once the first missed its lease (or its row was deleted, or it
 * was found gone on its host); the first may be alive, cut off for a while,
 * and not know yet: it learns at its next heartbeat.  Until then its claims
 * ran under the id beside the new process's, and the new process's unclaim
 * (after a claim reply of its own was lost) gave their jobs back to the
 * queue while the first ran them: two runs at once.  process is the caller
 * as register_worker's info names it ({"host", "pid"}); when the worker row
 * names another process (or none), 55006 and nothing changes.  NULL: not
 * checked (a claim by hand, an older daemon).  holder false: the shape of
 * process alone (heartbeat; await_claim at max_jobs 0, which claims
 * nothing).  A missing row is no one
 * else's: heartbeat asks its process to register again. */
CREATE FUNCTION bgexec._check_process(worker_id text, process jsonb, holder boolean DEFAULT true) RETURNS void
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
DECLARE
	v_holder bgexec.worker;
BEGIN
	IF process IS NULL THEN
		RETURN;
	END IF;
	-- pid as register_worker reads info.pid (_pid: 7 and 7.0 name the
	-- same process).
	IF jsonb_typeof(process) <> 'object'
	   OR jsonb_typeof(process->'host') IS DISTINCT FROM 'string'
	   OR bgexec._pid(process->'pid') IS NULL THEN
		RAISE EXCEPTION 'process must be an object with a string host and an integer pid'
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = format('process was %s', process);
	END IF;
	IF NOT holder THEN
		RETURN;
	END IF;
	SELECT * INTO v_holder FROM bgexec.worker w WHERE w.id = _check_process.worker_id;
	IF FOUND AND (v_holder.host IS DISTINCT FROM process->>'host'
	              OR v_holder.pid IS DISTINCT FROM bgexec._pid(process->'pid')) THEN
		RAISE EXCEPTION 'worker id "%" is held by another process', worker_id
			USING ERRCODE = 'object_in_use',
			      DETAIL = format('pid %s on host %s registered it; this is pid %s on host %s',
			                      coalesce(v_holder.pid::text, 'null'), coalesce(v_holder.host, 'null'),
			                      process->>'pid', process->>'host'),
			      HINT = 'this process lost the id (it missed its lease, or its row was taken): it must claim nothing more';
	END IF;
END
$$;
COMMENT ON FUNCTION bgexec._check_process(text, jsonb, boolean) IS
	'22023 for a malformed process; with holder, 55006 when the worker row names another process than the caller (claim, unclaim)';

/* _next_due: the highest priority below below with a job of q due at at,
 * or NULL.  claim's walk of a queue's priorities past its eighth (claim).
 * It reads the queue's entries of job_runnable_idx below below in index
 * order, in batches (an index-only read, ~0.1 us an entry): the first
 * due one found ends it (its priority's first entry, as a priority's
 * entries run by run_after), so the next priority with a due job costs one
 * entry.  A batch with none due: every priority it reaches, the last one
 * too, has its first job in the future, so the next batch starts below the
 * last one's priority, one descent on.  So the cost is at most a batch per
 * priority passed, and at most an entry per future job passed: 20 000
 * future-only priorities ~4.5 ms (the walk's two descents each: ~90 ms,
 * review F5), 200 000 jobs due tomorrow at one priority one batch, 0.3 ms.
 * (A step with "run_after <= at" as its index condition passed over future
 * jobs inside the index pages at 0.05 us each, but over every one of them:
 * those 200 000, 18-31 ms a claim, where the walk's descent took 0.25.)
 * A function, so that the claim's statement does not set up this scan on
 * every call: as a CTE of its own, with its recursion and index scans, it
 * cost every claim of a plain queue ~12 % (25 us), used or not. */
CREATE FUNCTION bgexec._next_due(q text, below int, at timestamptz) RETURNS int
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
DECLARE
	p int;
	lo int;
	n int;
BEGIN
	-- The first batch stops at its first due entry: the common case, the
	-- next priority has one, reads one entry.
	SELECT s.priority INTO p
	  FROM (SELECT j.priority, j.run_after FROM bgexec.job j
	         WHERE j.status = 'queued' AND j.queue = q AND j.priority < below
	         ORDER BY j.priority DESC, j.run_after LIMIT 256) s
	 WHERE s.run_after <= at LIMIT 1;
	IF FOUND THEN
		RETURN p;
	END IF;
	SELECT j.priority INTO below FROM bgexec.job j
	 WHERE j.status = 'queued' AND j.queue = q AND j.priority < below
	 ORDER BY j.priority DESC, j.run_after OFFSET 255 LIMIT 1;
	-- The next ones are read once each, 1 024 entries: the highest
	-- priority with a due entry among them is the one (every priority
	-- there has its first entry there), else below the lowest.
	WHILE below IS NOT NULL LOOP
		SELECT max(s.priority) FILTER (WHERE s.run_after <= at), min(s.priority), count(*)
		  INTO p, lo, n
		  FROM (SELECT j.priority, j.run_after FROM bgexec.job j
		         WHERE j.status = 'queued' AND j.queue = q AND j.priority < below
		         ORDER BY j.priority DESC, j.run_after LIMIT 1024) s;
		IF p IS NOT NULL OR n < 1024 THEN
			RETURN p;
		END IF;
		below := lo;
	END LOOP;
	RETURN NULL;  -- fewer than 256 entries were left, none due
END
$$;
COMMENT ON FUNCTION bgexec._next_due(text, int, timestamptz) IS
	'claim: the highest priority below below with a due job of the queue, or NULL';

/* claim: up to max_jobs runnable jobs, each leased to worker_id.
 *
 * Runnable: status 'queued', run_after <= now(), queue not paused.  Order:
 * priority desc, run_after, id.  Rows are locked FOR UPDATE SKIP LOCKED, so
 * concurrent claimers take distinct jobs and never wait for each other
 * (invariant 2); only the rows the claim takes, however many queues it
 * names (a claim over many queues reads them unlocked first); of more than
 * 32 queues of which few have queued jobs, only those are read (one skip
 * scan of job_runnable_idx finds them).  For queues with max_running or max_running_per_key, an
 * advisory lock per queue (taken in name order, so claimers cannot deadlock)
 * serializes claimers of that queue; the running counts are read after the
 * lock, in a fresh READ COMMITTED snapshot, so the caps are never exceeded
 * (claims from a capped queue are refused at any other isolation level:
 * _require_read_committed).
 * Each claimed job gets a fresh lease from lease_seq, attempt + 1, a
 * 'started' event and, when it has a timeout, a deadline on the DB clock.
 * completed_steps / completed_stdout: the outputs and captured stdout of
 * steps completed in earlier runs (retry, resume), which are not run again.
 * process: the calling process ({"host", "pid"}); refused (55006) once the
 * worker row names another (_check_process).  NULL: not checked. */
CREATE FUNCTION bgexec.claim(worker_id text, queues text[], max_jobs int,
                             lease_for interval DEFAULT '30 seconds',
                             process jsonb DEFAULT NULL)
	RETURNS TABLE (job_id bigint, lease bigint, queue text, kind text, owner name,
	               payload jsonb, attempt int, max_attempts int,
	               deadline timestamptz, lease_expires_at timestamptz,
	               completed_steps jsonb, completed_stdout jsonb, started_seq int)
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, bgexec, pg_temp
	-- One cached plan per statement: the candidate scan's LIMIT and the queue
	-- list are arguments, so plpgsql judged every generic plan costlier than
	-- a custom one and planned both statements again on every call.  Without
	-- JIT: a generic plan's cost is estimated for an unknown LIMIT and queue
	-- count, which crossed jit_above_cost (and cost 2.8x the throughput).
	SET plan_cache_mode = force_generic_plan
	SET jit = off
	SET enable_seqscan = off
	AS $$
DECLARE
	v_active text[];
	v_capped text[];
	-- Of many queues, those with queued jobs (the skip scan below); NULL:
	-- every queue named.
	v_named text[];
	v_stop boolean;
	v_ids bigint[] := '{}';
	-- The fast path's queues and how many rows of each; of many queues,
	-- the candidates read unlocked (their queues), those read before.
	v_qs text[];
	v_ns int[];
	v_cand bigint[];
	v_cand_q text[];
	v_seen bigint[] := '{}';
	v_want int;
	-- The capped path's walk: the counts before it, its second pass.
	v_saved jsonb;
	v_one_by_one boolean := false;
	-- The isolation level checked (of more than one capped queue, before
	-- the idle ones are dropped).
	v_rc_checked boolean := false;
	-- The first pass's rows this claim locked.
	v_mine bigint[];
	v_q record;
	v_running int;
	v_budget int;
	v_key_counts jsonb := '{}';
	-- Queues whose capped keys hold more runnable jobs than the candidate
	-- window (below): scanned key by key; their candidates, unlocked.
	v_by_key text[] := '{}';
	v_plain text[];
	v_pre bigint[] := '{}';
	v_at_cap text[];
	v_keys text[];
	-- Queues whose keys are counted one by one as the scan meets them.
	v_probe text[] := '{}';
	v_n bigint;
	v_map jsonb;
	-- The walk's rounds: which, the rows the round read, v_ids before it,
	-- whether it passed over a job of a key it capped.
	v_round int;
	v_rows int;
	v_before int;
	v_passed boolean;
	v_queue_counts jsonb := '{}';
	v_caps jsonb := '{}';
	v_c record;
	v_k text;
	-- Rate-limited queues: tokens left (as of their rate_at), those this
	-- claim drew on, those with candidates the limit held back.
	v_tokens jsonb := '{}';
	v_tok float8;
	v_drawn text[] := '{}';
	v_held text[] := '{}';
	-- The claim's time, read once.  Not now(): await_claim claims in the
	-- transaction that waited for the wake, begun up to its timeout ago, and
	-- a job submitted since is due after that transaction's start.
	v_now timestamptz := pg_catalog.clock_timestamp();
BEGIN
	IF worker_id IS NULL OR length(worker_id) NOT BETWEEN 1 AND 200 THEN
		RAISE EXCEPTION 'worker_id must be 1-200 characters' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	-- Bounded: the capped path's candidate scan reads max_jobs * 4 + 100 rows.
	IF max_jobs IS NULL OR max_jobs NOT BETWEEN 1 AND 10000 THEN
		RAISE EXCEPTION 'max_jobs must be 1-10000'
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = format('max_jobs was %s', coalesce(max_jobs::text, 'null'));
	END IF;
	PERFORM bgexec._check_lease_for(lease_for);
	-- An exact duration (_exact): not a day on this session's calendar.
	lease_for := bgexec._exact(lease_for);
	-- The guard's own call (a function with SET) only when it has work.
	IF bgexec._lease_timeline_unchecked() IS NOT NULL THEN
		PERFORM bgexec._lease_guard();
	END IF;
	-- As await_work checks them: a NULL list claimed nothing, silently; a
	-- 2-D array was claimed from as a flat list.  (A NULL name in the list
	-- is no queue, as in await_work.)
	IF queues IS NULL THEN
		RAISE EXCEPTION 'queues must not be null' USING ERRCODE = 'invalid_parameter_value';
	ELSIF pg_catalog.array_ndims(queues) > 1 THEN
		RAISE EXCEPTION 'queues must be a one-dimensional array'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	-- Held until this claim commits or aborts, so unclaim() can tell when no
	-- claim of this worker is still running.  Shared: claims never wait on
	-- one another for it.
	PERFORM pg_catalog.pg_advisory_xact_lock_shared(
		pg_catalog.hashtext('bgexec.claim.worker'), pg_catalog.hashtext(worker_id));
	-- After the lock, in a new snapshot: a registration of the id by another
	-- process is either committed and seen here, or waits for this claim.
	PERFORM bgexec._check_process(worker_id, process);

	-- Of many queues, only those with queued jobs are read, when they are
	-- few: each queue named cost the claim a lookup of its queue row and
	-- an index descent or two, jobs or not (2 000 empty queues: 3.4 ms a
	-- claim, ~1 % of a core for each idle worker polling them).  One skip
	-- scan of job_runnable_idx over the range of names finds the queues
	-- with queued jobs there, named or not; the names are matched by a
	-- hash.  A descent of the skip scan
	-- ("queue > the last one") costs ~20 of one queue's ("queue = it"):
	-- PostgreSQL 15 compares every later entry of the leaf page with the
	-- bound.  So it gives up after 1 + names / 128 queues (16 of 2 000
	-- names: 0.2 ms), and the claim reads every queue named, one by one,
	-- as before: a claim over 2 000 queues with jobs pays the 16 descents
	-- on its 10 ms.  Up to 32 queues, one by one, and at any isolation
	-- level but READ COMMITTED (where a capped queue named refuses the
	-- claim, jobs or not: below).
	IF cardinality(claim.queues) > 32
	   AND pg_catalog.current_setting('transaction_isolation') = 'read committed' THEN
		WITH RECURSIVE
		b AS MATERIALIZED (SELECT min(qn) AS lo, max(qn) AS hi FROM unnest(claim.queues) AS qn),
		-- each queue with queued jobs from lo on
		s(q, n) AS (
			SELECT h.queue, 1 FROM b CROSS JOIN LATERAL (
				SELECT j.queue FROM bgexec.job j
				 WHERE j.status = 'queued' AND j.queue >= b.lo
				 ORDER BY j.queue LIMIT 1) h
			UNION ALL
			SELECT h.queue, s.n + 1 FROM s CROSS JOIN b CROSS JOIN LATERAL (
				SELECT j.queue FROM bgexec.job j
				 WHERE j.status = 'queued' AND j.queue > s.q
				 ORDER BY j.queue LIMIT 1) h
			 WHERE s.q < b.hi AND s.n <= 1 + cardinality(claim.queues) / 128)
		SELECT coalesce(a.qs, '{}'),
		       -- whether it gave up short of hi
		       EXISTS (SELECT FROM s CROSS JOIN b
		                WHERE s.n > 1 + cardinality(claim.queues) / 128 AND s.q < b.hi)
		  INTO v_named, v_stop
		  FROM (SELECT array_agg(s.q) AS qs
		          FROM s WHERE s.q IN (SELECT unnest(claim.queues))) a;
		IF v_stop THEN
			v_named := NULL;
		END IF;
	END IF;

	SELECT coalesce(array_agg(DISTINCT qn) FILTER (WHERE NOT coalesce(q.paused, false)), '{}'),
	       coalesce(array_agg(DISTINCT qn ORDER BY qn)
	                FILTER (WHERE NOT coalesce(q.paused, false)
	                        AND (q.max_running IS NOT NULL OR q.max_running_per_key IS NOT NULL
	                             OR q.rate_limit IS NOT NULL)), '{}')
	  INTO v_active, v_capped
	  FROM unnest(coalesce(v_named, claim.queues)) AS qn
	  LEFT JOIN bgexec.queue q ON q.name = qn;

	-- Of many capped queues, those with no queued job are neither locked
	-- nor claimed from: each cost every claim an exclusive lock, a running
	-- count, and serialization with its claimers (rev-card F1: 2 000 lock
	-- acquisitions a claim over 2 000 queues, most of them idle).  One
	-- index descent each; a job submitted to one since is claimed by the
	-- claim its wake brings.  The lists again, from the queue table (not
	-- by "<> ALL" of the idle ones: at 2 000 queues, 4 million
	-- comparisons).  Refused at any other isolation level all the same, in
	-- the name of the first capped queue, as the lock loop below refuses
	-- it.
	IF cardinality(v_capped) > 1 THEN
		PERFORM bgexec._require_read_committed(v_capped[1], 'claim from');
		v_rc_checked := true;
		SELECT coalesce(array_agg(c.qn) FILTER (WHERE NOT c.idle), '{}'),
		       coalesce(array_agg(c.qn ORDER BY c.qn) FILTER (WHERE c.capped AND NOT c.idle), '{}')
		  INTO v_active, v_capped
		  FROM (
			SELECT qn, coalesce(q.max_running IS NOT NULL OR q.max_running_per_key IS NOT NULL
			                    OR q.rate_limit IS NOT NULL, false) AS capped,
			       coalesce((q.max_running IS NOT NULL OR q.max_running_per_key IS NOT NULL
			                 OR q.rate_limit IS NOT NULL)
			                AND NOT EXISTS (SELECT 1 FROM bgexec.job j
			                                 WHERE j.status = 'queued' AND j.queue = qn), false) AS idle
			  FROM unnest(v_active) AS qn
			  LEFT JOIN bgexec.queue q ON q.name = qn) c;
	END IF;

	IF cardinality(v_active) = 0 THEN
		RETURN;
	END IF;

	IF cardinality(v_capped) = 0 THEN
		-- Fast path: index scans, SKIP LOCKED, no caps to count.
		-- Per queue (a "queue = ANY" scan would sort the whole runnable
		-- set), merged in claim order: one range of job_runnable_idx per
		-- priority, highest first, each read only up to its first job not
		-- yet due ("run_after <= v_now" bounds the range).  A single scan
		-- of the queue in index order read, and filtered, every future
		-- job of a higher priority before the first due one: 50 000 jobs
		-- scheduled for tomorrow at priority 10 cost each claim of today's
		-- priority 0 jobs 250 index pages, 5 ms (scale review F8).  The
		-- priorities come one index descent each (a loose index scan),
		-- only as far as the claim needs them (the LIMIT stops the
		-- recursion): a queue of one priority pays one descent to find it,
		-- and one more when it has fewer due jobs than max_jobs.
		-- The walk so goes up to the eighth priority (pr): a priority
		-- whose jobs are all in the future cost it two descents for
		-- nothing, and 20 000 such priorities 208-386 ms a claim (review
		-- F5).  Below the eighth (pw, ps) it goes from each priority
		-- straight to the next one with a due job (_next_due: the index's
		-- entries read in batches, a batch at most for each
		-- priority passed: those 20 000, ~4.5 ms).  pw runs only when
		-- the first eight priorities did not give the scan its rows (the
		-- LIMIT stops the Append before it).  (Not from the first: a
		-- queue of a few priorities pays a descent each, no batch.)
		--
		-- The locked scan takes up to n_q rows of each queue q, and keeps
		-- those of every queue it read until commit.  Of one queue, n_q is
		-- max_jobs: one statement, the common case.  Of many, the claim
		-- order says which queues give how many: taking max_jobs of each,
		-- a claim of 4 over 2 000 queues locked (and WAL-logged, 332 kB)
		-- up to 8 000 rows, kept 4, and every other claimer of those
		-- queues, even one naming a single queue, found nothing until it
		-- committed (rev-card F1).  So the same scan first reads the
		-- queues unlocked, the first max_jobs in claim order, and counts
		-- each queue's n_q among them; then the locked scan reads only
		-- those queues, up to n_q each.  A row another claimer holds is
		-- skipped for that queue's next one (SKIP LOCKED), and a row
		-- claimed since the unlocked read is not seen at all, so claimers
		-- racing for the same head of line each get distinct rows at once.
		-- Short only when a queue has fewer left than its n_q: the next
		-- round reads on past every row the earlier ones read (v_seen)
		-- and those taken, until max_jobs or no more.
		IF cardinality(v_active) = 1 THEN
			v_qs := v_active;
			v_ns := ARRAY[max_jobs];
		END IF;
		LOOP
			IF cardinality(v_active) > 1 THEN
				v_want := max_jobs - cardinality(v_ids);
				SELECT coalesce(array_agg(c.id), '{}'), coalesce(array_agg(c.q), '{}')
				  INTO v_cand, v_cand_q FROM (
					SELECT c.* FROM unnest(v_active) AS qn(q)
					 CROSS JOIN LATERAL (
						-- as in the locked scan below, unlocked
						WITH RECURSIVE pr(p, i) AS (
							(SELECT j.priority, 1 FROM bgexec.job j
							  WHERE j.status = 'queued' AND j.queue = qn.q
							  ORDER BY j.priority DESC LIMIT 1)
							UNION ALL
							SELECT (SELECT j.priority FROM bgexec.job j
							         WHERE j.status = 'queued' AND j.queue = qn.q AND j.priority < pr.p
							         ORDER BY j.priority DESC LIMIT 1), pr.i + 1
							  FROM pr WHERE pr.p IS NOT NULL AND pr.i < 8),
						pw(p) AS (
							SELECT bgexec._next_due(qn.q, pr.p, v_now) FROM pr WHERE pr.i = 8 AND pr.p IS NOT NULL
							UNION ALL
							SELECT bgexec._next_due(qn.q, pw.p, v_now) FROM pw WHERE pw.p IS NOT NULL),
						ps(p) AS (
							SELECT pr.p FROM pr
							UNION ALL
							SELECT pw.p FROM pw)
						SELECT c.*, qn.q FROM ps AS pr CROSS JOIN LATERAL (
							SELECT j.id, j.priority, j.run_after FROM bgexec.job j
							 WHERE j.status = 'queued' AND j.queue = qn.q AND j.priority = pr.p
							   AND j.run_after <= v_now
							   AND j.attempt < 2147483646 AND j.last_seq < 2000000000
							   AND j.id <> ALL (v_seen)
							 ORDER BY j.run_after, j.id
							 LIMIT v_want) c
						 LIMIT v_want) c
					 ORDER BY c.priority DESC, c.run_after, c.id
					 LIMIT v_want) c;
				EXIT WHEN cardinality(v_cand) = 0;
				SELECT array_agg(g.q), array_agg(g.n) INTO v_qs, v_ns
				  FROM (SELECT q, count(*)::int AS n FROM unnest(v_cand_q) AS q GROUP BY q) g;
				v_seen := v_seen || v_cand;
			END IF;
			SELECT v_ids || coalesce(array_agg(c.id ORDER BY c.priority DESC, c.run_after, c.id), '{}')
			  INTO v_ids FROM (
				SELECT c.* FROM unnest(v_qs, v_ns) AS qn(q, n)
				 CROSS JOIN LATERAL (
					WITH RECURSIVE pr(p, i) AS (
						(SELECT j.priority, 1 FROM bgexec.job j
						  WHERE j.status = 'queued' AND j.queue = qn.q
						  ORDER BY j.priority DESC LIMIT 1)
						UNION ALL
						SELECT (SELECT j.priority FROM bgexec.job j
						         WHERE j.status = 'queued' AND j.queue = qn.q AND j.priority < pr.p
						         ORDER BY j.priority DESC LIMIT 1), pr.i + 1
						  FROM pr WHERE pr.p IS NOT NULL AND pr.i < 8),
					pw(p) AS (
						SELECT bgexec._next_due(qn.q, pr.p, v_now) FROM pr WHERE pr.i = 8 AND pr.p IS NOT NULL
						UNION ALL
						SELECT bgexec._next_due(qn.q, pw.p, v_now) FROM pw WHERE pw.p IS NOT NULL),
					ps(p) AS (
						SELECT pr.p FROM pr
						UNION ALL
						SELECT pw.p FROM pw)
					-- (pr's rows come in the order the recursion makes them,
					-- highest priority first, and the nested loop keeps it)
					SELECT c.* FROM ps AS pr CROSS JOIN LATERAL (
						SELECT j.id, j.priority, j.run_after FROM bgexec.job j
						 WHERE j.status = 'queued' AND j.queue = qn.q AND j.priority = pr.p
						   AND j.run_after <= v_now
						   -- room for the claim's + 1 under job_valid's bounds: a
						   -- row written around the API at them is left queued, and
						   -- does not fail the claim of the jobs beside it
						   AND j.attempt < 2147483646 AND j.last_seq < 2000000000
						   -- (its own: locked, and still queued)
						   AND j.id <> ALL (v_ids)
						 ORDER BY j.run_after, j.id
						 LIMIT qn.n
						   FOR UPDATE SKIP LOCKED) c
					 LIMIT qn.n) c
				 ORDER BY c.priority DESC, c.run_after, c.id
				 LIMIT max_jobs) c;
			EXIT WHEN cardinality(v_active) = 1 OR cardinality(v_ids) >= max_jobs
			          OR cardinality(v_cand) < v_want;
			v_seen := v_seen || v_ids;
		END LOOP;
	ELSE
		-- Refused at any other isolation level, in the name of the first
		-- capped queue (once: with more than one capped queue named, done
		-- above, before the idle ones were dropped; a call per queue here
		-- checked the same setting 2 000 times over 2 000 capped queues).
		IF NOT v_rc_checked THEN
			PERFORM bgexec._require_read_committed(v_capped[1], 'claim from');
		END IF;
		-- Serialize claimers of capped queues, in name order (no deadlock).
		FOR v_q IN SELECT qn FROM unnest(v_capped) AS qn ORDER BY qn LOOP
			PERFORM pg_catalog.pg_advisory_xact_lock(
				pg_catalog.hashtext('bgexec.claim'), pg_catalog.hashtext(v_q.qn));
		END LOOP;
		-- Fresh snapshot (new statement): running counts include claims that
		-- committed while we waited for the lock.  Each map in one
		-- aggregate: built with || a key at a time, each step copied the
		-- whole map, and a claim over 4000 capped queues, or of a queue with
		-- 4000 keys running, took seconds under the queues' locks.
		SELECT coalesce(jsonb_object_agg(c.name, jsonb_build_object(
		                  'max_running', c.max_running, 'per_key', c.max_running_per_key)), '{}'),
		       coalesce(jsonb_object_agg(c.name, coalesce(c.running, 0)), '{}'),
		       coalesce(jsonb_object_agg(c.name, c.tokens) FILTER (WHERE c.tokens IS NOT NULL), '{}')
		  INTO v_caps, v_queue_counts, v_tokens
		  FROM (
			SELECT q.name, q.max_running, q.max_running_per_key,
			       -- (only where max_running needs it: a queue with only a
			       -- per-key cap counted its 10 000 running jobs for nothing,
			       -- rev-card F4).  Up to max_running: all the walk compares
			       -- with the cap (a count at the cap admits nothing, as one
			       -- past it would).  Counted whole, a queue whose cap was
			       -- lowered to 100 under 5 000 running jobs paid the 5 000 on
			       -- every claim, under its claim lock.  At or under the cap
			       -- this still reads every running job (5 000: 0.5-1.5 ms a
			       -- claim, bench/README round 56); O(1) would need a count
			       -- kept by every move in and out of 'running'.
			       CASE WHEN q.max_running IS NOT NULL THEN
			            (SELECT count(*) FROM (
			                SELECT 1 FROM bgexec.job r
			                 WHERE r.queue = q.name AND r.status = 'running'
			                 LIMIT q.max_running) r)::int END AS running,
			       -- The bucket refilled up to now (the later of the claim's
			       -- clock and the last claim's: the clock was read before
			       -- the lock), full at rate_limit.  A rate_at more than a
			       -- period ahead (concurrent claimers differ by
			       -- milliseconds) is what a step of the database clock back
			       -- leaves: kept, it held the queue's claims for the whole
			       -- step; counted from a period ago instead, the bucket is
			       -- full once, and the store below re-bases rate_at.
			       CASE WHEN q.rate_limit IS NOT NULL THEN
			            least(q.rate_limit::float8,
			                  coalesce(q.rate_tokens, q.rate_limit::float8)
			                  + q.rate_limit * greatest(0, extract(epoch FROM v_now - coalesce(CASE WHEN q.rate_at - v_now > q.rate_period THEN v_now - bgexec._exact(q.rate_period) ELSE q.rate_at END, v_now))::float8)
			                    / extract(epoch FROM q.rate_period)::float8) END AS tokens
			  FROM bgexec.queue q WHERE q.name = ANY (v_capped)) c;

		-- A queue's keys at their max_running_per_key are passed over, but
		-- job_runnable_idx interleaves their queued jobs with the others',
		-- so the scan below reads (and filters) every one of them ahead of
		-- the jobs it takes: 20 000 jobs of one capped key cost every claim
		-- of the queue 20 000 rows, returning nothing (scale review F4).
		-- Where the capped keys hold more runnable jobs than the window, the
		-- queue's candidates come key by key from job_runnable_key_idx
		-- instead: up to its free slots from each key below its cap, the
		-- keyless jobs, and nothing from a capped key (one index descent to
		-- step over it).  That costs a descent per key with queued jobs, so
		-- a queue whose capped keys hold few stays on the scan below, which
		-- stops after max_jobs * 4 + 100 candidates however many keys it
		-- has, and so does a queue with more keys than that (its capped
		-- keys' backlogs are still read there: each of its claims then
		-- pays for both counts, at most the window each, and the scan).
		--
		-- The running counts per key (v_key_counts, "queue\x1fkey" -> n) are
		-- those of the keys that matter, never of the whole queue: a map
		-- of every running job's key cost a claim of a queue with 10 080
		-- running 91-134 ms under its lock, ~10 claims/s for the fleet
		-- (rev-card F4).  The queue's running jobs are read up to one past
		-- the window; where there are more, the counts of the keys with
		-- queued jobs instead, where they are up to as many keys; where
		-- both are more, the queue is in v_probe: the scan below counts a
		-- candidate's key when it meets it, and the walk when it admits
		-- it.  Each such count stops at per_key (all a comparison with the
		-- cap needs).  Otherwise the map holds every key a candidate can have.
		FOR v_q IN
			SELECT qn AS q, (v_caps->qn->>'per_key')::int AS per_key
			  FROM unnest(v_capped) AS qn WHERE v_caps->qn->>'per_key' IS NOT NULL
		LOOP
			-- The queue's running jobs with a key, up to one past the window:
			-- where that is all of them, their counts in one range of
			-- job_running_key_idx (the common case: few running).
			v_keys := NULL;
			SELECT coalesce(sum(g.n), 0),
			       coalesce(jsonb_object_agg(v_q.q || E'\x1f' || g.k, g.n), '{}'),
			       array_agg(g.k) FILTER (WHERE g.n >= v_q.per_key)
			  INTO v_n, v_map, v_at_cap
			  FROM (SELECT r.k, count(*)::int AS n FROM (
					SELECT r.concurrency_key AS k FROM bgexec.job r
					 WHERE r.status = 'running' AND r.queue = v_q.q AND r.concurrency_key IS NOT NULL
					 LIMIT max_jobs * 4 + 101) r
			         GROUP BY r.k) g;
			IF v_n > max_jobs * 4 + 100 THEN
				-- More: the keys with queued jobs (the only ones a candidate
				-- can have), one descent each (the enumeration below, done
				-- here), up to one past the window, and their counts.
				WITH RECURSIVE keys(k, n) AS (
					SELECT (SELECT j.concurrency_key FROM bgexec.job j
					         WHERE j.status = 'queued' AND j.queue = v_q.q AND j.concurrency_key IS NOT NULL
					         ORDER BY j.concurrency_key LIMIT 1), 1
					UNION ALL
					SELECT (SELECT j.concurrency_key FROM bgexec.job j
					         WHERE j.status = 'queued' AND j.queue = v_q.q AND j.concurrency_key > keys.k
					         ORDER BY j.concurrency_key LIMIT 1), keys.n + 1
					  FROM keys WHERE keys.k IS NOT NULL AND keys.n <= max_jobs * 4 + 100)
				SELECT coalesce(array_agg(keys.k), '{}') INTO v_keys FROM keys WHERE keys.k IS NOT NULL;
				IF cardinality(v_keys) > max_jobs * 4 + 100 THEN
					v_probe := v_probe || v_q.q;
					CONTINUE;
				END IF;
				SELECT coalesce(jsonb_object_agg(v_q.q || E'\x1f' || ck.k, c.n), '{}'),
				       array_agg(ck.k) FILTER (WHERE c.n >= v_q.per_key)
				  INTO v_map, v_at_cap
				  FROM unnest(v_keys) AS ck(k)
				 CROSS JOIN LATERAL (
					SELECT count(*)::int AS n FROM (
						SELECT 1 FROM bgexec.job r
						 WHERE r.status = 'running' AND r.queue = v_q.q AND r.concurrency_key = ck.k
						 LIMIT v_q.per_key) r) c;
			END IF;
			v_key_counts := v_key_counts || v_map;
			CONTINUE WHEN v_at_cap IS NULL;
			-- Due or not, and a capped key at a time: a filter on run_after
			-- here read every future job of the capped keys before the
			-- count was reached, and "concurrency_key = ANY" was planned
			-- as a filter over the queue's range, reading the other keys'
			-- jobs (10 000 of a key named before the capped one) too.
			CONTINUE WHEN (SELECT count(*) FROM (
				SELECT 1 FROM unnest(v_at_cap) AS ck(k)
				 CROSS JOIN LATERAL (
					SELECT 1 FROM bgexec.job j
					 WHERE j.status = 'queued' AND j.queue = v_q.q AND j.concurrency_key = ck.k
					 LIMIT max_jobs * 4 + 101) b
				 LIMIT max_jobs * 4 + 101) b) <= max_jobs * 4 + 100;
			-- The queue's keys, one descent each (a loose index scan), up to
			-- one past the window: a queue with more keys than that stays on
			-- the scan below, as every key would cost its descent here.
			IF v_keys IS NULL THEN
				WITH RECURSIVE keys(k, n) AS (
					SELECT (SELECT j.concurrency_key FROM bgexec.job j
					         WHERE j.status = 'queued' AND j.queue = v_q.q AND j.concurrency_key IS NOT NULL
					         ORDER BY j.concurrency_key LIMIT 1), 1
					UNION ALL
					SELECT (SELECT j.concurrency_key FROM bgexec.job j
					         WHERE j.status = 'queued' AND j.queue = v_q.q AND j.concurrency_key > keys.k
					         ORDER BY j.concurrency_key LIMIT 1), keys.n + 1
					  FROM keys WHERE keys.k IS NOT NULL AND keys.n <= max_jobs * 4 + 100)
				SELECT coalesce(array_agg(keys.k), '{}') INTO v_keys FROM keys WHERE keys.k IS NOT NULL;
			END IF;
			CONTINUE WHEN cardinality(v_keys) > max_jobs * 4 + 100;
			v_by_key := v_by_key || v_q.q;
			-- The first free-slots jobs of each key below its cap, and the
			-- keyless ones (the NULL key's range).  Unlocked: the ids are
			-- locked below, each job rechecked then.  Each key's a priority
			-- at a time, as on the fast path (F8): a key's future jobs of a
			-- higher priority were read ahead of its first due one.
			SELECT v_pre || coalesce(array_agg(c.id), '{}') INTO v_pre FROM (
				SELECT c.id FROM (
					SELECT c.id, c.priority, c.run_after FROM unnest(v_keys) AS keys(k)
					 CROSS JOIN LATERAL (
					  WITH RECURSIVE pr(p) AS (
						(SELECT j.priority FROM bgexec.job j
						  WHERE j.status = 'queued' AND j.queue = v_q.q AND j.concurrency_key = keys.k
						  ORDER BY j.priority DESC LIMIT 1)
						UNION ALL
						SELECT (SELECT j.priority FROM bgexec.job j
						         WHERE j.status = 'queued' AND j.queue = v_q.q
						           AND j.concurrency_key = keys.k AND j.priority < pr.p
						         ORDER BY j.priority DESC LIMIT 1)
						  FROM pr WHERE pr.p IS NOT NULL)
					  SELECT c.* FROM pr CROSS JOIN LATERAL (
						SELECT j.id, j.priority, j.run_after FROM bgexec.job j
						 WHERE j.status = 'queued' AND j.queue = v_q.q AND j.concurrency_key = keys.k
						   AND j.priority = pr.p AND j.run_after <= v_now
						   AND j.attempt < 2147483646 AND j.last_seq < 2000000000  -- as above
						 ORDER BY j.run_after, j.id
						 LIMIT greatest(0, least(max_jobs, v_q.per_key
						     - coalesce((v_key_counts->>(v_q.q || E'\x1f' || keys.k))::int, 0)))) c
					  LIMIT greatest(0, least(max_jobs, v_q.per_key
					      - coalesce((v_key_counts->>(v_q.q || E'\x1f' || keys.k))::int, 0)))) c
					UNION ALL
					(WITH RECURSIVE pr(p) AS (
						-- the key first (all NULL): the order of job_runnable_key_idx
						(SELECT j.priority FROM bgexec.job j
						  WHERE j.status = 'queued' AND j.queue = v_q.q AND j.concurrency_key IS NULL
						  ORDER BY j.concurrency_key, j.priority DESC LIMIT 1)
						UNION ALL
						SELECT (SELECT j.priority FROM bgexec.job j
						         WHERE j.status = 'queued' AND j.queue = v_q.q
						           AND j.concurrency_key IS NULL AND j.priority < pr.p
						         ORDER BY j.concurrency_key, j.priority DESC LIMIT 1)
						  FROM pr WHERE pr.p IS NOT NULL)
					 SELECT c.* FROM pr CROSS JOIN LATERAL (
						SELECT j.id, j.priority, j.run_after FROM bgexec.job j
						 WHERE j.status = 'queued' AND j.queue = v_q.q AND j.concurrency_key IS NULL
						   AND j.priority = pr.p AND j.run_after <= v_now
						   AND j.attempt < 2147483646 AND j.last_seq < 2000000000  -- as above
						 ORDER BY j.concurrency_key, j.priority DESC, j.run_after, j.id
						 LIMIT max_jobs) c
					 LIMIT max_jobs)) c
				 ORDER BY c.priority DESC, c.run_after, c.id
				 LIMIT max_jobs * 4 + 100) c;
		END LOOP;
		v_plain := ARRAY(SELECT qn FROM unnest(v_active) AS qn WHERE qn <> ALL (v_by_key));

		-- Walk candidates in claim order, read unlocked, and lock those the
		-- caps admit, SKIP LOCKED, rechecked (their latest version).  The
		-- scan locked them all, up to max_jobs * 4 + 100 of each queue,
		-- those the caps passed over too, until commit: a claim of 10 over
		-- 2 000 capped queues wrote 2.2 MB of WAL (rev-card F1).  First
		-- pass: the admitted ones locked in one statement (a statement per
		-- row cost the claim of 64 from one capped queue 4 % of its
		-- throughput).  When another transaction held one (claimers of the
		-- capped queues hold their locks; an uncapped queue's claimer, a
		-- stop() may not), a second pass from the same counts takes the
		-- first pass's locked rows (its own; counted first), then walks
		-- again, locking a row at a time and passing over the held ones,
		-- for the rest.  (Walking from the same counts and taking those
		-- rows as it met them, jobs committed ahead of them between the
		-- passes, the walk being a new snapshot, filled the claim first:
		-- they stayed locked, untaken, until the claim committed, passed
		-- over by every other claimer; e2e 113.)
		v_saved := jsonb_build_array(v_queue_counts, v_key_counts, v_tokens);
		<<walk>> LOOP
			-- Rounds: a window full of a few keys' backlogs admits one job of
			-- each key (per_key 1: 2 000 keys x 50 jobs submitted key by key,
			-- a claim of 10 took 3 jobs, rev-card F4).  While a round's window
			-- was full, admitted some and not max_jobs, and passed over jobs of
			-- keys it capped (not a queue's max_running), the scan reads again:
			-- the keys this walk brought to their cap are passed over now
			-- (v_key_counts), the jobs admitted are not read again.  At most
			-- four rounds: each reads the earlier rounds' capped rows again.
			v_round := 0;
			<<rounds>> LOOP
				v_round := v_round + 1;
				v_rows := 0;
				v_passed := false;
				v_before := cardinality(v_ids);
				FOR v_c IN
					SELECT c.id, c.q, c.k FROM (
					SELECT c.* FROM unnest(v_plain) AS qn(q)
					 CROSS JOIN LATERAL (
					  -- a priority at a time, as on the fast path (F8)
					  WITH RECURSIVE pr(p, i) AS (
						(SELECT j.priority, 1 FROM bgexec.job j
						  WHERE j.status = 'queued' AND j.queue = qn.q
						  ORDER BY j.priority DESC LIMIT 1)
						UNION ALL
						SELECT (SELECT j.priority FROM bgexec.job j
						         WHERE j.status = 'queued' AND j.queue = qn.q AND j.priority < pr.p
						         ORDER BY j.priority DESC LIMIT 1), pr.i + 1
						  FROM pr WHERE pr.p IS NOT NULL AND pr.i < 8),
					pw(p) AS (
						SELECT bgexec._next_due(qn.q, pr.p, v_now) FROM pr WHERE pr.i = 8 AND pr.p IS NOT NULL
						UNION ALL
						SELECT bgexec._next_due(qn.q, pw.p, v_now) FROM pw WHERE pw.p IS NOT NULL),
					ps(p) AS (
						SELECT pr.p FROM pr
						UNION ALL
						SELECT pw.p FROM pw)
					  SELECT c.* FROM ps AS pr CROSS JOIN LATERAL (
						SELECT j.id, j.queue AS q, j.concurrency_key AS k, j.priority, j.run_after
						  FROM bgexec.job j
						 WHERE j.status = 'queued' AND j.queue = qn.q AND j.priority = pr.p
						   AND j.run_after <= v_now
						   AND j.attempt < 2147483646 AND j.last_seq < 2000000000  -- as above
						   AND j.id <> ALL (v_ids)  -- (admitted in an earlier round)
						   -- A key already at its max_running_per_key is passed
						   -- over by the scan, not taken into its window: 150
						   -- queued jobs of one key filled it, and the next key's
						   -- job behind them was not claimed by any worker with 4
						   -- slots until the first key's backlog had drained
						   -- (isolation caps-per-key-window).
						   AND (j.concurrency_key IS NULL OR v_caps->qn.q->>'per_key' IS NULL
						        OR coalesce((v_key_counts->>(qn.q || E'\x1f' || j.concurrency_key))::int,
						                    -- a v_probe queue's key: counted here
						                    CASE WHEN qn.q = ANY (v_probe) THEN
						                         (SELECT count(*) FROM (
						                            SELECT 1 FROM bgexec.job r
						                             WHERE r.status = 'running' AND r.queue = qn.q
						                               AND r.concurrency_key = j.concurrency_key
						                             LIMIT (v_caps->qn.q->>'per_key')::int) r)::int
						                    ELSE 0 END)
						           < (v_caps->qn.q->>'per_key')::int)
						 ORDER BY j.run_after, j.id
						 LIMIT max_jobs * 4 + 100) c
					  LIMIT max_jobs * 4 + 100) c
					UNION ALL
					-- the key-by-key queues' candidates (status as text: by primary
					-- key, as in the claiming UPDATE below)
					SELECT j.id, j.queue AS q, j.concurrency_key AS k, j.priority, j.run_after
					  FROM bgexec.job j
					 WHERE j.id = ANY (v_pre) AND j.status::text = 'queued' AND j.run_after <= v_now
					   AND j.attempt < 2147483646 AND j.last_seq < 2000000000
					   AND j.id <> ALL (v_ids)) c
					 ORDER BY c.priority DESC, c.run_after, c.id
				LOOP
					v_rows := v_rows + 1;
					IF v_caps ? v_c.q THEN
						v_running := (v_queue_counts->>v_c.q)::int;
						v_budget := (v_caps->v_c.q->>'max_running')::int;
						CONTINUE WHEN v_budget IS NOT NULL AND v_running >= v_budget;
						-- Not a whole token left: held back, and counted, so that a
						-- waiting worker is woken when the next one is (below).
						v_tok := (v_tokens->>v_c.q)::float8;
						IF v_tok < 1 THEN
							v_held := v_held || v_c.q;
							CONTINUE;
						END IF;
						v_k := NULL;
						IF v_c.k IS NOT NULL AND v_caps->v_c.q->>'per_key' IS NOT NULL THEN
							v_k := v_c.q || E'\x1f' || v_c.k;
							IF v_c.q = ANY (v_probe) AND NOT v_key_counts ? v_k THEN
								SELECT v_key_counts || jsonb_build_object(v_k, count(*)::int) INTO v_key_counts
								  FROM (SELECT 1 FROM bgexec.job r
								         WHERE r.status = 'running' AND r.queue = v_c.q AND r.concurrency_key = v_c.k
								         LIMIT (v_caps->v_c.q->>'per_key')::int) r;
							END IF;
							-- (a job of a key this walk capped: a round more
							-- may find other keys)
							IF coalesce((v_key_counts->>v_k)::int, 0) >= (v_caps->v_c.q->>'per_key')::int THEN
								v_passed := true;
								CONTINUE;
							END IF;
						END IF;
					END IF;
					-- Second pass: held by another transaction, or no longer
					-- runnable: passed over, nothing counted.
					IF v_one_by_one THEN
						PERFORM 1 FROM bgexec.job j
						 WHERE j.id = v_c.id AND j.status::text = 'queued' AND j.run_after <= v_now
						   AND j.attempt < 2147483646 AND j.last_seq < 2000000000
						   FOR UPDATE SKIP LOCKED;
						CONTINUE WHEN NOT FOUND;
					END IF;
					IF v_caps ? v_c.q THEN
						IF v_k IS NOT NULL THEN
							v_key_counts := v_key_counts
								|| jsonb_build_object(v_k, coalesce((v_key_counts->>v_k)::int, 0) + 1);
						END IF;
						v_queue_counts := v_queue_counts || jsonb_build_object(v_c.q, v_running + 1);
						IF v_tok IS NOT NULL THEN
							v_tokens := v_tokens || jsonb_build_object(v_c.q, v_tok - 1);
							v_drawn := v_drawn || v_c.q;
						END IF;
					END IF;
					v_ids := v_ids || v_c.id;
					EXIT WHEN cardinality(v_ids) >= max_jobs;
				END LOOP;
				EXIT rounds WHEN cardinality(v_ids) >= max_jobs OR cardinality(v_ids) = v_before
				              OR v_rows < max_jobs * 4 + 100 OR NOT v_passed OR v_round >= 4;
			END LOOP rounds;
			EXIT walk WHEN v_one_by_one OR cardinality(v_ids) = 0;
			-- (status as text: by primary key, as in the claiming UPDATE below)
			SELECT coalesce(array_agg(l.id), '{}') INTO v_mine FROM (
				SELECT j.id FROM bgexec.job j
				 WHERE j.id = ANY (v_ids) AND j.status::text = 'queued' AND j.run_after <= v_now
				   AND j.attempt < 2147483646 AND j.last_seq < 2000000000
				   FOR UPDATE SKIP LOCKED) l;
			EXIT walk WHEN cardinality(v_mine) = cardinality(v_ids);
			v_one_by_one := true;
			v_ids := '{}';
			v_queue_counts := v_saved->0;
			v_key_counts := v_saved->1;
			v_tokens := v_saved->2;
			v_drawn := '{}';
			v_held := '{}';
			-- The rows locked: admitted from these counts in the first
			-- pass (a subset of what it admitted, so within every cap),
			-- counted as the walk counts them, and not read again.
			FOR v_c IN
				SELECT j.id, j.queue AS q, j.concurrency_key AS k FROM bgexec.job j
				 WHERE j.id = ANY (v_mine)
			LOOP
				IF v_caps ? v_c.q THEN
					IF v_c.k IS NOT NULL AND v_caps->v_c.q->>'per_key' IS NOT NULL THEN
						v_k := v_c.q || E'\x1f' || v_c.k;
						IF v_c.q = ANY (v_probe) AND NOT v_key_counts ? v_k THEN
							SELECT v_key_counts || jsonb_build_object(v_k, count(*)::int) INTO v_key_counts
							  FROM (SELECT 1 FROM bgexec.job r
							         WHERE r.status = 'running' AND r.queue = v_c.q AND r.concurrency_key = v_c.k
							         LIMIT (v_caps->v_c.q->>'per_key')::int) r;
						END IF;
						v_key_counts := v_key_counts
							|| jsonb_build_object(v_k, coalesce((v_key_counts->>v_k)::int, 0) + 1);
					END IF;
					v_queue_counts := v_queue_counts
						|| jsonb_build_object(v_c.q, (v_queue_counts->>v_c.q)::int + 1);
					IF v_tokens ? v_c.q THEN
						v_tokens := v_tokens || jsonb_build_object(v_c.q, (v_tokens->>v_c.q)::float8 - 1);
						v_drawn := v_drawn || v_c.q;
					END IF;
				END IF;
				v_ids := v_ids || v_c.id;
			END LOOP;
		END LOOP walk;

		-- The rate-limited queues' buckets as this claim leaves them (a
		-- queue whose bucket was not drawn on is not written: the same
		-- tokens follow from its row), under the claim lock, visible to
		-- the next claimer once this claim commits.  A queue with jobs held
		-- back wakes one waiting worker when its next token is due
		-- (_jobs_due; never at a rate_limit of 0): one, since one token is
		-- what it will find (a wake per held job would wake them all, and
		-- all but one would find nothing).
		IF v_tokens <> '{}' THEN
			UPDATE bgexec.queue q
			   SET rate_tokens = t.value::float8,
			       rate_at = greatest(v_now, coalesce(CASE WHEN q.rate_at - v_now > q.rate_period THEN v_now ELSE q.rate_at END, v_now))
			  FROM jsonb_each_text(v_tokens) t
			 -- Not once the limit is gone: a configure_queue() that removed
			 -- it while this claim waited for the row (it reads the queue
			 -- unlocked) had its bucket written back, and a new limit then
			 -- started from it, not full.
			 WHERE q.name = t.key AND t.key = ANY (v_drawn) AND q.rate_limit IS NOT NULL;
			-- (rate_at is now the time the tokens are counted at, drawn on
			-- or not.)
			FOR v_q IN
				SELECT q.name, q.rate_at, q.rate_limit, q.rate_period, (v_tokens->>q.name)::float8 AS tokens
				  FROM bgexec.queue q
				 WHERE q.name = ANY (v_held) AND q.rate_limit > 0
			LOOP
				PERFORM bgexec._jobs_due(v_q.name,
					greatest(v_now, coalesce(CASE WHEN v_q.rate_at - v_now > v_q.rate_period THEN v_now ELSE v_q.rate_at END, v_now))
					+ bgexec._exact(v_q.rate_period) * ((1 - v_q.tokens) / v_q.rate_limit) + interval '1 microsecond',
					1);
			END LOOP;
		END IF;
	END IF;

	IF cardinality(v_ids) = 0 THEN
		RETURN;
	END IF;

	-- The claim and its 'started' events in one statement (invariant 6: the
	-- event takes the seq the UPDATE reserved).  The events send no NOTIFY:
	-- on PG 15 every notifying commit wakes every listening backend, and
	-- claims are the hottest commits (bench/README.md); tails see 'started'
	-- with the job's next notified event or their poll.
	RETURN QUERY
	WITH claimed AS (
		UPDATE bgexec.job j
		   SET status = 'running',
		       lease = nextval('bgexec.lease_seq'),
		       lease_owner = claim.worker_id,
		       lease_expires_at = v_now + claim.lease_for,
		       attempt = j.attempt + 1,
		       started_at = v_now,
		       deadline = CASE WHEN j.timeout IS NOT NULL THEN v_now + bgexec._exact(j.timeout) END,
		       last_seq = j.last_seq + 1
		 -- The rows are locked by this transaction since the candidate scan.
		 -- status is compared as text so the planner reaches them by
		 -- primary key: "status = 'queued'" would let it pick the partial
		 -- job_runnable_idx and walk the whole runnable set for "id = ANY".
		 WHERE j.id = ANY (v_ids) AND j.status::text = 'queued'
		RETURNING j.*),
	started AS (
		INSERT INTO bgexec.job_event (job_id, seq, kind, data, created_at)
		SELECT c.id, c.last_seq, 'started',
		       jsonb_build_object('attempt', c.attempt, 'worker', claim.worker_id, 'lease', c.lease),
		       v_now
		  FROM claimed c)
	SELECT c.id, c.lease, c.queue, c.kind, c.owner, c.payload, c.attempt,
	       c.max_attempts, c.deadline, c.lease_expires_at,
	       CASE WHEN c.last_seq > 1 THEN bgexec._completed_steps(c.id) ELSE '{}'::jsonb END,
	       CASE WHEN c.last_seq > 1 THEN bgexec._completed_stdout(c.id) ELSE '{}'::jsonb END,
	       c.last_seq
	  FROM claimed c
	 ORDER BY c.priority DESC, c.run_after, c.id;
END
$$;
COMMENT ON FUNCTION bgexec.claim(text, text[], int, interval, jsonb) IS
	'leases up to max_jobs runnable jobs to a worker (FOR UPDATE SKIP LOCKED; caps respected)';

/* await_claim: await_work, then claim in the same backend when woken for
 * jobs.  The waiting backend claims as soon as its latch is set, where a
 * worker on await_work hears of the wake and sends claim on another
 * connection: two process wake-ups and a round trip later (0.3 ms at p50
 * on the reference machine, a third of an idle job's pickup; bench/README).
 * Claims up to max_jobs jobs (default: free), with the lease of claim();
 * the claim sees the jobs committed while it waited because claim reads
 * the clock, not the transaction's start, and takes a new snapshot in
 * READ COMMITTED.  free is what the wake counts on (as await_work's);
 * max_jobs below it, down to 0, leaves the rest to the caller's own
 * claims (the daemon passes 0 while it works through a backlog, and stays
 * woken for the jobs that arrive meanwhile).
 * Returns the claimed jobs, each with the wake's flags; when none was
 * claimed, one row of flags with the job columns NULL: woken true then
 * means a wake the claim could not serve (another claimer was first, or a
 * REPEATABLE READ snapshot older than the job), which the caller meets
 * with a claim of its own.  stop as await_work's. */
CREATE FUNCTION bgexec.await_claim(worker_id text, queues text[], free int, timeout interval,
                                   lease_for interval DEFAULT '30 seconds',
                                   pass_on boolean DEFAULT false, max_jobs int DEFAULT NULL,
                                   process jsonb DEFAULT NULL)
	RETURNS TABLE (woken boolean, stop boolean,
	               job_id bigint, lease bigint, queue text, kind text, owner name,
	               payload jsonb, attempt int, max_attempts int,
	               deadline timestamptz, lease_expires_at timestamptz,
	               completed_steps jsonb, completed_stdout jsonb, started_seq int)
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
DECLARE
	w record;
BEGIN
	-- await_work checks worker_id, queues, free and timeout; lease_for and
	-- max_jobs are checked before the wait, so a bad one fails at once, not
	-- in claim after a wake it then used up.  By default as many as free,
	-- up to claim's bound.
	PERFORM bgexec._check_lease_for(lease_for);
	IF max_jobs NOT BETWEEN 0 AND 10000 THEN
		RAISE EXCEPTION 'max_jobs must be 0-10000'
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = format('max_jobs was %s', max_jobs);
	END IF;
	max_jobs := coalesce(max_jobs, least(free, 10000));
	-- Before the wait too, so a process that lost its id is not picked for
	-- wakes it would not claim for (claim checks again); its shape whatever
	-- max_jobs is (it was not checked at 0).
	PERFORM bgexec._check_process(worker_id, process, max_jobs > 0);
	SELECT a.jobs, a.stop INTO w
	  FROM bgexec.await_work(worker_id, queues, free, timeout, pass_on) a;
	IF w.jobs AND max_jobs > 0 THEN
		RETURN QUERY SELECT true, w.stop, c.*
		  FROM bgexec.claim(worker_id, queues, max_jobs, lease_for, process) c;
		IF FOUND THEN
			RETURN;
		END IF;
	END IF;
	RETURN QUERY SELECT w.jobs, w.stop, NULL::bigint, NULL::bigint, NULL::text, NULL::text,
	                    NULL::name, NULL::jsonb, NULL::int, NULL::int, NULL::timestamptz,
	                    NULL::timestamptz, NULL::jsonb, NULL::jsonb, NULL::int;
END
$$;
COMMENT ON FUNCTION bgexec.await_claim(text, text[], int, interval, interval, boolean, int, jsonb) IS
	'await_work, then claim up to max_jobs (default free) jobs in the same backend when woken for jobs';

/* unclaim: gives back the jobs of a claim whose reply the worker never
 * received.  A claim commits before its rows reach the worker; when the
 * connection drops in between, its jobs stay running under worker_id with
 * leases the worker does not know, and fail as worker_lost once the leases
 * expire, although no attempt started (invariant 7: with max_attempts = 1
 * they would never run).  The worker calls unclaim after a claim failed with
 * a connection error, before it claims again, passing after_lease, the
 * highest lease it had received before that claim, and held, the leases it
 * has received since whose jobs may still be running (the jobs it holds, and
 * those that ended without a finish written).  Each running job of worker_id whose lease is above
 * after_lease and not held, and which was claimed since the worker last
 * registered (a previous run of the same worker id may have started its
 * jobs: its lease is above the row's lease_floor, and started_at after its
 * started_at), goes back to queued with its attempt given back, its place in the
 * queue kept (claim does not move run_after) and a retry_scheduled event
 * (error.reason 'claim_reply_lost'); one whose stop was requested meanwhile
 * ends cancelled.  Returns how many.
 * Returns NULL and changes nothing while a claim of this worker is still
 * running: the lost claim's backend may not have noticed the dropped
 * connection yet, and could commit after this looked.  Each claim holds a
 * shared advisory lock on its worker id; unclaim tries for it exclusively,
 * without waiting.  The caller tries again later, meanwhile claiming as
 * usual
 * process: the caller, as claim's (_check_process); an unclaim by a process
 * that lost the id gives nothing back.
 * reason: why the jobs go back, the retry_scheduled event's error.reason:
 * 'claim_reply_lost' (the above), or 'cannot_start_steps': the worker
 * received the job but its host could start none of the attempt's step
 * processes (out of processes, descriptors or memory), so nothing of the
 * attempt ran; the worker gives it back with after_lease one below its
 * lease and every other lease it knows above that held, its claims
 * stopped meanwhile.  Bounded: a step whose own start fails (ENOMEM,
 * EAGAIN for that program alone) while the worker's probe starts `true`
 * was given back every half second for ever, a job that never ran, never
 * failed and never counted an attempt.  After 10 such give-backs in a row
 * (retry_scheduled events of reason cannot_start_steps since the job's
 * last other requeue: a counted attempt, a lease lost, a manual retry, a
 * snooze, a suspend), the next one counts the attempt as failed,
 * retryable: error.reason 'cannot_start_steps' with given_back 10 and the
 * step's error, then the queue's backoff and max_attempts as for any
 * failed attempt.  Decided here, so every worker counts the same. */
CREATE FUNCTION bgexec.unclaim(worker_id text, after_lease bigint, held bigint[] DEFAULT '{}',
                               process jsonb DEFAULT NULL, reason text DEFAULT 'claim_reply_lost')
	RETURNS int
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, bgexec, pg_temp
	SET enable_seqscan = off
	SET jit = off
	-- It holds the worker's claim lock: waiting for a job row a client's
	-- open transaction holds (a stop()) held up every claim of the worker
	-- for as long.  55P03 instead; the worker tries again 500 ms later,
	-- claiming in between.
	SET lock_timeout = '1s'
	AS $$
DECLARE
	j record;
	v_n int := 0;
	v_seq int;
	v_err jsonb;
	v_given int;
	v_step jsonb;
BEGIN
	IF worker_id IS NULL OR length(worker_id) NOT BETWEEN 1 AND 200 THEN
		RAISE EXCEPTION 'worker_id must be 1-200 characters' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF after_lease IS NULL THEN
		RAISE EXCEPTION 'after_lease must not be null'
			USING ERRCODE = 'invalid_parameter_value',
			      HINT = 'pass 0 when the worker has received no lease yet';
	END IF;
	-- A NULL lease made "lease <> ALL (held)" NULL for every job: nothing
	-- given back, and 0 returned as if there was nothing to give.  A NULL
	-- list was read as none held, and gave back the jobs the worker runs.
	IF held IS NULL THEN
		RAISE EXCEPTION 'held must not be null'
			USING ERRCODE = 'invalid_parameter_value',
			      HINT = 'pass an empty array when the worker holds no lease since after_lease';
	END IF;
	IF pg_catalog.array_ndims(held) > 1 OR pg_catalog.array_position(held, NULL) IS NOT NULL THEN
		RAISE EXCEPTION 'held must be a one-dimensional array without nulls'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF reason IS NULL OR reason NOT IN ('claim_reply_lost', 'cannot_start_steps') THEN
		RAISE EXCEPTION 'reason must be claim_reply_lost or cannot_start_steps'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF NOT pg_catalog.pg_try_advisory_xact_lock(
	         pg_catalog.hashtext('bgexec.claim.worker'), pg_catalog.hashtext(worker_id)) THEN
		RETURN NULL;
	END IF;
	PERFORM bgexec._check_process(worker_id, process);
	FOR j IN
		SELECT x.id, x.queue, x.attempt, x.max_attempts, x.stop_requested_at, x.lease FROM bgexec.job x
		  JOIN bgexec.worker w ON w.id = unclaim.worker_id
		 WHERE x.status = 'running' AND x.lease > unclaim.after_lease
		   AND x.lease_owner = unclaim.worker_id
		   AND x.lease <> ALL (unclaim.held)
		   AND x.started_at >= w.started_at
		   AND x.lease > coalesce(w.lease_floor, 0)
		 ORDER BY x.id
		   FOR UPDATE OF x
	LOOP
		v_n := v_n + 1;
		-- No step can have started under a lease its worker never received;
		-- should one have, it ends as at any other way out of running.
		PERFORM bgexec._end_step_sessions(j.id, j.lease);
		IF j.stop_requested_at IS NOT NULL THEN
			PERFORM bgexec._terminal(j.id, 'cancelled', NULL,
				jsonb_build_object('reason', 'stopped',
				                   'message', 'stop requested before the job started'));
			CONTINUE;
		END IF;
		IF unclaim.reason = 'cannot_start_steps' THEN
			-- The give-backs in a row of this attempt: those since the
			-- job's last other requeue or suspend (the counted one below
			-- included: it has given_back).
			SELECT count(*) INTO v_given FROM bgexec.job_event e
			 WHERE e.job_id = j.id AND e.kind = 'retry_scheduled'
			   AND e.data->'error'->>'reason' = 'cannot_start_steps'
			   AND NOT (e.data->'error') ? 'given_back'
			   AND e.seq > coalesce((SELECT max(b.seq) FROM bgexec.job_event b
			                          WHERE b.job_id = j.id AND b.kind IN ('retry_scheduled', 'suspended')
			                            AND (b.data->'error'->>'reason' IS DISTINCT FROM 'cannot_start_steps'
			                                 OR (b.data->'error') ? 'given_back')), 0);
			IF v_given >= 10 THEN
				SELECT e.data->'error' INTO v_step FROM bgexec.job_event e
				 WHERE e.job_id = j.id AND e.kind = 'step_failed'
				 ORDER BY e.seq DESC LIMIT 1;
				v_err := jsonb_build_object('reason', 'cannot_start_steps', 'given_back', v_given,
				                            'worker', unclaim.worker_id, 'attempt', j.attempt,
				                            'step', v_step->'step', 'retryable', true,
				                            'message', format('%s; the job''s steps could not be started %s times in a row, the attempt is counted',
				                                              coalesce(v_step->>'message', 'its step processes could not be started'),
				                                              v_given + 1));
				IF j.attempt < j.max_attempts THEN
					PERFORM bgexec._requeue(j.id, j.queue, j.attempt, v_err);
				ELSE
					PERFORM bgexec._terminal(j.id, 'failed', NULL, v_err);
				END IF;
				CONTINUE;
			END IF;
		END IF;
		v_err := jsonb_build_object('reason', unclaim.reason, 'worker', unclaim.worker_id,
		                            'attempt', j.attempt,
		                            'message', format(CASE unclaim.reason
		                                                WHEN 'claim_reply_lost' THEN 'worker %s never received this claim; the attempt is not counted'
		                                                ELSE 'worker %s could not start the job''s step processes; the attempt is not counted'
		                                              END, unclaim.worker_id));
		UPDATE bgexec.job x
		   SET status = 'queued', lease = NULL, lease_owner = NULL,
		       lease_expires_at = NULL, deadline = NULL,
		       attempt = x.attempt - 1, last_seq = x.last_seq + 1
		 WHERE x.id = j.id
		RETURNING x.last_seq INTO v_seq;
		PERFORM bgexec._event(j.id, v_seq, 'retry_scheduled',
			jsonb_build_object('attempt', j.attempt, 'error', v_err, 'delay_ms', 0));
		PERFORM bgexec._jobs_ready(j.queue, 1);
	END LOOP;
	RETURN v_n;
END
$$;
COMMENT ON FUNCTION bgexec.unclaim(text, bigint, bigint[], jsonb, text) IS
	'requeues, attempt given back, the jobs of a claim whose reply the worker never received (or whose steps its host could not start); NULL while a claim of the worker runs';

/* snooze: gives back a running job whose running steps are all sleeps (its
 * worker is shutting down, or the sleeps are long: --snooze-after), its
 * attempt not counted: a sleep is a timer
 * that outlives the worker, not work that has to start again.  sleeps:
 * {"step id": seconds, ...}, each sleep the worker has running and the
 * seconds it set out to sleep from the step's step_started of this run.
 * Each wake-up is taken on the database clock (invariant 4): that
 * step_started's created_at plus its seconds.  The job goes back to queued
 * with run_after at the earliest wake-up, attempt - 1, and a
 * retry_scheduled event (error.reason 'sleeping') whose data.sleeping maps
 * each step to its wake-up: the next run's sleep_left reads it, so every
 * sleep goes on where it was, on any worker.  A stop requested meanwhile
 * ends the job cancelled instead, and a deadline passed timed_out (the
 * stop wins if requested before the deadline, as in _finish_one).  Applies only while the job is running
 * under lease (invariant 3); NULL when refused, nothing changed.  Returns
 * the job's new status. */
CREATE FUNCTION bgexec.snooze(job_id bigint, lease bigint, sleeps jsonb)
	RETURNS bgexec.job_status
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, bgexec, pg_temp
	-- As append_events: a client's open transaction holding the row fails
	-- the call (55P03), and the worker retries, its connection free.
	SET lock_timeout = '500ms'
	AS $$
DECLARE
	j bgexec.job;
	s record;
	v_started int;
	v_at timestamptz;
	v_wake timestamptz;
	v_until jsonb := '{}';
	v_seq int;
BEGIN
	IF jsonb_typeof(sleeps) IS DISTINCT FROM 'object' OR sleeps = '{}' THEN
		RAISE EXCEPTION 'sleeps must be a non-empty JSON object {"step id": seconds}'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	FOR s IN SELECT e.key, e.value FROM jsonb_each(sleeps) e LOOP
		IF jsonb_typeof(s.value) <> 'number' OR (s.value::text)::numeric NOT BETWEEN 0 AND 3110400000 THEN
			RAISE EXCEPTION 'sleeps.%: must be seconds from 0 to 3110400000 (100 years), not %', s.key, s.value
				USING ERRCODE = 'invalid_parameter_value';
		END IF;
	END LOOP;
	SELECT * INTO j FROM bgexec.job x
	 WHERE x.id = snooze.job_id AND x.lease = snooze.lease AND x.status = 'running'
	   FOR UPDATE;
	IF NOT FOUND THEN
		RETURN NULL;  -- lease not current: refused, nothing changed
	END IF;
	-- This run's started event, and each sleep's step_started after it.
	SELECT e.seq INTO v_started FROM bgexec.job_event e
	 WHERE e.job_id = j.id AND e.kind = 'started' ORDER BY e.seq DESC LIMIT 1;
	FOR s IN SELECT e.key, e.value FROM jsonb_each(sleeps) e ORDER BY e.key LOOP
		v_at := NULL;
		SELECT e.created_at INTO v_at FROM bgexec.job_event e
		 WHERE e.job_id = j.id AND e.seq > v_started AND e.kind = 'step_started'
		   AND e.data->>'step' = s.key
		 ORDER BY e.seq DESC LIMIT 1;
		IF v_at IS NULL THEN
			RAISE EXCEPTION 'sleeps.%: the step has no step_started in this run', s.key
				USING ERRCODE = 'invalid_parameter_value';
		END IF;
		v_at := v_at + make_interval(secs => (s.value::text)::float8);
		v_until := v_until || jsonb_build_object(s.key, v_at);
		v_wake := least(v_wake, v_at);
	END LOOP;
	-- The job leaves running under this lease (as in _finish_one).
	PERFORM bgexec._end_step_sessions(j.id, j.lease);
	-- A stop, or the deadline: the job ends, as _finish_one and reconcile
	-- end it (whichever came first on the database clock).  Given back past
	-- its deadline, a job escaped its timeout: the next run counts it anew.
	IF j.stop_requested_at IS NOT NULL OR j.deadline < now() THEN
		IF coalesce(j.stop_requested_at < j.deadline, j.stop_requested_at IS NOT NULL) THEN
			RETURN bgexec._terminal(j.id, 'cancelled', NULL,
				jsonb_build_object('reason', 'stopped', 'message', 'stop requested while the job slept'));
		END IF;
		-- (No attempt key: GET /metrics counts the timeouts whose error
		-- names one as the watchdog's.)
		RETURN bgexec._terminal(j.id, 'timed_out', NULL,
			jsonb_build_object('reason', 'timeout',
			                   'message', format('job exceeded its timeout of %s', j.timeout)));
	END IF;
	UPDATE bgexec.job x
	   SET status = 'queued', lease = NULL, lease_owner = NULL,
	       lease_expires_at = NULL, deadline = NULL, run_after = v_wake,
	       attempt = x.attempt - 1, last_seq = x.last_seq + 1
	 WHERE x.id = j.id
	RETURNING x.last_seq INTO v_seq;
	PERFORM bgexec._event(j.id, v_seq, 'retry_scheduled',
		jsonb_build_object('attempt', j.attempt,
		                   'delay_ms', greatest(0, round(extract(epoch FROM v_wake - now()) * 1000)),
		                   'error', jsonb_build_object('reason', 'sleeping', 'worker', j.lease_owner,
		                       'attempt', j.attempt,
		                       'message', format('worker %s gave the job back while it slept; it runs again when its sleep ends, the attempt not counted',
		                                         j.lease_owner)),
		                   'sleeping', v_until));
	IF v_wake <= now() THEN
		PERFORM bgexec._jobs_ready(j.queue, 1);
	ELSE  -- a waiting worker is woken at the wake-up
		PERFORM bgexec._jobs_due(j.queue, v_wake, 1);
		PERFORM bgexec._running_ended(ARRAY[j.queue]);
	END IF;
	RETURN 'queued';
END
$$;
COMMENT ON FUNCTION bgexec.snooze(bigint, bigint, jsonb) IS
	'gives back a job whose running steps are all sleeps, attempt not counted, queued until the first wake-up on the database clock; NULL when the lease is not current';

/* sleep_left: seconds until a sleep step's wake-up on the database clock,
 * when the job's run before this one was given back sleeping (snooze: the
 * event just before this run's started event); NULL otherwise (the step
 * sleeps its full time) or when the lease is not current.  Never below 0. */
CREATE FUNCTION bgexec.sleep_left(job_id bigint, lease bigint, step text)
	RETURNS float8
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
DECLARE
	v_started int;
	v_until text;
BEGIN
	PERFORM FROM bgexec.job x
	 WHERE x.id = sleep_left.job_id AND x.lease = sleep_left.lease AND x.status = 'running';
	IF NOT FOUND THEN
		RETURN NULL;
	END IF;
	SELECT e.seq INTO v_started FROM bgexec.job_event e
	 WHERE e.job_id = sleep_left.job_id AND e.kind = 'started' ORDER BY e.seq DESC LIMIT 1;
	SELECT e.data->'sleeping'->>sleep_left.step INTO v_until FROM bgexec.job_event e
	 WHERE e.job_id = sleep_left.job_id AND e.seq = v_started - 1 AND e.kind = 'retry_scheduled';
	IF v_until IS NULL THEN
		RETURN NULL;
	END IF;
	RETURN greatest(0, extract(epoch FROM v_until::timestamptz - clock_timestamp()))::float8;
END
$$;
COMMENT ON FUNCTION bgexec.sleep_left(bigint, bigint, text) IS
	'seconds left of a sleep step given back by snooze, on the database clock; NULL when it has none';

/* heartbeat: one statement extends every listed lease that is still current
 * and reports what the worker must do with each: ok, stop (a stop was
 * requested), lost (the lease is no longer current: abandon the run and
 * write nothing more) or busy (current, but its row is locked by another
 * transaction: not extended this time).  It never waits for a row lock: a
 * client that called stop() inside a transaction it keeps open holds that
 * job's row until it commits, and a heartbeat that waited for it renewed
 * none of the worker's leases meanwhile, so the worker abandoned every job
 * it ran, every tenant's.  Now only the locked job goes unrenewed; should
 * the lock outlast its lease, the worker abandons that job alone.  Also
 * refreshes worker.heartbeat_at (with process given, only while the row
 * names that process; never once its process deregistered it); when there is
 * no worker row of that id (someone deleted it), one more row, lease NULL
 * and action 'register', asks the worker to call register_worker again:
 * worker_stats and /metrics know workers by their row. */
CREATE FUNCTION bgexec.heartbeat(worker_id text, leases bigint[],
                                 lease_for interval DEFAULT '30 seconds',
                                 process jsonb DEFAULT NULL)
	RETURNS TABLE (lease bigint, action text)
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, bgexec, pg_temp
	SET enable_seqscan = off
	SET jit = off
	AS $$
DECLARE
	v_registered boolean;
	-- The call's time, as claim's: not now(), the start of a transaction a
	-- worker of its own may batch the heartbeat in (after a wait of its
	-- own), which renewed a lease to a time already past, answering ok.
	v_now timestamptz := pg_catalog.clock_timestamp();
BEGIN
	-- Not a register row for an id register_worker refuses.
	IF worker_id IS NULL OR length(worker_id) NOT BETWEEN 1 AND 200 THEN
		RAISE EXCEPTION 'worker_id must be 1-200 characters' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	PERFORM bgexec._check_lease_for(lease_for);
	-- An exact duration (_exact): not a day on this session's calendar.
	lease_for := bgexec._exact(lease_for);
	PERFORM bgexec._check_process(NULL, process, false);  -- its shape only
	-- A NULL lease was answered (NULL, 'lost'), and a NULL lease's row
	-- means 'register'.  A NULL list renewed nothing and refreshed the
	-- worker row: a worker that sent one by mistake lost every job.
	IF leases IS NULL THEN
		RAISE EXCEPTION 'leases must not be null'
			USING ERRCODE = 'invalid_parameter_value',
			      HINT = 'pass an empty array when the worker holds no lease';
	END IF;
	IF pg_catalog.array_ndims(leases) > 1 OR pg_catalog.array_position(leases, NULL) IS NOT NULL THEN
		RAISE EXCEPTION 'leases must be a one-dimensional array without nulls'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	-- The row is refreshed only by its own process: one that lost the id
	-- (process given, the row naming another) still renews its leases and
	-- drains, but does not keep the new holder's row alive (nor mark live
	-- again one whose process stopped), which would keep the id from the
	-- next process for a lease after its last heartbeat.  SKIP LOCKED, as
	-- the jobs below: a row another transaction holds (a deregister or an
	-- administrator's UPDATE left open) is refreshed at the next heartbeat,
	-- where waiting for it held back every lease of the worker.  Nor a row
	-- its own process stopped (stopped_by_self): a heartbeat of that process
	-- sent before its deregister and committed after it marked the stopped
	-- worker live.  (Whichever order: a deregister that committed before
	-- this statement's lock is seen by it, FOR UPDATE reading the row's
	-- newest version; one in flight holds the row, skipped; one that comes
	-- after waits for this commit, then marks the row stopped.)
	UPDATE bgexec.worker w SET heartbeat_at = v_now, stopped_at = NULL
	 WHERE w.id = (SELECT x.id FROM bgexec.worker x
	                WHERE x.id = heartbeat.worker_id
	                  AND NOT x.stopped_by_self
	                  AND (heartbeat.process IS NULL
	                       OR (x.host IS NOT DISTINCT FROM heartbeat.process->>'host'
	                           AND x.pid = bgexec._pid(heartbeat.process->'pid')))
	                  FOR UPDATE SKIP LOCKED);
	v_registered := FOUND OR EXISTS (SELECT 1 FROM bgexec.worker w WHERE w.id = heartbeat.worker_id);
	-- The rows are locked first, SKIP LOCKED (above), in job id order.
	RETURN QUERY
	WITH mine AS MATERIALIZED (
		SELECT j.id FROM bgexec.job j
		 WHERE j.lease = ANY (heartbeat.leases) AND j.status = 'running'
		   AND j.lease_owner = heartbeat.worker_id
		 ORDER BY j.id
		   FOR UPDATE SKIP LOCKED),
	ext AS (
		UPDATE bgexec.job j
		   SET lease_expires_at = v_now + heartbeat.lease_for
		 WHERE j.id = ANY (ARRAY(SELECT m.id FROM mine m))
		RETURNING j.lease, j.stop_requested_at)
	SELECT l.l, CASE WHEN ext.lease IS NOT NULL THEN
	                      CASE WHEN ext.stop_requested_at IS NOT NULL THEN 'stop' ELSE 'ok' END
	                 WHEN EXISTS (SELECT 1 FROM bgexec.job j
	                               WHERE j.lease = l.l AND j.status = 'running'
	                                 AND j.lease_owner = heartbeat.worker_id) THEN 'busy'
	                 ELSE 'lost' END
	  FROM unnest(heartbeat.leases) AS l(l)
	  LEFT JOIN ext ON ext.lease = l.l
	 ORDER BY l.l;
	IF NOT v_registered THEN
		RETURN QUERY SELECT NULL::bigint, 'register'::text;
	END IF;
END
$$;
COMMENT ON FUNCTION bgexec.heartbeat(text, bigint[], interval, jsonb) IS
	'extends all of a worker''s current leases in one statement, never waiting for a row lock; returns ok/stop/lost/busy per lease (and register when the worker row is gone)';

/* append_events: appends a batch of events under a lease; returns the last
 * seq, or NULL (and writes nothing) when the lease is not current
 * (invariant 3).  The job row lock taken by the UPDATE serializes appends, so
 * seqs are gapless (invariant 6).  Workers may not write terminal or
 * DB-owned kinds.
 * after_seq makes a retried batch idempotent: the worker passes the last seq
 * it knows of (its previous append, or the started seq from claim), and when
 * the job's worker events after that seq are exactly this batch -- the first
 * attempt committed but its reply was lost -- nothing is written and the
 * job's last seq is returned.  Only the lease holder appends these kinds, one
 * batch at a time, so what follows after_seq is this batch or nothing; other
 * events (stop_requested, ...) are not compared. */
CREATE FUNCTION bgexec.append_events(job_id bigint, lease bigint, events jsonb, after_seq int DEFAULT NULL)
	RETURNS int
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, bgexec, pg_temp
	SET enable_seqscan = off
	SET jit = off
	-- A client's stop() in a transaction it keeps open holds the job's row:
	-- waiting for it held up the worker's control connection, and with it
	-- every claim and every other job's events.  55P03 instead; the worker
	-- retries with backoff, the connection free in between.
	SET lock_timeout = '500ms'
	AS $$
DECLARE
	c_worker_kinds CONSTANT text[] := ARRAY['step_started', 'step_completed', 'step_failed', 'log', 'progress'];
	v_n int;
	v_last int;
	v_at int;
	v_bad text;
	v_object boolean;
	v_kind_ok boolean;
	v_step text;
	v_step_ok boolean;
	v_output jsonb;
	v_unknown text;
	v_data_ok boolean;
	v_data_type text;
BEGIN
	IF events IS NULL OR jsonb_typeof(events) <> 'array' THEN
		RAISE EXCEPTION 'events must be a JSON array of {"kind", "data"} objects'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF after_seq < 0 THEN
		RAISE EXCEPTION 'after_seq must not be negative' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	v_n := jsonb_array_length(events);
	-- The first bad event, in one pass: not an object, a key but kind and
	-- data (a misspelt "data" was stored as {}), data that is not an object
	-- (or null, stored as {}: readers look up data.step), a kind a worker may not
	-- append, a step event without its step (claim's completed_steps
	-- is keyed by data.step), a step's output the worker could not read
	-- back at the job's next run (as resume's input: _json_fits), or other
	-- data holding a number past a double's range (the CLI, the gateway
	-- and the dashboard read it as a double).  Each
	-- rule is written once, as a flag: the first event failing one is read.
	SELECT c.ord - 1, c.is_object, c.e->>'kind', c.kind_ok,
	       coalesce((c.e->'data'->'step')::text, 'missing'), c.step_ok,
	       CASE WHEN c.e->>'kind' = 'step_completed' THEN c.e->'data'->'output' ELSE c.e->'data' END,
	       c.unknown, c.data_ok, jsonb_typeof(c.e->'data')
	  INTO v_at, v_object, v_bad, v_kind_ok, v_step, v_step_ok, v_output, v_unknown, v_data_ok, v_data_type
	  FROM (SELECT x.ord, x.e, jsonb_typeof(x.e) = 'object' AS is_object,
	               bgexec._unknown_key(x.e, '{kind,data}') AS unknown,
	               coalesce(jsonb_typeof(x.e->'data') IN ('object', 'null'), true) AS data_ok,
	               coalesce(x.e->>'kind', '') = ANY (c_worker_kinds) AS kind_ok,
	               NOT coalesce(x.e->>'kind' IN ('step_started', 'step_completed', 'step_failed')
	                            AND (jsonb_typeof(x.e->'data'->'step') IS DISTINCT FROM 'string'
	                                 OR x.e->'data'->>'step' = ''), false) AS step_ok,
	               coalesce(CASE WHEN x.e->>'kind' = 'step_completed'
	                             THEN bgexec._json_fits(x.e->'data'->'output', 512)
	                             ELSE bgexec._json_fits(x.e->'data', 2147483647) END, true) AS output_ok
	          FROM jsonb_array_elements(events) WITH ORDINALITY AS x(e, ord)) c
	 WHERE NOT (c.is_object AND c.unknown IS NULL AND c.data_ok AND c.kind_ok AND c.step_ok AND c.output_ok)
	 ORDER BY c.ord
	 LIMIT 1;
	IF FOUND AND NOT v_object THEN
		RAISE EXCEPTION 'events[%]: must be a JSON object', v_at
			USING ERRCODE = 'invalid_parameter_value',
			      HINT = 'each event is an object {"kind", "data"}';
	ELSIF FOUND AND v_unknown IS NOT NULL THEN
		RAISE EXCEPTION 'events[%]: unknown field %', v_at, quote_literal(v_unknown)
			USING ERRCODE = 'invalid_parameter_value',
			      HINT = 'each event is an object {"kind", "data"}';
	ELSIF FOUND AND NOT v_data_ok THEN
		RAISE EXCEPTION 'events[%]: data must be a JSON object, not %', v_at, v_data_type
			USING ERRCODE = 'invalid_parameter_value',
			      HINT = 'wrap the value: {"value": ...}';
	ELSIF FOUND AND NOT v_kind_ok THEN
		RAISE EXCEPTION 'events[%]: event kind % cannot be appended by a worker', v_at,
			coalesce(quote_literal(v_bad), 'null')
			USING ERRCODE = 'invalid_parameter_value',
			      HINT = 'workers append step_started, step_completed, step_failed, log or progress';
	ELSIF FOUND AND NOT v_step_ok THEN
		RAISE EXCEPTION 'events[%]: a % event''s data.step must be the step''s id, a non-empty string', v_at, v_bad
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = format('data.step was %s', v_step);
	ELSIF FOUND AND v_bad = 'step_completed' THEN
		PERFORM bgexec._json_fits(v_output, 512, format('events[%s]: data.output', v_at));
	ELSIF FOUND THEN
		PERFORM bgexec._json_fits(v_output, 2147483647, format('events[%s]: data', v_at));
	END IF;
	IF v_n = 0 THEN
		SELECT j.last_seq INTO v_last FROM bgexec.job j
		 WHERE j.id = append_events.job_id AND j.lease = append_events.lease
		   AND j.status = 'running';
		RETURN v_last;
	END IF;
	-- The common case in one statement: nothing was appended after after_seq.
	UPDATE bgexec.job j SET last_seq = j.last_seq + v_n
	 WHERE j.id = append_events.job_id AND j.lease = append_events.lease
	   AND j.status = 'running'
	   AND (append_events.after_seq IS NULL OR j.last_seq = append_events.after_seq)
	RETURNING j.last_seq INTO v_last;
	IF v_last IS NULL THEN
		IF append_events.after_seq IS NULL THEN
			RETURN NULL;
		END IF;
		SELECT j.last_seq INTO v_last FROM bgexec.job j
		 WHERE j.id = append_events.job_id AND j.lease = append_events.lease
		   AND j.status = 'running'
		   FOR UPDATE;
		IF NOT FOUND THEN
			RETURN NULL;
		END IF;
		-- A seq no writer has seen: the batch's retry would compare nothing
		-- and write it twice.
		IF v_last < append_events.after_seq THEN
			RAISE EXCEPTION 'after_seq % is past the job''s last event (seq %)', append_events.after_seq, v_last
				USING ERRCODE = 'invalid_parameter_value',
				      HINT = 'pass the seq of the worker''s last append, or the started seq claim returned';
		END IF;
		IF (SELECT coalesce(jsonb_agg(jsonb_build_object('kind', e.kind, 'data', e.data) ORDER BY e.seq), '[]')
		      FROM bgexec.job_event e
		     WHERE e.job_id = append_events.job_id AND e.seq > append_events.after_seq
		       AND e.kind = ANY (c_worker_kinds))
		   = (SELECT jsonb_agg(jsonb_build_object('kind', x.v->>'kind',
		                                          'data', coalesce(nullif(x.v->'data', 'null'), '{}'))
		                       ORDER BY x.ord)
		        FROM jsonb_array_elements(events) WITH ORDINALITY AS x(v, ord)) THEN
			RETURN v_last;  -- a replay: written by the attempt whose reply was lost
		END IF;
		UPDATE bgexec.job j SET last_seq = j.last_seq + v_n
		 WHERE j.id = append_events.job_id
		RETURNING j.last_seq INTO v_last;
	END IF;
	INSERT INTO bgexec.job_event (job_id, seq, kind, data)
	SELECT append_events.job_id, v_last - v_n + e.ord::int, e.v->>'kind',
	       coalesce(nullif(e.v->'data', 'null'), '{}')  -- as append_event's NULL
	  FROM jsonb_array_elements(events) WITH ORDINALITY AS e(v, ord);
	PERFORM bgexec._notify_event(append_events.job_id, v_last);
	RETURN v_last;
END
$$;
COMMENT ON FUNCTION bgexec.append_events(bigint, bigint, jsonb, int) IS
	'appends a batch of events under a lease; NULL and nothing written when the lease is not current; with after_seq a retried batch is written once';

/* append_event, finish, submit and deregister_worker are PL/pgSQL, not SQL:
 * SECURITY DEFINER and SET keep PostgreSQL from inlining a SQL function, and
 * PostgreSQL 15 then parses and plans its body again on every call, where
 * PL/pgSQL keeps the plan for the session (a submit from one client: 0.25 ->
 * 0.22 ms, bench/README.md).  Regress plans checks that no SECURITY DEFINER
 * function is SQL. */
CREATE FUNCTION bgexec.append_event(job_id bigint, lease bigint, kind text, data jsonb DEFAULT '{}',
                                    after_seq int DEFAULT NULL)
	RETURNS int
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
BEGIN
	-- Each rule append_events checks of an event is checked here too, so
	-- that the message names the field, not events[0].
	IF coalesce(kind, '') NOT IN ('step_started', 'step_completed', 'step_failed', 'log', 'progress') THEN
		RAISE EXCEPTION 'event kind % cannot be appended by a worker', coalesce(quote_literal(kind), 'null')
			USING ERRCODE = 'invalid_parameter_value',
			      HINT = 'workers append step_started, step_completed, step_failed, log or progress';
	END IF;
	IF jsonb_typeof(data) NOT IN ('object', 'null') THEN
		RAISE EXCEPTION 'data must be a JSON object, not %', jsonb_typeof(data)
			USING ERRCODE = 'invalid_parameter_value',
			      HINT = 'wrap the value: {"value": ...}';
	END IF;
	IF kind IN ('step_started', 'step_completed', 'step_failed')
	   AND (jsonb_typeof(data->'step') IS DISTINCT FROM 'string' OR data->>'step' = '') THEN
		RAISE EXCEPTION 'a % event''s data.step must be the step''s id, a non-empty string', kind
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = format('data.step was %s', coalesce((data->'step')::text, 'missing'));
	END IF;
	IF kind = 'step_completed' THEN
		PERFORM bgexec._json_fits(data->'output', 512, 'data.output');
	ELSE
		PERFORM bgexec._json_fits(data, 2147483647, 'data');
	END IF;
	RETURN bgexec.append_events(job_id, lease,
	         jsonb_build_array(jsonb_build_object('kind', kind, 'data', coalesce(data, '{}'))), after_seq);
END
$$;
COMMENT ON FUNCTION bgexec.append_event(bigint, bigint, text, jsonb, int) IS
	'appends one event under a lease; returns its seq, or NULL when the lease is not current';

/* _step_completed(events): a worker's sql step records its step_completed
 * in the step's own transaction, just before its COMMIT: the step's writes
 * and the record that it is done commit together, or neither does.  When
 * the record was written after the COMMIT, on the worker's own session, a
 * worker lost in between (kill -9, a frozen host, a session holding the
 * job's row) left the step's writes committed and no step_completed, and
 * the job's next run ran the statement again (e2e 90).
 * events is append_events' one-element array, [{"kind": "step_completed",
 * "data": {...}}], as the worker builds it.  The job and lease are the
 * transaction's mark (_step_session), not arguments: the owner's statement
 * runs in the same transaction and could name any job.  Once per
 * transaction (_step_mark); refused (55000) unless the job still runs
 * under the lease, and then the step's transaction rolls back.  The job's
 * row is waited for without append_events' lock_timeout: the step's
 * session is its own, and a client's stop() holding the row is a short
 * wait.  Executable by PUBLIC: the statement's role, the job's owner, is
 * any role, and the mark (set by bgexec_worker before _act_as) is the
 * right to call it.  Only under READ COMMITTED: the worker asks for it
 * then (the job's row changes under the step, heartbeats renew its lease,
 * and a REPEATABLE READ transaction could not update it: 40001). */
CREATE FUNCTION bgexec._step_completed(events jsonb) RETURNS int
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, bgexec, pg_temp
	SET lock_timeout = 0
	AS $$
DECLARE
	m record;
	v_seq int;
BEGIN
	IF jsonb_typeof(events) IS DISTINCT FROM 'array' OR jsonb_array_length(events) <> 1
	   OR events->0->>'kind' IS DISTINCT FROM 'step_completed' THEN
		RAISE EXCEPTION 'events must be one step_completed event: [{"kind": "step_completed", "data": {...}}]'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	SELECT * INTO m FROM bgexec._step_mark();
	PERFORM FROM bgexec.job j
	 WHERE j.id = m.job_id AND j.lease = m.lease AND j.status = 'running'
	   FOR UPDATE;
	IF FOUND THEN
		v_seq := bgexec.append_events(m.job_id, m.lease, events);
	END IF;
	IF v_seq IS NULL THEN
		RAISE EXCEPTION 'the job''s lease is not current: its sql step does not commit'
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      DETAIL = format('Job %s, lease %s.', m.job_id, m.lease),
			      HINT = 'The lease was taken back (it expired, or the job passed its deadline), or the job ended.';
	END IF;
	RETURN v_seq;
END
$$;
COMMENT ON FUNCTION bgexec._step_completed(jsonb) IS
	'records a sql step''s step_completed in the step''s own transaction, under the lease it was marked with; the seq';

/* finish: the guarded terminal write.  Applies only while status='running'
 * AND lease=$lease (invariant 3) — so of finish and reconcile, or two
 * finishes, exactly one wins and writes exactly one terminal event
 * (invariant 5).  Returns the new status, or NULL when refused.
 * A requested stop is never lost: with one, a failed job is not retried and
 * a job the worker suspends ends cancelled (as reconcile cancels it when
 * the worker is gone), instead of waiting for a resume whose first
 * heartbeat would only say stop.
 * A stop and the deadline both: whichever came first on the database clock
 * decides, as in reconcile (_reconcile_batch): a stop requested before the
 * deadline ends the job cancelled, one at or after it timed_out, whichever
 * of the two the worker saw first (its deadline timer runs on its own
 * clock, a stop reaches it a round trip late) and whichever of the worker
 * and reconcile ends it.  error.reason and message follow the status; the
 * worker's other keys (the steps it ended) are kept. */
CREATE FUNCTION bgexec._finish_one(job_id bigint, lease bigint, outcome bgexec.job_status,
                                   body jsonb)
	RETURNS bgexec.job_status
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, bgexec, pg_temp
	SET enable_seqscan = off
	SET jit = off
	AS $$
DECLARE
	j bgexec.job;
	v_seq int;
	v_note jsonb;
BEGIN
	IF outcome IS NULL OR outcome IN ('queued', 'running') THEN
		RAISE EXCEPTION 'outcome must be completed, failed, cancelled, timed_out or suspended'
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = format('outcome was %s', coalesce(outcome::text, 'null'));
	END IF;

	-- A body past bgexec.max_result_bytes is not stored: the job fails with
	-- 54000, not retried, as the daemon fails one past its
	-- --max-result-bytes.  Refusing it would leave the job running for a
	-- worker to finish again, and fail a daemon's whole batch; failed, the
	-- job ends (invariant 1) and the worker reads why from the status
	-- returned.  Its size read from the header, before anything walks it.
	v_note := bgexec._body_over(outcome::text, body);
	IF v_note IS NOT NULL THEN
		outcome := 'failed';
		body := v_note;
	END IF;
	-- A JSON null is no body, as SQL's NULL (finish_many's "body": null is
	-- one): the suspended event's data {}, no error stored as JSON null.
	IF jsonb_typeof(body) = 'null' THEN
		body := NULL;
	END IF;
	-- Numbers the readers take as doubles (status, tail, the gateway):
	-- 1e400 showed as null.  finish_many checks every item first.
	PERFORM bgexec._json_fits(body, 2147483647, 'body');
	SELECT * INTO j FROM bgexec.job x
	 WHERE x.id = _finish_one.job_id AND x.lease = _finish_one.lease AND x.status = 'running'
	   FOR UPDATE;
	IF NOT FOUND THEN
		RETURN NULL;  -- lease not current: refused, nothing changed
	END IF;
	-- The job leaves running under this lease, whatever the outcome: a sql
	-- step session of it still open ends when this transaction commits.  A
	-- statement that turned off the server's connection check and caught
	-- every cancel ran on for ever once the worker closed its session (a
	-- step timeout, a stop), beside the job's next attempt.
	PERFORM bgexec._end_step_sessions(j.id, j.lease);

	IF outcome = 'suspended' AND j.stop_requested_at IS NOT NULL THEN
		RETURN bgexec._terminal(j.id, 'cancelled', NULL,
			jsonb_build_object('reason', 'stopped', 'suspended', coalesce(body, '{}'),
			                   'message', 'stop requested; cancelled instead of suspended'));
	END IF;
	IF outcome = 'suspended' THEN
		-- Release the lease; a resume does not use up an attempt.
		UPDATE bgexec.job x
		   SET status = 'suspended', lease = NULL, lease_owner = NULL,
		       lease_expires_at = NULL, deadline = NULL,
		       attempt = x.attempt - 1, last_seq = x.last_seq + 1
		 WHERE x.id = j.id
		RETURNING x.last_seq INTO v_seq;
		PERFORM bgexec._event(j.id, v_seq, 'suspended', coalesce(body, '{}'));
		PERFORM bgexec._running_ended(ARRAY[j.queue]);
		RETURN 'suspended';
	END IF;

	IF outcome IN ('cancelled', 'timed_out') AND j.stop_requested_at IS NOT NULL
	   AND j.deadline IS NOT NULL
	   AND (outcome = 'cancelled') <> (j.stop_requested_at < j.deadline) THEN
		outcome := CASE WHEN j.stop_requested_at < j.deadline THEN 'cancelled' ELSE 'timed_out' END;
		body := CASE WHEN jsonb_typeof(body) = 'object' THEN body ELSE '{}' END
		        || CASE WHEN outcome = 'cancelled'
		                THEN jsonb_build_object('reason', 'stopped',
		                       'message', 'stop requested before the job''s deadline')
		                ELSE jsonb_build_object('reason', 'timeout',
		                       'message', format('job exceeded its timeout of %s before the stop was requested',
		                                         j.timeout)) END;
	END IF;
	IF outcome = 'failed' AND j.attempt < j.max_attempts
	   AND j.stop_requested_at IS NULL
	   AND coalesce(body->>'retryable', 'true') <> 'false' THEN
		RETURN bgexec._requeue(j.id, j.queue, j.attempt, body);
	END IF;

	RETURN bgexec._terminal(j.id, outcome,
		CASE WHEN outcome = 'completed' THEN coalesce(body, '{}') END,
		CASE WHEN outcome = 'completed' THEN NULL ELSE body END);
END
$$;
CREATE FUNCTION bgexec.finish(job_id bigint, lease bigint, outcome bgexec.job_status,
                              body jsonb DEFAULT NULL)
	RETURNS bgexec.job_status
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER  -- not sql: see append_event
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
BEGIN
	RETURN bgexec._finish_one(job_id, lease, outcome, body);
END
$$;
COMMENT ON FUNCTION bgexec.finish(bigint, bigint, bgexec.job_status, jsonb) IS
	'guarded terminal write under a lease; NULL when the lease is not current';

/* finish_many: many guarded finishes in one statement and one commit — a
 * worker's completer batches the results of jobs that end close together,
 * so the WAL flush of a commit is shared by the batch (DESIGN.md §8).
 * items: [{"job_id", "lease", "outcome", "body"}, ...].  Each item is exactly
 * finish(): applied only under its current lease; status NULL when refused.
 * Rows are locked in job id order, so concurrent batches cannot deadlock. */
CREATE FUNCTION bgexec.finish_many(items jsonb)
	RETURNS TABLE (job_id bigint, lease bigint, status bgexec.job_status)
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, bgexec, pg_temp
	SET enable_seqscan = off
	SET jit = off
	-- Only nested loops: the finishing UPDATE below then takes its row locks
	-- in the order of its sorted items (job id order).
	SET enable_hashjoin = off
	SET enable_mergejoin = off
	-- A job row another transaction holds (a client's stop() in a
	-- transaction it keeps open) held up the whole batch, and every batch
	-- after it on the worker's finish connection.  55P03 instead: the worker
	-- writes the batch's other items without it, and that one again later.
	SET lock_timeout = '500ms'
	AS $$
DECLARE
	v_bad text;
	v_at bigint;
	v_unfit bigint;
	v_other boolean;
	v_done bigint[];
	v_seqs int[];
	v_ords bigint[];
	v_queues text[];
	v_ids bigint[];
	v_leases bigint[];
BEGIN
	IF items IS NULL OR jsonb_typeof(items) <> 'array' THEN
		RAISE EXCEPTION 'items must be a JSON array of {"job_id", "lease", "outcome", "body"} objects'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	-- An item whose body is past bgexec.max_result_bytes fails its job
	-- instead, as finish(): a valid one is replaced first (_item_over), so
	-- its body is not walked below; a bad one is refused as before.  A
	-- batch within the limit holds no such body: one read of its header,
	-- no item looked at.
	IF bgexec._over_result_limit(items) THEN
		SELECT jsonb_agg(coalesce(CASE WHEN bgexec._finish_item_error(x.i) IS NULL
		                               THEN bgexec._item_over(x.i) END, x.i) ORDER BY x.ord)
		  INTO items FROM jsonb_array_elements(items) WITH ORDINALITY AS x(i, ord);
	END IF;
	-- The first bad item, by position, and why (_finish_item_error): no key
	-- but these four (a "result" beside or instead of "body" was dropped:
	-- the job completed with {}), job_id and lease JSON numbers that are
	-- bigints (1.0 failed in the cast below, 22P02 naming no field), a
	-- terminal or suspended outcome; then the first body holding a number
	-- past a double's range (as finish()).
	SELECT min(x.ord) FILTER (WHERE bgexec._finish_item_error(x.i) IS NOT NULL),
	       bool_or(x.i->>'outcome' IS DISTINCT FROM 'completed'),
	       min(x.ord) FILTER (WHERE NOT coalesce(bgexec._json_fits(x.i->'body', 2147483647), true))
	  INTO v_at, v_other, v_unfit FROM jsonb_array_elements(items) WITH ORDINALITY AS x(i, ord);
	IF v_at IS NOT NULL THEN
		v_bad := bgexec._finish_item_error(items -> (v_at - 1)::int);
		RAISE EXCEPTION 'items[%]: %', v_at - 1, v_bad
			USING ERRCODE = 'invalid_parameter_value',
			      HINT = 'each item is an object {"job_id", "lease", "outcome", "body"}';
	END IF;
	IF v_unfit IS NOT NULL THEN
		PERFORM bgexec._json_fits(items -> (v_unfit - 1)::int -> 'body', 2147483647,
		                          format('items[%s]: body', v_unfit - 1));
	END IF;
	-- Rows are locked in job id order.  A batch of completions alone is
	-- locked by its UPDATE, which reaches the rows in that order; the other
	-- outcomes are finished one by one after it, so a batch with any of them
	-- locks every row first.
	IF v_other THEN
		PERFORM 1 FROM bgexec.job x
		 WHERE x.id IN (SELECT (i->>'job_id')::bigint FROM jsonb_array_elements(items) i)
		 ORDER BY x.id
		   FOR UPDATE;
	END IF;

	-- The common case set-based: every 'completed' item whose lease is current
	-- in one UPDATE and one INSERT of terminal events (same transaction, so
	-- invariant 5 holds as in _terminal).  Items apply as finish() calls in
	-- array order would: of several items for one job and lease only the
	-- first can, so only the first is a candidate here, and the others find
	-- the job finished (status NULL, refused).
	WITH it AS MATERIALIZED (
		SELECT f.job_id, f.lease, f.body, f.ord FROM (
			SELECT DISTINCT ON (r.job_id, r.lease) r.job_id, r.lease, r.outcome,
			       coalesce(r.body, '{}') AS body, r.ord
			  FROM ROWS FROM (jsonb_to_recordset(items) AS (
			         job_id bigint, lease bigint, outcome text, body jsonb))
			       WITH ORDINALITY AS r(job_id, lease, outcome, body, ord)
			 ORDER BY r.job_id, r.lease, r.ord) f
		 WHERE f.outcome = 'completed'
		 ORDER BY f.job_id),
	done AS (
		UPDATE bgexec.job x
		   SET status = 'completed', result = it.body, error = NULL, finished_at = now(),
		       lease = NULL, lease_owner = NULL, lease_expires_at = NULL,
		       last_seq = x.last_seq + 1
		  FROM it
		 -- status compared as text, as in claim: each item reaches its row by
		 -- primary key.  With "status = 'running'" the planner walked a
		 -- partial index of every running job once per item.
		 WHERE x.id = it.job_id AND x.lease = it.lease AND x.status::text = 'running'
		RETURNING x.id, x.queue, x.last_seq, x.result, it.ord, it.lease),
	counted AS (
		INSERT INTO bgexec.queue_count (queue, status, n)
		SELECT d.queue, 'completed', count(*) FROM done d GROUP BY d.queue),
	ev AS (
		INSERT INTO bgexec.job_event (job_id, seq, kind, data)
		SELECT d.id, d.last_seq, 'completed', _jsonb_object('{result}', ARRAY[d.result]) FROM done d
		RETURNING job_event.job_id AS jid, job_event.seq AS jseq)
	SELECT coalesce(array_agg(ev.jid), '{}'),
	       coalesce(array_agg(ev.jseq), '{}'),
	       (SELECT coalesce(array_agg(d.ord), '{}') FROM done d),
	       (SELECT coalesce(array_agg(d.queue), '{}') FROM done d),
	       -- both read the materialized rows of done, in one order
	       (SELECT coalesce(array_agg(d.id), '{}') FROM done d),
	       (SELECT coalesce(array_agg(d.lease), '{}') FROM done d)
	  INTO v_done, v_seqs, v_ords, v_queues, v_ids, v_leases
	  FROM ev;
	PERFORM bgexec._notify_event(d.jid, d.jseq) FROM unnest(v_done, v_seqs) AS d(jid, jseq);
	PERFORM bgexec._running_ended(v_queues);
	-- The completed jobs leave running under their leases: their sql step
	-- sessions still open end at commit, as _finish_one's (one call for
	-- the batch; with none marked anywhere, the commit reads one counter).
	PERFORM bgexec._end_step_sessions(v_ids, v_leases);

	-- Every other item (failed, cancelled, timed_out, suspended) as finish().
	RETURN QUERY
	SELECT (i->>'job_id')::bigint, (i->>'lease')::bigint,
	       CASE WHEN t.ord = ANY (v_ords) THEN 'completed'::bgexec.job_status
	            WHEN i->>'outcome' = 'completed' THEN NULL
	            ELSE bgexec._finish_one((i->>'job_id')::bigint, (i->>'lease')::bigint,
	                                    (i->>'outcome')::bgexec.job_status, i->'body') END
	  FROM jsonb_array_elements(items) WITH ORDINALITY AS t(i, ord)
	 ORDER BY ord;
END
$$;
COMMENT ON FUNCTION bgexec.finish_many(jsonb) IS
	'many guarded finishes in one statement; status NULL for each refused lease';

/* _fire_schedules: submits a job for every schedule whose next_run_at has
 * come, as the schedule's owner, and moves next_run_at to the expression's
 * next minute after now: a schedule that was due several times while
 * nothing ran reconcile() fires once.  Rows are taken FOR UPDATE SKIP
 * LOCKED and re-checked under the lock, so racing callers (the watchdog and
 * every worker) fire each tick once (isolation schedule-fire-race); the job's
 * idempotency key names the tick (schedule:NAME@TIME), so a tick fired again
 * by hand returns the same job.  A tick that cannot submit (its queue is
 * full, its fields no longer pass submit's checks) is skipped and its error
 * kept in last_error: one schedule never stops reconcile() for everyone;
 * so is a tick whose owner is no longer a member of bgexec_client, and,
 * with overlap false, one whose last job is still queued, running or
 * suspended.  A paused schedule fires nothing.
 * A tick waits a second at most for a lock: a client's open transaction
 * holding the tick's idempotency key, or the admission lock of a capped
 * queue (a submit not yet committed), held the watchdog's reconcile() for
 * as long as it stayed open, with the expired jobs it had taken back still
 * locked, and every later lease of the database when no worker was alive.
 * Past it (lock_timeout) the tick is
 * left due, its last_error saying why, and fired by a later call, after
 * the ticks that did not wait; and a call stops firing after two seconds,
 * its other due ticks left to the next.
 * Returns how many ticks it fired. */
CREATE FUNCTION bgexec._fire_schedules() RETURNS int
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, bgexec, pg_temp
	SET enable_seqscan = off
	SET jit = off
	SET lock_timeout = '1s'
	AS $$
DECLARE
	s record;
	v_n int := 0;
	v_job bigint;
	v_next timestamptz;
	v_err text;
	v_last bgexec.job_status;
	v_began timestamptz := clock_timestamp();
BEGIN
	FOR s IN
		SELECT x.* FROM bgexec.schedule x
		 WHERE x.next_run_at <= now() AND NOT x.paused
		 ORDER BY coalesce(x.last_error LIKE 'not fired yet:%', false), x.next_run_at
		   FOR UPDATE SKIP LOCKED
	LOOP
		EXIT WHEN clock_timestamp() - v_began > interval '2 seconds';
		v_job := NULL;
		v_err := NULL;
		BEGIN
			-- Revoking a role's bgexec_client (or dropping the role: 42704)
			-- stops its schedules.
			IF NOT pg_catalog.pg_has_role(s.owner, 'bgexec_client', 'USAGE') THEN
				RAISE EXCEPTION 'role % may no longer submit jobs (not a member of bgexec_client)', s.owner
					USING ERRCODE = 'insufficient_privilege';
			END IF;
			IF NOT s.overlap THEN
				SELECT j.status INTO v_last FROM bgexec.job j WHERE j.id = s.last_job_id;
				IF NOT bgexec._is_terminal(v_last) THEN  -- unfinished (a purged job: NULL, no)
					RAISE EXCEPTION 'skipped: job % of the last run is still %', s.last_job_id, v_last
						USING ERRCODE = 'object_in_use';
				END IF;
			END IF;
			v_job := bgexec._submit_one(s.owner, s.kind, s.payload, s.queue, s.priority, now(),
				s.max_attempts, s.timeout,
				'schedule:' || s.name || '@'
				  || to_char(s.next_run_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI"Z"'),
				s.concurrency_key);
			v_n := v_n + 1;
		-- A deadlock (the caller holding a row a client's transaction waits
		-- for, the client the queue's lock this submit waits for) is the
		-- same wait ended another way: the tick stays due, not lost.  So is
		-- a capped queue's tick in a transaction that is not READ COMMITTED
		-- (0A000: a worker's reconcile() on a role that defaults to
		-- REPEATABLE READ): the watchdog, READ COMMITTED, fires it; taken
		-- for the tick's failure, the run was lost.
		EXCEPTION WHEN lock_not_available OR deadlock_detected OR serialization_failure
		            OR feature_not_supported THEN
			UPDATE bgexec.schedule x
			   SET last_error = CASE WHEN SQLSTATE = '0A000'
			                         THEN format('not fired yet: %s; fired by the watchdog, or a reconcile'
			                                     ' in a READ COMMITTED transaction (SQLSTATE 0A000)', SQLERRM)
			                         ELSE format('not fired yet: another transaction holds a lock the tick''s submit needs'
			                                     ' (its idempotency key, or its queue''s max_queued), or a deadlock with'
			                                     ' one ended the wait; tried again at the next reconcile (SQLSTATE %s)',
			                                     SQLSTATE) END
			 WHERE x.owner = s.owner AND x.name = s.name;
			CONTINUE;
		WHEN OTHERS THEN
			v_err := format('%s (SQLSTATE %s)', SQLERRM, SQLSTATE);
		END;
		BEGIN
			v_next := bgexec._cron_next(s.cron, greatest(now(), s.next_run_at), s.time_zone);
		EXCEPTION WHEN OTHERS THEN
			-- only an expression written past schedule(): try again in a day
			v_next := now() + interval '24 hours';
			v_err := coalesce(v_err || '; ', '') || format('%s (SQLSTATE %s)', SQLERRM, SQLSTATE);
		END;
		UPDATE bgexec.schedule x
		   SET next_run_at = v_next, last_error = v_err,
		       last_run_at = CASE WHEN v_job IS NULL THEN x.last_run_at ELSE s.next_run_at END,
		       last_job_id = coalesce(v_job, x.last_job_id)
		 WHERE x.owner = s.owner AND x.name = s.name;
	END LOOP;
	RETURN v_n;
END
$$;

/* _reconcile_batch: takes back expired jobs the caller has locked (ids in
 * id order), set-based: one UPDATE of the jobs, one INSERT of their
 * events, one of the terminal counts per queue and status, and the wakes
 * grouped by queue.  Each job ends as _terminal and _requeue leave one:
 * the same status, error, run_after backoff (per job, _backoff), the same
 * events at the same seqs (worker_lost then the terminal event or
 * retry_scheduled; a job past its deadline timed_out alone, or cancelled
 * alone when its stop came first and its lease is live).  A stop and the
 * deadline both: whichever came first on the database clock decides, as
 * in _finish_one (a stop requested before the deadline: cancelled; at or
 * after it: timed_out).  The deadline used to win whenever it had passed,
 * so a job stopped at once and whose worker was then lost ended
 * timed_out when its lease outlived its deadline, and cancelled when it
 * did not.  The
 * bgexec_events notification is one per job, for its last seq (a batch:
 * README "Channels").  Row by row, the function calls per job (_terminal,
 * _event, _count, _running_ended, each with its own SET) made 5 000
 * expired leases take 1.9 s of the watchdog's transaction, its locks held
 * (bench/README.md).  Returns how many jobs it took back. */
CREATE FUNCTION bgexec._reconcile_batch(p_ids bigint[]) RETURNS int
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
DECLARE
	v_n int;
	v_ids bigint[];
	v_seqs int[];
	v_ended text[];
	v_ready text[];
	v_due_q text[];
	v_due_at timestamptz[];
BEGIN
	-- The lease is taken back: a sql step its worker could not end
	-- (stopped, frozen) ends now, rolled back.
	PERFORM bgexec._end_step_sessions(x.id, x.lease)
	   FROM bgexec.job x WHERE x.id = ANY (p_ids);
	WITH c AS MATERIALIZED (
		SELECT x.id, x.queue, x.attempt, x.last_seq,
		       -- the stop wins if requested before the deadline (NULL
		       -- deadline: no timeout, the stop wins)
		       CASE WHEN x.deadline < now() AND NOT coalesce(x.stop_requested_at < x.deadline, false)
		            THEN 'timed_out'::bgexec.job_status
		            WHEN x.stop_requested_at IS NOT NULL THEN 'cancelled'
		            WHEN x.attempt < x.max_attempts THEN 'queued'
		            ELSE 'failed' END AS st,
		       -- taken back for its lease (else for its deadline alone)
		       x.lease_expires_at < now() AS expired,
		       jsonb_build_object('reason', 'timeout', 'message',
		           format('job exceeded its timeout of %s', x.timeout),
		           'attempt', x.attempt) AS timeout,
		       jsonb_build_object('reason', 'worker_lost', 'worker', x.lease_owner,
		           'attempt', x.attempt,
		           'message', format('lease of worker %s expired', x.lease_owner)) AS lost,
		       x.timeout AS job_timeout
		  FROM bgexec.job x
		 WHERE x.id = ANY (p_ids)),
	d AS MATERIALIZED (
		SELECT c.id, c.queue, c.attempt, c.last_seq, c.st, c.lost,
		       -- a worker_lost event before the terminal one or retry_scheduled
		       c.st <> 'timed_out' AND c.expired AS lost_ev,
		       CASE WHEN c.st = 'timed_out' THEN c.timeout
		            WHEN c.st = 'cancelled' AND c.expired
		            THEN c.lost || jsonb_build_object('message', 'stop requested; worker lost')
		            WHEN c.st = 'cancelled'
		            THEN jsonb_build_object('reason', 'stopped', 'attempt', c.attempt,
		                   'message', format('stop requested before the job''s deadline (its timeout of %s); ended at the deadline',
		                                     c.job_timeout))
		            ELSE c.lost END AS err,
		       CASE WHEN c.st = 'queued' THEN bgexec._backoff(c.queue, c.attempt) END AS delay
		  FROM c ORDER BY c.id),
	up AS (
		UPDATE bgexec.job x
		   SET status = d.st,
		       result = CASE WHEN d.st = 'queued' THEN x.result END,
		       error = d.err,
		       finished_at = CASE WHEN d.st = 'queued' THEN x.finished_at ELSE now() END,
		       lease = NULL, lease_owner = NULL, lease_expires_at = NULL,
		       deadline = CASE WHEN d.st = 'queued' THEN NULL ELSE x.deadline END,
		       run_after = CASE WHEN d.st = 'queued' THEN now() + d.delay ELSE x.run_after END,
		       last_seq = x.last_seq + CASE WHEN d.lost_ev THEN 2 ELSE 1 END
		  FROM d
		 WHERE x.id = d.id
		RETURNING x.id, x.queue, x.last_seq, d.st, d.attempt, d.lost, d.lost_ev, d.err, d.delay),
	counted AS (
		INSERT INTO bgexec.queue_count (queue, status, n)
		SELECT u.queue, u.st, count(*) FROM up u WHERE u.st <> 'queued' GROUP BY u.queue, u.st),
	ev AS (
		INSERT INTO bgexec.job_event (job_id, seq, kind, data)
		SELECT e.job_id, e.seq, e.kind, e.data FROM (
			SELECT u.id AS job_id, u.last_seq - 1 AS seq, 'worker_lost' AS kind, u.lost AS data
			  FROM up u WHERE u.lost_ev
			UNION ALL
			SELECT u.id, u.last_seq,
			       CASE WHEN u.st = 'queued' THEN 'retry_scheduled' ELSE u.st::text END,
			       CASE WHEN u.st = 'queued'
			            THEN jsonb_build_object('attempt', u.attempt, 'error', u.err,
			                   'delay_ms', round(extract(epoch FROM u.delay) * 1000))
			            ELSE _jsonb_object('{error}', ARRAY[u.err]) END
			  FROM up u) e
		 ORDER BY e.job_id, e.seq)
	SELECT count(*),
	       coalesce(array_agg(u.id ORDER BY u.id), '{}'),
	       coalesce(array_agg(u.last_seq ORDER BY u.id), '{}'),
	       -- a running slot freed: terminal, or queued with a backoff
	       -- (_requeue without one wakes the queue for the job itself)
	       coalesce(array_agg(u.queue) FILTER (WHERE u.st <> 'queued' OR u.delay > interval '0'), '{}'),
	       coalesce(array_agg(u.queue) FILTER (WHERE u.st = 'queued' AND u.delay <= interval '0'), '{}'),
	       coalesce(array_agg(u.queue ORDER BY u.id) FILTER (WHERE u.st = 'queued' AND u.delay > interval '0'), '{}'),
	       coalesce(array_agg(now() + u.delay ORDER BY u.id) FILTER (WHERE u.st = 'queued' AND u.delay > interval '0'), '{}')
	  INTO v_n, v_ids, v_seqs, v_ended, v_ready, v_due_q, v_due_at
	  FROM up u;
	PERFORM bgexec._notify_event(e.jid, e.jseq) FROM unnest(v_ids, v_seqs) AS e(jid, jseq);
	PERFORM bgexec._jobs_ready(r.q, count(*)) FROM unnest(v_ready) AS r(q) GROUP BY r.q;
	PERFORM bgexec._jobs_due(w.q, w.at, count(*)) FROM unnest(v_due_q, v_due_at) AS w(q, at)
	  GROUP BY w.q, w.at;
	PERFORM bgexec._running_ended(v_ended);
	RETURN v_n;
END
$$;

/* _reconcile_jobs: reconcile()'s work on the expired jobs; returns how many
 * it acted on.  The rows are locked as the loop fetches them (PL/pgSQL
 * fetches 10 at a time) and taken back in batches (_reconcile_batch) of
 * 10, 20, 40, … at most 1000 jobs: no more locked than before while a
 * batch writes, in the common case of a few expired jobs.
 * each: every job in a subtransaction of its own (a batch of one), a row it
 * cannot write (one written around the API: its last_seq at the int's
 * end, an event row already at its next seq) left as it is and named in a
 * warning, where without it one such row failed the whole call, and with
 * it every other lease and deadline of the database for as long as the row
 * stayed. */
CREATE FUNCTION bgexec._reconcile_jobs(each boolean) RETURNS int
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
DECLARE
	v_id bigint;
	v_n int := 0;
	v_batch bigint[] := '{}';
	v_size int := 10;
BEGIN
	-- Only the id: a row variable holds its values detoasted, the payload
	-- and the result of every job the loop passes.
	FOR v_id IN
		SELECT x.id FROM bgexec.job x
		 WHERE x.id = ANY (ARRAY(
		         SELECT e.id FROM bgexec.job e
		          WHERE e.lease_expires_at < now()
		         UNION
		         SELECT d.id FROM bgexec.job d
		          WHERE d.lease IS NOT NULL AND d.deadline < now()))
		   -- Rechecked on the row's latest version once it is locked.  status
		   -- is compared as text so that each id is reached by primary key.
		   AND x.status::text = 'running'
		   AND (x.lease_expires_at < now() OR x.deadline < now())
		 ORDER BY x.id
		   FOR UPDATE SKIP LOCKED
	LOOP
		IF NOT each THEN
			v_batch := v_batch || v_id;
			IF cardinality(v_batch) >= v_size THEN
				v_n := v_n + bgexec._reconcile_batch(v_batch);
				v_batch := '{}';
				v_size := least(v_size * 2, 1000);
			END IF;
			CONTINUE;
		END IF;
		BEGIN
			v_n := v_n + bgexec._reconcile_batch(ARRAY[v_id]);
		EXCEPTION WHEN OTHERS THEN
			RAISE WARNING 'bgexec.reconcile: job % left as it is: % (SQLSTATE %)', v_id, SQLERRM, SQLSTATE;
		END;
	END LOOP;
	IF cardinality(v_batch) > 0 THEN
		v_n := v_n + bgexec._reconcile_batch(v_batch);
	END IF;
	RETURN v_n;
END
$$;

/* _reconcile_one: takes back one expired job the caller has locked, as
 * _reconcile_batch does (its one definition of how). */
CREATE FUNCTION bgexec._reconcile_one(j bgexec.job) RETURNS void
	LANGUAGE sql VOLATILE
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$ SELECT FROM bgexec._reconcile_batch(ARRAY[j.id]) $$;

/* reconcile: the watchdog.  Running jobs whose lease expired: queued with
 * backoff when attempts remain (and no stop was requested), else failed with
 * error.reason 'worker_lost' (cancelled if a stop was requested).  Running
 * jobs past their deadline: timed_out.  Rows are taken FOR UPDATE SKIP
 * LOCKED, and the state is re-checked under the lock, so racing reconcilers
 * (or a racing finish) never both act on a job: one terminal event per job.
 * Also submits the jobs of due schedules (_fire_schedules) and folds
 * queue_stats' count deltas once there are many (_compact_counts). */
CREATE FUNCTION bgexec.reconcile() RETURNS int
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, bgexec, pg_temp
	-- Plain index scans, which mark the entries of finished runs dead as they
	-- pass them.  A bitmap scan never does: until the next vacuum it visited
	-- the heap page of every job run more than a lease period before, on
	-- every call (16-83 ms after a 200 000-job drain, bench/README.md).  And
	-- never a sequential scan of job: the plan is cached for the watchdog's
	-- life, and one made while the table was small would read every job
	-- later.  Without JIT: the penalty that disables a path counts in a
	-- plan's cost, so the scans of queue_count (which has no index) by
	-- _compact_counts crossed jit_above_cost and took 60-80 ms to compile.
	SET enable_bitmapscan = off
	SET enable_seqscan = off
	SET jit = off
	AS $$
DECLARE
	v_n int;
BEGIN
	-- The expired jobs together, and only if that fails, each on its own:
	-- a subtransaction per job, past 64 in one transaction, made every
	-- snapshot of the database read pg_subtrans until it ended.
	BEGIN
		v_n := bgexec._reconcile_jobs(false);
	EXCEPTION WHEN OTHERS THEN
		v_n := bgexec._reconcile_jobs(true);
	END;
	-- Then the due schedules, whose waits for a client's lock are bounded
	-- (two seconds a call).  Not before: the job table is locked first, as
	-- it always was, and DROP EXTENSION, which locks the tables the other
	-- way round, deadlocked with a reconcile that locked schedule first.
	PERFORM bgexec._fire_schedules();
	PERFORM bgexec._compact_counts();
	RETURN v_n;
END
$$;
COMMENT ON FUNCTION bgexec.reconcile() IS
	'watchdog: requeues or fails jobs whose lease expired, times out jobs past their deadline; returns how many';

/* _completed_steps: step id → output for steps completed in earlier runs
 * (step_completed events), plus the approval step answered by resume.
 * Events whose data.step is not a string are left out: append_events
 * refuses them, and one written around it must not fail every claim of
 * its queue (a null step was a null key for the object).
 * Nor may outputs past what one jsonb holds (256 MiB: 17 steps of 16 MiB,
 * or many resumes) fail every claim of its queue, the job queued at its
 * head for ever: a JSON string in place of the object says why, and the
 * worker fails the job with it (_completed_stdout the same). */
CREATE FUNCTION bgexec._completed_steps(p_job bigint) RETURNS jsonb
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
BEGIN
	RETURN (
	SELECT coalesce(_jsonb_object(array_agg(s.step), array_agg(s.output)), '{}')
	  FROM (SELECT DISTINCT ON (step) step, output FROM (
	          SELECT e.data->>'step' AS step,
	                 coalesce(e.data->'output', 'null') AS output, e.seq
	            FROM bgexec.job_event e
	           WHERE e.job_id = p_job AND e.kind = 'step_completed'
	             AND jsonb_typeof(e.data->'step') = 'string'
	          UNION ALL
	          SELECT e.data->>'step', coalesce(e.data->'input', 'null'), e.seq
	            FROM bgexec.job_event e
	           WHERE e.job_id = p_job AND e.kind = 'resumed'
	             AND jsonb_typeof(e.data->'step') = 'string') all_steps
	         ORDER BY step, seq DESC) s);
EXCEPTION WHEN program_limit_exceeded THEN
	RETURN to_jsonb('the outputs of its completed steps are over what one JSON value holds: ' || SQLERRM);
END
$$;

/* _completed_stdout: step id → captured stdout of the steps completed in
 * earlier runs whose newest step_completed recorded one, so {{steps.ID.stdout}}
 * is exact on re-runs.  The worker records none where the output is the text
 * itself (or its compact JSON): the output then stands in, so an older event's
 * stdout must not. */
CREATE FUNCTION bgexec._completed_stdout(p_job bigint) RETURNS jsonb
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
BEGIN
	RETURN (
	SELECT coalesce(_jsonb_object(array_agg(s.step) FILTER (WHERE jsonb_typeof(s.stdout) = 'string'),
	                              array_agg(s.stdout) FILTER (WHERE jsonb_typeof(s.stdout) = 'string')), '{}')
	  FROM (SELECT DISTINCT ON (e.data->>'step') e.data->>'step' AS step, e.data->'stdout' AS stdout
	          FROM bgexec.job_event e
	         WHERE e.job_id = p_job AND e.kind = 'step_completed'
	           AND jsonb_typeof(e.data->'step') = 'string'
	         ORDER BY e.data->>'step', e.seq DESC) s);
EXCEPTION WHEN program_limit_exceeded THEN
	RETURN to_jsonb('the stdout of its completed steps is over what one JSON value holds: ' || SQLERRM);
END
$$;

/* ----------------------------------------------------- client functions */

CREATE FUNCTION bgexec.submit(
	kind text, payload jsonb DEFAULT '{}', queue text DEFAULT 'default',
	priority int DEFAULT 0, run_after timestamptz DEFAULT now(),
	max_attempts int DEFAULT NULL, timeout interval DEFAULT NULL,
	idempotency_key text DEFAULT NULL, concurrency_key text DEFAULT NULL,
	unique_key text DEFAULT NULL)
	RETURNS bigint
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER  -- not sql: see append_event
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
DECLARE
	-- The owner is the role the session acts as, never a group role (_owner).
	v_owner name := bgexec._owner();
	v_id bigint;
	v_cap int;
	v_max_attempts int;
	v_timeout interval;
BEGIN
	-- The queue's settings row, read once (it was read for max_queued
	-- alone, in the IF's NOT EXISTS): its cap, and the defaults of a NULL
	-- max_attempts (else 1) and timeout (else none), which
	-- queue_defaults_sane keeps valid.  Without a row, all NULL.  A timeout
	-- of 0 is none, whatever the default.
	SELECT q.max_queued, q.default_max_attempts, q.default_timeout
	  INTO v_cap, v_max_attempts, v_timeout
	  FROM bgexec.queue q WHERE q.name = submit.queue;
	v_max_attempts := coalesce(submit.max_attempts, v_max_attempts, 1);
	v_timeout := CASE WHEN submit.timeout IS NULL THEN v_timeout
	                  WHEN bgexec._interval_zero(submit.timeout) THEN NULL ELSE submit.timeout END;
	-- The common submit in one function: no idempotency key, a queue
	-- without max_queued, and arguments that pass _check_submit's cheap
	-- tests.  The two nested PL/pgSQL calls with their SET clauses cost a
	-- lone submit 0.04-0.05 ms, a tenth of its time to its row, and one
	-- connection 9-16 % of its submits per second (bench/README,
	-- twenty-third round).  Anything else, a bad argument too, goes
	-- through _submit_one, whose _check_submit raises the precise error in
	-- its order; the cheap tests are all of its tests but the last,
	-- _validate_payload, called here as there.
	IF idempotency_key IS NULL AND unique_key IS NULL
	   AND coalesce(bgexec._valid_name(kind, 128) AND bgexec._valid_name(queue, 63)
	                AND payload IS NOT NULL AND priority IS NOT NULL
	                AND (run_after IS NULL OR isfinite(run_after))
	                AND v_max_attempts >= 1
	                AND (v_timeout IS NULL
	                     OR bgexec._interval_positive(v_timeout)
	                        AND bgexec._interval_within(v_timeout, interval '100 years'))
	                AND (concurrency_key IS NULL OR length(concurrency_key) BETWEEN 1 AND 512),
	                false)
	   AND v_cap IS NULL THEN
		PERFORM bgexec._validate_payload(kind, payload);
		INSERT INTO bgexec.job (queue, kind, owner, priority, payload, max_attempts,
		                        run_after, timeout, concurrency_key)
		VALUES (submit.queue, submit.kind, v_owner, submit.priority, submit.payload,
		        v_max_attempts, greatest(submit.run_after, now()), v_timeout,
		        submit.concurrency_key)
		RETURNING id INTO v_id;
		-- As _submit_one: a NOTIFY and wakes for a job runnable now, a wake
		-- when it is due for one due later (one statement, as submit_many's).
		PERFORM CASE WHEN run_after IS NULL OR run_after <= now() THEN bgexec._jobs_ready(queue, 1)
		             ELSE bgexec._jobs_due(queue, run_after, 1) END;
		RETURN v_id;
	END IF;
	RETURN bgexec._submit_one(v_owner, kind, payload, queue, priority,
	                          run_after, max_attempts, timeout, idempotency_key,
	                          concurrency_key, p_unique_key => unique_key);
END
$$;
COMMENT ON FUNCTION bgexec.submit(text, jsonb, text, int, timestamptz, int, interval, text, text, text) IS
	'enqueues a job owned by the caller (transactional; idempotent per owner + idempotency_key; one active job per owner + unique_key)';

-- VOLATILE: the answer for one xid changes within a transaction when the
-- subtransaction that wrote it aborts.
CREATE FUNCTION bgexec._xid_is_current(xid) RETURNS boolean
	AS 'MODULE_PATHNAME', 'bgexec_xid_is_current'
	LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION bgexec._xid_is_current(xid) IS
	'whether the xid is this transaction''s or one of its live subtransactions''';

/* _inserted_here: whether this transaction inserted the job, that is, whether
 * a submit with an idempotency key created it rather than returned an existing
 * job.  VOLATILE, so it reads with a snapshot taken after the submit: it sees a
 * job that a concurrent first submit of the same key committed while this one
 * waited, which a read in the submit's own statement cannot (the gateway's
 * 201 / 200).  Under RLS the caller sees its own jobs only, and those are the
 * ones submit returns.
 * The row's version written here (xmin: this transaction or a subtransaction
 * of it, a savepoint's too) by the transaction that created it (created_at,
 * its start): an xmin alone was true for an older job this transaction
 * stopped, resumed or retried before its submit returned that job. */
CREATE FUNCTION bgexec._inserted_here(job_id bigint) RETURNS boolean
	LANGUAGE sql VOLATILE
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
	SELECT EXISTS (SELECT FROM bgexec.job j
	                WHERE j.id = _inserted_here.job_id
	                  AND bgexec._xid_is_current(j.xmin)
	                  AND j.created_at OPERATOR(pg_catalog.=) pg_catalog.now())
$$;

/* _element_failing: the position (0-based) of the first element of a
 * submit_many array whose own checks raise p_state with message p_msg;
 * NULL when none does (the error was not one element's: a full queue).
 * Runs only after submit_many failed, one read-only subtransaction per
 * element. */
CREATE FUNCTION bgexec._element_failing(jobs jsonb, p_state text, p_msg text) RETURNS bigint
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
DECLARE
	x record;
BEGIN
	FOR x IN SELECT t.e, t.ord FROM jsonb_array_elements(jobs) WITH ORDINALITY AS t(e, ord) ORDER BY t.ord LOOP
		BEGIN
			PERFORM bgexec._check_submit(x.e->>'kind', coalesce(x.e->'payload', '{}'),
			                             coalesce(x.e->>'queue', 'default'),
			                             coalesce((x.e->>'priority')::int, 0),
			                             coalesce((x.e->>'run_after')::timestamptz, now()),
			                             (x.e->>'max_attempts')::int,
			                             (x.e->>'timeout')::interval, x.e->>'idempotency_key',
			                             x.e->>'concurrency_key', x.e->>'unique_key');
		EXCEPTION WHEN OTHERS THEN
			IF SQLSTATE = p_state AND SQLERRM = p_msg THEN
				RETURN x.ord - 1;
			END IF;
		END;
	END LOOP;
	RETURN NULL;
END
$$;

CREATE FUNCTION bgexec.submit_many(jobs jsonb) RETURNS SETOF bigint
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, bgexec, pg_temp
	SET enable_seqscan = off
	SET jit = off
	AS $$
DECLARE
	v_owner name := bgexec._owner();
	v_bad text;
	v_limit bigint;
	v_state text;
	v_msg text;
	v_detail text;
	v_hint text;
	v_at bigint;
	v_field text;
	v_name text;
	v_elem jsonb;
	v_huge boolean;
	v_ids bigint[];
	v_el record;
	v_cap int;
BEGIN
	IF jobs IS NULL OR jsonb_typeof(jobs) <> 'array' THEN
		RAISE EXCEPTION 'jobs must be a JSON array of objects'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	-- The shape of each element, naming the first bad one: an object of
	-- submit's arguments; both keys strings (the set-based path below is
	-- chosen by the type of idempotency_key, and read any other type as no
	-- key); a payload given as null refused, as submit refuses it.  A null
	-- for any other field means its default.
	SELECT x.bad INTO v_bad FROM (
		SELECT t.ord, CASE
		         WHEN jsonb_typeof(t.e) <> 'object' THEN
		           format('jobs[%s]: must be a JSON object', t.ord - 1)
		         WHEN t.unknown IS NOT NULL THEN
		           format('jobs[%s]: unknown field %s', t.ord - 1, quote_literal(t.unknown))
		         WHEN jsonb_typeof(t.e->'idempotency_key') NOT IN ('string', 'null') THEN
		           format('jobs[%s]: idempotency_key must be a string', t.ord - 1)
		         WHEN jsonb_typeof(t.e->'concurrency_key') NOT IN ('string', 'null') THEN
		           format('jobs[%s]: concurrency_key must be a string', t.ord - 1)
		         WHEN jsonb_typeof(t.e->'unique_key') NOT IN ('string', 'null') THEN
		           format('jobs[%s]: unique_key must be a string', t.ord - 1)
		         WHEN jsonb_typeof(t.e->'payload') = 'null' THEN
		           format('jobs[%s]: payload must be a JSON object', t.ord - 1)
		       END AS bad
		  FROM (SELECT a.e, a.ord,
		               bgexec._unknown_key(a.e, '{kind,payload,queue,priority,run_after,max_attempts,timeout,idempotency_key,concurrency_key,unique_key}') AS unknown
		          FROM jsonb_array_elements(jobs) WITH ORDINALITY AS a(e, ord)) t) x
	 WHERE x.bad IS NOT NULL
	 ORDER BY x.ord
	 LIMIT 1;
	IF FOUND THEN
		RAISE EXCEPTION '%', v_bad
			USING ERRCODE = 'invalid_parameter_value',
			      HINT = 'each element must be an object with the arguments of bgexec.submit';
	END IF;
	-- An error of one element's fields is named by its position (jobs[3]:
	-- kind must be ...), found again after the fact (_element_failing).
	BEGIN
	-- Set-based path when nothing needs per-row serialization (no
	-- idempotency or unique key, no admission cap): one INSERT for the whole array,
	-- one NOTIFY per queue.  Ids are assigned in array order.
	IF NOT EXISTS (SELECT 1 FROM jsonb_array_elements(jobs) e
	                WHERE jsonb_typeof(e->'idempotency_key') = 'string'
	                   OR jsonb_typeof(e->'unique_key') = 'string')
	   AND NOT EXISTS (SELECT 1 FROM bgexec.queue q
	                    WHERE q.max_queued IS NOT NULL
	                      AND q.name IN (SELECT coalesce(e->>'queue', 'default')
	                                       FROM jsonb_array_elements(jobs) e)) THEN
		-- Checks, set-based: an element that fails a cheap SQL test, is a
		-- workflow, or may be over the size limit goes through
		-- _check_submit, which raises the precise error; the rest are valid.
		-- A number past a double's range anywhere in the array, or a value
		-- nested deeper than a payload may be (512 levels; the array and
		-- its element are two more), one pass over it, sends every element
		-- there.
		v_limit := coalesce(pg_catalog.pg_size_bytes(
			current_setting('bgexec.max_payload_bytes', true)), 1048576);
		v_huge := NOT bgexec._json_fits(jobs, 514);
		PERFORM bgexec._check_submit(x.kind, coalesce(x.payload, '{}'),
		                             coalesce(x.queue, 'default'), coalesce(x.priority, 0),
		                             x.run_after, x.max_attempts, x.timeout, NULL,
		                             x.concurrency_key)
		   FROM ROWS FROM (jsonb_to_recordset(jobs) AS (
		          kind text, payload jsonb, queue text, priority int, run_after timestamptz,
		          max_attempts int, timeout interval, concurrency_key text))
		        WITH ORDINALITY AS x(kind, payload, queue, priority, run_after, max_attempts,
		                             timeout, concurrency_key, ord)
		  WHERE NOT coalesce(bgexec._valid_name(x.kind, 128)
		                     AND bgexec._valid_name(coalesce(x.queue, 'default'), 63)
		                     AND jsonb_typeof(coalesce(x.payload, '{}')) = 'object'
		                     AND (x.run_after IS NULL OR isfinite(x.run_after))
		                     AND coalesce(x.max_attempts, 1) >= 1
		                     AND (x.timeout IS NULL
		                          OR bgexec._interval_positive(x.timeout)
		                             AND bgexec._interval_within(x.timeout, interval '100 years')
		                          OR bgexec._interval_zero(x.timeout))
		                     AND (x.concurrency_key IS NULL
		                          OR length(x.concurrency_key) BETWEEN 1 AND 512), false)
		     OR x.kind = 'workflow'
		     OR v_huge
		     OR pg_catalog.pg_column_size(x.payload) > v_limit / 2
		  ORDER BY x.ord;
		-- A NULL max_attempts or timeout: the queue's default (else 1, none);
		-- a timeout of 0: none.
		RETURN QUERY
		WITH ins AS (
			INSERT INTO bgexec.job (queue, kind, owner, priority, payload, max_attempts,
			                        run_after, timeout, concurrency_key)
			SELECT coalesce(x.queue, 'default'), x.kind, v_owner, coalesce(x.priority, 0),
			       coalesce(x.payload, '{}'), coalesce(x.max_attempts, q.default_max_attempts, 1),
			       greatest(x.run_after, now()),
			       CASE WHEN x.timeout IS NULL THEN q.default_timeout
			            WHEN bgexec._interval_zero(x.timeout) THEN NULL ELSE x.timeout END,
			       x.concurrency_key
			  FROM ROWS FROM (jsonb_to_recordset(jobs) AS (
			         kind text, payload jsonb, queue text, priority int,
			         run_after timestamptz, max_attempts int, timeout interval,
			         concurrency_key text)) WITH ORDINALITY AS x(kind, payload, queue,
			           priority, run_after, max_attempts, timeout, concurrency_key, ord)
			  LEFT JOIN bgexec.queue q ON q.name = coalesce(x.queue, 'default')
			 ORDER BY x.ord
			RETURNING id)
		SELECT ins.id FROM ins ORDER BY ins.id;
		-- Per queue: its jobs runnable now (NOTIFY and wakes), and the 32
		-- earliest times of its jobs due later (the poll finds the rest).
		PERFORM CASE WHEN d.ra IS NULL THEN bgexec._jobs_ready(d.qn, d.n)
		             ELSE bgexec._jobs_due(d.qn, d.ra, d.n) END
		   FROM (SELECT x.qn, x.ra, count(*) AS n,
		                row_number() OVER (PARTITION BY x.qn ORDER BY x.ra NULLS FIRST) AS k
		           FROM (SELECT coalesce(e->>'queue', 'default') AS qn,  -- NULL: due now
		                        nullif(greatest((e->>'run_after')::timestamptz, now()), now()) AS ra
		                   FROM jsonb_array_elements(jobs) e) x
		          GROUP BY 1, 2) d
		  WHERE d.k <= 33;
		RETURN;
	END IF;
	-- One element at a time (_submit_one), each lock in one order for
	-- every caller: taken in array order, two calls naming two capped
	-- queues, or one owner's two idempotency keys, in opposite orders
	-- deadlocked (isolation submit-many-order).  So every element is
	-- checked first, in array order (the first bad one is named); then the
	-- admission lock of each capped queue is taken, by lock key; then the
	-- elements are submitted in key order (idempotency or unique key; of
	-- one text, the idempotency key first), the ids returned in
	-- array order.
	PERFORM bgexec._check_submit(e->>'kind', coalesce(e->'payload', '{}'),
	                             coalesce(e->>'queue', 'default'),
	                             coalesce((e->>'priority')::int, 0),
	                             coalesce((e->>'run_after')::timestamptz, now()),
	                             (e->>'max_attempts')::int,
	                             (e->>'timeout')::interval,
	                             e->>'idempotency_key', e->>'concurrency_key', e->>'unique_key')
	   FROM jsonb_array_elements(jobs) WITH ORDINALITY AS t(e, ord)
	  ORDER BY ord;
	PERFORM bgexec._require_read_committed(q.name, 'submit to'),
	        pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('bgexec.queue'),
	                                         pg_catalog.hashtext(q.name))
	   FROM bgexec.queue q
	  WHERE q.max_queued IS NOT NULL
	    AND q.name IN (SELECT coalesce(e->>'queue', 'default') FROM jsonb_array_elements(jobs) e)
	  ORDER BY pg_catalog.hashtext(q.name), q.name;
	v_ids := array_fill(NULL::bigint, ARRAY[jsonb_array_length(jobs)]);
	FOR v_el IN SELECT t.e, t.ord FROM jsonb_array_elements(jobs) WITH ORDINALITY AS t(e, ord)
	          ORDER BY coalesce(t.e->>'idempotency_key', t.e->>'unique_key') COLLATE "C",
	                   t.e->>'idempotency_key' IS NULL, t.ord
	LOOP
		v_ids[v_el.ord] := bgexec._submit_one(v_owner, v_el.e->>'kind', coalesce(v_el.e->'payload', '{}'),
		                                   coalesce(v_el.e->>'queue', 'default'),
		                                   coalesce((v_el.e->>'priority')::int, 0),
		                                   coalesce((v_el.e->>'run_after')::timestamptz, now()),
		                                   (v_el.e->>'max_attempts')::int,
		                                   (v_el.e->>'timeout')::interval,
		                                   v_el.e->>'idempotency_key', v_el.e->>'concurrency_key',
		                                   false, v_el.e->>'unique_key');
	END LOOP;
	-- Each capped queue this call added jobs to, counted once, now that
	-- they are all in: its lock, taken above, is held to commit, so the
	-- count sees every job admitted before it and each of this call's; over
	-- the cap, the call fails whole (nothing is admitted), as a count after
	-- each element made it fail.  A duplicate key's job is not added and,
	-- as in submit, is returned even from a full queue.
	SELECT q.name, q.max_queued INTO v_name, v_cap
	  FROM bgexec.queue q
	 WHERE q.max_queued IS NOT NULL
	   AND q.name IN (SELECT j.queue FROM unnest(v_ids) AS u(id)
	                    JOIN bgexec.job j ON j.id = u.id
	                   WHERE bgexec._inserted_here(u.id))
	   AND (SELECT count(*) FROM (
	          SELECT 1 FROM bgexec.job j
	           WHERE j.queue = q.name AND j.status = 'queued'
	           LIMIT q.max_queued::bigint + 1) d) > q.max_queued
	 ORDER BY pg_catalog.hashtext(q.name), q.name
	 LIMIT 1;
	IF FOUND THEN
		RAISE EXCEPTION 'queue "%" is full (max_queued %)', v_name, v_cap
			USING ERRCODE = 'configuration_limit_exceeded',
			      HINT = 'retry later, or raise the cap with bgexec.configure_queue()';
	END IF;
	RETURN QUERY SELECT u.id FROM unnest(v_ids) WITH ORDINALITY AS u(id, ord) ORDER BY u.ord;
	EXCEPTION WHEN OTHERS THEN
		GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_msg = MESSAGE_TEXT,
		                        v_detail = PG_EXCEPTION_DETAIL, v_hint = PG_EXCEPTION_HINT;
		v_at := bgexec._element_failing(jobs, v_state, v_msg);
		IF v_at IS NULL THEN
			RAISE;
		END IF;
		-- A field that does not convert to its argument's type (22P02,
		-- 22003, 22007, 22008: PostgreSQL's message names the type, not the
		-- field) is named too: the casts are tried one by one.
		v_field := NULL;
		v_elem := jobs->v_at::int;
		FOREACH v_name IN ARRAY ARRAY['priority', 'max_attempts', 'run_after', 'timeout'] LOOP
			BEGIN
				PERFORM CASE v_name WHEN 'run_after' THEN (v_elem->>v_name)::timestamptz::text
				                    WHEN 'timeout' THEN (v_elem->>v_name)::interval::text
				                    ELSE (v_elem->>v_name)::int::text END;
			EXCEPTION WHEN OTHERS THEN
				IF SQLSTATE = v_state AND SQLERRM = v_msg THEN
					v_field := v_name;
					EXIT;
				END IF;
			END;
		END LOOP;
		v_msg := format('jobs[%s]: %s%s', v_at, coalesce(v_field || ': ', ''), v_msg);
		-- RAISE takes no NULL option, and an empty one would show as an
		-- empty DETAIL or HINT line.
		IF v_detail <> '' AND v_hint <> '' THEN
			RAISE EXCEPTION '%', v_msg USING ERRCODE = v_state, DETAIL = v_detail, HINT = v_hint;
		ELSIF v_detail <> '' THEN
			RAISE EXCEPTION '%', v_msg USING ERRCODE = v_state, DETAIL = v_detail;
		ELSIF v_hint <> '' THEN
			RAISE EXCEPTION '%', v_msg USING ERRCODE = v_state, HINT = v_hint;
		END IF;
		RAISE EXCEPTION '%', v_msg USING ERRCODE = v_state;
	END;
END
$$;
COMMENT ON FUNCTION bgexec.submit_many(jsonb) IS
	'bulk submit: an array of objects with submit''s arguments; returns the ids in order';

-- _visible_job: locks and returns a job the caller may act on, or raises P0002
-- (22023 for a null id: no job was named).
CREATE FUNCTION bgexec._visible_job(p_job bigint) RETURNS bgexec.job
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
DECLARE
	j bgexec.job;
BEGIN
	IF p_job IS NULL THEN
		RAISE EXCEPTION 'job_id must not be null'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	-- Whose it is before the lock: another tenant's job must not make the
	-- caller wait on its row (and so tell that it exists and is busy).
	SELECT * INTO j FROM bgexec.job WHERE id = p_job;
	IF FOUND AND bgexec._can_see(j.owner) THEN
		SELECT * INTO j FROM bgexec.job WHERE id = p_job FOR UPDATE;
	END IF;
	IF NOT FOUND OR NOT bgexec._can_see(j.owner) THEN
		RAISE EXCEPTION 'job % does not exist', p_job
			USING ERRCODE = 'no_data_found';
	END IF;
	RETURN j;
END
$$;

/* stop: queued/suspended → cancelled now; running → stop requested (the
 * worker holding the lease is told via NOTIFY bgexec_stop and heartbeat
 * 'stop'); terminal → no-op.  Returns the status after the call. */
CREATE FUNCTION bgexec.stop(job_id bigint) RETURNS bgexec.job_status
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, bgexec, pg_temp
	SET enable_seqscan = off
	SET jit = off
	AS $$
DECLARE
	j bgexec.job := bgexec._visible_job(job_id);
	v_seq int;
BEGIN
	IF j.status IN ('queued', 'suspended') THEN
		RETURN bgexec._terminal(j.id, 'cancelled', NULL,
			jsonb_build_object('reason', 'stopped', 'message', 'stopped by ' || bgexec._caller()),
			p_was_running => false);
	ELSIF j.status = 'running' THEN
		IF j.stop_requested_at IS NULL THEN
			UPDATE bgexec.job x SET stop_requested_at = now(), last_seq = x.last_seq + 1
			 WHERE x.id = j.id
			RETURNING x.last_seq INTO v_seq;
			PERFORM bgexec._event(j.id, v_seq, 'stop_requested',
				jsonb_build_object('by', bgexec._caller()));
			IF coalesce(pg_catalog.current_setting('bgexec.notify_jobs', true), 'on') <> 'off' THEN
				PERFORM pg_catalog.pg_notify('bgexec_stop', j.id::text);
			END IF;
			PERFORM bgexec._wake_stop(j.lease_owner);
		END IF;
		RETURN 'running';
	END IF;
	RETURN j.status;
END
$$;
COMMENT ON FUNCTION bgexec.stop(bigint) IS
	'cancels a queued/suspended job, asks the worker of a running one to stop; no-op on terminal jobs';

/* resume: suspended → queued; the input becomes the output of the approval
 * step that suspended the job.  The attempt is not used up. */
CREATE FUNCTION bgexec.resume(job_id bigint, input jsonb DEFAULT NULL) RETURNS boolean
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, bgexec, pg_temp
	SET enable_seqscan = off
	SET jit = off
	AS $$
DECLARE
	j bgexec.job := bgexec._visible_job(job_id);
	v_seq int;
	v_step text;
	-- its size as the worker reads it, not as stored: a value from a table
	-- is compressed (20 MB of one repeated letter passed as 229 kB)
	v_size bigint := bgexec._raw_bytes(input);
	v_limit bigint := coalesce(pg_catalog.pg_size_bytes(
		current_setting('bgexec.max_payload_bytes', true)), 1048576);
BEGIN
	-- The input is the approval step's output, read back by every later run
	-- of the job: bounded as a payload is, with numbers the worker can read
	-- (JSON numbers as doubles) and nested no deeper than it reads (512
	-- levels): past either, every run of the job failed reading its
	-- completed steps, and retry could not mend it.
	IF v_size > v_limit THEN
		RAISE EXCEPTION 'input is % bytes, over bgexec.max_payload_bytes (%)', v_size, v_limit
			USING ERRCODE = 'program_limit_exceeded',
			      HINT = 'Pass a reference to large data instead, or raise bgexec.max_payload_bytes.';
	END IF;
	IF input IS NOT NULL THEN  -- as a payload's (_validate_payload): 22003, 54000
		PERFORM bgexec._json_fits(input, 512, 'input');
	END IF;
	IF j.status <> 'suspended' THEN
		RETURN false;
	END IF;
	SELECT e.data->>'step' INTO v_step FROM bgexec.job_event e
	 WHERE e.job_id = j.id AND e.kind = 'suspended'
	 ORDER BY e.seq DESC LIMIT 1;
	UPDATE bgexec.job x
	   SET status = 'queued', run_after = now(), last_seq = x.last_seq + 1
	 WHERE x.id = j.id
	RETURNING x.last_seq INTO v_seq;
	PERFORM bgexec._event(j.id, v_seq, 'resumed',
		jsonb_build_object('input', coalesce(input, 'null'), 'step', v_step,
		                   'by', bgexec._caller()));
	PERFORM bgexec._jobs_ready(j.queue, 1);
	RETURN true;
END
$$;
COMMENT ON FUNCTION bgexec.resume(bigint, jsonb) IS
	'resumes a suspended job; the input becomes the waiting approval step''s output';

/* retry: failed/cancelled/timed_out → queued with a fresh attempt budget
 * (manual re-run, dead-letter redrive).  Completed steps are not re-run.
 * A retry adds a queued job, so it is admitted as a submit is: with a
 * max_queued cap, under the queue's advisory lock (the one _submit_one
 * takes), and refused at the cap (53400).  The lock is taken before the
 * job's row lock, as submit takes it before its insert, so submits and
 * retries of one queue always lock in that order.  A job whose unique_key
 * another active job now holds is refused (23505, naming both). */
CREATE FUNCTION bgexec.retry(job_id bigint) RETURNS boolean
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, bgexec, pg_temp
	SET enable_seqscan = off
	SET jit = off
	AS $$
DECLARE
	j bgexec.job;
	v_queue text;
	v_cap int;
	v_depth bigint;
	v_seq int;
	v_other bigint;
	v_other_status bgexec.job_status;
BEGIN
	-- A job's queue never changes: read without a lock, to lock the queue
	-- first.  Only of a job the caller may act on: another role's job must
	-- raise _visible_job's P0002 below, not the isolation check's 0A000
	-- naming its queue, nor wait on its queue's lock.
	SELECT x.queue INTO v_queue FROM bgexec.job x
	 WHERE x.id = retry.job_id AND bgexec._can_see(x.owner);
	SELECT q.max_queued INTO v_cap FROM bgexec.queue q WHERE q.name = v_queue;
	IF v_cap IS NOT NULL THEN
		PERFORM bgexec._require_read_committed(v_queue, 'retry into');
		PERFORM pg_catalog.pg_advisory_xact_lock(
			pg_catalog.hashtext('bgexec.queue'), pg_catalog.hashtext(v_queue));
	END IF;
	j := bgexec._visible_job(job_id);
	IF j.status NOT IN ('failed', 'cancelled', 'timed_out') THEN
		RETURN false;
	END IF;
	-- Its unique key held by another active job (submitted after this one
	-- ended): a retry would make two, which job_unique_idx refuses.  Raised
	-- here naming the key and the job; a retry racing that job's submit
	-- raises the index's own 23505.
	IF j.unique_key IS NOT NULL THEN
		SELECT x.id, x.status INTO v_other, v_other_status FROM bgexec.job x
		 WHERE x.owner = j.owner AND x.unique_key = j.unique_key
		   AND x.status IN ('queued', 'running', 'suspended');
		IF FOUND THEN
			RAISE EXCEPTION 'job % has unique_key "%", held by active job %', j.id, j.unique_key, v_other
				USING ERRCODE = 'unique_violation',
				      DETAIL = format('job %s is %s', v_other, v_other_status),
				      HINT = 'retry it when that job has ended';
		END IF;
	END IF;
	IF v_cap IS NOT NULL THEN
		-- Under the queue's lock, so concurrent submitters count this job.
		SELECT count(*) INTO v_depth FROM (
			SELECT 1 FROM bgexec.job x
			 WHERE x.queue = v_queue AND x.status = 'queued' LIMIT v_cap) d;
		IF v_depth >= v_cap THEN
			RAISE EXCEPTION 'queue "%" is full (max_queued %)', v_queue, v_cap
				USING ERRCODE = 'configuration_limit_exceeded',
				      HINT = 'retry later, or raise the cap with bgexec.configure_queue()';
		END IF;
	END IF;
	UPDATE bgexec.job x
	   SET status = 'queued', attempt = 0, run_after = now(), finished_at = NULL,
	       result = NULL, stop_requested_at = NULL, deadline = NULL,
	       last_seq = x.last_seq + 1
	 WHERE x.id = j.id
	RETURNING x.last_seq INTO v_seq;
	PERFORM bgexec._count(j.queue, j.status, -1);
	PERFORM bgexec._event(j.id, v_seq, 'retry_scheduled',
		jsonb_build_object('manual', true, 'by', bgexec._caller(),
		                   'previous_status', j.status));
	PERFORM bgexec._jobs_ready(j.queue, 1);
	RETURN true;
END
$$;
COMMENT ON FUNCTION bgexec.retry(bigint) IS
	're-queues a failed, cancelled or timed_out job with a fresh attempt budget';

/* reschedule: moves a queued job of the caller's (row-level security and
 * _visible_job, as stop) to another run_after or priority; NULL keeps
 * either, and one must be given.  A run_after in the past is stored as
 * now(), as submit stores it.  Returns the job's run_after after the call.
 * Only a queued job: a running one (its claim committed first; a claim not
 * yet committed is waited for on the row lock, and then read as running),
 * a suspended one (resume() sets its run_after) or a terminal one raises
 * 55000 naming its status, nothing changed.  Writes a `rescheduled`
 * event, and wakes the queue's workers as submit does: now for a job
 * runnable now, at its time for one due later. */
CREATE FUNCTION bgexec.reschedule(job_id bigint, run_after timestamptz DEFAULT NULL,
                                  priority int DEFAULT NULL)
	RETURNS timestamptz
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, bgexec, pg_temp
	SET enable_seqscan = off
	SET jit = off
	AS $$
DECLARE
	j bgexec.job;
	v_seq int;
	v_run_after timestamptz;
BEGIN
	-- The arguments first: a bad one changes nothing and waits for no lock.
	IF reschedule.run_after IS NULL AND reschedule.priority IS NULL THEN
		RAISE EXCEPTION 'run_after or priority must be given'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF NOT isfinite(reschedule.run_after) THEN
		RAISE EXCEPTION 'run_after must be a finite timestamp'
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = format('run_after was %s', reschedule.run_after);
	END IF;
	j := bgexec._visible_job(job_id);
	IF j.status <> 'queued' THEN
		RAISE EXCEPTION 'job % is %: only a queued job can be rescheduled', j.id, j.status
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      DETAIL = format('status was %s', j.status);
	END IF;
	UPDATE bgexec.job x
	   SET run_after = CASE WHEN reschedule.run_after IS NULL THEN x.run_after
	                        ELSE greatest(reschedule.run_after, now()) END,
	       priority = coalesce(reschedule.priority, x.priority),
	       last_seq = x.last_seq + 1
	 WHERE x.id = j.id
	RETURNING x.last_seq, x.run_after INTO v_seq, v_run_after;
	PERFORM bgexec._event(j.id, v_seq, 'rescheduled',
		-- times in UTC, whatever the session's TimeZone (as run_schedule's key)
		jsonb_build_object('run_after', to_char(v_run_after AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
		                   'priority', coalesce(reschedule.priority, j.priority),
		                   'previous_run_after', to_char(j.run_after AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
		                   'previous_priority', j.priority,
		                   'by', bgexec._caller()));
	IF v_run_after <= now() THEN
		PERFORM bgexec._jobs_ready(j.queue, 1);
	ELSE
		PERFORM bgexec._jobs_due(j.queue, v_run_after, 1);
	END IF;
	RETURN v_run_after;
END
$$;
COMMENT ON FUNCTION bgexec.reschedule(bigint, timestamptz, int) IS
	'moves a queued job of the caller''s to another run_after (a past one is now()) or priority; returns its run_after';

/* schedule: creates or replaces the caller's schedule `name`: a job with
 * these fields (as submit() takes them, and checked as submit() checks
 * them) is submitted as the caller at every minute the five-field cron
 * expression matches on time_zone's wall clock (UTC by default), while a
 * worker or the watchdog runs reconcile().  overlap false skips a tick
 * while the job of the last one is still queued, running or suspended.
 * Returns the first time it will fire.  Replacing a schedule keeps its
 * history (last_run_at, last_job_id) and whether it is paused, and
 * recomputes its next run from now. */
CREATE FUNCTION bgexec.schedule(name text, cron text, kind text, payload jsonb DEFAULT '{}',
                                queue text DEFAULT 'default', priority int DEFAULT 0,
                                max_attempts int DEFAULT NULL, timeout interval DEFAULT NULL,
                                concurrency_key text DEFAULT NULL, time_zone text DEFAULT 'UTC',
                                overlap boolean DEFAULT true)
	RETURNS timestamptz
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
DECLARE
	v_owner name := bgexec._owner();
	v_next timestamptz;
BEGIN
	IF schedule.name IS NULL OR NOT bgexec._valid_name(schedule.name, 128) THEN
		RAISE EXCEPTION 'name must be 1-128 characters: ASCII letters, digits, _ . : -'
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = format('name was %L', schedule.name);
	END IF;
	IF schedule.cron IS NULL THEN
		RAISE EXCEPTION 'cron must not be null' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF schedule.time_zone IS NULL THEN
		RAISE EXCEPTION 'time_zone must not be null' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF schedule.overlap IS NULL THEN
		RAISE EXCEPTION 'overlap must not be null' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	-- The clock, not the transaction's start: in a transaction older than
	-- a tick the watchdog has fired since, now() gave that tick again, past
	-- already, and it fired a second time (its key named the old job).
	v_next := bgexec._cron_next(schedule.cron, clock_timestamp(), schedule.time_zone);
	PERFORM bgexec._check_submit(schedule.kind, schedule.payload, schedule.queue,
	                             schedule.priority, now(), schedule.max_attempts,
	                             schedule.timeout, NULL, schedule.concurrency_key);
	INSERT INTO bgexec.schedule AS x (owner, name, cron, kind, payload, queue, priority,
	                                  max_attempts, timeout, concurrency_key, time_zone,
	                                  overlap, next_run_at)
	VALUES (v_owner, schedule.name, schedule.cron, schedule.kind, schedule.payload,
	        schedule.queue, schedule.priority, schedule.max_attempts, schedule.timeout,
	        schedule.concurrency_key, schedule.time_zone, schedule.overlap, v_next)
	ON CONFLICT ON CONSTRAINT schedule_pkey DO UPDATE
	   SET cron = excluded.cron, kind = excluded.kind, payload = excluded.payload,
	       queue = excluded.queue, priority = excluded.priority,
	       max_attempts = excluded.max_attempts, timeout = excluded.timeout,
	       concurrency_key = excluded.concurrency_key, time_zone = excluded.time_zone,
	       overlap = excluded.overlap, last_error = NULL,
	       -- again, after the wait for the row: the watchdog may have fired
	       -- a tick meanwhile
	       next_run_at = bgexec._cron_next(excluded.cron, clock_timestamp(), excluded.time_zone)
	RETURNING x.next_run_at INTO v_next;
	RETURN v_next;
END
$$;
COMMENT ON FUNCTION bgexec.schedule(text, text, text, jsonb, text, int, int, interval, text, text, boolean) IS
	'creates or replaces the caller''s recurring job (five-field cron on time_zone''s clock); returns its first run';

/* unschedule: deletes the caller's schedule `name`; false when there was none.
 * Jobs it already submitted are left alone. */
CREATE FUNCTION bgexec.unschedule(name text) RETURNS boolean
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
BEGIN
	IF unschedule.name IS NULL THEN
		RAISE EXCEPTION 'name must not be null' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	DELETE FROM bgexec.schedule x WHERE x.owner = bgexec._owner() AND x.name = unschedule.name;
	RETURN FOUND;
END
$$;
COMMENT ON FUNCTION bgexec.unschedule(text) IS
	'deletes the caller''s recurring job; jobs it submitted stay';

/* pause_schedule: the caller's schedule `name` fires nothing until
 * resume_schedule(); its definition and history stay, and so do the jobs it
 * already submitted.  False when there is no such schedule; pausing a
 * paused one is a no-op. */
CREATE FUNCTION bgexec.pause_schedule(name text) RETURNS boolean
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
BEGIN
	IF pause_schedule.name IS NULL THEN
		RAISE EXCEPTION 'name must not be null' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	UPDATE bgexec.schedule x SET paused = true
	 WHERE x.owner = bgexec._owner() AND x.name = pause_schedule.name;
	RETURN FOUND;
END
$$;
COMMENT ON FUNCTION bgexec.pause_schedule(text) IS
	'stops the caller''s recurring job from firing until resume_schedule; false when there is none';

/* resume_schedule: the caller's paused schedule `name` fires again, from its
 * next minute after now: the ticks that came while it was paused are not
 * fired.  Returns its next run (also for a schedule that was not paused,
 * left as it was); NULL when there is no such schedule. */
CREATE FUNCTION bgexec.resume_schedule(name text) RETURNS timestamptz
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
DECLARE
	v_next timestamptz;
BEGIN
	IF resume_schedule.name IS NULL THEN
		RAISE EXCEPTION 'name must not be null' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	UPDATE bgexec.schedule x
	   SET paused = false,
	       next_run_at = CASE WHEN x.paused
	                          THEN bgexec._cron_next(x.cron, clock_timestamp(), x.time_zone)  -- as schedule()
	                          ELSE x.next_run_at END
	 WHERE x.owner = bgexec._owner() AND x.name = resume_schedule.name
	RETURNING x.next_run_at INTO v_next;
	RETURN v_next;
END
$$;
COMMENT ON FUNCTION bgexec.resume_schedule(text) IS
	'lets the caller''s paused recurring job fire again from its next minute after now; returns that run, NULL when there is none';

/* run_schedule: submits the job of the caller's schedule `name` now, out
 * of turn, paused or not (a tick's job, for a test or a rerun), and records
 * it as the last run (last_run_at now, last_job_id); the next tick stays
 * where it was.  Its idempotency key names the moment
 * (schedule:NAME@manual:TIME).  With overlap false it is refused (55006)
 * while the last run's job is unfinished, as a tick would be skipped; a full
 * queue raises 53400 as submit does.  Returns the job's id; NULL when there
 * is no such schedule. */
CREATE FUNCTION bgexec.run_schedule(name text) RETURNS bigint
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
DECLARE
	s bgexec.schedule;
	v_last bgexec.job_status;
	v_last_key text;
	v_key text;
	v_job bigint;
BEGIN
	IF run_schedule.name IS NULL THEN
		RAISE EXCEPTION 'name must not be null' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	SELECT x.* INTO s FROM bgexec.schedule x
	 WHERE x.owner = bgexec._owner() AND x.name = run_schedule.name
	   FOR UPDATE;
	IF NOT FOUND THEN
		RETURN NULL;
	END IF;
	v_key := 'schedule:' || s.name || '@manual:'
	         || to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"');
	IF NOT s.overlap THEN
		SELECT j.status, j.idempotency_key INTO v_last, v_last_key
		  FROM bgexec.job j WHERE j.id = s.last_job_id;
		-- unfinished (a purged job: NULL, no), and not this transaction's
		-- own run, which the key returns again
		IF NOT bgexec._is_terminal(v_last) AND v_last_key IS DISTINCT FROM v_key THEN
			RAISE EXCEPTION 'schedule "%" does not overlap: job % of its last run is still %',
			                s.name, s.last_job_id, v_last
				USING ERRCODE = 'object_in_use';
		END IF;
	END IF;
	v_job := bgexec._submit_one(s.owner, s.kind, s.payload, s.queue, s.priority, now(),
		s.max_attempts, s.timeout, v_key, s.concurrency_key);
	UPDATE bgexec.schedule x SET last_run_at = now(), last_job_id = v_job, last_error = NULL
	 WHERE x.owner = s.owner AND x.name = s.name;
	RETURN v_job;
END
$$;
COMMENT ON FUNCTION bgexec.run_schedule(text) IS
	'submits the caller''s recurring job now, out of turn; returns the job id, NULL when there is none';

/* events: the job's events after after_seq, in seq order, max_events of
 * them at most (NULL: all).  A reader replaying a long log in batches passes
 * max_events: RETURN QUERY builds the whole set before the caller's LIMIT
 * applies, so batches of 1000 read with an outer LIMIT cost the whole rest
 * of the log each (a 100 000-event job: 62 ms a batch from seq 2000, 10 ms
 * from seq 90 000). */
CREATE FUNCTION bgexec.events(job_id bigint, after_seq int DEFAULT 0, max_events int DEFAULT NULL)
	RETURNS SETOF bgexec.job_event
	LANGUAGE plpgsql STABLE SECURITY DEFINER
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
DECLARE
	v_owner name;
BEGIN
	IF events.job_id IS NULL THEN
		RAISE EXCEPTION 'job_id must not be null'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	SELECT owner INTO v_owner FROM bgexec.job WHERE id = events.job_id;
	IF NOT FOUND OR NOT bgexec._can_see(v_owner) THEN
		RAISE EXCEPTION 'job % does not exist', events.job_id
			USING ERRCODE = 'no_data_found';
	END IF;
	IF max_events < 0 THEN
		RAISE EXCEPTION 'max_events must not be negative'
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = format('max_events was %s', max_events);
	END IF;
	RETURN QUERY
	SELECT e.* FROM bgexec.job_event e
	 WHERE e.job_id = events.job_id AND e.seq > coalesce(after_seq, 0)
	 ORDER BY e.seq
	 LIMIT max_events;
END
$$;
COMMENT ON FUNCTION bgexec.events(bigint, int, int) IS
	'replays a job''s events after a seq, in seq order, max_events at most (the resume cursor of every reader)';

/* purge: deletes the caller's terminal jobs finished before now() -
 * older_than, with their events (the job_deleted trigger).  With max_jobs,
 * at most that many, oldest first, passing over rows another transaction
 * holds (a retry in flight, a concurrent purge): a caller deletes a large
 * backlog in short transactions, SELECT bgexec.purge('30 days', 10000) until
 * it returns less than 10000, as the watchdog's retention does.  With
 * statuses, only jobs that ended so: completed jobs kept a day, failures a
 * month (River's retention per state).  The jobs of other statuses past
 * the cutoff are read again by each such purge (finished_at's index). */
CREATE FUNCTION bgexec.purge(older_than interval, max_jobs int DEFAULT NULL,
                             statuses bgexec.job_status[] DEFAULT NULL) RETURNS bigint
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, bgexec, pg_temp
	SET enable_seqscan = off
	SET jit = off
	AS $$
DECLARE
	v_n bigint;
	v_caller name;
BEGIN
	-- No part negative either: '-1 mon +31 days' compares as a day, but in
	-- a 31-day month its cutoff is now(), and '-1 mon +30 days 1 hour' put
	-- it in the future (every terminal job deleted).  Zero is zero in every
	-- part: '1 mon -30 days' compares equal to it, and on 1 March its cutoff
	-- was 3 March.  (As text: every part shows; the session's style both.)
	IF older_than IS NULL
	   OR NOT (older_than::text = (interval '0')::text OR bgexec._interval_positive(older_than))
	   OR NOT bgexec._interval_within(older_than, interval '100 years') THEN
		RAISE EXCEPTION 'older_than must be a non-negative interval of at most 100 years, no part of it negative'
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = format('older_than was %s', coalesce(older_than::text, 'null'));
	END IF;
	IF max_jobs < 1 THEN
		RAISE EXCEPTION 'max_jobs must be at least 1, or null for every job'
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = format('max_jobs was %s', max_jobs);
	END IF;
	IF pg_catalog.cardinality(statuses) = 0
	   OR pg_catalog.array_position(statuses, NULL) IS NOT NULL
	   OR statuses && '{queued,running,suspended}'::bgexec.job_status[] THEN
		RAISE EXCEPTION 'statuses must be terminal statuses (completed, failed, cancelled, timed_out), or null for all of them'
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = format('statuses was %s', statuses);
	END IF;
	-- _can_see's two tests, each made once (_can_see(NULL) is its
	-- superuser test alone): a function with SET is never inlined, and
	-- called for each finished job of every owner it was most of a purge's
	-- time (a role with no jobs among 100 000 of another's: 5.6 s).  And
	-- in two statements, not one with "owner = caller OR superuser": that
	-- OR kept the owner test out of any index, so a client's purge read
	-- every owner's finished jobs past the cutoff (1 872 of its own among
	-- 2 M: 1.8-5.5 s) even with an index on owner (README "Tuning":
	-- job_owner_idx, or one on (owner, finished_at)), which it now uses.
	IF bgexec._can_see(NULL) THEN
		IF max_jobs IS NULL THEN
			WITH gone AS (
				DELETE FROM bgexec.job j WHERE j.finished_at < now() - bgexec._exact(older_than)
				   AND (statuses IS NULL OR j.status = ANY (statuses))
				RETURNING 1)
			SELECT count(*) INTO v_n FROM gone;
			RETURN v_n;
		END IF;
		RETURN bgexec._retention(older_than, max_jobs, statuses);
	END IF;
	v_caller := bgexec._caller();
	IF max_jobs IS NULL THEN
		WITH gone AS (
			DELETE FROM bgexec.job j
			 WHERE j.owner = v_caller AND j.finished_at < now() - bgexec._exact(older_than)
			   AND (statuses IS NULL OR j.status = ANY (statuses))
			RETURNING 1)
		SELECT count(*) INTO v_n FROM gone;
		RETURN v_n;
	END IF;
	-- As _retention: the batch's ids as an array, deleted by key.
	WITH gone AS (
		DELETE FROM bgexec.job j
		 WHERE j.id = ANY (ARRAY(
			SELECT id FROM bgexec.job
			 WHERE owner = v_caller AND finished_at < now() - bgexec._exact(older_than)
			   AND (statuses IS NULL OR status = ANY (statuses))
			 ORDER BY finished_at
			 LIMIT max_jobs
			   FOR UPDATE SKIP LOCKED))
		RETURNING 1)
	SELECT count(*) INTO v_n FROM gone;
	RETURN v_n;
END
$$;
COMMENT ON FUNCTION bgexec.purge(interval, int, bgexec.job_status[]) IS
	'deletes the caller''s terminal jobs (all, for a superuser) finished before now() - older_than, with their events; with max_jobs at most that many, oldest first, skipping locked rows; with statuses only jobs that ended so';

/* _list_jobs: a page of the caller's jobs, newest first (id < before),
 * of one queue, kind and set of statuses (null: any), lim at most: what
 * `bgexec jobs` and GET /v1/jobs (the dashboard's list) read.  The caller's
 * own jobs, every role's for one that row-level security passes over (a
 * superuser, BYPASSRLS, the table's owner): as reading bgexec.job directly.
 * SECURITY DEFINER so that the owner test is an ordinary qual: under
 * row-level security "status = ANY(...)" (enum equality, not leakproof) was
 * only a filter above the policy's, and a tenant whose newest jobs had not
 * the status read every owner's jobs (2.1 M jobs: 2.5-5 s, bench/README.md).
 * Planned for its arguments (EXECUTE), as one statement when one index
 * holds every status asked for (the three that ended badly share one).
 * Statuses of several indexes walk the newest 2 000 jobs first (recent
 * matches cost what one walk of the primary key did), then the older ones
 * by a branch per index, merged: as one statement a status with few of
 * the caller's jobs (queued,suspended) had the table read.  A queue with
 * statuses that ended badly alone reads job_ended_badly_idx (queue, id):
 * taking queue and status as independent, the planner chose
 * job_ended_badly_id_idx and filtered every queue's failed jobs (600 000
 * for an empty page: 2.5 s).  Its queue test is then a range, so that
 * (queue, id) is an order only that index gives, with sorting off (the
 * function's SET puts it back).  No owner index (README "Tuning":
 * job_owner_idx): a tenant's page reads its status's index or the
 * primary key, filtering the owner. */
CREATE FUNCTION bgexec._list_jobs(queue text, statuses bgexec.job_status[], before bigint, lim int, kind text)
	RETURNS SETOF bgexec.job
	LANGUAGE plpgsql STABLE SECURITY DEFINER
	SET search_path = pg_catalog, bgexec, pg_temp
	SET jit = off
	SET enable_sort = on
	AS $$
DECLARE
	v_where text := '';
	v_sql text := '';
	v_caller name := bgexec._caller();
	v_bad bgexec.job_status[];
	v_other bgexec.job_status[];
	v_found bigint;
	v_edge bigint;
BEGIN
	IF lim IS NULL OR lim < 1 OR lim > 1000 THEN
		RAISE EXCEPTION 'lim must be an integer from 1 to 1000'
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = format('lim was %s', coalesce(lim::text, 'null'));
	END IF;
	-- Whom row-level security passes over (a role not found: no one).
	IF NOT coalesce((SELECT r.rolsuper OR r.rolbypassrls OR pg_catalog.pg_has_role(r.oid, c.relowner, 'USAGE')
	                   FROM pg_catalog.pg_roles r, pg_catalog.pg_class c
	                  WHERE r.rolname = v_caller AND c.oid = 'bgexec.job'::pg_catalog.regclass), false) THEN
		v_where := v_where || ' AND j.owner = $6';
	END IF;
	IF kind IS NOT NULL THEN v_where := v_where || ' AND j.kind = $5'; END IF;
	IF queue IS NOT NULL THEN v_where := v_where || ' AND j.queue = $1'; END IF;
	IF before IS NOT NULL THEN v_where := v_where || ' AND j.id < $3'; END IF;
	IF statuses IS NULL THEN
		RETURN QUERY EXECUTE 'SELECT j.* FROM bgexec.job j WHERE true' || v_where || ' ORDER BY j.id DESC LIMIT $4'
			USING queue, statuses, before, lim, kind, v_caller;
		RETURN;
	END IF;
	v_bad := ARRAY(SELECT DISTINCT s FROM pg_catalog.unnest(statuses) s
	                WHERE s OPERATOR(pg_catalog.=) ANY ('{failed,cancelled,timed_out}'));
	v_other := ARRAY(SELECT DISTINCT s FROM pg_catalog.unnest(statuses) s
	                  WHERE NOT s OPERATOR(pg_catalog.=) ANY ('{failed,cancelled,timed_out}'));
	IF cardinality(v_bad) > 0 AND cardinality(v_other) = 0 AND queue IS NOT NULL THEN
		PERFORM pg_catalog.set_config('enable_sort', 'off', true);
		RETURN QUERY EXECUTE 'SELECT j.* FROM bgexec.job j WHERE j.status OPERATOR(pg_catalog.=) ANY ($2)'
			|| replace(v_where, 'j.queue = $1', 'j.queue >= $1 AND j.queue <= $1')
			|| ' ORDER BY j.queue DESC, j.id DESC LIMIT $4'
			USING queue, v_bad, before, lim, kind, v_caller;
		RETURN;
	ELSIF cardinality(v_other) = 0 OR (cardinality(v_bad) = 0 AND cardinality(v_other) = 1) THEN
		RETURN QUERY EXECUTE 'SELECT j.* FROM bgexec.job j WHERE j.status OPERATOR(pg_catalog.=) ANY ($2)'
			|| v_where || ' ORDER BY j.id DESC LIMIT $4'
			USING queue, v_bad || v_other, before, lim, kind, v_caller;
		RETURN;
	END IF;
	-- Statuses of several indexes: the newest 2 000 jobs (before before)
	-- first, walked until lim match, as one statement did; then the older
	-- ones, a branch per index.
	RETURN QUERY EXECUTE 'SELECT j.* FROM (SELECT w.* FROM bgexec.job w'
		|| CASE WHEN before IS NOT NULL THEN ' WHERE w.id < $3' ELSE '' END
		|| ' ORDER BY w.id DESC LIMIT 2000) j WHERE j.status OPERATOR(pg_catalog.=) ANY ($2)' || v_where
		|| ' ORDER BY j.id DESC LIMIT $4'
		USING queue, statuses, before, lim, kind, v_caller;
	GET DIAGNOSTICS v_found = ROW_COUNT;
	IF v_found >= lim THEN
		RETURN;
	END IF;
	EXECUTE 'SELECT id FROM bgexec.job' || CASE WHEN before IS NOT NULL THEN ' WHERE id < $1' ELSE '' END
		|| ' ORDER BY id DESC OFFSET 1999 LIMIT 1' INTO v_edge USING before;
	IF v_edge IS NULL THEN
		RETURN;  -- that was every job
	END IF;
	IF cardinality(v_bad) > 0 THEN
		v_sql := '(SELECT j.* FROM bgexec.job j WHERE j.status OPERATOR(pg_catalog.=) ANY ($2)'
		      || v_where || ' AND j.id < $7 ORDER BY j.id DESC LIMIT $4)';
	END IF;
	FOR i IN 1 .. cardinality(v_other) LOOP
		v_sql := v_sql || CASE WHEN v_sql = '' THEN '' ELSE ' UNION ALL ' END
		      || format('(SELECT j.* FROM bgexec.job j WHERE j.status OPERATOR(pg_catalog.=) %L::bgexec.job_status', v_other[i])
		      || v_where || ' AND j.id < $7 ORDER BY j.id DESC LIMIT $4)';
	END LOOP;
	-- Appended, then sorted ("+ 0": no Merge Append): under one, a branch
	-- was planned to start fast, and a status with fewer than lim matches
	-- walked the primary key whole instead of reading its index.
	RETURN QUERY EXECUTE 'SELECT u.* FROM (' || v_sql || ') u ORDER BY u.id + 0 DESC LIMIT $4'
		USING queue, v_bad, before, lim - v_found, kind, v_caller, v_edge;
END
$$;
COMMENT ON FUNCTION bgexec._list_jobs(text, bgexec.job_status[], bigint, int, text) IS
	'the caller''s jobs (every role''s for a superuser), newest first, before an id, of a queue, kind and statuses (null: any), lim (1-1000) at most';

/* _retry_batch: one batch of retry of many (`bgexec retry --queue Q`,
 * POST /v1/jobs/retry, the dashboard's "retry failed"; core/many.hpp calls
 * bgexec.retry on each): the caller's jobs (SECURITY INVOKER: row-level
 * security keeps a tenant to its own) that ended with one of statuses
 * (each failed, cancelled or timed_out, else 22023), of queue and kind
 * (null: any), id after after, the oldest lim (1-1000, else 22023).  One
 * walk in id order of the jobs that ended badly, statuses filtered, so a
 * batch reads its own jobs and those of the other two statuses among them.
 * With a queue, that walk is job_ended_badly_idx (queue, id): as one
 * statement, taking queue and status as independent (and the (id) index's
 * heap order as cheaper), the planner walked job_ended_badly_id_idx and
 * filtered every queue's jobs that ended badly: 90 000 per status for a
 * queue with none (315 000 jobs: 0.1 s warm, 0.5-1 s cold).  Its queue
 * test is then a range (= for the default collation, deterministic), so
 * that (queue, id) is an order only that index gives, with sorting off
 * (the function's SET puts it back). */
CREATE FUNCTION bgexec._retry_batch(queue text, kind text, statuses bgexec.job_status[], after bigint, lim int)
	RETURNS TABLE (job_id bigint, job_queue text)
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, bgexec, pg_temp
	SET jit = off
	SET enable_sort = on
	AS $$
DECLARE
	v_where text := '';
BEGIN
	IF lim IS NULL OR lim < 1 OR lim > 1000 THEN
		RAISE EXCEPTION 'lim must be an integer from 1 to 1000'
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = format('lim was %s', coalesce(lim::text, 'null'));
	END IF;
	IF EXISTS (SELECT FROM pg_catalog.unnest(statuses) s
	            WHERE s IS NULL OR NOT s OPERATOR(pg_catalog.=) ANY ('{failed,cancelled,timed_out}')) THEN
		RAISE EXCEPTION 'retry acts on failed, cancelled or timed_out jobs'
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = format('statuses were %s', statuses);
	END IF;
	IF kind IS NOT NULL THEN v_where := v_where || ' AND j.kind = $2'; END IF;
	IF after IS NOT NULL THEN v_where := v_where || ' AND j.id > $4'; END IF;
	IF queue IS NULL THEN
		RETURN QUERY EXECUTE 'SELECT j.id, j.queue FROM bgexec.job j WHERE j.status OPERATOR(pg_catalog.=) ANY ($3)'
			|| v_where || ' ORDER BY j.id LIMIT $5'
			USING queue, kind, statuses, after, lim;
	ELSE
		PERFORM pg_catalog.set_config('enable_sort', 'off', true);
		RETURN QUERY EXECUTE 'SELECT j.id, j.queue FROM bgexec.job j WHERE j.status OPERATOR(pg_catalog.=) ANY ($3)'
			|| ' AND j.queue >= $1 AND j.queue <= $1' || v_where || ' ORDER BY j.queue, j.id LIMIT $5'
			USING queue, kind, statuses, after, lim;
	END IF;
END
$$;
COMMENT ON FUNCTION bgexec._retry_batch(text, text, bgexec.job_status[], bigint, int) IS
	'the caller''s jobs (row-level security applies) that ended with one of statuses, of a queue and kind (null: any), after an id, oldest first, lim (1-1000) at most: one batch of retry of many';

/* _recount: rebuilds queue_count from the jobs themselves, for jobs inserted
 * or re-statused by hand outside the bgexec functions.  Not granted: the
 * extension owner's.  Locks job in SHARE mode, so every write to it waits
 * until the recount commits (one scan of the table).  Waits a second at
 * most for that lock (55P03): queued behind a transaction that wrote a job
 * and stays open (a client's stop() not committed), the lock request held
 * up every later write -- every worker's heartbeat, finish and claim --
 * for as long as that transaction stayed open. */
CREATE FUNCTION bgexec._recount() RETURNS bigint
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, bgexec, pg_temp
	-- the caller's own lock_timeout again on return (the SET LOCAL below
	-- is the function's alone)
	SET lock_timeout = '1s'
	AS $$
DECLARE
	v_n bigint;
BEGIN
	BEGIN
		LOCK TABLE bgexec.job IN SHARE MODE;
		SET LOCAL lock_timeout = 0;  -- the compaction lock below: as long as it takes
	EXCEPTION WHEN lock_not_available THEN
		RAISE EXCEPTION '_recount could not lock bgexec.job within a second: a transaction that wrote to it is open'
			USING ERRCODE = 'lock_not_available',
			      HINT = 'call it again once that transaction ends; pg_locks shows who holds bgexec.job';
	END;
	-- waits for a compaction in progress, whose new rows this DELETE must see
	PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('bgexec.queue_count'));
	DELETE FROM bgexec.queue_count;
	INSERT INTO bgexec.queue_count (queue, status, n)
	SELECT j.queue, j.status, count(*) FROM bgexec.job j
	 WHERE bgexec._is_terminal(j.status)
	 GROUP BY j.queue, j.status;
	GET DIAGNOSTICS v_n = ROW_COUNT;
	RETURN v_n;
END
$$;
COMMENT ON FUNCTION bgexec._recount() IS
	'rebuilds the terminal counts of queue_stats from the jobs (after hand edits); locks job in SHARE mode';

CREATE FUNCTION bgexec.configure_queue(
	name text, paused boolean DEFAULT NULL, max_queued int DEFAULT NULL,
	max_running int DEFAULT NULL, max_running_per_key int DEFAULT NULL,
	retry_base interval DEFAULT NULL, retry_cap interval DEFAULT NULL,
	rate_limit int DEFAULT NULL, rate_period interval DEFAULT NULL,
	default_max_attempts int DEFAULT NULL, default_timeout interval DEFAULT NULL)
	RETURNS bgexec.queue
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, bgexec, pg_temp
	AS $$
DECLARE
	q bgexec.queue;
	o bgexec.queue;
BEGIN
	IF configure_queue.name IS NULL THEN
		RAISE EXCEPTION 'name must not be null'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	-- A bad value is refused here, naming its parameter, with the SQLSTATE
	-- (23514) and the constraint name of the table's CHECK constraint it
	-- breaks, which still guards the row (the constraint's own message
	-- named neither the parameter nor the value).
	IF NOT bgexec._valid_name(configure_queue.name, 63) THEN
		RAISE EXCEPTION 'name must be 1-63 characters: ASCII letters, digits, _ . : -'
			USING ERRCODE = 'check_violation', CONSTRAINT = 'queue_name_valid',
			      DETAIL = format('name was %L', configure_queue.name);
	END IF;
	-- The job defaults as submit checks a job's own (22023 naming the
	-- parameter), before the row is created: a default_max_attempts of 1
	-- removes the queue's (1 is what a job gets without one), and a
	-- default_timeout of 0 (a job's timeout of 0 is none) removes that one.
	IF configure_queue.default_max_attempts < 1 THEN
		RAISE EXCEPTION 'default_max_attempts must be from 1 to 2147483647'
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = format('default_max_attempts was %s', configure_queue.default_max_attempts);
	END IF;
	IF configure_queue.default_timeout IS NOT NULL
	   AND NOT bgexec._interval_zero(configure_queue.default_timeout)
	   AND NOT (bgexec._interval_positive(configure_queue.default_timeout)
	            AND bgexec._interval_within(configure_queue.default_timeout, interval '100 years')) THEN
		RAISE EXCEPTION 'default_timeout must be a positive interval of at most 100 years, or 0 to remove it'
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = format('default_timeout was %s', configure_queue.default_timeout);
	END IF;
	INSERT INTO bgexec.queue AS x (name) VALUES (configure_queue.name)
	ON CONFLICT ON CONSTRAINT queue_pkey DO NOTHING;
	SELECT * INTO o FROM bgexec.queue x WHERE x.name = configure_queue.name FOR UPDATE;
	-- The values the row would hold: a parameter left NULL keeps its own.
	IF NOT bgexec._interval_positive(coalesce(configure_queue.retry_base, o.retry_base)) THEN
		RAISE EXCEPTION 'retry_base must be above zero, no part of it negative, got %',
			coalesce(configure_queue.retry_base, o.retry_base)
			USING ERRCODE = 'check_violation', CONSTRAINT = 'queue_backoff_sane';
	END IF;
	IF NOT (bgexec._interval_positive(coalesce(configure_queue.retry_cap, o.retry_cap))
	        AND bgexec._interval_within(coalesce(configure_queue.retry_cap, o.retry_cap), interval '100 years')) THEN
		RAISE EXCEPTION 'retry_cap must be above zero and at most 100 years, no part of it negative or over that, got %',
			coalesce(configure_queue.retry_cap, o.retry_cap)
			USING ERRCODE = 'check_violation', CONSTRAINT = 'queue_backoff_sane';
	END IF;
	IF coalesce(configure_queue.retry_cap, o.retry_cap) < coalesce(configure_queue.retry_base, o.retry_base) THEN
		RAISE EXCEPTION 'retry_cap must be at least retry_base, got retry_cap % and retry_base %',
			coalesce(configure_queue.retry_cap, o.retry_cap), coalesce(configure_queue.retry_base, o.retry_base)
			USING ERRCODE = 'check_violation', CONSTRAINT = 'queue_backoff_sane';
	END IF;
	IF NOT (coalesce(configure_queue.rate_period, o.rate_period) >= interval '1 millisecond'
	        AND bgexec._interval_positive(coalesce(configure_queue.rate_period, o.rate_period))
	        AND bgexec._interval_within(coalesce(configure_queue.rate_period, o.rate_period), interval '1 day')) THEN
		RAISE EXCEPTION 'rate_period must be from 1 millisecond to 1 day, no part of it negative or over that, got %',
			coalesce(configure_queue.rate_period, o.rate_period)
			USING ERRCODE = 'check_violation', CONSTRAINT = 'queue_rate_sane';
	END IF;
	UPDATE bgexec.queue x
	   SET paused = coalesce(configure_queue.paused, x.paused),
	       max_queued = CASE WHEN configure_queue.max_queued < 0 THEN NULL
	                         ELSE coalesce(configure_queue.max_queued, x.max_queued) END,
	       max_running = CASE WHEN configure_queue.max_running < 0 THEN NULL
	                          ELSE coalesce(configure_queue.max_running, x.max_running) END,
	       max_running_per_key = CASE WHEN configure_queue.max_running_per_key < 0 THEN NULL
	                          ELSE coalesce(configure_queue.max_running_per_key, x.max_running_per_key) END,
	       retry_base = coalesce(configure_queue.retry_base, x.retry_base),
	       retry_cap = coalesce(configure_queue.retry_cap, x.retry_cap),
	       rate_limit = CASE WHEN configure_queue.rate_limit < 0 THEN NULL
	                         ELSE coalesce(configure_queue.rate_limit, x.rate_limit) END,
	       rate_period = coalesce(configure_queue.rate_period, x.rate_period),
	       default_max_attempts = CASE WHEN configure_queue.default_max_attempts = 1 THEN NULL
	                                   ELSE coalesce(configure_queue.default_max_attempts, x.default_max_attempts) END,
	       default_timeout = CASE WHEN bgexec._interval_zero(configure_queue.default_timeout) THEN NULL
	                              ELSE coalesce(configure_queue.default_timeout, x.default_timeout) END,
	       -- A limit removed forgets its bucket; a new one starts full.  A
	       -- changed limit or period keeps the tokens left (claim reads
	       -- them capped at the limit).
	       rate_tokens = CASE WHEN configure_queue.rate_limit < 0 THEN NULL ELSE x.rate_tokens END,
	       rate_at = CASE WHEN configure_queue.rate_limit < 0 THEN NULL ELSE x.rate_at END
	 WHERE x.name = configure_queue.name
	RETURNING x.* INTO q;
	-- Unpaused, or a running cap or the rate limit raised or removed (or
	-- its period shortened): its queued jobs may be claimable now, and
	-- nothing else would say so; wake every waiting worker of the queue.
	-- Nothing else a call changes makes a job claimable (max_queued, the
	-- backoff and the job defaults concern submits and retries).
	IF NOT q.paused
	   AND (o.paused
	        OR (o.max_running IS NOT NULL
	            AND (q.max_running IS NULL OR q.max_running > o.max_running))
	        OR (o.max_running_per_key IS NOT NULL
	            AND (q.max_running_per_key IS NULL OR q.max_running_per_key > o.max_running_per_key))
	        OR (o.rate_limit IS NOT NULL
	            AND (q.rate_limit IS NULL OR q.rate_limit > o.rate_limit
	                 OR q.rate_period < o.rate_period))) THEN
		PERFORM bgexec._jobs_ready(q.name, 2147483647);
	END IF;
	RETURN q;
END
$$;
COMMENT ON FUNCTION bgexec.configure_queue(text, boolean, int, int, int, interval, interval, int, interval, int, interval) IS
	'creates or changes a queue''s settings (NULL keeps a setting; a negative cap removes it; default_max_attempts 1 and default_timeout 0 remove those defaults); administrators only';

/* ---------------------------------------------------------------- views */

-- _queue_names: the known queues and the live workers claiming from each,
-- without counting any job: a queue with a settings row, with terminal
-- counts in queue_count, or with an active job, found by one descent per
-- queue of the partial index of each active status (a loose index scan),
-- so the cost follows the number of queues, not the backlog.  queue_stats
-- lists these; GET /metrics (daemon/src/http/metrics.cpp) names a series
-- for each and counts the active jobs itself, as its login role under
-- row-level security: reading the names from queue_stats counted every
-- queued job a second time (a scrape took 60 ms with 100 000 queued as a
-- superuser, and 2 s as a tenant role, JIT and parallel workers
-- included).  Reads as its owner, as queue_stats: every tenant's queues.
CREATE VIEW bgexec._queue_names AS
	WITH RECURSIVE
	queued(queue) AS (
		(SELECT j.queue FROM bgexec.job j WHERE j.status = 'queued' ORDER BY j.queue LIMIT 1)
		UNION ALL
		SELECT (SELECT j.queue FROM bgexec.job j
		         WHERE j.status = 'queued' AND j.queue > q.queue ORDER BY j.queue LIMIT 1)
		  FROM queued q WHERE q.queue IS NOT NULL),
	running(queue) AS (
		(SELECT j.queue FROM bgexec.job j WHERE j.status = 'running' ORDER BY j.queue LIMIT 1)
		UNION ALL
		SELECT (SELECT j.queue FROM bgexec.job j
		         WHERE j.status = 'running' AND j.queue > q.queue ORDER BY j.queue LIMIT 1)
		  FROM running q WHERE q.queue IS NOT NULL),
	suspended(queue) AS (
		(SELECT j.queue FROM bgexec.job j WHERE j.status = 'suspended' ORDER BY j.queue LIMIT 1)
		UNION ALL
		SELECT (SELECT j.queue FROM bgexec.job j
		         WHERE j.status = 'suspended' AND j.queue > q.queue ORDER BY j.queue LIMIT 1)
		  FROM suspended q WHERE q.queue IS NOT NULL),
	-- Workers that claim from the queue: not stopped, a heartbeat within
	-- the minute (or the lease, when longer).  worker_stats' alive also
	-- counts a worker whose heartbeats stopped while a lease of its lives
	-- on; such a worker claims nothing, and testing it costs a scan of
	-- the running jobs per worker.
	claiming AS (
		SELECT qn AS queue, count(DISTINCT w.id) AS workers
		  FROM bgexec.worker w CROSS JOIN LATERAL unnest(w.queues) AS qn
		 WHERE w.stopped_at IS NULL AND w.heartbeat_at > bgexec._silent_since(w.info)
		   AND w.heartbeat_at <= now() + make_interval(secs => bgexec._lease_s(w.info))
		 GROUP BY qn),
	-- a queue whose terminal counts are not all 0
	names AS (
		SELECT name FROM bgexec.queue
		UNION SELECT c.queue FROM bgexec.queue_count c GROUP BY c.queue
		       HAVING coalesce(sum(c.n) FILTER (WHERE c.status = 'completed'), 0) <> 0
		           OR coalesce(sum(c.n) FILTER (WHERE c.status = 'failed'), 0) <> 0
		           OR coalesce(sum(c.n) FILTER (WHERE c.status = 'cancelled'), 0) <> 0
		           OR coalesce(sum(c.n) FILTER (WHERE c.status = 'timed_out'), 0) <> 0
		UNION SELECT queue FROM queued WHERE queue IS NOT NULL
		UNION SELECT queue FROM running WHERE queue IS NOT NULL
		UNION SELECT queue FROM suspended WHERE queue IS NOT NULL)
	SELECT n.name AS queue, coalesce(cl.workers, 0) AS workers
	  FROM names n LEFT JOIN claiming cl ON cl.queue = n.name;
COMMENT ON VIEW bgexec._queue_names IS
	'the queues queue_stats lists, with its workers, without counting their jobs (GET /metrics)';

-- Terminal counts from queue_count; queued, running and suspended jobs (and
-- the oldest runnable one) through their partial indexes: the cost follows
-- the active jobs and the number of queues, not the retained history.  A
-- run_after of -infinity (only a direct write can store one: submit refuses
-- it) has no age: it is left out of oldest_queued_age rather than failing
-- the view for every reader ("cannot subtract infinite timestamps").
CREATE VIEW bgexec.queue_stats AS
	WITH fin AS (
		SELECT c.queue,
		       coalesce(sum(c.n) FILTER (WHERE c.status = 'completed'), 0)::bigint AS completed,
		       coalesce(sum(c.n) FILTER (WHERE c.status = 'failed'), 0)::bigint AS failed,
		       coalesce(sum(c.n) FILTER (WHERE c.status = 'cancelled'), 0)::bigint AS cancelled,
		       coalesce(sum(c.n) FILTER (WHERE c.status = 'timed_out'), 0)::bigint AS timed_out
		  FROM bgexec.queue_count c GROUP BY c.queue),
	queued AS (
		SELECT j.queue, count(*) AS queued,
		       now() - min(j.run_after) FILTER (WHERE j.run_after <= now() AND isfinite(j.run_after))
		           AS oldest_queued_age
		  FROM bgexec.job j WHERE j.status = 'queued' GROUP BY j.queue),
	running AS (
		SELECT j.queue, count(*) AS running
		  FROM bgexec.job j WHERE j.status = 'running' GROUP BY j.queue),
	suspended AS (
		SELECT j.queue, count(*) AS suspended
		  FROM bgexec.job j WHERE j.status = 'suspended' GROUP BY j.queue)
	SELECT n.queue,
	       coalesce(q.paused, false) AS paused,
	       coalesce(qd.queued, 0) AS queued,
	       coalesce(r.running, 0) AS running,
	       coalesce(su.suspended, 0) AS suspended,
	       coalesce(f.completed, 0) AS completed,
	       coalesce(f.failed, 0) AS failed,
	       coalesce(f.cancelled, 0) AS cancelled,
	       coalesce(f.timed_out, 0) AS timed_out,
	       qd.oldest_queued_age,
	       q.max_queued, q.max_running, q.max_running_per_key,
	       n.workers,
	       q.rate_limit, CASE WHEN q.rate_limit IS NOT NULL THEN q.rate_period END AS rate_period
	  FROM bgexec._queue_names n
	  LEFT JOIN bgexec.queue q ON q.name = n.queue
	  LEFT JOIN fin f ON f.queue = n.queue
	  LEFT JOIN queued qd ON qd.queue = n.queue
	  LEFT JOIN running r ON r.queue = n.queue
	  LEFT JOIN suspended su ON su.queue = n.queue;
COMMENT ON VIEW bgexec.queue_stats IS
	'per queue: job counts by status (fleet-wide, all owners), age of the oldest runnable job, caps, live workers claiming from it';

-- alive: not stopped, its last heartbeat (written on the DB clock) no more
-- than a lease ahead of now(), and a heartbeat within a minute and its
-- lease or a lease of its still live.  A heartbeat further ahead was written
-- before a step of the server's clock back: counted, a worker that died
-- then stayed alive for the length of the step (and with a job running, for
-- as long as its lease, extended on the clock before the step).  A live
-- worker's next heartbeat (three a lease) writes now() and is counted again.
-- The running jobs are counted once for all workers: a lookup per worker
-- walked the index of every running job (no index has lease_owner), and
-- 1000 workers with 5000 jobs running took 1.8 s.  The join is removed
-- when neither column is read (the heartbeat's lookup of its own row).
CREATE VIEW bgexec.worker_stats AS
	SELECT w.id, w.host, w.pid, w.queues, w.concurrency, w.started_at, w.heartbeat_at,
	       w.stopped_at,
	       (w.stopped_at IS NULL
	        AND w.heartbeat_at <= now() + make_interval(secs => bgexec._lease_s(w.info))
	        AND (coalesce(r.live, false) OR w.heartbeat_at > bgexec._silent_since(w.info))) AS alive,
	       coalesce(r.n, 0) AS in_flight
	  FROM bgexec.worker w
	  LEFT JOIN (SELECT j.lease_owner, count(*) AS n, bool_or(j.lease_expires_at > now()) AS live
	               FROM bgexec.job j WHERE j.status = 'running'
	              GROUP BY j.lease_owner) r ON r.lease_owner = w.id;
COMMENT ON VIEW bgexec.worker_stats IS
	'per worker: liveness (a heartbeat within a minute and its lease, or a live lease; none with a heartbeat more than a lease ahead of the DB clock) and jobs in flight';

-- GET /metrics' gauges: the active jobs per queue and status, each read
-- once, as the caller (row-level security limits a tenant role to its own
-- jobs).  A function for its settings: under row-level security status is
-- no index condition (enum equality is not leakproof), the planner costed
-- the scans of the empty running and suspended sets like half the table,
-- and the scrape started parallel workers for each (100-300 ms apiece on a
-- busy host) and crossed jit_above_cost (160 ms of JIT).  A scrape every
-- 15 s needs neither.
CREATE FUNCTION bgexec._active_counts()
	RETURNS TABLE (queue text, status text, n bigint, oldest float8)
	LANGUAGE sql STABLE
	SET search_path = pg_catalog, bgexec, pg_temp
	SET enable_seqscan = off
	SET jit = off
	SET max_parallel_workers_per_gather = 0
	AS $$
	-- A run_after of -infinity has no age (now() minus it raises 22008).
	SELECT j.queue, 'queued', count(*),
	       extract(epoch FROM now() - min(j.run_after)
	               FILTER (WHERE j.run_after <= now() AND isfinite(j.run_after)))::float8
	  FROM bgexec.job j WHERE j.status = 'queued' GROUP BY j.queue
	UNION ALL
	SELECT j.queue, 'running', count(*), NULL FROM bgexec.job j
	 WHERE j.status = 'running' GROUP BY j.queue
	UNION ALL
	SELECT j.queue, 'suspended', count(*), NULL FROM bgexec.job j
	 WHERE j.status = 'suspended' GROUP BY j.queue
$$;
COMMENT ON FUNCTION bgexec._active_counts() IS
	'queued, running and suspended jobs per queue that the caller may read, and the oldest runnable one''s age (GET /metrics)';

/* ------------------------------------------------------------- pg_dump */

-- Jobs, events, queue settings and workers are user data: pg_dump must keep
-- them (invariant 1 survives a dump and restore), with the job ids'
-- sequence.  Not lease_seq nor lease_epoch: see lease_seq.
SELECT pg_catalog.pg_extension_config_dump('bgexec.job', '');
SELECT pg_catalog.pg_extension_config_dump('bgexec.job_event', '');
SELECT pg_catalog.pg_extension_config_dump('bgexec.queue', '');
SELECT pg_catalog.pg_extension_config_dump('bgexec.worker', '');
SELECT pg_catalog.pg_extension_config_dump('bgexec.schedule', '');
SELECT pg_catalog.pg_extension_config_dump('bgexec.queue_count', '');
SELECT pg_catalog.pg_extension_config_dump(
	pg_catalog.pg_get_serial_sequence('bgexec.job', 'id'), '');

/* ---------------------------------------------------------------- grants */

-- Row-level security: a client reading the tables directly sees only its own
-- jobs and their events.  Functions write as the extension owner (which
-- bypasses RLS) and check ownership themselves through _caller().
ALTER TABLE bgexec.job ENABLE ROW LEVEL SECURITY;
ALTER TABLE bgexec.job_event ENABLE ROW LEVEL SECURITY;
CREATE POLICY job_owner_read ON bgexec.job FOR SELECT
	USING (owner = current_user);
CREATE POLICY job_event_owner_read ON bgexec.job_event FOR SELECT
	USING (EXISTS (SELECT 1 FROM bgexec.job j
	                WHERE j.id = job_event.job_id AND j.owner = current_user));
ALTER TABLE bgexec.schedule ENABLE ROW LEVEL SECURITY;
CREATE POLICY schedule_owner_read ON bgexec.schedule FOR SELECT
	USING (owner = current_user);

-- Functions are executable by PUBLIC by default; every bgexec function is
-- revoked from PUBLIC and granted to exactly the role that needs it, so the
-- SECURITY DEFINER functions cannot be reached by unrelated roles.
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA bgexec FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA bgexec FROM PUBLIC;
REVOKE ALL ON SCHEMA bgexec FROM PUBLIC;

GRANT USAGE ON SCHEMA bgexec TO bgexec_client, bgexec_worker;
GRANT USAGE ON TYPE bgexec.job_status TO bgexec_client, bgexec_worker;
-- Clients read (never write) their own rows, under RLS.
GRANT SELECT ON bgexec.job, bgexec.job_event, bgexec.schedule TO bgexec_client;
GRANT SELECT ON bgexec.queue_stats, bgexec.worker_stats, bgexec.queue TO bgexec_client, bgexec_worker;
GRANT SELECT ON bgexec._queue_names TO bgexec_client, bgexec_worker;
-- as the caller, who must read bgexec.job: a client
GRANT EXECUTE ON FUNCTION bgexec._active_counts() TO bgexec_client;

GRANT EXECUTE ON FUNCTION
	bgexec.submit(text, jsonb, text, int, timestamptz, int, interval, text, text, text),
	bgexec.submit_many(jsonb),
	bgexec.stop(bigint),
	bgexec.resume(bigint, jsonb),
	bgexec.retry(bigint),
	bgexec.reschedule(bigint, timestamptz, int),
	bgexec.schedule(text, text, text, jsonb, text, int, int, interval, text, text, boolean),
	bgexec.unschedule(text),
	bgexec.pause_schedule(text),
	bgexec.resume_schedule(text),
	bgexec.run_schedule(text),
	bgexec.events(bigint, int, int),
	bgexec.purge(interval, int, bgexec.job_status[]),
	bgexec._caller(),
	bgexec._can_see(name),
	bgexec._inserted_here(bigint),
	bgexec._xid_is_current(xid),
	bgexec._raw_bytes(jsonb),
	bgexec._json_prefix(jsonb, int),
	bgexec._list_jobs(text, bgexec.job_status[], bigint, int, text),
	bgexec._retry_batch(text, text, bgexec.job_status[], bigint, int)
	TO bgexec_client;
-- worker_stats' liveness reads each worker's lease (pure functions).
GRANT EXECUTE ON FUNCTION bgexec._silent_since(jsonb), bgexec._lease_s(jsonb) TO bgexec_client, bgexec_worker;

GRANT EXECUTE ON FUNCTION
	bgexec.register_worker(text, text[], int, jsonb),
	bgexec.deregister_worker(text, jsonb),
	bgexec.claim(text, text[], int, interval, jsonb),
	bgexec.unclaim(text, bigint, bigint[], jsonb, text),
	bgexec.heartbeat(text, bigint[], interval, jsonb),
	bgexec.await_work(text, text[], int, interval, boolean),
	bgexec.await_claim(text, text[], int, interval, interval, boolean, int, jsonb),
	bgexec.append_event(bigint, bigint, text, jsonb, int),
	bgexec.append_events(bigint, bigint, jsonb, int),
	bgexec.finish(bigint, bigint, bgexec.job_status, jsonb),
	bgexec.finish_many(jsonb),
	bgexec.snooze(bigint, bigint, jsonb),
	bgexec.sleep_left(bigint, bigint, text),
	bgexec.reconcile(),
	bgexec._act_as(name),
	bgexec._step_session(bigint, bigint),
	bgexec._secret_step()
	TO bgexec_worker;
-- The step's statement runs as the job's owner, any role; the mark is the
-- right to call it (_step_completed).
GRANT EXECUTE ON FUNCTION bgexec._step_completed(jsonb) TO PUBLIC;
