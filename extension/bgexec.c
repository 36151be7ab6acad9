/*-------------------------------------------------------------------------
 *
 * bgexec.c
 *	  Module entry point of the bgexec extension: GUCs, the watchdog
 *	  registration and the small SQL-callable helpers.
 *
 * The job tables and the queue logic live in the SQL install script; this
 * module only holds what is better written in C (see STYLE.md): payload
 * validation (validate.c), the in-server watchdog (watchdog.c), the
 * targeted wake-ups of idle workers (wake.c) and the identity of the
 * caller (here and caller.c).
 *
 * extension/bgexec.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/xact.h"
#include "access/xlog.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "bgexec/bgexec.h"

PG_MODULE_MAGIC;

/* GUC variables; defaults here must match the boot values in _PG_init. */
int			bgexec_max_payload_bytes = 1024 * 1024;
int			bgexec_max_result_bytes = 64 * 1024 * 1024;
bool		bgexec_notify_events = true;
bool		bgexec_notify_jobs = true;
int			bgexec_watchdog_interval = 1000;
int			bgexec_retention = -1;
int			bgexec_retention_batch = 1000;
int			bgexec_vacuum_threshold = 10000;
char	   *bgexec_database = NULL;
bool		bgexec_watchdog_enabled = true;
int			bgexec_debug_clock_offset = 0;

void		_PG_init(void);

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* shmem_request_hook: each module reserves its shared memory and locks. */
static void
bgexec_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	bgexec_wake_shmem_request();
	bgexec_step_session_shmem_request();
}

/* shmem_startup_hook: each module attaches to (or creates) its structure. */
static void
bgexec_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	bgexec_wake_shmem_startup();
	bgexec_step_session_shmem_startup();
	LWLockRelease(AddinShmemInitLock);
}

PG_FUNCTION_INFO_V1(bgexec_caller);
PG_FUNCTION_INFO_V1(bgexec_owner);
PG_FUNCTION_INFO_V1(bgexec_valid_name);
PG_FUNCTION_INFO_V1(bgexec_lease_timeline_unchecked);
PG_FUNCTION_INFO_V1(bgexec_lease_timeline_checked);
PG_FUNCTION_INFO_V1(bgexec_xid_is_current);

/*
 * Module load: defines the bgexec.* GUCs and, when loaded from
 * shared_preload_libraries, registers the watchdog background worker.
 *
 * Runs once per process that loads the library: in the postmaster when
 * preloaded (backends inherit the definitions), else in each backend on
 * the first call of one of its functions.
 */
void
_PG_init(void)
{
	DefineCustomIntVariable("bgexec.max_payload_bytes",
							"Maximum size of a job payload.",
							"Measured on the uncompressed jsonb value as stored "
							"(what pg_column_size reports before compression), "
							"not on its text form.",
							&bgexec_max_payload_bytes,
							1024 * 1024,
							1024,
							(int) MaxAllocSize,
							PGC_SUSET,
							GUC_UNIT_BYTE,
							NULL, NULL, NULL);

	/*
	 * Bounds what finish and finish_many store, as the daemon's
	 * --max-result-bytes bounds what it sends: a worker of the SQL protocol
	 * could store a result of any size, and every reader (status, the
	 * gateway, a retry's claim) paid for it.  At most 256000000, under
	 * jsonb's 255 MiB, as the daemon's flag.
	 */
	DefineCustomIntVariable("bgexec.max_result_bytes",
							"Maximum size of the body finish stores (a result, an error).",
							"Measured on the uncompressed jsonb value, as "
							"bgexec.max_payload_bytes; past it the job fails "
							"with 54000 instead, not retried.",
							&bgexec_max_result_bytes,
							64 * 1024 * 1024,
							1024,
							256000000,
							PGC_SUSET,
							GUC_UNIT_BYTE,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("bgexec.notify_events",
							 "Sends NOTIFY bgexec_events for every job event.",
							 "Event tails (CLI, SSE) wake on it; turn it off to "
							 "save the NOTIFY commit lock when nobody tails.",
							 &bgexec_notify_events,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	/* PostgreSQL refuses PREPARE TRANSACTION after a NOTIFY: a two-phase
	 * commit that submits, stops, resumes or retries turns this and
	 * notify_events off for its transaction (SET LOCAL).  Workers on a
	 * preloaded server are woken by the commit-time wakes, not by it. */
	DefineCustomBoolVariable("bgexec.notify_jobs",
							 "Sends NOTIFY bgexec_jobs and bgexec_stop when jobs become runnable or are stopped.",
							 "Workers on a server without bgexec preloaded wake on it. "
							 "Off, for PREPARE TRANSACTION: such workers find the "
							 "jobs at their next poll and the stop at their next heartbeat.",
							 &bgexec_notify_jobs,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("bgexec.watchdog_interval",
							"Time between two runs of the in-server watchdog.",
							NULL,
							&bgexec_watchdog_interval,
							1000,
							10,
							60 * 60 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("bgexec.retention",
							"Age after which the watchdog purges finished jobs.",
							"Terminal jobs whose finished_at is older than this "
							"are deleted with their events; -1 turns purging off.",
							&bgexec_retention,
							-1,
							-1,
							INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("bgexec.retention_batch",
							"Maximum number of jobs purged per watchdog run.",
							"Keeps each purge transaction short.",
							&bgexec_retention_batch,
							1000,
							1,
							INT_MAX,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("bgexec.vacuum_threshold",
							"Dead rows of bgexec.job at which the watchdog vacuums it.",
							"Checked on every watchdog run, so that claims do not "
							"walk the index entries of the jobs claimed since the "
							"last vacuum; -1 leaves the table to autovacuum.",
							&bgexec_vacuum_threshold,
							10000,
							-1,
							INT_MAX,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	/*
	 * The watchdog settings are read once, by the postmaster.  PostgreSQL
	 * refuses to define a PGC_POSTMASTER variable in a backend that loads
	 * the module on first use (FATAL), so without preloading they are
	 * defined as PGC_SIGHUP instead: still visible and settable in
	 * postgresql.conf without a warning, and inert, since no watchdog runs.
	 */
	DefineCustomStringVariable("bgexec.database",
							   "Databases the watchdog serves, separated by commas.",
							   "One watchdog per database; the extension bgexec must be "
							   "installed there, and its watchdog idles while it is not.",
							   &bgexec_database,
							   "postgres",
							   process_shared_preload_libraries_in_progress ?
							   PGC_POSTMASTER : PGC_SIGHUP,
							   0,
							   NULL, NULL, NULL);

	DefineCustomBoolVariable("bgexec.watchdog",
							 "Starts the in-server watchdog background worker.",
							 "Only read when bgexec is in shared_preload_libraries.",
							 &bgexec_watchdog_enabled,
							 true,
							 process_shared_preload_libraries_in_progress ?
							 PGC_POSTMASTER : PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	/*
	 * A test hook, hidden: steps the wall clock that the wake module's due
	 * times and the watchdog read, in every process at once (wake.c,
	 * bgexec_wall_clock), as a step of the system clock would; now() in SQL
	 * and the monotonic clock are left alone.  test/e2e/106 steps it back.
	 */
	DefineCustomIntVariable("bgexec.debug_clock_offset",
							"Test hook: shifts the wall clock of bgexec's timers.",
							"Only for tests; 0 in production.",
							&bgexec_debug_clock_offset,
							0, INT_MIN, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS | GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE,
							NULL, bgexec_clock_offset_assign, NULL);

	MarkGUCPrefixReserved("bgexec");

	bgexec_caller_init();

	if (process_shared_preload_libraries_in_progress && bgexec_watchdog_enabled)
		bgexec_watchdog_register();
	if (process_shared_preload_libraries_in_progress)
	{
		prev_shmem_request_hook = shmem_request_hook;
		shmem_request_hook = bgexec_shmem_request;
		prev_shmem_startup_hook = shmem_startup_hook;
		shmem_startup_hook = bgexec_shmem_startup;
	}
}

/*
 * bgexec._caller() returns name: the role bgexec acts for.
 *
 * That is the role in effect where the client function was called
 * (caller.c): the owner of the innermost SECURITY DEFINER function outside
 * schema bgexec that is running, else the outer user, GetOuterUserId():
 * the session user, or the target of SET ROLE.  Inside bgexec's own
 * SECURITY DEFINER client functions current_user names their owner, and
 * the outer user alone named Alice inside Bob's SECURITY DEFINER function
 * that Alice called, where Bob's code runs as Bob.
 *
 * That role becomes bgexec.job.owner, which row-level security compares
 * with the reader; takes no locks, reads the syscache only.
 *
 * Except inside a security-restricted operation (ANALYZE, VACUUM, CREATE
 * INDEX, REINDEX, CLUSTER, REFRESH MATERIALIZED VIEW, autovacuum): there
 * PostgreSQL runs a table owner's code (an index expression, say) as that
 * owner, while the outer user stays whoever started the command, often a
 * superuser.  Naming the outer user there let a client's index expression,
 * run by a superuser's ANALYZE, act as the superuser: read and stop every
 * tenant's jobs, submit jobs the superuser owns.  Refused, 42501.
 */
static char *
outer_user_name(void)
{
	if (InSecurityRestrictedOperation())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("bgexec client functions cannot be called within a security-restricted operation"),
				 errdetail("ANALYZE, VACUUM, CREATE INDEX, REFRESH MATERIALIZED VIEW and the like run a table owner's code, not the session role's.")));
	return GetUserNameFromId(bgexec_caller_id(), false);
}

Datum
bgexec_caller(PG_FUNCTION_ARGS)
{
	char	   *rolname = outer_user_name();
	Name		result = (Name) palloc0(NAMEDATALEN);

	namestrcpy(result, rolname);
	PG_RETURN_NAME(result);
}

/*
 * bgexec._owner() -> name: the owner a job or schedule made now gets, _caller(),
 * refused (42501) when that is the group role bgexec_client or
 * bgexec_worker: a job one of them owned would be every member's to read
 * (row-level security compares owner and current_user).
 */
Datum
bgexec_owner(PG_FUNCTION_ARGS)
{
	char	   *rolname = outer_user_name();
	Name		result = (Name) palloc0(NAMEDATALEN);

	if (strcmp(rolname, "bgexec_client") == 0 || strcmp(rolname, "bgexec_worker") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("role %s cannot own jobs or schedules: every member of it could read them", rolname),
				 errhint("Act as your own role (RESET ROLE, or SET ROLE to a role of yours).")));
	namestrcpy(result, rolname);
	PG_RETURN_NAME(result);
}

/*
 * True when s[0..len) is 1 to max_len ASCII letters, digits and characters
 * of punct.  Non-ASCII bytes are refused, so the byte length is the
 * character length.
 */
bool
bgexec_name_chars_ok(const char *s, int len, int max_len, const char *punct)
{
	if (len < 1 || len > max_len)
		return false;
	for (int i = 0; i < len; i++)
	{
		char		c = s[i];

		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
			  (c >= '0' && c <= '9') || (c != '\0' && strchr(punct, c) != NULL)))
			return false;
	}
	return true;
}

/*
 * bgexec._valid_name(name text, max_len int) -> bool: true when name is 1 to
 * max_len characters of ASCII letters, digits, '_', '.', ':' and '-' (the
 * rule of job kinds and queue names, ^[A-Za-z0-9_.:-]{1,max_len}$).
 *
 * The job table's CHECK constraints call it, and PostgreSQL evaluates every
 * CHECK constraint on every UPDATE of a row, so a claim and a finish each
 * paid for two regular-expression matches per job; this loop costs a few
 * nanoseconds (bench/README.md).
 */
Datum
bgexec_valid_name(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(bgexec_text_name_ok(PG_GETARG_TEXT_PP(0), PG_GETARG_INT32(1)));
}

/*
 * Lease numbers and the WAL timeline (bgexec._lease_guard).  A promoted
 * standby knows lease_seq only as far as WAL reached it: after an
 * asynchronous failover it handed out again leases the old primary had
 * given in transactions it never received, and a worker of the old primary
 * still holding one had its finish accepted on the job claimed again
 * under the same number; a copy of the data directory started as it is
 * recovers to the copy's point on the same timeline, with the same effect.
 * On a timeline it has not checked, a backend's first claim compares the
 * timeline and the server's start with lease_epoch's and, when either
 * differs, moves lease_seq past every lease of the old ones.  A backend
 * lives within one server start: the timeline is all it keeps.
 *
 * lease_timeline_checked: the timeline this backend has checked, set at
 * the commit of the transaction that checked it (an aborted check is done
 * again).  0: none yet.
 */
static TimeLineID lease_timeline_checked = 0;
static TimeLineID lease_timeline_pending = 0;
static bool lease_callback_registered = false;

static void
lease_timeline_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT && lease_timeline_pending != 0)
		lease_timeline_checked = lease_timeline_pending;
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_PREPARE)
		lease_timeline_pending = 0;
}

/*
 * bgexec._lease_timeline_unchecked() -> bigint: the timeline new WAL is
 * written on, when this backend has not checked lease_seq for it; NULL
 * when it has, and during recovery (nothing is claimed there).  Called by
 * every claim: two reads of shared memory.
 */
Datum
bgexec_lease_timeline_unchecked(PG_FUNCTION_ARGS)
{
	TimeLineID	tli;

	if (RecoveryInProgress())
		PG_RETURN_NULL();
	tli = GetWALInsertionTimeLine();
	if (tli == lease_timeline_checked)
		PG_RETURN_NULL();
	PG_RETURN_INT64((int64) tli);
}

/*
 * bgexec._lease_timeline_checked(timeline bigint) -> void: this backend
 * has checked lease_seq for the timeline, as of its transaction's commit.
 */
Datum
bgexec_lease_timeline_checked(PG_FUNCTION_ARGS)
{
	if (!lease_callback_registered)
	{
		RegisterXactCallback(lease_timeline_xact_callback, NULL);
		lease_callback_registered = true;
	}
	lease_timeline_pending = (TimeLineID) PG_GETARG_INT64(0);
	PG_RETURN_VOID();
}

/*
 * bgexec._xid_is_current(xid) -> boolean: the xid is this transaction's or
 * one of its subtransactions' (not aborted), as TransactionIdIsCurrent-
 * TransactionId reads it.  A row's xmin compared with
 * pg_current_xact_id_if_assigned() missed a row written under a savepoint
 * or in a PL/pgSQL block with EXCEPTION: its xmin is the subtransaction's.
 */
Datum
bgexec_xid_is_current(PG_FUNCTION_ARGS)
{
	TransactionId xid = DatumGetTransactionId(PG_GETARG_DATUM(0));

	PG_RETURN_BOOL(TransactionIdIsNormal(xid) && TransactionIdIsCurrentTransactionId(xid));
}

/* bgexec.h: the entries a subtransaction that ended leaves at commit. */
int
bgexec_subxact_entries(SubXactEvent event, void *entries, int n, size_t size,
					   size_t level_offset)
{
	int			level = GetCurrentTransactionNestLevel();
	char	   *base = entries;
	int			kept = 0;

	for (int i = 0; i < n; i++)
	{
		char	   *e = base + i * size;
		int		   *at = (int *) (e + level_offset);

		if (*at < level)
			;					/* an outer level's: kept as it is */
		else if (event == SUBXACT_EVENT_ABORT_SUB)
			continue;			/* this subtransaction's: dropped */
		else if (event == SUBXACT_EVENT_COMMIT_SUB)
			*at = level - 1;	/* this subtransaction's: the parent's now */
		if (kept != i)
			memmove(base + kept * size, e, size);
		kept++;
	}
	return kept;
}

/*
 * The rule of job kinds and queue names on a text value (see
 * bgexec._valid_name); also checked by the job table's rules (checks.c).
 */
bool
bgexec_text_name_ok(const text *name, int max_len)
{
	return bgexec_name_chars_ok(VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name), max_len, "_.:-");
}
