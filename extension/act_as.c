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
 * extension/act_as.c
 */
#include "postgres.h"

#include "access/xact.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"


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

/*
 * _act_as(role name): SET LOCAL ROLE role, with the role fixed until the
 * transaction ends.  The session user must be allowed to become the role,
 * as for SET ROLE (42501 otherwise).
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
	PG_RETURN_VOID();
}
