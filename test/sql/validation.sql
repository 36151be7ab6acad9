-- validation: every rule of submit raises its documented SQLSTATE, names the field, and writes nothing.
\set SHOW_CONTEXT never
\set VERBOSITY default
SELECT count(*) AS jobs_before FROM bgexec.job \gset
-- a valid workflow: the example of DESIGN.md §4, and a diamond
SELECT bgexec.submit('workflow', '{"input": {"day": "2026-11-29"}, "steps": [
  {"id": "extract", "action": "export-orders", "with": {"day": "{{input.day}}"}},
  {"id": "count", "needs": ["extract"], "run": ["wc", "-l", "{{steps.extract.output.path}}"]},
  {"id": "gate", "needs": ["count"], "approval": {"prompt": "load {{steps.count.stdout}} rows?"}},
  {"id": "load", "needs": ["gate"], "sql": "select $1", "params": ["{{steps.extract.output.path}}"]}]}') > 0 AS ok;
SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sleep": 0}, {"id": "b", "needs": ["a"], "sleep": 0},
  {"id": "c", "needs": ["a"], "sleep": 0}, {"id": "d", "needs": ["b", "c"], "sleep": 0}]}') > 0 AS diamond_ok;
SELECT count(*) - :jobs_before AS inserted FROM bgexec.job;
SELECT count(*) AS jobs_before FROM bgexec.job \gset
-- kind: empty, bad characters
SELECT * FROM try($q$SELECT bgexec.submit('')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('no spaces')$q$);
-- queue name
SELECT * FROM try($q$SELECT bgexec.submit('noop', queue => 'bad queue')$q$);
-- the name rule (kinds 1-128, queues 1-63 characters of A-Z a-z 0-9 _ . : -) at its edges
SELECT bgexec._valid_name(n, m) AS ok, length(n) AS len, left(n, 12) AS name
  FROM (VALUES (repeat('k', 128), 128), (repeat('k', 129), 128), ('a.b:c_d-E9', 63),
               ('café', 63), (E'tab\tx', 63), ('x/y', 63), ('', 63), ('%', 63)) v(n, m);
SELECT * FROM try($q$SELECT bgexec.submit(repeat('k', 129))$q$);
SELECT * FROM try($q$SELECT bgexec.submit('café')$q$);
SELECT * FROM try($q$SELECT bgexec.submit_many('[{"kind": "noop", "queue": "ü"}]')$q$);
-- the table refuses a bad name even from a superuser writing directly
SELECT * FROM try($q$INSERT INTO bgexec.job (kind, owner) VALUES ('bad kind', 'x')$q$);
SELECT * FROM try($q$INSERT INTO bgexec.job (kind, owner, queue) VALUES ('noop', 'x', repeat('q', 64))$q$);
-- invariant 2: a lease (token, expiry, owner: all three) on running jobs only
SELECT * FROM try($q$INSERT INTO bgexec.job (kind, owner, lease) VALUES ('noop', 'x', 1)$q$);
SELECT * FROM try($q$INSERT INTO bgexec.job (kind, owner, lease_expires_at) VALUES ('noop', 'x', now())$q$);
SELECT * FROM try($q$INSERT INTO bgexec.job (kind, owner, status, lease, lease_expires_at) VALUES ('noop', 'x', 'running', 1, now())$q$);
-- Every rule of the job and job_event rows (their CHECK constraints call C,
-- extension/checks.c): the rule a row breaks, by the error's constraint
-- name, or 'accepted' (the row is rolled back either way).
CREATE FUNCTION pg_temp.rule(stmt text) RETURNS TABLE (sqlstate text, rule text) LANGUAGE plpgsql AS $$
DECLARE
	v_state text;
	v_rule text;
BEGIN
	EXECUTE stmt;
	RAISE EXCEPTION 'accepted' USING ERRCODE = 'P0001';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_rule = CONSTRAINT_NAME;
	RETURN QUERY SELECT v_state, CASE WHEN v_state = 'P0001' THEN SQLERRM ELSE v_rule END;
END $$;
SELECT t, (pg_temp.rule(format('INSERT INTO bgexec.job (kind, owner, status, lease, lease_owner, lease_expires_at,
                                 finished_at, result, error, attempt, max_attempts, timeout)
                                VALUES (''noop'', ''x'', %s)', v))).*
  FROM (VALUES
	('queued',                   $$'queued', NULL, NULL, NULL, NULL, NULL, NULL, 0, 1, NULL$$),
	('running',                  $$'running', -7, 'w', now(), NULL, NULL, NULL, 1, 1, '1 s'$$),
	('completed',                $$'completed', NULL, NULL, NULL, now(), '{}', NULL, 1, 1, NULL$$),
	('failed, no result',        $$'failed', NULL, NULL, NULL, now(), NULL, '{}', 1, 1, NULL$$),
	('running without lease',    $$'running', NULL, NULL, NULL, NULL, NULL, NULL, 1, 1, NULL$$),
	('running without owner',    $$'running', -7, NULL, now(), NULL, NULL, NULL, 1, 1, NULL$$),
	('running without expiry',   $$'running', -7, 'w', NULL, NULL, NULL, NULL, 1, 1, NULL$$),
	('suspended with lease',     $$'suspended', -7, 'w', now(), NULL, NULL, NULL, 0, 1, NULL$$),
	('queued, finished_at',      $$'queued', NULL, NULL, NULL, now(), NULL, NULL, 0, 1, NULL$$),
	('cancelled, no finished_at', $$'cancelled', NULL, NULL, NULL, NULL, NULL, NULL, 0, 1, NULL$$),
	('completed, no result',     $$'completed', NULL, NULL, NULL, now(), NULL, NULL, 1, 1, NULL$$),
	('attempt -1',               $$'queued', NULL, NULL, NULL, NULL, NULL, NULL, -1, 1, NULL$$),
	('max_attempts 0',           $$'queued', NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, NULL$$),
	('timeout 0',                $$'queued', NULL, NULL, NULL, NULL, NULL, NULL, 0, 1, '0 s'$$),
	('timeout -1 s',             $$'queued', NULL, NULL, NULL, NULL, NULL, NULL, 0, 1, '-1 s'$$),
	('timeout 1 mon -31 days',   $$'queued', NULL, NULL, NULL, NULL, NULL, NULL, 0, 1, '1 mon -31 days'$$),
	-- each part at most 100 years: claim adds it to now() (22008 past the
	-- end of time, for every claim of its queue)
	('timeout 1000000 years',    $$'queued', NULL, NULL, NULL, NULL, NULL, NULL, 0, 1, '1000000 years'$$),
	('timeout 36501 days',       $$'queued', NULL, NULL, NULL, NULL, NULL, NULL, 0, 1, '36501 days'$$),
	('timeout 876025 hours',     $$'queued', NULL, NULL, NULL, NULL, NULL, NULL, 0, 1, '876025 hours'$$),
	('timeout 100 years',        $$'queued', NULL, NULL, NULL, NULL, NULL, NULL, 0, 1, '100 years'$$),
	-- attempt and last_seq short of the int's end: claim adds one to each
	-- (22003 for every claim of its queue)
	('attempt 2147483647',       $$'queued', NULL, NULL, NULL, NULL, NULL, NULL, 2147483647, 2147483647, NULL$$),
	('attempt 2147483646',       $$'queued', NULL, NULL, NULL, NULL, NULL, NULL, 2147483646, 2147483647, NULL$$)) AS c(t, v);
SELECT t, (pg_temp.rule(format('INSERT INTO bgexec.job (kind, owner, last_seq) VALUES (''noop'', ''x'', %s)', v))).*
  FROM (VALUES ('last_seq 2147483647', '2147483647'), ('last_seq 2100000001', '2100000001'),
               ('last_seq -1', '-1'), ('last_seq 2100000000', '2100000000')) AS c(t, v);
-- rows at claim's bounds are left queued, and the jobs beside them claimed
-- (one failed the claim of them all), on the fast path and the capped one
BEGIN;
INSERT INTO bgexec.job (kind, owner, queue, attempt, max_attempts) VALUES ('noop', 'x', 'qbound', 2147483646, 2147483647);
INSERT INTO bgexec.job (kind, owner, queue, last_seq) VALUES ('noop', 'x', 'qbound', 2000000000);
INSERT INTO bgexec.job (kind, owner, queue) VALUES ('noop', 'x', 'qbound'), ('noop', 'x', 'qbound');
SELECT count(*) AS claimed FROM bgexec.claim('wbound', '{qbound}', 10);
SELECT count(*) FROM bgexec.configure_queue('qbound', max_running => 10);
INSERT INTO bgexec.job (kind, owner, queue) VALUES ('noop', 'x', 'qbound');
SELECT count(*) AS claimed FROM bgexec.claim('wbound', '{qbound}', 10);
SELECT status, count(*) FROM bgexec.job WHERE queue = 'qbound' GROUP BY 1 ORDER BY 1;
ROLLBACK;
-- a queue's rate bucket is finite: claim computes with it (22008 at
-- infinity, for every claim of the queue and of the others claimed with it)
SELECT t, (pg_temp.rule(format('INSERT INTO bgexec.queue (name, rate_limit, rate_tokens, rate_at) VALUES (''qb'', 5, %s)', v))).*
  FROM (VALUES ('rate_at -infinity', $$1, '-infinity'$$), ('rate_at infinity', $$1, 'infinity'$$),
               ('rate_tokens NaN', $$'NaN', now()$$), ('rate_tokens Infinity', $$'Infinity', now()$$),
               ('rate_tokens -1', $$-1, now()$$), ('rate_tokens 2.5', $$2.5, now()$$)) AS c(t, v);
-- the terminal statuses, and only they, carry finished_at: every status both ways
SELECT s, (pg_temp.rule(format($f$INSERT INTO bgexec.job (kind, owner, status, finished_at, result, lease, lease_owner, lease_expires_at)
                                 VALUES ('noop', 'x', %L, %s, '{}', %s)$f$, s,
                                CASE WHEN s IN ('completed', 'failed', 'cancelled', 'timed_out') THEN 'now()' ELSE 'NULL' END,
                                CASE WHEN s = 'running' THEN $$-7, 'w', now()$$ ELSE 'NULL, NULL, NULL' END))).rule AS as_documented,
       (pg_temp.rule(format($f$INSERT INTO bgexec.job (kind, owner, status, finished_at, result, lease, lease_owner, lease_expires_at)
                                 VALUES ('noop', 'x', %L, %s, '{}', %s)$f$, s,
                                CASE WHEN s IN ('completed', 'failed', 'cancelled', 'timed_out') THEN 'NULL' ELSE 'now()' END,
                                CASE WHEN s = 'running' THEN $$-7, 'w', now()$$ ELSE 'NULL, NULL, NULL' END))).rule AS the_other_way
  FROM unnest(enum_range(NULL::bgexec.job_status)) s;
-- an update is checked as an insert is
SELECT (pg_temp.rule($$UPDATE bgexec.job SET status = 'running' WHERE id = (SELECT min(id) FROM bgexec.job)$$)).*;
SELECT t, (pg_temp.rule(format('INSERT INTO bgexec.job_event (job_id, seq, kind) VALUES (-1, %s)', v))).*
  FROM (VALUES ('started', $$1, 'started'$$), ('timed_out', $$1, 'timed_out'$$), ('bogus kind', $$1, 'bogus'$$),
               ('kind with a suffix', $$1, 'started2'$$), ('kind cut short', $$1, 'start'$$), ('seq 0', $$0, 'log'$$)) AS c(t, v);
-- payload not an object
SELECT * FROM try($q$SELECT bgexec.submit('noop', '[1, 2]')$q$);
-- max_attempts < 1
SELECT * FROM try($q$SELECT bgexec.submit('noop', max_attempts => 0)$q$);
-- workflow: steps missing
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"input": {}}')$q$);
-- workflow: steps not an array / empty
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": {}}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": []}')$q$);
-- workflow: unknown top-level key
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sleep": 1}], "stpes": []}')$q$);
-- workflow: step not an object
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": ["a"]}')$q$);
-- workflow: missing / malformed id
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"sleep": 1}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "has space", "sleep": 1}]}')$q$);
-- workflow: duplicate id
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sleep": 1}, {"id": "a", "sleep": 2}]}')$q$);
-- workflow: no step kind / two step kinds / unknown step kind
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a"}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sleep": 1, "sql": "select 1"}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "shell": "rm -rf /"}]}')$q$);
-- workflow: a null payload
SELECT * FROM try($q$SELECT bgexec.submit('noop', NULL)$q$);
-- workflow: bad values per kind
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "action": ""}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "run": []}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "run": ["ls", 1]}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sql": ""}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sleep": -1}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "approval": "yes"}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sleep": 1, "params": [1]}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sleep": 1, "with": {}}]}')$q$);
-- workflow: an http step's shape (its URL is the worker's to check, against --allow-http)
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "http": "http://svc/"}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "http": {"method": "GET"}}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "http": {"url": ""}}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "http": {"url": "http://svc/", "method": 1}}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "http": {"url": "http://svc/", "headers": {"X": 1}}}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "http": {"url": "http://svc/", "timeout": 0}}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "http": {"url": "http://svc/", "follow": true}}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "http": {"url": "http://svc/"}, "env": {"A": "b"}}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "http": {"url": "http://svc/"}, "sleep": 1}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sql": "select 1"}, {"id": "b", "http": {"url": "http://svc/{{steps.a.output}}"}}]}')$q$);
BEGIN;
SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sql": "select 1"}, {"id": "b", "needs": ["a"], "timeout": 5, "http": {"url": "http://svc/{{steps.a.output}}", "method": "POST", "headers": {"X-Key": "{{secrets.K}}"}, "body": {"n": [1]}, "timeout": "30s"}}]}') > 0 AS accepted;
ROLLBACK;
-- workflow: the options any step may have, where they do something
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "run": ["true"], "timeout": 0}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "run": ["true"], "timeout": "1s"}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "approval": true, "timeout": 5}]}')$q$);
-- its hint: the job's timeout does not count while the job is suspended
SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "approval": true, "timeout": 5}]}');
-- sleep and timeout at most 3110400000 s (100 years): 1e400 is valid jsonb but
-- no double a worker can read, and failed the job as "not a JSON object"
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "run": ["true"], "timeout": 3110400000.5}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sleep": 1e400}]}')$q$);
-- any payload: a number past a double's range, at any depth, is refused
-- (22003; the worker reads numbers as doubles and failed the job at run);
-- the largest double passes (_json_fits at the bounds, last)
SELECT * FROM try($q$SELECT bgexec.submit('noop', '{"a": 1e400}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('export', '{"a": [{"b": -2e308}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"input": {"n": 1e400}, "steps": [{"id": "a", "sleep": 1}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "action": "x", "with": {"n": 1e400}}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('noop', '{"a": 1e400}', idempotency_key => 'val-huge')$q$);
SELECT * FROM try($q$SELECT bgexec.submit_many('[{"kind": "noop"}, {"kind": "noop", "payload": {"a": [[1e400]]}}]')$q$);
SELECT bgexec._json_fits(v::jsonb, 512) AS fits, v FROM (VALUES ('[1.7976931348623157e308]'),
  ('[-1.7976931348623157e308]'), ('[1.7976931348623158e308]'), ('{"a": "1e400"}'), ('[1, {"b": -1e309}]')) t(v);
-- any payload: nested deeper than the worker reads (512 levels, the top
-- object counted; 54000), refused: the worker failed every run of the job
SELECT * FROM try($q$SELECT bgexec.submit('noop', ('{"a": ' || repeat('[', 512) || repeat(']', 512) || '}')::jsonb)$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', ('{"steps": [{"id": "a", "action": "x", "with": ' || repeat('[', 600) || repeat(']', 600) || '}]}')::jsonb)$q$);
SELECT * FROM try($q$SELECT bgexec.submit_many(('[{"kind": "noop"}, {"kind": "noop", "payload": {"a": ' || repeat('[', 512) || repeat(']', 512) || '}}]')::jsonb)$q$);
SELECT * FROM try($q$SELECT bgexec.schedule('deep', '* * * * *', 'noop', ('{"a": ' || repeat('[', 512) || repeat(']', 512) || '}')::jsonb)$q$);
-- the deepest that passes: 512 levels, a raw scalar none
SELECT bgexec._json_fits(('{"a": ' || repeat('[', 511) || repeat(']', 511) || '}')::jsonb, 512) AS fits_512,
       bgexec._json_fits(('{"a": ' || repeat('[', 512) || repeat(']', 512) || '}')::jsonb, 512) AS fits_513,
       bgexec._json_fits('1', 0) AS scalar_at_0, bgexec._json_fits('[]', 0) AS array_at_0;
BEGIN;  -- (taken, then rolled back: this file writes nothing)
SELECT count(*) FROM bgexec.submit_many(('[{"kind": "noop", "queue": "val-deep", "payload": {"a": ' || repeat('[', 511) || repeat(']', 511) || '}}]')::jsonb);
ROLLBACK;
-- a step's timeout above 0 as a double: 1e-400 is above 0 as a number, but
-- the worker reads 0 and failed the step (its sleep of 1e-400 is 0: allowed)
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "run": ["true"], "timeout": 1e-400}]}')$q$);
SELECT bgexec._validate_payload('workflow', '{"steps": [{"id": "a", "run": ["true"], "timeout": 1e-300}]}') IS NULL AS valid;
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "run": ["true"], "env": ["A=1"]}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "run": ["true"], "env": {"A=B": "1"}}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "run": ["true"], "env": {"": "1"}}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "run": ["true"], "env": {"A": 1}}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "run": ["true"], "env": {"BGEXEC_QUEUE": "x"}}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "run": ["true"], "env": {"BGEXEC_WORKER_INSTANCE": "x"}}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sleep": 1, "env": {"A": "1"}}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sql": "select 1", "env": {"A": "1"}}]}')$q$);
BEGIN;  -- accepted (rolled back: this part of the file writes nothing)
SELECT count(*) FROM (SELECT bgexec.submit('workflow', '{"steps": [
  {"id": "a", "run": ["true"], "timeout": 1.5, "env": {"A": "{{input.x}}", "BGEXEC_OTHER": "ok"}},
  {"id": "b", "action": "x", "env": {}, "timeout": 2}, {"id": "c", "sql": "select 1", "timeout": 1},
  {"id": "d", "sleep": 3110400000, "timeout": 3110400000}]}')) s;
ROLLBACK;
-- workflow: a step's "if" is true, false or one template ("!" negating it);
-- text around the template, two templates, another type: 22023 naming it
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sleep": 1, "if": 1}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sleep": 1, "if": "yes"}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sleep": 1, "if": "go: {{input.go}}"}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sleep": 1, "if": "{{input.a}}{{input.b}}"}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sleep": 1, "if": "!!{{input.a}}"}]}')$q$);
-- a "}" after the template's: its first "}}" is not the last (was accepted)
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sleep": 1, "if": "{{input.a}}}"}]}')$q$);
-- "sleep" is seconds or one template (the worker renders it: a number or
-- a duration); text around it, or a duration written out, is refused
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sleep": "1s"}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sleep": "{{input.d}}s"}]}')$q$);
BEGIN;
SELECT bgexec.submit('workflow', '{"input": {"d": 1}, "steps": [{"id": "a", "sleep": "{{input.d}}"}]}') > 0 AS sleep_template_ok;
ROLLBACK;
-- its templates need the step they name
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sleep": 1}, {"id": "b", "sleep": "{{steps.a.output}}"}]}')$q$);
-- "Did you mean" names another step, never the step itself (which may not
-- name itself): no hint, or the next closest
SELECT bgexec.submit('workflow', '{"steps": [{"id": "load", "needs": ["lod"], "sleep": 0}]}');
SELECT bgexec.submit('workflow', '{"steps": [{"id": "loader", "sleep": 0}, {"id": "load", "needs": ["loadr"], "sleep": 0}]}');
SELECT bgexec.submit('workflow', '{"steps": [{"id": "extract", "sleep": 0}, {"id": "load", "needs": ["extract"], "run": ["echo", "{{steps.loaf.output}}"]}]}');
-- its templates name only steps it needs, as every rendered field's
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sleep": 1}, {"id": "b", "sleep": 1, "if": "{{steps.a.output.go}}"}]}')$q$);
BEGIN;  -- accepted
SELECT count(*) FROM (SELECT bgexec.submit('workflow', '{"steps": [
  {"id": "a", "run": ["true"], "if": true}, {"id": "b", "sleep": 1, "if": false},
  {"id": "c", "needs": ["a"], "sleep": 0, "if": "{{ steps.a.output.go }}"},
  {"id": "d", "needs": ["c"], "approval": true, "if": "!{{steps.a.output.go}}"},
  {"id": "e", "sleep": 0, "if": "{{input.go}}"}]}')) s;
ROLLBACK;
-- workflow: needs names a step that does not exist (dangling)
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sleep": 1}, {"id": "b", "needs": ["c"], "sleep": 1}]}')$q$);
-- workflow: needs itself / needs not an array of strings
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "needs": ["a"], "sleep": 1}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "needs": "b", "sleep": 1}, {"id": "b", "sleep": 1}]}')$q$);
-- workflow: a cycle
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "needs": ["c"], "sleep": 1}, {"id": "b", "needs": ["a"], "sleep": 1}, {"id": "c", "needs": ["b"], "sleep": 1}]}')$q$);
-- workflow: a template names a step the step does not need, directly or
-- through its needs' needs (the worker rendered it before that step was
-- done and failed the step, or did not, as the timing fell), an unknown
-- step, or the step itself; in each field the worker renders (with, run,
-- params, env, an approval's prompt)
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sql": "select 1"}, {"id": "b", "sql": "select $1", "params": ["{{steps.a.output}}"]}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sql": "select 1"}, {"id": "b", "needs": ["a"], "sleep": 0}, {"id": "c", "run": ["echo", "x {{ steps.a.stdout }} y"]}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sql": "select 1"}, {"id": "c", "action": "x", "with": {"k": [1, {"v": "{{steps.a.output.x}}"}]}}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sql": "select 1"}, {"id": "c", "run": ["env"], "env": {"X": "{{steps.a.output}}"}}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sql": "select 1"}, {"id": "g", "approval": {"prompt": "ok {{steps.a.output}}?"}}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "fetch", "sql": "select 1"}, {"id": "b", "needs": ["fetch"], "run": ["echo", "{{steps.fech.output}}"]}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "run": ["echo", "{{steps.a.output}}"]}]}')$q$);
-- ... through a need's need, it is a need; a name no field renders, object
-- keys, an unclosed "{{" and other roots are not templates of steps
BEGIN;
SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sql": "select 1"}, {"id": "b", "needs": ["a"], "sleep": 0},
  {"id": "c", "needs": ["b"], "name": "{{steps.zz}}", "run": ["echo", "{{steps.a.stdout}} {{ input.x }} {{steps.b.output"],
   "env": {"{{steps.zz.output}}": "1"}}]}') > 0 AS ok;
ROLLBACK;
-- workflow: a template the worker cannot read whatever the data (it failed
-- the job at run time, after the steps before it had run): 22023 naming it
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "run": ["echo", "{{ }}"]}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "run": ["echo", "x {{ nonsense }}"]}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "run": ["echo", "{{steps.}}"]}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sleep": 0}, {"id": "b", "needs": ["a"], "run": ["echo", "{{steps.a}}"]}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sleep": 0}, {"id": "b", "needs": ["a"], "env": {"X": "{{steps.a.out}}"}, "run": ["env"]}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sleep": 0}, {"id": "b", "needs": ["a"], "run": ["echo", "{{steps.a.stdout.x}}"]}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "action": "x", "with": {"k": "{{secrets.}}"}}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sleep": 1, "if": "{{input..go}}"}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "approval": {"prompt": "ok {{inputs.x}}?"}}]}')$q$);
BEGIN;  -- accepted: the whole input, a secret's name with dots, an output's path
SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sleep": 0},
  {"id": "b", "needs": ["a"], "run": ["echo", "{{input}}", "{{ secrets.db.pass }}", "{{steps.a.output.x.0}}", "{{steps.a.stdout}}"]}]}') > 0 AS ok;
ROLLBACK;
-- workflow: over 1000 steps is a program limit (54000), as the payload size
SELECT * FROM try($q$SELECT bgexec.submit('workflow', jsonb_build_object('steps',
  (SELECT jsonb_agg(jsonb_build_object('id', 's' || i, 'sleep', 0)) FROM generate_series(1, 1001) i)))$q$);
-- payload over bgexec.max_payload_bytes
SET bgexec.max_payload_bytes = '2kB';
SELECT * FROM try($q$SELECT bgexec.submit('noop', jsonb_build_object('blob', repeat('x', 4000)))$q$);
RESET bgexec.max_payload_bytes;
-- submit_many validates every element; one bad element and nothing is written
SELECT * FROM try($q$SELECT bgexec.submit_many('[{"kind": "noop"}, {"kind": "workflow", "payload": {"steps": []}}]')$q$);
-- submit_many's set-based path applies every rule of submit, naming the field
SELECT * FROM try($q$SELECT bgexec.submit_many('[{"kind": "noop"}, {"kind": "bad kind"}]')$q$);
SELECT * FROM try($q$SELECT bgexec.submit_many('[{"kind": "noop", "queue": "bad queue"}]')$q$);
SELECT * FROM try($q$SELECT bgexec.submit_many('[{"kind": "noop", "payload": [1]}]')$q$);
SELECT * FROM try($q$SELECT bgexec.submit_many('[{"kind": "noop", "max_attempts": 0}]')$q$);
SELECT * FROM try($q$SELECT bgexec.submit_many('[{"kind": "noop", "timeout": "-1 s"}]')$q$);
SELECT * FROM try($q$SELECT bgexec.submit_many('[{"payload": {}}]')$q$);
-- ... and a field of the wrong type, by position too (22P02)
SELECT * FROM try($q$SELECT bgexec.submit_many('[{"kind": "noop"}, {"kind": "noop", "priority": "high"}]')$q$);
SELECT * FROM try($q$SELECT bgexec.submit_many('[{"kind": "noop", "max_attempts": 1e20}]')$q$);
SELECT * FROM try($q$SELECT bgexec.submit_many('[{"kind": "noop", "run_after": "2020-13-45"}]')$q$);
SELECT * FROM try($q$SELECT bgexec.submit_many('[{"kind": "noop"}, {"kind": "noop"}, {"kind": "noop", "timeout": "abc"}]')$q$);
SET bgexec.max_payload_bytes = '2kB';
SELECT * FROM try($q$SELECT bgexec.submit_many(jsonb_build_array(jsonb_build_object('kind', 'noop', 'payload', jsonb_build_object('blob', repeat('x', 4000)))))$q$);
RESET bgexec.max_payload_bytes;
-- what a claim computes with is bounded at submit, so that no job makes the
-- claims that reach it fail: concurrency_key 1-512 characters (the index of
-- running keys takes it when the job runs: 9600 bytes broke every claim),
-- timeout at most 100 years, and each of its parts too (the deadline is the
-- claim's now() plus it)
SELECT * FROM try($q$SELECT bgexec.submit('noop', concurrency_key => repeat('k', 9600))$q$);
SELECT * FROM try($q$SELECT bgexec.submit('noop', concurrency_key => '')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('noop', timeout => '300000 years')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('noop', timeout => '100 years 1 day')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('noop', timeout => '4000000 mons -119999000 days')$q$);
-- positive as compared, but a month less 29 days ends a day early from 31
-- January: no part may be negative, in submit and submit_many
SELECT * FROM try($q$SELECT bgexec.submit('noop', timeout => '1 mon -29 days')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('noop', timeout => '1 day -1 hour')$q$);
SELECT * FROM try($q$SELECT bgexec.submit_many('[{"kind": "noop", "timeout": "1 mon -29 days"}]')$q$);
-- the same in submit_many, set-based and per job (with an idempotency key)
SELECT * FROM try($q$SELECT bgexec.submit_many(jsonb_build_array(jsonb_build_object('kind', 'noop', 'concurrency_key', repeat('k', 9600))))$q$);
SELECT * FROM try($q$SELECT bgexec.submit_many(jsonb_build_array(jsonb_build_object('kind', 'noop', 'idempotency_key', 'v-ck', 'concurrency_key', repeat('k', 9600))))$q$);
SELECT * FROM try($q$SELECT bgexec.submit_many('[{"kind": "noop", "concurrency_key": ""}]')$q$);
SELECT * FROM try($q$SELECT bgexec.submit_many('[{"kind": "noop", "timeout": "300000 years"}]')$q$);
SELECT * FROM try($q$SELECT bgexec.submit_many('[{"kind": "noop", "timeout": "4000000 mons -119999000 days"}]')$q$);
SELECT * FROM try($q$SELECT bgexec.submit_many('[{"kind": "noop", "idempotency_key": "v-t", "timeout": "300000 years"}]')$q$);
-- run_after must be finite: an infinite one never runs, and '-infinity'
-- made queue_stats fail for everyone (its oldest age is now() minus it)
SELECT * FROM try($q$SELECT bgexec.submit('noop', run_after => 'infinity')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('noop', run_after => '-infinity')$q$);
SELECT * FROM try($q$SELECT bgexec.submit_many('[{"kind": "noop", "run_after": "-infinity"}]')$q$);
SELECT * FROM try($q$SELECT bgexec.submit_many('[{"kind": "noop", "idempotency_key": "v-ra", "run_after": "infinity"}]')$q$);
SELECT count(*) > 0 AS queue_stats_reads FROM bgexec.queue_stats;
-- submit_many names the first element of the wrong shape: not an object
SELECT * FROM try($q$SELECT bgexec.submit_many('[1]')$q$);
SELECT * FROM try($q$SELECT bgexec.submit_many('[{"kind": "noop"}, "noop"]')$q$);
-- and the whole argument: NULL or not an array (a mutation test: a NULL
-- submitted nothing and said nothing)
SELECT * FROM try($q$SELECT bgexec.submit_many(NULL)$q$);
SELECT * FROM try($q$SELECT bgexec.submit_many('{"kind": "noop"}')$q$);
-- names one past their limits on the set-based path: a queue of 64
-- characters, a kind of 129 (22023, naming the field, as submit does)
SELECT * FROM try(format($q$SELECT bgexec.submit_many('[{"kind": "noop", "queue": "%s"}]')$q$, repeat('q', 64)));
SELECT * FROM try(format($q$SELECT bgexec.submit_many('[{"kind": "%s"}]')$q$, repeat('k', 129)));
-- a key that is not a string (it was dropped: the set-based path, chosen by
-- the type of idempotency_key, inserted the job without it)
SELECT * FROM try($q$SELECT bgexec.submit_many('[{"kind": "noop", "idempotency_key": 42}]')$q$);
SELECT * FROM try($q$SELECT bgexec.submit_many('[{"kind": "noop", "idempotency_key": "v-i"}, {"kind": "noop", "idempotency_key": {"k": 1}}]')$q$);
SELECT * FROM try($q$SELECT bgexec.submit_many('[{"kind": "noop", "concurrency_key": 7}]')$q$);
-- a null payload, refused as submit refuses it, on both paths (the
-- set-based one took it for {})
SELECT * FROM try($q$SELECT bgexec.submit_many('[{"kind": "noop", "payload": null}]')$q$);
SELECT * FROM try($q$SELECT bgexec.submit_many('[{"kind": "noop", "payload": null, "idempotency_key": "v-p"}]')$q$);
-- nothing was written by any of the above
SELECT count(*) - :jobs_before AS inserted FROM bgexec.job;
-- at the bounds a job runs: top priority, a key of 512 four-byte characters,
-- a timeout of 100 years, in a queue with a per-key cap
SELECT (bgexec.configure_queue('val-edge', max_running_per_key => 1)).name;
SELECT bgexec.submit('noop', queue => 'val-edge', priority => 2147483647, timeout => '100 years',
                     concurrency_key => repeat(chr(119070), 512)) AS edge,
       (bgexec.submit_many(jsonb_build_array(jsonb_build_object('kind', 'noop', 'queue', 'val-edge',
                           'timeout', '100 years', 'concurrency_key', repeat(chr(119070), 511) || 'x')))) AS edge2 \gset
SELECT job_id IN (:edge, :edge2) AS claimed, deadline > now() + interval '99 years' AS deadline_set,
       octet_length((SELECT concurrency_key FROM bgexec.job WHERE id = job_id)) AS key_bytes
  FROM bgexec.claim('w-edge', '{val-edge}', 2) ORDER BY job_id;
SELECT bgexec.finish(id, lease, 'completed', '{}') FROM bgexec.job WHERE id IN (:edge, :edge2) ORDER BY id;
-- a workflow of 1000 steps, the limit, is accepted
SELECT bgexec.submit('workflow', jsonb_build_object('steps',
  (SELECT jsonb_agg(jsonb_build_object('id', 's' || i, 'sleep', 0)) FROM generate_series(1, 1000) i)),
  queue => 'val-limit') > 0 AS thousand_steps_ok;
-- submit's two paths write the same job: the common one (no idempotency key,
-- no max_queued) in submit itself, the general one in _submit_one; every
-- argument given, a run_after in the future (the due-later wake); in one
-- transaction, so now() is one time
BEGIN;
SELECT bgexec.submit('noop', '{"a": [1, 2.50]}', 'val-paths', 7, now() + interval '1 hour', 3,
                     interval '10 minutes', NULL, 'ck') AS common,
       bgexec.submit('noop', '{"a": [1, 2.50]}', 'val-paths', 7, now() + interval '1 hour', 3,
                     interval '10 minutes', 'val-paths-key', 'ck') AS general \gset
SELECT to_jsonb(c) - '{id,idempotency_key}'::text[] = to_jsonb(g) - '{id,idempotency_key}'::text[] AS same_row,
       c.run_after = now() + interval '1 hour' AS run_after_kept, c.owner = current_user AS owner_ok
  FROM bgexec.job c, bgexec.job g WHERE c.id = :common AND g.id = :general;
-- and a NULL run_after means now on both
SELECT bgexec.submit('noop', queue => 'val-paths', run_after => NULL) AS common,
       bgexec.submit('noop', queue => 'val-paths', run_after => NULL, idempotency_key => 'val-paths-2') AS general \gset
SELECT c.run_after = now() AND g.run_after = now() AS now_both
  FROM bgexec.job c, bgexec.job g WHERE c.id = :common AND g.id = :general;
ROLLBACK;
