#!/usr/bin/env bash
# A sql step runs with its owner's role settings (ALTER ROLE owner [IN
# DATABASE db] SET ...), as the owner's own psql session does.  The step's
# session logs in as the worker's role and acts as the owner (_act_as), and
# PostgreSQL applies a role's settings only at login: the owner's
# search_path and TimeZone were not the step's, and `SELECT ... FROM
# orders` that worked for the owner in psql failed in the step (42P01).
# Now _act_as applies them for the step's transaction: this database's
# over all databases', a superuser's setting too (with the privilege of
# whoever stored it, as at login); never role; the worker's own settings
# (idle_in_transaction_session_timeout ...) win; a value the server now
# refuses is skipped with a warning in the job's log, and the step runs.
source "$(dirname "$0")/lib.sh"
e2e_cluster 58012
sql "CREATE ROLE app LOGIN; GRANT bgexec_client TO app; CREATE ROLE other;
     GRANT other TO app;
     CREATE SCHEMA appschema AUTHORIZATION app;
     CREATE TABLE appschema.orders (id int); INSERT INTO appschema.orders VALUES (1), (2);
     ALTER TABLE appschema.orders OWNER TO app;
     ALTER ROLE app IN DATABASE postgres SET search_path = appschema, public;
     ALTER ROLE app SET search_path = public;
     ALTER ROLE app SET TimeZone = 'America/New_York';
     ALTER ROLE app SET statement_timeout = '5min';
     ALTER ROLE app IN DATABASE postgres SET statement_timeout = '7s';
     ALTER ROLE app SET log_min_duration_statement = '12s';
     ALTER ROLE app SET role = 'other';
     ALTER ROLE app SET idle_in_transaction_session_timeout = '1h';
     ALTER ROLE app SET client_encoding = 'LATIN1';
     ALTER ROLE app SET application_name = 'app-login';
     ALTER ROLE app SET transaction_read_only = on;
     CREATE TEXT SEARCH CONFIGURATION public.gone (COPY = simple);
     ALTER ROLE app SET default_text_search_config = 'public.gone';
     DROP TEXT SEARCH CONFIGURATION public.gone" >/dev/null
# A setting only a login can make (ALTER ROLE refuses it now; a placeholder
# stored before its library was loaded can be one).
sql "UPDATE pg_db_role_setting SET setconfig = setconfig || '{log_disconnections=on}'
     WHERE setdatabase = 0 AND setrole = 'app'::regrole" >/dev/null
# What the owner's own session has (role = other aside: its login sets it).
[[ $(psql -qXAt -U app -d postgres -c "SET ROLE app; SELECT count(*) FROM orders" 2>/dev/null) == 2 ]] || fail "the owner's psql does not see orders"
start_worker w1 --lease 4
submit_as_app() { psql -qXAt -U app -d postgres -c "SET ROLE app; SELECT bgexec.submit('workflow', \$j\$$1\$j\$::jsonb)" 2>/dev/null; }
id=$(submit_as_app '{"steps": [{"id": "r", "sql": "SELECT count(*) AS n FROM orders"}]}') || fail "submit"
wait_for 30 job_ended "$id" || fail "job $id is $(job_status "$id")"
[[ $(job_status "$id") == completed ]] || fail "job $id (FROM orders, the owner's search_path) is $(job_status "$id"): $(sql "SELECT error FROM bgexec.job WHERE id = $id")"
[[ $(sql "SELECT result->'r'->0->>'n' FROM bgexec.job WHERE id = $id") == 2 ]] || fail "job $id: $(sql "SELECT result FROM bgexec.job WHERE id = $id")"

q='SELECT current_setting($$search_path$$) AS sp, current_setting($$TimeZone$$) AS tz, current_setting($$statement_timeout$$) AS st, current_setting($$log_min_duration_statement$$) AS lm, current_user AS u, current_setting($$idle_in_transaction_session_timeout$$) AS it, current_setting($$client_encoding$$) AS ce, current_setting($$application_name$$) AS an'
id=$(submit_as_app "{\"steps\": [{\"id\": \"q\", \"sql\": \"$q\"}]}") || fail "submit"
wait_for 30 job_ended "$id" || fail "job $id is $(job_status "$id")"
[[ $(job_status "$id") == completed ]] || fail "job $id is $(job_status "$id"): $(sql "SELECT error FROM bgexec.job WHERE id = $id")"
got=$(sql "SELECT concat_ws('|', r->>'sp', r->>'tz', r->>'st', r->>'lm', r->>'u', r->>'it', r->>'ce', r->>'an') FROM bgexec.job, jsonb_array_elements(result->'q') r WHERE id = $id")
[[ $got == 'appschema, public|America/New_York|7s|12s|app|4s|UTF8|bgexec worker sql-step' ]] \
  || fail "the step's settings: $got (want the owner's search_path for this database, its TimeZone, this database's statement_timeout, the superuser's log_min_duration_statement, current_user app, the worker's idle timeout, client_encoding and application_name)"
# One warning, for the value refused; none for role (never applied),
# log_disconnections (a login's only: skipped) or the worker's own.
logged=$(sql "SELECT string_agg(l, ' / ') FROM bgexec.job_event, jsonb_array_elements_text(data->'lines') l WHERE job_id = $id AND kind = 'log'")
[[ $logged == 'WARNING:  invalid value for parameter "default_text_search_config": "public.gone"' ]] \
  || fail "job $id's log is not the one warning, for the refused default_text_search_config: $(sql "SELECT string_agg(kind || ' ' || data::text, '; ' ORDER BY seq) FROM bgexec.job_event WHERE job_id = $id")"

# The owner's statement_timeout is its statement's, not the worker's record
# of the step (bgexec._step_completed), which waits here for the job's row
# longer than that timeout: the step, whose statement succeeded, failed.
sql "CREATE ROLE app2 LOGIN; GRANT bgexec_client TO app2; ALTER ROLE app2 SET statement_timeout = '1s'" >/dev/null
id=$(psql -qXAt -U app2 -d postgres -c "SELECT bgexec.submit('workflow', '{\"steps\": [{\"id\": \"s\", \"sql\": \"SELECT pg_sleep(0.7) AS z\"}]}')")
running() { [[ $(sql "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(0.7)%' AND pid <> pg_backend_pid()") == 1 ]]; }
wait_for 15 running || fail "job $id's statement did not start ($(job_status "$id"))"
hold_open
hold "SELECT 'row', id FROM bgexec.job WHERE id = $id FOR UPDATE;"
wait_for 10 held row || fail "the test's session did not lock job $id's row: $(cat "$E2E_DIR/hold.out")"
waiting() { [[ $(sql "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'bgexec worker sql-step' AND wait_event_type = 'Lock'") == 1 ]]; }
wait_for 10 waiting || fail "job $id's record did not wait for its row ($(job_status "$id"))"
sleep 1.5
hold "COMMIT;"
exec 7>&-
wait_for 30 job_ended "$id" || fail "job $id is $(job_status "$id")"
[[ $(job_status "$id") == completed ]] || fail "job $id (owner's statement_timeout 1s, record held 1.5 s) is $(job_status "$id"): $(sql "SELECT error FROM bgexec.job WHERE id = $id")"

# The worker's session is as it was: the next step's owner (postgres, no
# settings) gets none of app's.
id=$(sql "SELECT bgexec.submit('workflow', \$j\${\"steps\": [{\"id\": \"q\", \"sql\": \"SELECT current_setting(\$\$search_path\$\$) AS sp, current_setting(\$\$TimeZone\$\$) AS tz\"}]}\$j\$::jsonb)")
wait_for 30 job_ended "$id" || fail "job $id is $(job_status "$id")"
got=$(sql "SELECT concat_ws('|', r->>'sp', r->>'tz') FROM bgexec.job, jsonb_array_elements(result->'q') r WHERE id = $id")
[[ $got != *appschema* && $got != *New_York* ]] || fail "a later step of another owner kept app's settings: $got"
ok
