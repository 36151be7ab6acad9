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
-- workflow: needs names a step that does not exist (dangling)
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "sleep": 1}, {"id": "b", "needs": ["c"], "sleep": 1}]}')$q$);
-- workflow: needs itself / needs not an array of strings
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "needs": ["a"], "sleep": 1}]}')$q$);
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "needs": "b", "sleep": 1}, {"id": "b", "sleep": 1}]}')$q$);
-- workflow: a cycle
SELECT * FROM try($q$SELECT bgexec.submit('workflow', '{"steps": [{"id": "a", "needs": ["c"], "sleep": 1}, {"id": "b", "needs": ["a"], "sleep": 1}, {"id": "c", "needs": ["b"], "sleep": 1}]}')$q$);
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
SET bgexec.max_payload_bytes = '2kB';
SELECT * FROM try($q$SELECT bgexec.submit_many(jsonb_build_array(jsonb_build_object('kind', 'noop', 'payload', jsonb_build_object('blob', repeat('x', 4000)))))$q$);
RESET bgexec.max_payload_bytes;
-- nothing was written by any of the above
SELECT count(*) - :jobs_before AS inserted FROM bgexec.job;
