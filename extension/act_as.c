/*
 * act_as.c — bgexec._act_as(role): what a worker's `sql` step runs under.
 *
 * A `sql` step's statement is the job owner's text, run on a connection of
 * the worker's login role, which is a member of every tenant role (it must
 * be, to act as them).  A plain SET LOCAL ROLE is not a boundary there: the
 * statement can SET ROLE, RESET ROLE or set_config('role', ...) to any role
 * the login may become, another tenant or the worker itself (a superuser,
 * when the worker runs as one).
 *
 * _act_as does SET LOCAL ROLE and then marks the rest of the transaction as
 * a local user-id change (SECURITY_LOCAL_USERID_CHANGE, what PostgreSQL
 * sets inside SECURITY DEFINER functions).  role and session_authorization
 * are GUC_NOT_WHILE_SEC_REST, so every way of changing them, a function's
 * SET clause included, is then refused.  The mark is taken off when the
 * transaction ends: at pre-commit, after the last user code (deferred
 * triggers) ran and before SET LOCAL ROLE is undone; an abort restores the
 * security context of the transaction's start by itself.  A subtransaction
 * (a PL/pgSQL exception block) restores the context it started with, which
 * carries the mark.
 *
 * And the role's own settings (ALTER ROLE ... [IN DATABASE ...] SET), which
 * PostgreSQL applies only at login: the step's session logged in as the
 * worker's role, so the owner's search_path, TimeZone, statement_timeout...
 * were not the step's, and SQL that worked for the owner in psql failed in
 * its step.  _act_as applies them for the transaction, as a login would
 * (the role's for this database over its for all databases; as PGC_SUSET,
 * as ProcessGUCArray at login: ALTER ROLE checked, as they were stored,
 * that whoever stored them might set them), except:
 * - role and session_authorization, never; transaction_isolation,
 *   transaction_read_only, transaction_deferrable neither (at login too:
 *   the step's transaction has begun);
 * - what the worker's session set itself (at connect, client_encoding
 *   and application_name, or its conninfo's options; by SET; set_config
 *   earlier in the transaction, _secret_step's): a client's own settings
 *   win over a role's at login too, and the worker's set after _act_as
 *   (client_connection_check_interval, ...) win by coming after;
 * - settings that take effect only at login or server start (PGC_BACKEND,
 *   PGC_SIGHUP, ...): not to be changed in a session, skipped silently.
 * A value the server refuses now (a text search configuration dropped
 * since) is skipped with a WARNING, as at login: the step runs, the
 * warning is a notice of the job's log.
 *
 * extension/act_as.c
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "catalog/pg_db_role_setting.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/guc_tables.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"


PG_FUNCTION_INFO_V1(bgexec_act_as);

/* Whether this backend's transaction carries the mark _act_as set. */
static bool confined = false;
static bool callback_registered = false;

static void
release(void)
{
	Oid			userid;
	int			sec_context;

	if (!confined)
		return;
	GetUserIdAndSecContext(&userid, &sec_context);
	SetUserIdAndSecContext(userid, sec_context & ~SECURITY_LOCAL_USERID_CHANGE);
	confined = false;
}

static void
act_as_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			release();
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			/* AbortTransaction restored the context of the start already. */
			confined = false;
			break;
		default:
			break;
	}
}

/* The variable named, or NULL (a custom placeholder not defined yet). */
static struct config_generic *
find_variable(const char *name)
{
	struct config_generic **vars = get_guc_variables();
	int			n = GetNumConfigOptions();

	for (int i = 0; i < n; i++)
		if (pg_strcasecmp(vars[i]->name, name) == 0)
			return vars[i];
	return NULL;
}

/*
 * Applies the settings pg_db_role_setting holds for (database, role) for
 * the rest of the transaction, but those the session set itself: a
 * variable whose value came from the client's startup packet or a SET
 * (PGC_S_CLIENT and above; the transaction_* ones, which InitializeGUCOptions
 * sets as PGC_S_OVERRIDE, and role, which _act_as has just set, among them).
 * What it applies is then the session's own too (PGC_S_SESSION), so a
 * second call, for all databases, leaves the first's, for this database,
 * as a login does (a value the first refused, the second's applies).
 */
static void
apply_role_settings(Oid databaseid, Oid roleid)
{
	Relation	rel;
	ScanKeyData keys[2];
	SysScanDesc scan;
	HeapTuple	tup;

	rel = table_open(DbRoleSettingRelationId, AccessShareLock);
	ScanKeyInit(&keys[0], Anum_pg_db_role_setting_setdatabase, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(databaseid));
	ScanKeyInit(&keys[1], Anum_pg_db_role_setting_setrole, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(roleid));
	scan = systable_beginscan(rel, DbRoleSettingDatidRolidIndexId, true, NULL, 2, keys);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		bool		isnull;
		Datum		d = heap_getattr(tup, Anum_pg_db_role_setting_setconfig, RelationGetDescr(rel), &isnull);
		Datum	   *items;
		bool	   *nulls;
		int			n;

		if (isnull)
			continue;
		deconstruct_array(DatumGetArrayTypeP(d), TEXTOID, -1, false, TYPALIGN_INT, &items, &nulls, &n);
		for (int i = 0; i < n; i++)
		{
			char	   *item;
			char	   *name;
			char	   *value;
			struct config_generic *var;

			if (nulls[i])
				continue;
			item = TextDatumGetCString(items[i]);
			ParseLongOption(item, &name, &value);
			if (value == NULL)
				continue;
			/* Never, whatever their source. */
			if (pg_strcasecmp(name, "role") == 0 || pg_strcasecmp(name, "session_authorization") == 0)
				continue;
			var = find_variable(name);
			if (var != NULL &&
				((var->context != PGC_USERSET && var->context != PGC_SUSET) || var->source >= PGC_S_CLIENT))
				continue;
			(void) set_config_option(name, value, PGC_SUSET, PGC_S_SESSION, GUC_ACTION_LOCAL, true, WARNING,
									 false);
		}
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
}

/*
 * _act_as(role name): SET LOCAL ROLE role, with the role fixed until the
 * transaction ends, and the role's own settings for it (above).  The
 * session user must be allowed to become the role, as for SET ROLE (42501
 * otherwise).
 */
Datum
bgexec_act_as(PG_FUNCTION_ARGS)
{
	Name		role;
	Oid			userid;
	int			sec_context;

	/* Not STRICT: a null role must not leave the statement after it to run
	 * as the caller. */
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("role must not be null")));
	role = PG_GETARG_NAME(0);
	if (!IsTransactionBlock())
		ereport(ERROR,
				(errcode(ERRCODE_NO_ACTIVE_SQL_TRANSACTION),
				 errmsg("_act_as must be called inside a transaction block"),
				 errhint("The role it sets lasts until the transaction ends: BEGIN first.")));
	/*
	 * At the transaction's own level: a savepoint rolled back would undo the
	 * role and the mark under us.
	 */
	if (GetCurrentTransactionNestLevel() != 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("_act_as must be called at the top level of its transaction"),
				 errhint("Call it right after BEGIN, outside any savepoint.")));
	if (confined)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("_act_as was called already in this transaction")));

	/*
	 * SET ROLE's own check, made first for its hint: a worker's login role
	 * not granted the job owner's role failed the sql step with
	 * PostgreSQL's bare "permission denied to set role".
	 */
	{
		Oid			roleid = get_role_oid(NameStr(*role), true);

		if (OidIsValid(roleid) && !is_member_of_role(GetSessionUserId(), roleid))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied to set role \"%s\"", NameStr(*role)),
					 errhint("A sql step runs as its job's owner: grant that role to the worker's login role (GRANT %s TO %s).",
							 quote_identifier(NameStr(*role)),
							 quote_identifier(GetUserNameFromId(GetSessionUserId(), false)))));
	}
	(void) set_config_option("role", NameStr(*role), PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_LOCAL, true, 0, false);

	if (!callback_registered)
	{
		RegisterXactCallback(act_as_xact_callback, NULL);
		callback_registered = true;
	}
	GetUserIdAndSecContext(&userid, &sec_context);
	SetUserIdAndSecContext(userid, sec_context | SECURITY_LOCAL_USERID_CHANGE);
	confined = true;

	{
		Oid			roleid = GetUserId();

		apply_role_settings(MyDatabaseId, roleid);
		apply_role_settings(InvalidOid, roleid);
	}
	PG_RETURN_VOID();
}
