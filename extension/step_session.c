/*
 * step_session.c — the sessions of workers' sql steps, which the database
 * ends when it takes their lease back.
 *
 * A sql step runs the job owner's statement in a transaction on a session
 * of its own.  A worker that can no longer act — stopped (SIGSTOP, a
 * debugger), frozen, cut off with its session alive — cannot cancel it: the
 * statement ran on (the server's connection check sees a socket still
 * open), holding its locks and doing its writes, beside the job's next
 * attempt on another worker.  The worker's step guard ends such a worker's
 * processes, but not a statement on the server.
 *
 * So the step's transaction first calls _step_session(job_id, lease), which
 * marks this backend's slot in shared memory with the job and the lease
 * until the transaction ends, and then refuses to go on unless the job is
 * running under that lease on the latest committed state.  When reconcile() takes a running job's lease
 * back (it expired, or the job passed its deadline), it calls
 * _end_step_sessions(job_id, lease): when reconcile's transaction commits,
 * each backend whose transaction is so marked is sent SIGTERM, as
 * pg_terminate_backend() does, and its transaction rolls back.  So does
 * every other way out of running under a lease: finish() and finish_many()
 * (completed, failed and retried, cancelled, timed out, suspended) and
 * unclaim().  The worker's own cancel is not enough: a statement may turn
 * off the server's connection check (client_connection_check_interval is
 * a user's setting) and catch every cancel, and the session the worker
 * closed after --kill-grace then ran on for ever, beside the job's next
 * attempt, after its job failed, was stopped or timed out.  By then the
 * lease has expired on the database's clock: the worker that held it may
 * write nothing more for the job, and the statement cannot commit anything
 * it would own.  At commit, not at the call: a reconcile that rolls back
 * (an error, a cancel, a ROLLBACK, a subtransaction of reconcile(each)
 * that fails) has taken nothing back, and the lease it left is still the
 * worker's, and so is its step.  A prepared reconcile ends them at PREPARE
 * TRANSACTION, which is its promise to commit.
 *
 * The slots are in shared memory: bgexec must be in shared_preload_libraries.
 * Without it _step_session does nothing and no session is ended.
 *
 * Locking: one LWLock.  A step's transaction takes it exclusively twice
 * (mark, clear at its end); reconcile takes it shared for a scan, only for
 * the jobs it takes back, and again at its commit.
 *
 * extension/step_session.c
 */
#include "postgres.h"

#include <signal.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/array.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "bgexec/bgexec.h"

typedef struct StepSlot
{
	int			pid;			/* 0: free */
	Oid			dboid;
	int64		job_id;
	int64		lease;
} StepSlot;

typedef struct StepShared
{
	LWLock	   *lock;
	/*
	 * How many slots are marked (pid not 0).  Read without the lock at the
	 * commit of a transaction that asked for ends: 0, the common case (no
	 * sql step runs), costs the commit of a finish_many of noop jobs one
	 * read, not a pass over the slots under the lock.
	 */
	pg_atomic_uint32 nmarked;
	int			nslots;
	StepSlot	slots[FLEXIBLE_ARRAY_MEMBER];
} StepShared;

static StepShared *step_shared = NULL;

/* Whether this backend's transaction marked its slot, and with what. */
static bool marked = false;
static int64 mark_job = 0;
static int64 mark_lease = 0;
/* Whether _step_mark handed the mark out already (once per transaction). */
static bool mark_taken = false;
static bool callback_registered = false;

/* The step sessions this transaction ends when it commits. */
typedef struct EndRequest
{
	int64		job_id;
	int64		lease;
	int			level;			/* subtransaction nesting level */
} EndRequest;

static EndRequest *ends = NULL;	/* in TopTransactionContext */
static int	nends = 0;
static int	maxends = 0;

PG_FUNCTION_INFO_V1(bgexec_step_session);
PG_FUNCTION_INFO_V1(bgexec_end_step_sessions);
PG_FUNCTION_INFO_V1(bgexec_end_step_sessions_many);
PG_FUNCTION_INFO_V1(bgexec_step_mark);

static Size
step_shmem_size(void)
{
	return add_size(offsetof(StepShared, slots), mul_size(MaxBackends, sizeof(StepSlot)));
}

/* Reserves the slots and their lock (bgexec.c's shmem_request_hook). */
void
bgexec_step_session_shmem_request(void)
{
	RequestAddinShmemSpace(step_shmem_size());
	RequestNamedLWLockTranche("bgexec_step_session", 1);
}

/* Attaches to (or creates) the slots (bgexec.c's shmem_startup_hook). */
void
bgexec_step_session_shmem_startup(void)
{
	bool		found;

	step_shared = ShmemInitStruct("bgexec_step_session", step_shmem_size(), &found);
	if (!found)
	{
		memset(step_shared, 0, step_shmem_size());
		step_shared->lock = &(GetNamedLWLockTranche("bgexec_step_session"))->lock;
		pg_atomic_init_u32(&step_shared->nmarked, 0);
		step_shared->nslots = MaxBackends;
	}
}

/* This backend's slot; NULL without shared memory. */
static StepSlot *
my_slot(void)
{
	if (step_shared == NULL || MyBackendId < 1 || MyBackendId > step_shared->nslots)
		return NULL;
	return &step_shared->slots[MyBackendId - 1];
}

/* Clears this backend's mark (its transaction ended). */
static void
clear_mark(void)
{
	StepSlot   *slot = my_slot();

	if (!marked)
		return;
	marked = false;
	if (slot == NULL)
		return;
	LWLockAcquire(step_shared->lock, LW_EXCLUSIVE);
	if (slot->pid == MyProcPid)
	{
		memset(slot, 0, sizeof(StepSlot));
		pg_atomic_fetch_sub_u32(&step_shared->nmarked, 1);
	}
	LWLockRelease(step_shared->lock);
}

/*
 * How many backends of this database, not this one, have their transaction
 * marked as the step of one of the n jobs under its lease (jobs[r],
 * leases[r]): those end_requested ends at commit.  One pass over the slots
 * whatever n, none when no slot is marked anywhere.
 */
static int
count_marked(const int64 *jobs, const int64 *leases, int n)
{
	int			marked = 0;

	if (pg_atomic_read_u32(&step_shared->nmarked) == 0)
		return 0;
	LWLockAcquire(step_shared->lock, LW_SHARED);
	for (int i = 0; i < step_shared->nslots; i++)
	{
		StepSlot   *s = &step_shared->slots[i];

		if (s->pid == 0 || s->pid == MyProcPid || s->dboid != MyDatabaseId)
			continue;
		for (int r = 0; r < n; r++)
			if (jobs[r] == s->job_id && leases[r] == s->lease)
			{
				marked++;
				break;
			}
	}
	LWLockRelease(step_shared->lock);
	return marked;
}

/* A session end_requested signalled, for its log line after the lock. */
typedef struct Ended
{
	int			pid;
	int64		job_id;
	int64		lease;
} Ended;

/*
 * end_requested's list of what it signalled, allocated once per backend in
 * TopMemoryContext by end_scratch when a request is recorded: it runs at
 * commit, after the commit record, where nothing may raise an ERROR.
 */
static Ended *ended = NULL;		/* [nslots] */

/* Allocates end_requested's list, if not yet (may raise an ERROR). */
static void
end_scratch(void)
{
	if (ended == NULL && step_shared != NULL)
		ended = MemoryContextAlloc(TopMemoryContext, sizeof(Ended) * step_shared->nslots);
}

/*
 * At commit: sends SIGTERM to each backend of this database, not this one,
 * whose transaction is marked as the step of a job under a lease this
 * transaction took back (ends), once.  One pass over the slots, under one
 * acquisition of the lock: a pass over the slots for each lease took the
 * lock 20 000 times at the commit of a reconcile that took back 20 000
 * leases.  Only marked slots are compared with the requests, so a lease
 * requested twice still ends its session once.  The log lines are written
 * after the lock is released (every sql step's mark and clear wait for it).
 * Allocates nothing: end_scratch has run.
 *
 * None marked (nmarked 0, read after a barrier), none to end: this
 * transaction's commit is visible by now (the callback runs after it), and
 * a step marks its slot (an atomic add, a full barrier) before it reads
 * the job's row on the latest snapshot, so a step this read misses sees
 * the job no longer running under its lease, and refuses to run.
 */
static void
end_requested(void)
{
	int			nended = 0;

	if (ended == NULL)
		return;
	pg_memory_barrier();
	if (pg_atomic_read_u32(&step_shared->nmarked) == 0)
		return;
	LWLockAcquire(step_shared->lock, LW_SHARED);
	for (int i = 0; i < step_shared->nslots; i++)
	{
		StepSlot   *s = &step_shared->slots[i];

		if (s->pid == 0 || s->pid == MyProcPid || s->dboid != MyDatabaseId)
			continue;
		for (int r = 0; r < nends; r++)
		{
			if (ends[r].job_id != s->job_id || ends[r].lease != s->lease)
				continue;
			/* As pg_terminate_backend: a backend leads its process group. */
#ifdef HAVE_SETSID
			if (kill(-s->pid, SIGTERM) == 0)
#else
			if (kill(s->pid, SIGTERM) == 0)
#endif
				ended[nended++] = (Ended) {s->pid, s->job_id, s->lease};
			break;
		}
	}
	LWLockRelease(step_shared->lock);
	for (int i = 0; i < nended; i++)
		ereport(LOG,
				(errmsg("terminating the sql step session (pid %d) of job " INT64_FORMAT
						": the job is no longer running under its lease " INT64_FORMAT,
						ended[i].pid, ended[i].job_id, ended[i].lease)));
}

static void
step_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PREPARE:

			/*
			 * After the commit record (or at PREPARE's promise to commit):
			 * nothing here may raise an ERROR, and none is caught (a catch
			 * left InterruptHoldoffCount at -1: the backend then ignored
			 * cancel and terminate).  end_requested allocates nothing.
			 */
			if (nends > 0 && step_shared != NULL)
				end_requested();
			/* FALLTHROUGH */
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			ends = NULL;		/* freed with TopTransactionContext */
			nends = maxends = 0;
			clear_mark();
			break;
		default:
			break;
	}
}

/* Subtransaction callback: an aborted subtransaction ends no session. */
static void
step_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					  SubTransactionId parentSubid, void *arg)
{
	nends = bgexec_subxact_entries(event, ends, nends, sizeof(EndRequest),
								   offsetof(EndRequest, level));
}

static void
register_callbacks(void)
{
	if (callback_registered)
		return;
	RegisterXactCallback(step_xact_callback, NULL);
	RegisterSubXactCallback(step_subxact_callback, NULL);
	callback_registered = true;
}

/*
 * Whether the job is running under the lease, on the latest committed
 * state: not the transaction's snapshot, which under REPEATABLE READ (a
 * database's default_transaction_isolation) was taken before the mark.
 * The function is SECURITY DEFINER: the job table's row-level security
 * does not hide the row from the worker's role.
 */
static bool
lease_current(int64 job_id, int64 lease)
{
	static SPIPlanPtr plan = NULL;
	Datum		values[2] = {Int64GetDatum(job_id), Int64GetDatum(lease)};
	bool		current;
	int			rc;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (plan == NULL)
	{
		Oid			types[2] = {INT8OID, INT8OID};
		SPIPlanPtr	p = SPI_prepare("SELECT 1 FROM bgexec.job"
									" WHERE id = $1 AND lease = $2 AND status = 'running'",
									2, types);

		if (p == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		if (SPI_keepplan(p) != 0)
			elog(ERROR, "SPI_keepplan failed");
		plan = p;
	}
	rc = SPI_execute_snapshot(plan, values, NULL, GetLatestSnapshot(), InvalidSnapshot,
							  true, false, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "SPI_execute_snapshot failed: %s", SPI_result_code_string(rc));
	current = SPI_processed > 0;
	SPI_finish();
	return current;
}

/*
 * _step_session(job_id bigint, lease bigint): marks this backend's
 * transaction as the sql step of the job under the lease, until it ends.
 * Inside a transaction block (it would end with the statement otherwise),
 * once per transaction; refused (55000) unless the job is running under
 * the lease.
 */
Datum
bgexec_step_session(PG_FUNCTION_ARGS)
{
	StepSlot   *slot;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("job_id must not be null")));
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease must not be null")));
	if (!IsTransactionBlock())
		ereport(ERROR,
				(errcode(ERRCODE_NO_ACTIVE_SQL_TRANSACTION),
				 errmsg("_step_session must be called inside a transaction block"),
				 errhint("The mark lasts until the transaction ends: BEGIN first.")));
	if (marked)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("_step_session was called already in this transaction")));
	register_callbacks();
	slot = my_slot();
	marked = true;
	mark_job = PG_GETARG_INT64(0);
	mark_lease = PG_GETARG_INT64(1);
	mark_taken = false;
	if (slot != NULL)
	{
		LWLockAcquire(step_shared->lock, LW_EXCLUSIVE);
		/* A slot left marked (it cannot be) is counted already. */
		if (slot->pid == 0)
			pg_atomic_fetch_add_u32(&step_shared->nmarked, 1);
		slot->pid = MyProcPid;
		slot->dboid = MyDatabaseId;
		slot->job_id = PG_GETARG_INT64(0);
		slot->lease = PG_GETARG_INT64(1);
		LWLockRelease(step_shared->lock);
	}
	/*
	 * Marked first, checked after: a reconcile that commits after this
	 * check ends the session at its commit, and one that committed before
	 * it is seen here.  Without the check a step started after reconcile
	 * took its lease back (a worker frozen between its last heartbeat and
	 * the step) ran and committed beside the job's next attempt.
	 */
	if (!lease_current(PG_GETARG_INT64(0), PG_GETARG_INT64(1)))
	{
		clear_mark();			/* caught in a subtransaction, it would stay */
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the job's lease is not current: its sql step does not run"),
				 errdetail("Job " INT64_FORMAT ", lease " INT64_FORMAT ".",
						   PG_GETARG_INT64(0), PG_GETARG_INT64(1)),
				 errhint("The lease was taken back (it expired, or the job passed its deadline), or the job ended.")));
	}
	PG_RETURN_BOOL(slot != NULL);	/* false: not preloaded, nothing marked */
}

/*
 * Records that this transaction, at its commit, ends the step sessions of
 * the job under the lease.  The same lease again, at the same level, is
 * not recorded twice: only the last request is compared.  A comparison
 * with every request was quadratic (0.2 s of a reconcile that took back
 * 20 000 leases, each asked for once); a lease asked for again after
 * others is one more request, which end_requested still ends once.
 */
static void
request_end(int64 job_id, int64 lease, int level)
{
	if (nends > 0 && ends[nends - 1].job_id == job_id && ends[nends - 1].lease == lease &&
		ends[nends - 1].level == level)
		return;
	if (nends == maxends)
	{
		int			grow = maxends == 0 ? 8 : maxends * 2;

		ends = ends == NULL
			? MemoryContextAlloc(TopTransactionContext, grow * sizeof(EndRequest))
			: repalloc(ends, grow * sizeof(EndRequest));
		maxends = grow;
	}
	ends[nends].job_id = job_id;
	ends[nends].lease = lease;
	ends[nends].level = level;
	nends++;
}

/*
 * _end_step_sessions(job_id bigint, lease bigint) → int: when this
 * transaction commits, terminates each backend of this database whose
 * transaction is then the sql step of the job under the lease (SIGTERM: its
 * transaction rolls back); how many are so marked now.  reconcile() calls
 * it for each lease it takes back.
 */
Datum
bgexec_end_step_sessions(PG_FUNCTION_ARGS)
{
	int64		job_id;
	int64		lease;
	int			level = GetCurrentTransactionNestLevel();

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || step_shared == NULL)
		PG_RETURN_INT32(0);
	job_id = PG_GETARG_INT64(0);
	lease = PG_GETARG_INT64(1);
	register_callbacks();
	end_scratch();				/* end_requested's list, before any commit */
	request_end(job_id, lease, level);
	PG_RETURN_INT32(count_marked(&job_id, &lease, 1));
}

/*
 * _end_step_sessions(job_ids bigint[], leases bigint[]) → int: the same for
 * each job and lease at one position of the two arrays, in one call:
 * finish_many's, for the jobs its batch completed.  How many sessions of
 * them are marked now (0 at once when none is marked anywhere).
 */
Datum
bgexec_end_step_sessions_many(PG_FUNCTION_ARGS)
{
	ArrayType  *jobs;
	ArrayType  *leases;
	int			n;
	int64	   *j;
	int64	   *l;
	int			level = GetCurrentTransactionNestLevel();

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || step_shared == NULL)
		PG_RETURN_INT32(0);
	jobs = PG_GETARG_ARRAYTYPE_P(0);
	leases = PG_GETARG_ARRAYTYPE_P(1);
	n = ArrayGetNItems(ARR_NDIM(jobs), ARR_DIMS(jobs));
	if (ARR_NDIM(jobs) > 1 || ARR_NDIM(leases) > 1 || ARR_HASNULL(jobs) || ARR_HASNULL(leases) ||
		ARR_ELEMTYPE(jobs) != INT8OID || ARR_ELEMTYPE(leases) != INT8OID ||
		n != ArrayGetNItems(ARR_NDIM(leases), ARR_DIMS(leases)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("job_ids and leases must be one-dimensional arrays of one length, without nulls")));
	if (n == 0)
		PG_RETURN_INT32(0);
	j = (int64 *) ARR_DATA_PTR(jobs);
	l = (int64 *) ARR_DATA_PTR(leases);
	register_callbacks();
	end_scratch();
	for (int i = 0; i < n; i++)
		request_end(j[i], l[i], level);
	PG_RETURN_INT32(count_marked(j, l, n));
}

/*
 * _step_mark() → (job_id, lease): the job and lease this transaction was
 * marked with (_step_session), once: _step_completed's, which records the
 * step's step_completed in the step's own transaction.  Refused (55000)
 * in a transaction not so marked, and the second time.  Not granted to
 * anyone: _step_completed, SECURITY DEFINER, calls it.
 */
Datum
bgexec_step_mark(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[2];
	bool		nulls[2] = {false, false};

	if (!marked)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this transaction is not a worker's sql step"),
				 errhint("A worker records its sql step's completion in the step's own transaction.")));
	if (mark_taken)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this sql step's completion was recorded already")));
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "_step_mark must return a composite type");
	mark_taken = true;
	values[0] = Int64GetDatum(mark_job);
	values[1] = Int64GetDatum(mark_lease);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls)));
}
