/*-------------------------------------------------------------------------
 *
 * watchdog.c
 *	  The "bgexec watchdog" background worker: runs bgexec.reconcile() and
 *	  retention on a timer inside the server, so that expired leases and
 *	  deadlines are recovered, and due schedules fired (reconcile() fires
 *	  them), even when no worker host is alive (DESIGN §6).
 *
 * One worker per database bgexec.database names (a comma-separated list)
 * connects to it as the bootstrap superuser and,
 * every bgexec.watchdog_interval, runs
 *
 *		SELECT bgexec.reconcile()						-- always
 *		SELECT bgexec._retention($1, $2)				-- if bgexec.retention >= 0
 *		SELECT bgexec._retire_workers($1)				-- likewise
 *
 * each in its own transaction (_retention again, a batch a transaction,
 * while it purges whole batches, for up to half the interval: one batch a
 * tick, 1000 jobs a second at the defaults, fell behind a steadier stream
 * of jobs and let the table grow without bound), provided the extension
 * bgexec exists in that database (checked every tick: it may be created or
 * dropped at any time).
 * Both functions are safe to run concurrently with the daemons' own
 * reconcile timers (invariant 2), so this worker needs no coordination.
 * Then, when bgexec.job has bgexec.vacuum_threshold dead rows or more, it
 * vacuums that table (see watchdog_vacuum for why and how).
 *
 * Errors.  An ERROR in a tick (a serialization failure, a lock timeout, a
 * broken reconcile()) is caught, reported to the server log, and its
 * transaction aborted; the worker stays up and retries, backing off
 * exponentially (interval * 2^errors, capped at max(interval, 60 s)) while
 * errors persist, so that a broken function does not flood the log.  Exiting
 * on error instead would also work (the postmaster restarts the worker after
 * 10 s), but it would stall lease recovery for every transient error and
 * pay a new connection each time.  FATAL errors (SIGTERM, a missing
 * database) still end the process, and the postmaster restarts it after
 * bgw_restart_time.
 *
 * extension/watchdog.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "commands/vacuum.h"
#include "datatype/timestamp.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/varlena.h"

#include "bgexec/bgexec.h"

#define WATCHDOG_NAME			"bgexec watchdog"
#define WATCHDOG_RESTART_SECS	10
#define WATCHDOG_MAX_BACKOFF_MS	(60 * 1000)

/*
 * The vacuum of bgexec.job may take at most 1 / (1 + this) of the
 * watchdog's time: the next one starts no sooner than this many times the
 * last one's duration after it ended.
 */
#define VACUUM_PAUSE_FACTOR		3
/* After a failed vacuum, the wait before the next attempt. */
#define VACUUM_RETRY_MS			(60 * 1000)
/*
 * How long after the end of any vacuum of bgexec.job the count of its dead
 * rows is taken as the new baseline: the time the backends take to report
 * the rows that died before it (a busy backend reports once a second).
 */
#define VACUUM_SETTLE_MS		2000

/* The queries; the ::bigint casts let the SQL side return int or bigint. */
#define RECONCILE_QUERY		"SELECT bgexec.reconcile()::bigint"
#define RETENTION_QUERY		"SELECT bgexec._retention($1, $2)::bigint"
#define RETIRE_QUERY		"SELECT bgexec._retire_workers($1)::bigint"

/* What one transaction of a tick does. */
typedef enum WatchdogTask
{
	WATCHDOG_RECONCILE,
	WATCHDOG_RETENTION,
	WATCHDOG_RETIRE
} WatchdogTask;

/* Whether the extension was found on the last tick, to log only changes. */
typedef enum ExtensionState
{
	EXT_UNKNOWN,
	EXT_ABSENT,
	EXT_PRESENT
} ExtensionState;

/* Saved plans (SPI_keepplan), prepared on first use; they outlive ticks. */
static SPIPlanPtr reconcile_plan = NULL;
static SPIPlanPtr retention_plan = NULL;
static int64 retention_purged = 0;	/* by the last WATCHDOG_RETENTION task */
static SPIPlanPtr retire_plan = NULL;

static ExtensionState extension_state = EXT_UNKNOWN;

/* The earliest time of the next vacuum of bgexec.job (monotonic; 0: any time). */
static int64 vacuum_not_before = 0;

/*
 * Dead rows of bgexec.job that the statistics report but the last vacuum
 * already removed (see watchdog_vacuum_body), the end of that vacuum, and
 * whether the baseline has been taken since.
 */
static int64 dead_baseline = 0;
static TimestampTz last_vacuum_end = 0;	/* 0: not yet set */
static bool baseline_taken = true;

/* PortalContext of the vacuum (VACUUM keeps its own state under it). */
static MemoryContext vacuum_cxt = NULL;

static int64 watchdog_delay_ms(int consecutive_errors);
static bool watchdog_run(WatchdogTask task);
static bool watchdog_retention(void);
static void watchdog_task_body(WatchdogTask task);
static int64 watchdog_exec(SPIPlanPtr *plan, const char *query, int nargs,
						   Oid *argtypes, Datum *values);
static void watchdog_vacuum(void);
static bool watchdog_vacuum_body(void);
static void watchdog_recover(MemoryContext caller_cxt);
static void watchdog_task_done(MemoryContext caller_cxt);

/* The database this watchdog process serves (bgexec_watchdog_main). */
static const char *watchdog_db = NULL;

/*
 * The databases bgexec.database names: a comma-separated list, each name
 * as written (not folded to lower case; double quotes for one with a
 * comma or a space), a name given twice once.  A value without a comma
 * that does not parse as a list is one name as it is ('my db', which was
 * the one database this setting named before it took a list).  NIL when
 * the list does not parse.
 */
static List *
watchdog_databases(void)
{
	List	   *names = NIL;
	List	   *unique = NIL;
	ListCell   *lc;

	if (!SplitGUCList(pstrdup(bgexec_database), ',', &names))
	{
		if (strchr(bgexec_database, ',') != NULL || *bgexec_database == '\0')
			return NIL;
		names = list_make1(pstrdup(bgexec_database));
	}
	foreach(lc, names)
	{
		char	   *name = (char *) lfirst(lc);
		bool		seen = false;
		ListCell   *u;

		foreach(u, unique)
			seen = seen || strcmp((char *) lfirst(u), name) == 0;
		if (*name != '\0' && !seen)
			unique = lappend(unique, name);
	}
	return unique;
}

/*
 * Registers one watchdog, a static background worker, for each database
 * bgexec.database names: a tenant given a database of its own (README) had
 * no watchdog, so nothing took back its expired leases, fired its
 * schedules or purged its jobs while no worker was alive.  Each takes a
 * background worker slot (max_worker_processes).
 *
 * Must be called from _PG_init while shared_preload_libraries is being
 * processed (the postmaster is the only process that may register one).
 */
void
bgexec_watchdog_register(void)
{
	List	   *dbs = watchdog_databases();
	int			i = 0;
	ListCell   *lc;

	if (dbs == NIL)
		ereport(WARNING,
				(errmsg("bgexec.database \"%s\" names no database: no bgexec watchdog runs",
						bgexec_database),
				 errhint("Set it to a database name, or to several separated by commas.")));
	foreach(lc, dbs)
	{
		BackgroundWorker worker;

		memset(&worker, 0, sizeof(worker));
		worker.bgw_flags = BGWORKER_SHMEM_ACCESS |
			BGWORKER_BACKEND_DATABASE_CONNECTION;
		worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
		worker.bgw_restart_time = WATCHDOG_RESTART_SECS;
		strlcpy(worker.bgw_library_name, "bgexec", BGW_MAXLEN);
		strlcpy(worker.bgw_function_name, "bgexec_watchdog_main", BGW_MAXLEN);
		snprintf(worker.bgw_name, BGW_MAXLEN, "%s for %s", WATCHDOG_NAME, (char *) lfirst(lc));
		strlcpy(worker.bgw_type, WATCHDOG_NAME, BGW_MAXLEN);
		worker.bgw_main_arg = Int32GetDatum(i++);
		worker.bgw_notify_pid = 0;

		RegisterBackgroundWorker(&worker);
	}
}

/*
 * Entry point of the watchdog process: connect, then tick forever.
 *
 * A tick starts bgexec.watchdog_interval after the previous one ended
 * (longer while ticks keep failing, see watchdog_delay_ms).  A SIGHUP wakes
 * the loop to reload the configuration; the new interval applies to the
 * wait in progress, and no extra tick runs.  Exits through die() on
 * SIGTERM, or with the postmaster.
 */
void
bgexec_watchdog_main(Datum main_arg)
{
	MemoryContext loop_cxt;
	int64		last_tick_end = 0;	/* monotonic; 0: tick at once */
	int			consecutive_errors = 0;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	pqsignal(SIGINT, StatementCancelHandler);	/* pg_cancel_backend: abort a tick */
	BackgroundWorkerUnblockSignals();

	watchdog_db = (const char *) list_nth(watchdog_databases(), DatumGetInt32(main_arg));
	BackgroundWorkerInitializeConnection(watchdog_db, NULL, 0);

	/*
	 * The watchdog runs as a superuser: resolve nothing through a schema a
	 * user can write.  Its queries name bgexec.* explicitly, and pg_temp
	 * comes last (left out, it would be searched first for types).
	 */
	SetConfigOption("application_name", WATCHDOG_NAME,
					PGC_USERSET, PGC_S_SESSION);
	SetConfigOption("search_path", "pg_catalog, pg_temp",
					PGC_USERSET, PGC_S_SESSION);

	/*
	 * The schedules it fires count a capped queue's jobs after a lock, which
	 * only READ COMMITTED sees past (_require_read_committed), whatever the
	 * database's default_transaction_isolation.
	 */
	SetConfigOption("default_transaction_isolation", "read committed",
					PGC_USERSET, PGC_S_SESSION);

	/*
	 * The watchdog's own bounds, whatever the database, its role or
	 * postgresql.conf set (as the daemon's sessions, set_own_timeouts): no
	 * lock_timeout, and transactions that may write.  Its functions bound
	 * the waits a client can prolong themselves (_fire_schedules); a
	 * database's lock_timeout of 10 ms made every tick that met a lock a
	 * client held for a moment (a SHARE lock on bgexec.job: _recount, a
	 * CREATE INDEX) fail and log, and back off, its expired jobs left
	 * running; a database's default_transaction_read_only failed every
	 * tick.  statement_timeout and idle_in_transaction_session_timeout are
	 * armed by a client backend's command loop only, never here: set to 0
	 * as well, so that what the watchdog runs with reads in one place.
	 */
	SetConfigOption("lock_timeout", "0", PGC_USERSET, PGC_S_SESSION);
	SetConfigOption("statement_timeout", "0", PGC_USERSET, PGC_S_SESSION);
	SetConfigOption("idle_in_transaction_session_timeout", "0",
					PGC_USERSET, PGC_S_SESSION);
	SetConfigOption("default_transaction_read_only", "off",
					PGC_USERSET, PGC_S_SESSION);

	ereport(LOG,
			(errmsg("bgexec watchdog started in database \"%s\"",
					watchdog_db)));

	loop_cxt = AllocSetContextCreate(TopMemoryContext,
									 "bgexec watchdog loop",
									 ALLOCSET_DEFAULT_SIZES);

	for (;;)
	{
		bool		ok;

		/*
		 * A cancel (pg_cancel_backend) is meant for a running tick; between
		 * ticks there is nothing to cancel, and outside PG_TRY the ERROR it
		 * would raise here would end the process.  Drop it.
		 */
		QueryCancelPending = false;
		CHECK_FOR_INTERRUPTS();

		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		/*
		 * On the monotonic clock: on the wall clock, a step of it back (NTP,
		 * a VM resumed) stopped the ticks for the step's length.
		 */
		if (last_tick_end != 0)
		{
			int64		due = last_tick_end + watchdog_delay_ms(consecutive_errors) * 1000;
			long		delay_ms = (long) ((due - bgexec_mono_clock() + 999) / 1000);

			if (delay_ms > 0)
			{
				(void) WaitLatch(MyLatch,
								 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
								 delay_ms,
								 PG_WAIT_EXTENSION);
				ResetLatch(MyLatch);
				continue;
			}
		}

		MemoryContextReset(loop_cxt);
		MemoryContextSwitchTo(loop_cxt);

		ok = watchdog_run(WATCHDOG_RECONCILE);
		if (bgexec_retention >= 0 && extension_state == EXT_PRESENT)
			ok = watchdog_retention() && ok;
		if (bgexec_vacuum_threshold >= 0 && extension_state == EXT_PRESENT)
			watchdog_vacuum();

		if (ok)
			consecutive_errors = 0;
		else if (consecutive_errors < 30)
			consecutive_errors++;
		last_tick_end = bgexec_mono_clock();
	}
}

/*
 * Returns the wait before the next tick: bgexec.watchdog_interval, doubled
 * for each consecutive failed tick, capped at max(interval, 60 s).
 */
static int64
watchdog_delay_ms(int consecutive_errors)
{
	int64		wait_ms = bgexec_watchdog_interval;
	int64		cap = Max(wait_ms, (int64) WATCHDOG_MAX_BACKOFF_MS);

	if (consecutive_errors > 0)
		wait_ms = Min(wait_ms << Min(consecutive_errors, 20), cap);
	return wait_ms;
}

/*
 * Runs one task of a tick in its own transaction; returns false if it
 * raised an ERROR, which is then logged and rolled back.
 *
 * Caller's memory context must not be a transaction context (it is the loop
 * context); it is current again on return.  On error, AbortCurrentTransaction
 * releases every lock, snapshot and SPI connection the task held.
 */
static bool
watchdog_run(WatchdogTask task)
{
	MemoryContext caller_cxt = CurrentMemoryContext;
	volatile bool ok = true;

	PG_TRY();
	{
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		PushActiveSnapshot(GetTransactionSnapshot());

		watchdog_task_body(task);

		PopActiveSnapshot();
		SPI_finish();
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		watchdog_recover(caller_cxt);
		ok = false;
	}
	PG_END_TRY();

	watchdog_task_done(caller_cxt);
	return ok;
}

/*
 * The error recovery of a task's transaction, called from its PG_CATCH
 * block, in the order of a regular backend's: reports the error, aborts the
 * transaction (releasing every lock, snapshot and SPI connection it held)
 * and makes caller_cxt current again.
 */
static void
watchdog_recover(MemoryContext caller_cxt)
{
	HOLD_INTERRUPTS();
	MemoryContextSwitchTo(caller_cxt);
	EmitErrorReport();
	AbortCurrentTransaction();
	FlushErrorState();
	RESUME_INTERRUPTS();
}

/*
 * After a task, done or failed: caller_cxt current again, the task's
 * statistics reported, and the process shown idle in pg_stat_activity.
 */
static void
watchdog_task_done(MemoryContext caller_cxt)
{
	MemoryContextSwitchTo(caller_cxt);
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);
}

/*
 * Does one task inside the transaction watchdog_run opened: nothing if the
 * extension is absent, else the query, and logs what it changed.
 *
 * Locks: whatever bgexec.reconcile() / bgexec._retention() /
 * bgexec._retire_workers() take (row locks on the jobs and worker rows they
 * change, SKIP LOCKED in the last two); this code itself takes none beyond the
 * catalog lookup of the extension.
 */
static void
watchdog_task_body(WatchdogTask task)
{
	bool		present = OidIsValid(get_extension_oid("bgexec", true));
	ExtensionState state = present ? EXT_PRESENT : EXT_ABSENT;

	if (state != extension_state)
	{
		if (state == EXT_PRESENT)
			ereport(LOG,
					(errmsg("bgexec watchdog: extension bgexec found in database \"%s\", reconciling every %d ms",
							watchdog_db, bgexec_watchdog_interval)));
		else
			ereport(extension_state == EXT_UNKNOWN ? DEBUG1 : LOG,
					(errmsg("bgexec watchdog: extension bgexec is not installed in database \"%s\", idle",
							watchdog_db)));
		extension_state = state;
	}
	if (!present)
		return;

	if (task == WATCHDOG_RECONCILE)
	{
		int64		n = watchdog_exec(&reconcile_plan, RECONCILE_QUERY,
									  0, NULL, NULL);

		ereport(n > 0 ? LOG : DEBUG1,
				(errmsg("bgexec watchdog reconciled " INT64_FORMAT " jobs", n)));
	}
	else
	{
		Interval   *older_than = (Interval *) palloc0(sizeof(Interval));
		Oid			argtypes[2] = {INTERVALOID, INT4OID};
		Datum		values[2];
		int64		n;

		older_than->time = (int64) bgexec_retention * USECS_PER_SEC;
		values[0] = IntervalPGetDatum(older_than);
		values[1] = Int32GetDatum(bgexec_retention_batch);
		if (task == WATCHDOG_RETENTION)
			retention_purged = watchdog_exec(&retention_plan, RETENTION_QUERY,
											 2, argtypes, values);
		else
		{
			/* The rows of workers gone as long (one statement, few rows). */
			n = watchdog_exec(&retire_plan, RETIRE_QUERY, 1, argtypes, values);
			ereport(n > 0 ? LOG : DEBUG1,
					(errmsg("bgexec watchdog removed " INT64_FORMAT " rows of workers gone", n)));
		}
	}
}

/*
 * Retention, a tick's worth: _retention a batch a transaction while it
 * purges whole batches, for up to half of bgexec.watchdog_interval, then
 * _retire_workers; one log line for the tick's purge.  Returns false if a
 * transaction raised an ERROR.
 */
static bool
watchdog_retention(void)
{
	int64		start = bgexec_mono_clock();
	int64		purged = 0;
	bool		ok;

	for (;;)
	{
		retention_purged = 0;
		ok = watchdog_run(WATCHDOG_RETENTION);
		purged += retention_purged;
		if (!ok || extension_state != EXT_PRESENT || retention_purged < bgexec_retention_batch ||
			bgexec_mono_clock() - start >= (int64) bgexec_watchdog_interval * 500)
			break;
		CHECK_FOR_INTERRUPTS();
	}
	ereport(purged > 0 ? LOG : DEBUG1,
			(errmsg("bgexec watchdog purged " INT64_FORMAT " finished jobs", purged)));
	return watchdog_run(WATCHDOG_RETIRE) && ok;
}

/*
 * Executes a one-row bigint query through a saved plan (prepared on first
 * use), returning its value, 0 for NULL.
 *
 * Caller holds an SPI connection and an active snapshot.  A saved plan
 * survives DROP/CREATE EXTENSION: the plan cache re-analyzes it.
 */
static int64
watchdog_exec(SPIPlanPtr *plan, const char *query, int nargs,
			  Oid *argtypes, Datum *values)
{
	int			rc;
	bool		isnull;
	Datum		d;

	if (*plan == NULL)
	{
		SPIPlanPtr	p = SPI_prepare(query, nargs, argtypes);

		if (p == NULL)
			elog(ERROR, "SPI_prepare(\"%s\") failed: %s",
				 query, SPI_result_code_string(SPI_result));
		if (SPI_keepplan(p) != 0)
			elog(ERROR, "SPI_keepplan failed");
		*plan = p;
	}

	pgstat_report_activity(STATE_RUNNING, query);
	rc = SPI_execute_plan(*plan, values, NULL, false, 1);
	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "\"%s\" failed: %s", query, SPI_result_code_string(rc));

	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	return isnull ? 0 : DatumGetInt64(d);
}

/*
 * Vacuums bgexec.job when it has bgexec.vacuum_threshold dead rows or more
 * (by the cumulative statistics: see watchdog_vacuum_body) and the pause
 * after the previous vacuum is over.
 *
 * Why.  A claim reads job_runnable_idx from the head of its queue.  The
 * entries of the jobs claimed since the last vacuum are dead, and scans mark
 * them so, but they stay on the index's leaf pages until a VACUUM deletes
 * them, so every claim walks those pages first.  Autovacuum looks at a
 * database once per autovacuum_naptime (a minute): in the burn-down of a
 * backlog of a million jobs, claims read about 3 700 index pages each and
 * the drain ran at 13 400 jobs/s, against 21 300 with this vacuum
 * (bench/README.md, bench/burn-down.sh).
 *
 * How: as VACUUM (SKIP_LOCKED, INDEX_CLEANUP ON, TRUNCATE OFF) bgexec.job.
 * INDEX_CLEANUP ON because the index entries are the point, and by default
 * PostgreSQL skips the indexes when under 2 % of the table's pages have dead
 * rows; TRUNCATE OFF because truncation takes an ACCESS EXCLUSIVE lock,
 * which would stall the claims; SKIP_LOCKED so that a vacuum already running
 * (autovacuum's) is left alone, silently (no relation name is passed, so
 * there is nothing to report).  The job table's TOAST table is left to
 * autovacuum: claims and finishes do not rewrite toasted payloads.  A vacuum
 * reads every index of the table whole, so its cost grows with the retained
 * history; VACUUM_PAUSE_FACTOR bounds the share of time it can take.
 *
 * The vacuum runs in the tick, so it delays the next reconcile() by its
 * duration (0.2 s for a table of a million jobs here); leases last tens of
 * seconds.  Errors are reported and rolled back like a tick's; the next
 * attempt waits VACUUM_RETRY_MS.  They do not slow down reconcile's ticks.
 */
static void
watchdog_vacuum(void)
{
	MemoryContext caller_cxt = CurrentMemoryContext;
	TimestampTz start = GetCurrentTimestamp();
	int64		mono_start = bgexec_mono_clock();
	volatile bool vacuumed = false;
	volatile bool ok = true;

	if (mono_start < vacuum_not_before)
		return;
	/* Only vacuums that end from now on move the baseline. */
	if (last_vacuum_end == 0)
		last_vacuum_end = start;
	if (vacuum_cxt == NULL)
		vacuum_cxt = AllocSetContextCreate(TopMemoryContext,
										   "bgexec watchdog vacuum",
										   ALLOCSET_DEFAULT_SIZES);

	PG_TRY();
	{
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		PortalContext = vacuum_cxt;
		vacuumed = watchdog_vacuum_body();
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		watchdog_recover(caller_cxt);
		ok = false;
	}
	PG_END_TRY();

	PortalContext = NULL;
	MemoryContextReset(vacuum_cxt);
	watchdog_task_done(caller_cxt);

	if (!ok)
		vacuum_not_before = bgexec_mono_clock() + (int64) VACUUM_RETRY_MS * 1000;
	else if (vacuumed)
	{
		int64		end = bgexec_mono_clock();
		long		ms = (long) ((end - mono_start) / 1000);

		vacuum_not_before = end + (int64) ms * VACUUM_PAUSE_FACTOR * 1000;
		ereport(DEBUG1,
				(errmsg("bgexec watchdog vacuumed bgexec.job in %ld ms", ms)));
	}
}

/*
 * Inside the transaction watchdog_vacuum opened: looks up bgexec.job and its
 * dead rows and, when there are enough, vacuums it; returns whether it did.
 * VACUUM commits the caller's transaction and starts a new one on return
 * (as it does in a backend), which the caller then commits.
 *
 * Dead rows are counted from a baseline.  A vacuum resets the statistics'
 * count to what it left, but a backend reports its changes up to a second
 * or more after it commits them, so rows that died before a vacuum and were
 * removed by it are added to the count afterwards, and stay in it until the
 * next vacuum.  Counted as they are, a DELETE of 30 000 jobs followed by a
 * VACUUM (or an autovacuum) made the watchdog vacuum again a second later,
 * for nothing.  So after any vacuum of the table (its end, from the
 * statistics' timestamps) the watchdog waits VACUUM_SETTLE_MS, takes the
 * count then as the baseline, and vacuums once there are
 * bgexec.vacuum_threshold more.  Rows that really died during those two
 * seconds are counted only by the vacuum after next; in a drain they are
 * a few seconds of claims.  A baseline not taken within two more seconds
 * is zero.
 */
static bool
watchdog_vacuum_body(void)
{
	Oid			nsp = get_namespace_oid("bgexec", true);
	Oid			relid = OidIsValid(nsp) ? get_relname_relid("job", nsp) : InvalidOid;
	PgStat_StatTabEntry *stats;
	VacuumParams params;
	MemoryContext old_cxt;
	List	   *rels;
	TimestampTz ended;

	if (!OidIsValid(relid))
		return false;
	stats = pgstat_fetch_stat_tabentry(relid);
	if (stats == NULL)
		return false;

	ended = Max(stats->vacuum_timestamp, stats->autovac_vacuum_timestamp);
	if (ended > last_vacuum_end)
	{
		last_vacuum_end = ended;
		baseline_taken = false;
	}
	if (!baseline_taken)
	{
		TimestampTz now = GetCurrentTimestamp();

		if (now < TimestampTzPlusMilliseconds(last_vacuum_end, VACUUM_SETTLE_MS))
			return false;
		/*
		 * Taken late (the watchdog was busy, or the vacuum was turned off
		 * meanwhile), the count would hold rows that died since: none then.
		 */
		if (now < TimestampTzPlusMilliseconds(last_vacuum_end, 2 * VACUUM_SETTLE_MS))
			dead_baseline = stats->n_dead_tuples;
		else
			dead_baseline = 0;
		baseline_taken = true;
	}
	/* Statistics reset, or a new table (the extension created again). */
	if (stats->n_dead_tuples < dead_baseline)
		dead_baseline = stats->n_dead_tuples;
	if (stats->n_dead_tuples - dead_baseline < bgexec_vacuum_threshold)
		return false;

	memset(&params, 0, sizeof(params));
	params.options = VACOPT_VACUUM | VACOPT_SKIP_LOCKED;
	params.freeze_min_age = -1;
	params.freeze_table_age = -1;
	params.multixact_freeze_min_age = -1;
	params.multixact_freeze_table_age = -1;
	params.is_wraparound = false;
	params.log_min_duration = -1;
	params.index_cleanup = VACOPTVALUE_ENABLED;
	params.truncate = VACOPTVALUE_DISABLED;
	params.nworkers = -1;		/* no parallel workers */

	/* The target must outlive this transaction, which VACUUM commits. */
	old_cxt = MemoryContextSwitchTo(vacuum_cxt);
	rels = list_make1(makeVacuumRelation(NULL, relid, NIL));
	MemoryContextSwitchTo(old_cxt);

	pgstat_report_activity(STATE_RUNNING, "VACUUM bgexec.job");
	vacuum(rels, &params, NULL, true);
	return true;
}
