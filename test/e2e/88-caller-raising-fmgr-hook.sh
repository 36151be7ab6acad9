#!/usr/bin/env bash
# Another module's fmgr_hook loaded before bgexec's (sepgsql, say) may
# raise when a SECURITY DEFINER function starts.  bgexec's hook pushed its
# frame (the function, the role it runs as) before calling that hook, and
# no FHET_ABORT followed the error: when it was caught (an EXCEPTION block)
# the frame stayed until the transaction ended, and every bgexec call after
# it took that function's owner (bob) for the caller: _caller() named him,
# and a job submitted then was his (its sql steps would run as bob).
source "$(dirname "$0")/lib.sh"
cp "$E2E_ROOT/test/e2e/raising_fmgr_hook.c" "$E2E_DIR/"
# a PGBIN copied without the server headers: the system's pg_config (same major)
pgc=$PGBIN/pg_config
[[ -f $("$pgc" --includedir-server)/postgres.h ]] || pgc=/usr/lib/postgresql/15/bin/pg_config
cat >"$E2E_DIR/Makefile" <<MK
MODULES = raising_fmgr_hook
PG_CONFIG = $pgc
with_llvm = no
PGXS := \$(shell \$(PG_CONFIG) --pgxs)
include \$(PGXS)
MK
make -s -C "$E2E_DIR" >"$E2E_DIR/build.log" 2>&1 || fail "module build: $(tail -5 "$E2E_DIR/build.log")"
e2e_cluster 58007 "shared_preload_libraries = '$E2E_DIR/raising_fmgr_hook.so,bgexec'"
sql "CREATE ROLE alice LOGIN; CREATE ROLE bob LOGIN; GRANT bgexec_client TO alice, bob;
     CREATE FUNCTION public.deny_me() RETURNS int LANGUAGE sql SECURITY DEFINER AS 'SELECT 1';
     ALTER FUNCTION public.deny_me() OWNER TO bob;
     GRANT EXECUTE ON FUNCTION public.deny_me() TO alice" >/dev/null
# the module raises for deny_me
out=$(psql -qXAt -c "SELECT public.deny_me()" 2>&1) && fail "deny_me ran: $out"
[[ $out == *"deny_me denied"* ]] || fail "not the module's error: $out"
got=$(psql -qXAt -v ON_ERROR_STOP=1 <<'SQL' 2>&1
SET ROLE alice;
BEGIN;
DO $$ BEGIN BEGIN PERFORM public.deny_me(); EXCEPTION WHEN others THEN NULL; END; END $$;
SELECT 'caller=' || bgexec._caller();
SELECT bgexec.submit('noop', '{}') AS id \gset
COMMIT;
RESET ROLE;
SELECT 'owner=' || owner FROM bgexec.job WHERE id = :id;
SQL
) || fail "psql: $got"
[[ $got == *"caller=alice"* ]] || fail "after the caught error, the caller was not alice: $got"
[[ $got == *"owner=alice"* ]] || fail "the job was not alice's: $got"
ok
