-- upgrade: drop + create gives the same catalog (fingerprint), and roles survive.
\set SHOW_CONTEXT never
CREATE FUNCTION catalog_fingerprint() RETURNS TABLE (k text, v text) LANGUAGE sql AS $$
SELECT 'fn', p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ') ' ||
       pg_get_function_result(p.oid) || ' ' || p.provolatile::text || p.prosecdef::text || p.proisstrict::text
  FROM pg_proc p WHERE p.pronamespace = 'bgexec'::regnamespace
UNION ALL
SELECT 'col', c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull::text
  FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
 WHERE c.relnamespace = 'bgexec'::regnamespace AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT 'con', conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid)
  FROM pg_constraint WHERE connamespace = 'bgexec'::regnamespace
UNION ALL
SELECT 'idx', pg_get_indexdef(indexrelid)
  FROM pg_index WHERE indrelid IN (SELECT oid FROM pg_class WHERE relnamespace = 'bgexec'::regnamespace)
UNION ALL
SELECT 'policy', tablename || ' ' || policyname || ' ' || cmd || ' ' || coalesce(qual, '')
  FROM pg_policies WHERE schemaname = 'bgexec'
$$;
CREATE TEMP TABLE fp AS SELECT * FROM catalog_fingerprint();
SELECT k, count(*) FROM fp GROUP BY k ORDER BY k;
-- the public API of DESIGN.md §3, with its signatures
SELECT v FROM fp WHERE k = 'fn' AND v NOT LIKE '\_%' ORDER BY v;
SELECT v FROM fp WHERE k IN ('idx', 'policy') ORDER BY v;
-- a lease handed out before the extension is dropped and created again
-- (its worker may still be running the job, whose id the new extension
-- hands out again from 1) is never handed out again
SELECT bgexec.submit('noop', queue => 'upg') AS upg_job \gset
SELECT lease AS lease_before FROM bgexec.claim('w-upg', '{upg}', 1) \gset
DROP EXTENSION bgexec CASCADE;
SELECT count(*) AS objects_left FROM pg_class WHERE relnamespace = 'bgexec'::regnamespace;
SELECT count(*) AS functions_left FROM pg_proc WHERE pronamespace = 'bgexec'::regnamespace;
SELECT rolname FROM pg_roles WHERE rolname IN ('bgexec_client', 'bgexec_worker') ORDER BY 1;
CREATE EXTENSION bgexec;
-- (job ids start from 1 again; here from the dropped job's, whatever ran before)
SELECT pg_catalog.setval(pg_catalog.pg_get_serial_sequence('bgexec.job', 'id'), :upg_job, false) = :upg_job AS ids_again;
SELECT bgexec.submit('noop', queue => 'upg') = :upg_job AS same_job_id;
SELECT lease > :lease_before AS lease_not_reused,
       bgexec.finish(:upg_job, :lease_before, 'completed', '{}') IS NULL AS stale_finish_refused
  FROM bgexec.claim('w-upg', '{upg}', 1);
SELECT status FROM bgexec.job WHERE id = :upg_job;
DELETE FROM bgexec.job;
-- symmetric difference of the fingerprints: none
(SELECT * FROM fp EXCEPT ALL SELECT * FROM catalog_fingerprint())
UNION ALL
(SELECT * FROM catalog_fingerprint() EXCEPT ALL SELECT * FROM fp);
-- the extension cannot be relocated
ALTER EXTENSION bgexec SET SCHEMA public;
-- CREATE EXTENSION refuses a schema bgexec that a role other than a
-- superuser owns, may create in, or has left objects in: that role could
-- plant what the SECURITY DEFINER functions resolve (42501, nothing created)
DROP EXTENSION bgexec CASCADE;
ALTER SCHEMA bgexec OWNER TO regress_alice;
CREATE EXTENSION bgexec;
ALTER SCHEMA bgexec OWNER TO CURRENT_USER;
GRANT CREATE ON SCHEMA bgexec TO regress_bob;
CREATE EXTENSION bgexec;
REVOKE CREATE ON SCHEMA bgexec FROM regress_bob;
GRANT CREATE ON SCHEMA bgexec TO PUBLIC;
CREATE EXTENSION bgexec;
REVOKE CREATE ON SCHEMA bgexec FROM PUBLIC;
CREATE FUNCTION bgexec.planted(jsonb) RETURNS jsonb LANGUAGE sql AS 'SELECT $1';
ALTER FUNCTION bgexec.planted(jsonb) OWNER TO regress_alice;
CREATE EXTENSION bgexec;
SELECT count(*) AS extensions FROM pg_extension WHERE extname = 'bgexec';
DROP FUNCTION bgexec.planted(jsonb);
-- a table is named as itself (it was named by its array type), and the
-- kinds of object beyond functions, operators, types and relations count
CREATE TABLE bgexec.planted_t (x int);
ALTER TABLE bgexec.planted_t OWNER TO regress_alice;
CREATE EXTENSION bgexec;
DROP TABLE bgexec.planted_t;
-- a domain is named as itself, not by its array type (planted_d[])
CREATE DOMAIN bgexec.planted_d AS int;
ALTER DOMAIN bgexec.planted_d OWNER TO regress_alice;
CREATE EXTENSION bgexec;
DROP DOMAIN bgexec.planted_d;
CREATE COLLATION bgexec.planted_c FROM "C";
ALTER COLLATION bgexec.planted_c OWNER TO regress_alice;
CREATE EXTENSION bgexec;
DROP COLLATION bgexec.planted_c;
CREATE TEXT SEARCH CONFIGURATION bgexec.planted_ts (COPY = pg_catalog.simple);
ALTER TEXT SEARCH CONFIGURATION bgexec.planted_ts OWNER TO regress_alice;
CREATE EXTENSION bgexec;
DROP TEXT SEARCH CONFIGURATION bgexec.planted_ts;
SELECT count(*) AS extensions FROM pg_extension WHERE extname = 'bgexec';
-- a superuser's schema, with nothing in it but what superusers own: accepted
CREATE EXTENSION bgexec;
SELECT extname FROM pg_extension WHERE extname = 'bgexec';
