/*-------------------------------------------------------------------------
 *
 * wake.c
 *	  Targeted wake-ups of idle workers: bgexec.await_work() and the
 *	  commit-time wakes of submit, retry, resume and stop.
 *
 * Why not LISTEN.  On PostgreSQL 15 a NOTIFY signals every backend of the
 * database that listens on any channel; each wakes, reads the notification
 * queue in a transaction of its own and commits.  With one LISTEN
 * connection per worker process, every submit cost every worker's backend a
 * wake-up and a commit, and every finish that notified bgexec_events did
 * too: 148 commits per job with 64 idle workers, and a 64-worker drain at
 * half the rate of a 16-worker one (bench/README.md).
 *
 * How.  A worker's backend calls bgexec.await_work(worker_id, queues, free,
 * timeout), which registers it in a slot of shared memory (the queues it
 * claims from, as hashes, and how many jobs it could start) and sleeps on
 * its latch.  A transaction that makes jobs runnable records, per queue,
 * how many (bgexec._jobs_ready, which also sends the NOTIFY bgexec_jobs of
 * the contract for anyone else listening); when it commits, a transaction
 * callback wakes waiting slots of that queue until their free capacity
 * covers the jobs: one worker per job, not all of them.  bgexec.stop()
 * records the worker holding the lease (bgexec._wake_stop), and its slots
 * are woken with the stop flag.  Jobs due later (a run_after ahead, a
 * retry's backoff) are recorded with their time (bgexec._jobs_due) in a
 * table of the 256 earliest; a waiting worker of the queue sleeps until the
 * earliest and takes them as a wake then, so they start on time rather than
 * at the workers' next poll.  The daemon calls bgexec.await_claim (SQL),
 * which runs claim() in this backend as soon as await_work returns with a
 * job wake: the woken backend claims, with no round trip to the worker.
 *
 * What is guaranteed, and what is not.  A wake is a hint, never a claim: the
 * woken worker (or await_claim) still claims with FOR UPDATE SKIP LOCKED,
 * and a lost or spurious wake costs latency or a claim, never a job (the
 * workers' poll finds any job no wake announced).  A wake for a slot that is
 * not asleep at that moment (its worker is claiming, or between two calls)
 * is kept as pending, and its next call returns at once: no wake falls
 * between a worker's empty claim and its next wait.  Jobs that no slot has
 * capacity for are kept by the slots between two calls whose capacity the
 * wake that ended their last wait used up: their next call with capacity
 * returns at once (a capped queue's next job, whose running one ended while
 * its worker was between calls, waited for the poll).  Wakes are sent after
 * the commit is visible (XACT_EVENT_COMMIT follows ProcArrayEndTransaction),
 * dropped on abort, on the abort of the subtransaction that recorded them,
 * and on PREPARE TRANSACTION (a prepared transaction's jobs are found by
 * poll).
 *
 * Locking.  One LWLock guards the slots; a wake scans them once per
 * committing transaction that recorded wakes (MaxBackends slots, a few
 * microseconds), and sets the latches after releasing it.  Due times cost
 * one more pass over the slots and one over the table, however many the
 * transaction recorded: it keeps only the 256 earliest of each
 * subtransaction level, the most the table could keep (a reconcile that
 * re-queued 20 000 jobs, each due at its own time, held the lock 20 ms).
 *
 * Needs shared_preload_libraries: without it await_work raises 55000 and
 * the worker falls back to LISTEN bgexec_jobs, bgexec_stop.
 *
 * extension/wake.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/async.h"
#include "common/hashfn.h"
#include "common/int.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "nodes/plannodes.h"
#include "pgstat.h"
#include "portability/instr_time.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "tcop/pquery.h"
#include "tcop/tcopprot.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/catcache.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/portal.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "bgexec/bgexec.h"

/*
 * Queues a slot keeps as hashes; a worker with more keeps them in a Bloom
 * filter of WAKE_BLOOM_BITS bits, WAKE_BLOOM_K bits a queue.  Such a slot
 * matches every queue it lists and, falsely, a few it does not (of 40
 * queues, about one queue in 500 000; of 1000, one in 7), so it is woken
 * only for the jobs the slots that list the queue exactly leave over.  It
 * matched every queue, and the wake loop, which prefers the sleeper that
 * went to sleep last, gave it the wakes meant for the workers of other
 * queues: it claimed nothing over its own queues, and the job waited for
 * its worker's poll (bench/README.md, fifty-fourth round).  The filter
 * is 512 bytes a slot, MaxBackends slots, and is copied in by that slot's
 * await_work alone.
 */
#define WAKE_MAX_QUEUES 32
#define WAKE_BLOOM_BITS 4096
#define WAKE_BLOOM_K 4
/* Queues of job wakes a slot of many queues keeps, to hand them on. */
#define WAKE_MAX_WOKEN_MANY 8

#define WAKE_JOBS	0x01
#define WAKE_STOP	0x02
#define WAKE_LATER	0x04		/* request kind only: jobs due at a later time */

/* Due times of jobs submitted for later, kept in all (the earliest win). */
#define WAKE_MAX_DUE 256

/* A due entry nobody took this long after its time is dropped. */
#define WAKE_DUE_EXPIRE_US (10 * USECS_PER_SEC)

/* A slot that has not called await_work for this long takes no pending wakes. */
#define WAKE_STALE_US (10 * USECS_PER_SEC)

/* Longest await_work timeout: the statement holds a snapshot while it waits. */
#define WAKE_MAX_TIMEOUT_MS (3600 * 1000)

/*
 * Queues and workers are known by a 64-bit hash of their names.  With 32
 * bits, names that collide are found in a second (q22137 and q190411): a
 * tenant naming its queue so took the wakes of another tenant's queue, whose
 * worker then slept its whole wait.
 */
typedef uint64 NameHash;

typedef struct WakeSlot
{
	int			pid;			/* 0: free */
	int			pgprocno;		/* whose latch to set */
	Oid			dboid;
	NameHash	worker;			/* hash of the worker id */
	int			nqueues;		/* -1: more than WAKE_MAX_QUEUES, in bloom */
	NameHash	queues[WAKE_MAX_QUEUES];
	uint64		bloom[WAKE_BLOOM_BITS / 64];	/* nqueues -1: its queues */
	int			free;			/* jobs it said it could start, less wakes since */
	bool		sleeping;		/* inside await_work now */
	TimestampTz sleep_until;	/* when it wakes by itself, while sleeping (wall) */
	uint8		pending;		/* WAKE_JOBS | WAKE_STOP, not yet returned */
	uint32		woken_queues;	/* bit i: queues[i] had a job wake */
	int			nwoken_many;	/* nqueues -1: its job wakes' queues, */
	NameHash	woken_many[WAKE_MAX_WOKEN_MANY];	/* to hand on (the first ones) */
	bool		missed;			/* a job wake passed it by between calls */
	uint32		missed_queues;	/* bit i: for queues[i] */
	int64		last_call;		/* entry or exit of await_work (monotonic) */
} WakeSlot;

StaticAssertDecl(WAKE_MAX_WOKEN_MANY <= WAKE_MAX_QUEUES,
				 "woken_queue_hashes writes at most WAKE_MAX_QUEUES hashes");

/*
 * Jobs of a queue that become runnable at a later time (run_after, a rate
 * limit's refill).  at is on the database's clock; mono_at is the same
 * instant on the monotonic clock, as it was when at was recorded.  The
 * entry is due at whichever comes first: after a step of the clock back,
 * mono_at still comes after the delay meant when it was recorded (a rate
 * limit's period), where at would come the step later (see take_due).
 */
typedef struct DueEntry
{
	Oid			dboid;			/* InvalidOid: free */
	NameHash	queue;
	TimestampTz at;
	int64		mono_at;
	int64		jobs;
} DueEntry;

typedef struct WakeShared
{
	LWLock	   *lock;
	int			nslots;
	int			next;			/* where the next scan starts: spreads wakes */
	pg_atomic_uint64 clock_offset;	/* bgexec.debug_clock_offset, in us */
	DueEntry	due[WAKE_MAX_DUE];
	WakeSlot	slots[FLEXIBLE_ARRAY_MEMBER];
} WakeShared;

/* What a transaction will wake at commit. */
typedef struct WakeRequest
{
	uint8		kind;			/* WAKE_JOBS, WAKE_STOP or WAKE_LATER */
	NameHash	hash;			/* queue or worker */
	int64		jobs;			/* WAKE_JOBS, WAKE_LATER: how many */
	TimestampTz at;				/* WAKE_LATER: when they become runnable */
	int			level;			/* subtransaction nesting level */
	int			skip_slot;		/* a slot not to wake (pass-on), or -1 */
} WakeRequest;

static WakeShared *wake_shared = NULL;

static WakeRequest *requests = NULL;	/* in TopTransactionContext */
static int	nrequests = 0;
static int	maxrequests = 0;

/*
 * The due times a transaction recorded (WAKE_LATER requests), kept apart:
 * a reconcile that re-queues 20 000 jobs with jittered backoffs records
 * 20 000 of them, and a scan of the list for each, to merge equal times,
 * cost 0.1-0.3 s of its backend (bench/README.md, forty-sixth round).
 * They are appended as they come; compact_dues sorts them, merges equal
 * times and keeps the WAKE_MAX_DUE earliest of each subtransaction level.
 * The shared table keeps the WAKE_MAX_DUE earliest of all it is given, so a
 * time later than WAKE_MAX_DUE others of its level can never be kept: the
 * requests of a level share its fate (an abort drops them all, a commit
 * hands them all to the parent), so whenever it would reach the table,
 * those do too.
 */
static WakeRequest *dues = NULL;	/* in TopTransactionContext */
static int	ndues = 0;
static int	maxdues = 0;
static int	dues_compact_at = 2 * WAKE_MAX_DUE; /* compact_dues at this many */
static bool callbacks_registered = false;
static bool slot_exit_registered = false;

static void compact_dues(void);

PG_FUNCTION_INFO_V1(bgexec_await_work);
PG_FUNCTION_INFO_V1(bgexec_jobs_ready);
PG_FUNCTION_INFO_V1(bgexec_wake_stop);
PG_FUNCTION_INFO_V1(bgexec_jobs_due);

/* Size of the shared slots. */
static Size
wake_shmem_size(void)
{
	return add_size(offsetof(WakeShared, slots), mul_size(MaxBackends, sizeof(WakeSlot)));
}

/* Reserves the slots and their lock (bgexec.c's shmem_request_hook). */
void
bgexec_wake_shmem_request(void)
{
	RequestAddinShmemSpace(wake_shmem_size());
	RequestNamedLWLockTranche("bgexec_wake", 1);
}

/* Attaches to (or creates) the slots (bgexec.c's shmem_startup_hook). */
void
bgexec_wake_shmem_startup(void)
{
	bool		found;

	wake_shared = ShmemInitStruct("bgexec_wake", wake_shmem_size(), &found);
	if (!found)
	{
		memset(wake_shared, 0, wake_shmem_size());
		wake_shared->lock = &(GetNamedLWLockTranche("bgexec_wake"))->lock;
		wake_shared->nslots = MaxBackends;
		pg_atomic_init_u64(&wake_shared->clock_offset, 0);
	}
}

/*
 * The wall clock as the wake module and the watchdog read it: now, plus
 * bgexec.debug_clock_offset (a test hook, 0 but in tests: it steps this
 * clock, in every process at once, as a step of the system clock would,
 * without touching now() in SQL nor the monotonic clock).
 */
TimestampTz
bgexec_wall_clock(void)
{
	TimestampTz now = GetCurrentTimestamp();

	if (wake_shared != NULL)
		now += (int64) pg_atomic_read_u64(&wake_shared->clock_offset);
	return now;
}

/*
 * The monotonic clock, in microseconds: for waits and timers, which a step
 * of the wall clock (NTP, a VM resumed) must not stretch or cut short.
 */
int64
bgexec_mono_clock(void)
{
	instr_time	t;

	INSTR_TIME_SET_CURRENT(t);
	return (int64) INSTR_TIME_GET_MICROSEC(t);
}

/*
 * Assign hook of bgexec.debug_clock_offset (milliseconds): the postmaster,
 * which reads the configuration first on a reload, writes it to shared
 * memory, where every process reads it at once (a backend inside
 * await_work does not read the configuration until its statement ends).
 */
void
bgexec_clock_offset_assign(int newval, void *extra)
{
	if (!IsUnderPostmaster && wake_shared != NULL)
		pg_atomic_write_u64(&wake_shared->clock_offset, (uint64) ((int64) newval * 1000));
}

/* Hash of a name, as slots and requests keep it. */
static NameHash
name_hash(const text *t)
{
	return hash_bytes_extended((const unsigned char *) VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t), 0);
}

/* This backend's slot; NULL without shared memory. */
static WakeSlot *
my_slot(void)
{
	if (wake_shared == NULL || MyBackendId < 1 || MyBackendId > wake_shared->nslots)
		return NULL;
	return &wake_shared->slots[MyBackendId - 1];
}

/* before_shmem_exit: frees this backend's slot. */
static void
wake_slot_exit(int code, Datum arg)
{
	WakeSlot   *slot = my_slot();

	if (slot == NULL)
		return;
	LWLockAcquire(wake_shared->lock, LW_EXCLUSIVE);
	if (slot->pid == MyProcPid)
		memset(slot, 0, sizeof(WakeSlot));
	LWLockRelease(wake_shared->lock);
}

/* Adds the queue with hash q to a Bloom filter of WAKE_BLOOM_BITS bits. */
static void
bloom_add(uint64 *bloom, NameHash q)
{
	uint32		h1 = (uint32) q;
	uint32		h2 = (uint32) (q >> 32) | 1;

	for (int k = 0; k < WAKE_BLOOM_K; k++)
	{
		uint32		b = (h1 + k * h2) % WAKE_BLOOM_BITS;

		bloom[b / 64] |= (uint64) 1 << (b % 64);
	}
}

/* Whether a Bloom filter may hold the queue with hash q (false: it does not). */
static bool
bloom_has(const uint64 *bloom, NameHash q)
{
	uint32		h1 = (uint32) q;
	uint32		h2 = (uint32) (q >> 32) | 1;

	for (int k = 0; k < WAKE_BLOOM_K; k++)
	{
		uint32		b = (h1 + k * h2) % WAKE_BLOOM_BITS;

		if ((bloom[b / 64] & ((uint64) 1 << (b % 64))) == 0)
			return false;
	}
	return true;
}

/*
 * Whether slot s waits for jobs of the queue with hash q; sets *bit.  A
 * slot of more than WAKE_MAX_QUEUES queues may answer true for a queue it
 * does not list (its Bloom filter), with no bit.
 */
static bool
slot_has_queue(const WakeSlot *s, NameHash q, uint32 *bit)
{
	if (s->nqueues < 0)
	{
		*bit = 0;
		return bloom_has(s->bloom, q);
	}
	for (int i = 0; i < s->nqueues; i++)
		if (s->queues[i] == q)
		{
			*bit = (uint32) 1 << i;
			return true;
		}
	return false;
}

/* A queue of the due times a transaction committed, and its earliest. */
typedef struct DueQueue
{
	NameHash	queue;
	TimestampTz at;
} DueQueue;

/* qsort: by queue, then time. */
static int
due_queue_cmp(const void *a, const void *b)
{
	const DueQueue *x = a;
	const DueQueue *y = b;

	if (x->queue != y->queue)
		return x->queue < y->queue ? -1 : 1;
	if (x->at != y->at)
		return x->at < y->at ? -1 : 1;
	return 0;
}

/* The index of queue q's entry in queues[0..n) (sorted by queue), or -1. */
static int
due_queue_find(const DueQueue *queues, int n, NameHash q)
{
	int			lo = 0;
	int			hi = n - 1;

	while (lo <= hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (queues[mid].queue == q)
			return mid;
		if (queues[mid].queue < q)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -1;
}

/* The index of the request for queue q at `at` in dues[0..n) (by time, then queue), or -1. */
static int
due_request_find(const WakeRequest *reqs, int n, NameHash q, TimestampTz at)
{
	int			lo = 0;
	int			hi = n - 1;

	while (lo <= hi)
	{
		int			mid = lo + (hi - lo) / 2;
		const WakeRequest *d = &reqs[mid];

		if (d->at == at && d->hash == q)
			return mid;
		if (d->at < at || (d->at == at && d->hash < q))
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -1;
}

/* qsort: indexes of the table's entries, the latest first. */
static int
due_latest_first_cmp(const void *a, const void *b)
{
	TimestampTz x = wake_shared->due[*(const int *) a].at;
	TimestampTz y = wake_shared->due[*(const int *) b].at;

	if (x != y)
		return x > y ? -1 : 1;
	return *(const int *) a - *(const int *) b;
}

/*
 * Records the due times reqs[0..n) of this database (distinct, by time
 * then queue, at most WAKE_MAX_DUE), as one at a time in time order would:
 * each is merged with an entry of the same queue and time; else it takes a
 * free entry; else, when the table is full, the latest entry if it is
 * earlier (a job left out is found by the workers' poll).  So the table
 * holds the WAKE_MAX_DUE earliest of what it held and what it is given.
 * Drops entries nobody took.  Then marks the latches of the sleepers of
 * each queue (queues[0..nqueues), its earliest time) that would sleep past
 * it: they sleep until then.  The caller holds the lock exclusively: one
 * pass over the table and one over the slots, where a pass of each per due
 * time held it 20 ms for 20 000 of them.
 */
static void
add_dues(const WakeRequest *reqs, int n, const DueQueue *queues, int nqueues,
		 TimestampTz now, int64 mono, bool *latch)
{
	bool		merged[WAKE_MAX_DUE] = {false};
	int			free_i[WAKE_MAX_DUE];
	int			used[WAKE_MAX_DUE];
	int			nfree = 0;
	int			nused = 0;
	int			f = 0;
	int			u = 0;
	bool		sorted = false;

	Assert(n <= WAKE_MAX_DUE);
	for (int i = 0; i < WAKE_MAX_DUE; i++)
	{
		DueEntry   *e = &wake_shared->due[i];
		int			k;

		if (e->dboid != InvalidOid && now - e->at > WAKE_DUE_EXPIRE_US)
			e->dboid = InvalidOid;
		if (e->dboid == InvalidOid)
		{
			free_i[nfree++] = i;
			continue;
		}
		used[nused++] = i;
		if (e->dboid == MyDatabaseId &&
			(k = due_request_find(reqs, n, e->queue, e->at)) >= 0)
		{
			e->jobs = Min(e->jobs + reqs[k].jobs, PG_INT32_MAX);
			merged[k] = true;
		}
	}
	for (int k = 0; k < n; k++)
	{
		int			i;

		if (merged[k])
			continue;
		if (f < nfree)
			i = free_i[f++];
		else
		{
			/*
			 * In place of the latest entry held before: one recorded here
			 * is no later than this request, nor the rest of them.
			 */
			if (!sorted)
			{
				qsort(used, nused, sizeof(int), due_latest_first_cmp);
				sorted = true;
			}
			if (u == nused || wake_shared->due[used[u]].at <= reqs[k].at)
				break;			/* and none later is kept either */
			i = used[u++];
		}
		wake_shared->due[i] = (DueEntry) {MyDatabaseId, reqs[k].hash, reqs[k].at,
		mono + (reqs[k].at - now), reqs[k].jobs};
	}
	/* Sleepers of a queue that would wake after its earliest time: sooner. */
	for (int i = 0; i < wake_shared->nslots; i++)
	{
		WakeSlot   *s = &wake_shared->slots[i];

		if (s->pid == 0 || s->dboid != MyDatabaseId || !s->sleeping ||
			s->sleep_until <= reqs[0].at)
			continue;
		/* (Not a slot of many queues: take_due gives it none.) */
		for (int j = 0; j < s->nqueues && !latch[i]; j++)
		{
			int			k = due_queue_find(queues, nqueues, s->queues[j]);

			if (k >= 0 && s->sleep_until > queues[k].at)
				latch[i] = true;
		}
	}
}

/*
 * For slot s, which waits with free capacity: takes the due entries of its
 * queues whose time has come (as a job wake, up to its capacity; what it
 * cannot take stays for another waiter) and returns the earliest time still
 * ahead (or DT_NOEND), on the wall clock (now; mono: the monotonic clock).
 * The caller holds the lock exclusively.
 *
 * An entry whose monotonic time has come but not its time on the clock
 * was recorded before the clock stepped back.  A rate-limited queue's
 * refill was meant for then: its claims were held for the whole step (an
 * hour's step, an hour) while every other queue ran.  So s is woken for it
 * (claim then re-bases the queue's rate_at), and the entry stays, for its
 * time on the clock (a run_after's jobs are runnable by that clock only).
 */
static TimestampTz
take_due(WakeSlot *s, TimestampTz now, int64 mono)
{
	TimestampTz next = DT_NOEND;

	if (s->free <= 0)
		return next;			/* nothing to take: no reason to wake */
	for (int i = 0; i < WAKE_MAX_DUE; i++)
	{
		DueEntry   *e = &wake_shared->due[i];
		uint32		bit;

		/* Not for a worker of many queues: a false match would take others' jobs. */
		if (e->dboid != s->dboid || s->nqueues < 0 || !slot_has_queue(s, e->queue, &bit))
			continue;
		if (e->at > now && e->mono_at > mono)
		{
			next = Min(next, Min(e->at, now + (e->mono_at - mono)));
			continue;
		}
		if (s->free <= 0)
			continue;
		if (e->at > now)
		{
			/* The clock stepped back since: once, then at its time. */
			s->pending |= WAKE_JOBS;
			s->woken_queues |= bit;
			e->mono_at = mono + (e->at - now);
			continue;
		}
		s->pending |= WAKE_JOBS;
		s->woken_queues |= bit;
		e->jobs -= s->free;
		s->free = e->jobs >= 0 ? 0 : (int) -e->jobs;
		if (e->jobs <= 0)
			e->dboid = InvalidOid;
	}
	return next;
}

/* Whether slot i can take a job wake for req (any state of sleep); sets *bit. */
static bool
job_candidate(const WakeSlot *s, int i, const WakeRequest *req, uint32 *bit)
{
	return s->pid != 0 && s->dboid == MyDatabaseId && i != req->skip_slot &&
		s->free > 0 && slot_has_queue(s, req->hash, bit);
}

/* A sleeping slot that can take a job wake, and since when it sleeps. */
typedef struct Sleeper
{
	int			slot;
	uint32		bit;
	bool		many;			/* of more than WAKE_MAX_QUEUES queues */
	int64		since;			/* monotonic */
} Sleeper;

/* qsort: slots that list the queue first, then the latest to sleep first; ties in slot order. */
static int
sleeper_cmp(const void *a, const void *b)
{
	const Sleeper *x = a;
	const Sleeper *y = b;

	if (x->many != y->many)
		return x->many ? 1 : -1;
	if (x->since != y->since)
		return x->since > y->since ? -1 : 1;
	return x->slot - y->slot;
}

/*
 * Gives slot i a job wake for `need` jobs of queue q (its bit); returns what
 * is left.  A slot of many queues, whose bit is 0, keeps q in its list of
 * woken queues (the first WAKE_MAX_WOKEN_MANY), so that its worker can hand
 * the wake on (pass_on, a client gone).
 */
static int64
wake_one(int i, NameHash q, uint32 bit, int64 need, bool *latch)
{
	WakeSlot   *s = &wake_shared->slots[i];

	latch[i] |= s->sleeping && s->pending == 0;
	s->pending |= WAKE_JOBS;
	s->woken_queues |= bit;
	if (s->nqueues < 0)
	{
		int			k = 0;

		while (k < s->nwoken_many && s->woken_many[k] != q)
			k++;
		if (k == s->nwoken_many && k < WAKE_MAX_WOKEN_MANY)
			s->woken_many[s->nwoken_many++] = q;
	}
	need -= s->free;
	s->free = need >= 0 ? 0 : (int) -need;
	return need;
}

/*
 * wake_slots' working arrays, allocated once per backend in TopMemoryContext
 * by wake_scratch, before anything is recorded: the commit callback that
 * calls wake_slots runs after the commit record, where nothing may raise an
 * ERROR (one caught there left the backend's interrupts held off for good:
 * it ignored cancel and terminate), so it allocates nothing.
 */
static bool *scratch_latch = NULL;	/* [nslots] */
static Sleeper *scratch_sleepers = NULL;	/* [nslots] */
static DueQueue *scratch_queues = NULL; /* [WAKE_MAX_DUE] */

/* Allocates wake_slots' working arrays, if not yet (may raise an ERROR). */
static void
wake_scratch(void)
{
	if (scratch_queues != NULL || wake_shared == NULL)
		return;
	scratch_latch = MemoryContextAlloc(TopMemoryContext, sizeof(bool) * wake_shared->nslots);
	scratch_sleepers = MemoryContextAlloc(TopMemoryContext, sizeof(Sleeper) * wake_shared->nslots);
	scratch_queues = MemoryContextAlloc(TopMemoryContext, sizeof(DueQueue) * WAKE_MAX_DUE);
}

/*
 * Wakes slots for each request of reqs[0..n), in this database.  A job
 * request wakes, in turn: slots asleep with free capacity, the one that
 * went to sleep last first, then slots called recently and not asleep
 * (their next call returns at once, in turn from where the last left), until
 * their capacity covers the jobs; a slot already holding a job wake counts
 * as covering up to its capacity and is not woken twice.  Slots that list
 * the queue go first, sleepers then callers; slots of more than
 * WAKE_MAX_QUEUES queues, whose filter may match a queue they do not
 * list, only for the jobs left over, in the same order.  A stop request
 * wakes every slot of the worker.  The due times dues[0..ndues) (requests
 * for later, as compact_dues leaves them: distinct, by time then queue, at
 * most WAKE_MAX_DUE) are recorded, and each queue's sleepers that would
 * sleep past its earliest are woken, to sleep until then.  Takes the
 * slots' lock; sets each latch once, after releasing it.  Allocates
 * nothing and raises no ERROR (the commit callback calls it): wake_scratch
 * must have run.
 */
static void
wake_slots(const WakeRequest *reqs, int n, const WakeRequest *dues, int ndues)
{
	bool	   *latch = scratch_latch;
	Sleeper    *sleepers = scratch_sleepers;
	int			nsleepers;
	DueQueue   *queues = scratch_queues;
	int			nqueues = 0;
	TimestampTz now = bgexec_wall_clock();
	int64		mono = bgexec_mono_clock();

	if (wake_shared == NULL || (n == 0 && ndues == 0) || queues == NULL)
		return;
	Assert(ndues <= WAKE_MAX_DUE);
	memset(latch, 0, sizeof(bool) * wake_shared->nslots);
	/* Each queue's earliest due time, by queue, before taking the lock. */
	if (ndues > 0)
	{
		for (int k = 0; k < ndues; k++)
			queues[k] = (DueQueue) {dues[k].hash, dues[k].at};
		qsort(queues, ndues, sizeof(DueQueue), due_queue_cmp);
		for (int k = 0; k < ndues; k++)
			if (nqueues == 0 || queues[nqueues - 1].queue != queues[k].queue)
				queues[nqueues++] = queues[k];
	}
	LWLockAcquire(wake_shared->lock, LW_EXCLUSIVE);
	for (int r = 0; r < n; r++)
	{
		const WakeRequest *req = &reqs[r];
		int64		need = req->jobs;
		int			start = wake_shared->next;
		int			s_k;
		bool		many_left;
		int64		exact_left; /* jobs the slots that list the queue left over */

		if (req->kind == WAKE_STOP)
		{
			for (int i = 0; i < wake_shared->nslots; i++)
			{
				WakeSlot   *s = &wake_shared->slots[i];

				if (s->pid == 0 || s->dboid != MyDatabaseId || s->worker != req->hash)
					continue;
				latch[i] |= s->sleeping && s->pending == 0;
				s->pending |= WAKE_STOP;
			}
			continue;
		}
		/*
		 * Sleepers first, the one that went to sleep last first: its
		 * process and backend are the likeliest to be on a CPU soon.  One
		 * scan, then in that order until their free slots cover the jobs.
		 * Those that list the queue before those of many queues (tier 1,
		 * sorted last), each tier's sleepers before its callers: a wake
		 * taken by a slot that does not list the queue (a false match) is
		 * claimed for nothing, and its job waits for the poll.
		 */
		nsleepers = 0;
		for (int i = 0; i < wake_shared->nslots; i++)
		{
			WakeSlot   *s = &wake_shared->slots[i];

			if (s->sleeping && job_candidate(s, i, req, &sleepers[nsleepers].bit))
			{
				sleepers[nsleepers].slot = i;
				sleepers[nsleepers].many = s->nqueues < 0;
				sleepers[nsleepers].since = s->last_call;
				nsleepers++;
			}
		}
		qsort(sleepers, nsleepers, sizeof(Sleeper), sleeper_cmp);
		s_k = 0;
		many_left = nsleepers > 0 && sleepers[nsleepers - 1].many;
		exact_left = 0;
		for (int tier = 0; tier < 2 && need > 0; tier++)
		{
			if (tier == 1)
			{
				exact_left = need;
				if (!many_left)
					break;		/* no slot of many queues is a candidate */
			}
			for (; s_k < nsleepers && sleepers[s_k].many == (tier == 1) && need > 0; s_k++)
				need = wake_one(sleepers[s_k].slot, req->hash, sleepers[s_k].bit, need, latch);
			/* Then those called recently and not asleep: their next call returns at once. */
			for (int k = 0; k < wake_shared->nslots && need > 0; k++)
			{
				int			i = (start + k) % wake_shared->nslots;
				WakeSlot   *s = &wake_shared->slots[i];
				uint32		bit;

				if (s->sleeping || mono - s->last_call > WAKE_STALE_US || !job_candidate(s, i, req, &bit))
					continue;
				if ((s->nqueues < 0) != (tier == 1))
				{
					many_left = true;
					continue;
				}
				need = wake_one(i, req->hash, bit, need, latch);
				wake_shared->next = (i + 1) % wake_shared->nslots;
			}
		}
		/*
		 * Jobs left over: a slot between two calls whose capacity the wake
		 * that ended its last call used up (it is claiming, or about to wait
		 * again) is no candidate, and its next wait counted on slots free
		 * by then would sleep through these jobs.  A capped queue's next
		 * job, made claimable by the finish of its running one while the
		 * worker that claimed it was between calls, waited so for the poll.
		 * Its next call with free capacity returns at once instead.  Also
		 * when slots of many queues took them: their match may be false.
		 */
		for (int i = 0; i < wake_shared->nslots && exact_left > 0; i++)
		{
			WakeSlot   *s = &wake_shared->slots[i];
			uint32		bit;

			if (s->pid != 0 && s->dboid == MyDatabaseId && i != req->skip_slot && !s->sleeping &&
				(s->pending & WAKE_JOBS) == 0 && s->free <= 0 &&
				mono - s->last_call <= WAKE_STALE_US && slot_has_queue(s, req->hash, &bit))
			{
				s->missed = true;
				s->missed_queues |= bit;
			}
		}
	}
	if (ndues > 0)
		add_dues(dues, ndues, queues, nqueues, now, mono, latch);
	LWLockRelease(wake_shared->lock);
	for (int i = 0; i < wake_shared->nslots; i++)
		if (latch[i])
			SetLatch(&ProcGlobal->allProcs[wake_shared->slots[i].pgprocno].procLatch);
}

/* Transaction callback: wakes at commit, forgets at abort and prepare. */
static void
wake_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
			/*
			 * After the commit record: nothing here may raise an ERROR, and
			 * none is caught (a catch left InterruptHoldoffCount at -1).
			 * compact_dues sorts in place; wake_slots uses the arrays
			 * wake_scratch allocated when the first request was recorded.
			 */
			if (nrequests > 0 || ndues > 0)
			{
				/* One level now: its WAKE_MAX_DUE earliest. */
				compact_dues();
				wake_slots(requests, nrequests, dues, Min(ndues, WAKE_MAX_DUE));
			}
			/* FALLTHROUGH */
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PREPARE:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PARALLEL_ABORT:
			requests = NULL;	/* freed with TopTransactionContext */
			nrequests = maxrequests = 0;
			dues = NULL;
			ndues = maxdues = 0;
			dues_compact_at = 2 * WAKE_MAX_DUE;
			break;
		default:
			break;
	}
}

/*
 * Adds jobs to the request among the first n that wakes the same thing at
 * that level (kind, queue or worker, level), if there is one: true then.
 */
static bool
merge_request(int n, uint8 kind, NameHash hash, int level, int64 jobs)
{
	for (int i = 0; i < n; i++)
		if (requests[i].kind == kind && requests[i].hash == hash && requests[i].level == level)
		{
			if (kind != WAKE_STOP)
				requests[i].jobs = Min(requests[i].jobs + jobs, PG_INT32_MAX);
			return true;
		}
	return false;
}

/*
 * Merges the requests of one level that wake the same thing, as add_request
 * does for new ones: a committed subtransaction's requests join its
 * parent's.  Without it a transaction submitting each job under its own
 * savepoint (an ORM's nested transaction, a PL/pgSQL block with EXCEPTION)
 * kept one request per job, and each subtransaction's start and end, and
 * each submit, scanned them all: 40 000 such submits took 11.4 s, 3.3 s
 * without the savepoints (bench/README.md, forty-seventh round).  Requests
 * are unique per kind, queue and level, so the scan is over a few.
 */
static void
merge_requests(int level)
{
	int			kept = 0;

	for (int i = 0; i < nrequests; i++)
	{
		WakeRequest *r = &requests[i];

		if (r->level == level && merge_request(kept, r->kind, r->hash, level, r->jobs))
			continue;
		if (kept != i)
			requests[kept] = *r;
		kept++;
	}
	nrequests = kept;
}

/*
 * Subtransaction callback: an aborted subtransaction's wakes are dropped, a
 * committed one's are its parent's.
 */
static void
wake_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					  SubTransactionId parentSubid, void *arg)
{
	nrequests = bgexec_subxact_entries(event, requests, nrequests, sizeof(WakeRequest),
									   offsetof(WakeRequest, level));
	if (event == SUBXACT_EVENT_COMMIT_SUB && nrequests > 1)
		merge_requests(GetCurrentTransactionNestLevel() - 1);
	ndues = bgexec_subxact_entries(event, dues, ndues, sizeof(WakeRequest),
								   offsetof(WakeRequest, level));
}

/* qsort: due times by level, then time, then queue. */
static int
due_request_cmp(const void *a, const void *b)
{
	const WakeRequest *x = a;
	const WakeRequest *y = b;

	if (x->level != y->level)
		return x->level < y->level ? -1 : 1;
	if (x->at != y->at)
		return x->at < y->at ? -1 : 1;
	if (x->hash != y->hash)
		return x->hash < y->hash ? -1 : 1;
	return 0;
}

/*
 * Sorts the due times by level, time and queue, merges the requests of a
 * level for the same queue and time, and keeps the WAKE_MAX_DUE earliest of
 * each level (see dues).  The next call is at twice what it kept: a
 * request costs a logarithm's worth of sorting.
 */
static void
compact_dues(void)
{
	int			kept = 0;
	int			of_level = 0;

	if (ndues > 1)
		qsort(dues, ndues, sizeof(WakeRequest), due_request_cmp);
	for (int i = 0; i < ndues; i++)
	{
		WakeRequest *last = kept > 0 ? &dues[kept - 1] : NULL;

		if (last != NULL && last->level == dues[i].level)
		{
			if (last->at == dues[i].at && last->hash == dues[i].hash)
			{
				last->jobs = Min(last->jobs + dues[i].jobs, PG_INT32_MAX);
				continue;
			}
			if (of_level == WAKE_MAX_DUE)
				continue;		/* later than WAKE_MAX_DUE of its level */
		}
		else
			of_level = 0;
		dues[kept++] = dues[i];
		of_level++;
	}
	ndues = kept;
	dues_compact_at = Max(2 * kept, 2 * WAKE_MAX_DUE);
}

/* Registers the transaction callbacks, once a backend records a wake. */
static void
register_callbacks(void)
{
	wake_scratch();
	if (!callbacks_registered)
	{
		RegisterXactCallback(wake_xact_callback, NULL);
		RegisterSubXactCallback(wake_subxact_callback, NULL);
		callbacks_registered = true;
	}
}

/* Records jobs of a queue due at `at` for the commit of the current transaction. */
static void
add_due_request(NameHash hash, int64 jobs, TimestampTz at)
{
	register_callbacks();
	if (ndues >= dues_compact_at)
		compact_dues();
	if (ndues == maxdues)
	{
		int			grown = Max(64, maxdues * 2);

		dues = dues == NULL ?
			MemoryContextAlloc(TopTransactionContext, sizeof(WakeRequest) * grown) :
			repalloc(dues, sizeof(WakeRequest) * grown);
		maxdues = grown;
	}
	dues[ndues] = (WakeRequest) {WAKE_LATER, hash, jobs, at, GetCurrentTransactionNestLevel(), -1};
	ndues++;
}

/* Records a job or stop wake for the commit of the current transaction. */
static void
add_request(uint8 kind, NameHash hash, int64 jobs)
{
	int			level = GetCurrentTransactionNestLevel();

	register_callbacks();
	if (merge_request(nrequests, kind, hash, level, jobs))
		return;
	if (nrequests == maxrequests)
	{
		int			grown = Max(8, maxrequests * 2);

		requests = requests == NULL ?
			MemoryContextAlloc(TopTransactionContext, sizeof(WakeRequest) * grown) :
			repalloc(requests, sizeof(WakeRequest) * grown);
		maxrequests = grown;
	}
	requests[nrequests].kind = kind;
	requests[nrequests].hash = hash;
	requests[nrequests].jobs = jobs;
	requests[nrequests].at = 0;
	requests[nrequests].level = level;
	requests[nrequests].skip_slot = -1;
	nrequests++;
}

/*
 * bgexec._jobs_ready(queue text, jobs bigint) -> void: the queue has jobs
 * runnable now.  Sends NOTIFY bgexec_jobs, queue (coalesced per transaction,
 * as before; not with bgexec.notify_jobs off) and, at commit, wakes waiting workers of the queue until their
 * free capacity covers the jobs.  Callers: the functions that make jobs
 * runnable (submit, submit_many, retry, resume, unclaim, configure_queue).
 */
Datum
bgexec_jobs_ready(PG_FUNCTION_ARGS)
{
	text	   *queue = PG_GETARG_TEXT_PP(0);
	/*
	 * Capped on entry, as every merge caps its sum: two counts near
	 * INT64_MAX summed past it (wrapped negative, the wake was lost).
	 */
	int64		jobs = Min(PG_GETARG_INT64(1), PG_INT32_MAX);

	if (bgexec_notify_jobs)
		Async_Notify("bgexec_jobs", text_to_cstring(queue));
	if (wake_shared != NULL && jobs > 0)
		add_request(WAKE_JOBS, name_hash(queue), jobs);
	PG_RETURN_VOID();
}

/*
 * bgexec._wake_stop(worker_id text) -> void: at commit, wakes the waiting
 * slots of that worker with the stop flag (its heartbeat then learns which
 * jobs to stop).  Called by stop() next to its NOTIFY bgexec_stop.
 */
Datum
bgexec_wake_stop(PG_FUNCTION_ARGS)
{
	if (wake_shared != NULL)
		add_request(WAKE_STOP, name_hash(PG_GETARG_TEXT_PP(0)), 0);
	PG_RETURN_VOID();
}

/*
 * bgexec._jobs_due(queue text, at timestamptz, jobs bigint) -> void: the
 * queue has jobs that become runnable at `at` (a run_after ahead, a retry's
 * backoff).  At commit the time is recorded, and a worker waiting for the
 * queue is woken then, instead of finding them on its poll.
 */
Datum
bgexec_jobs_due(PG_FUNCTION_ARGS)
{
	text	   *queue = PG_GETARG_TEXT_PP(0);
	TimestampTz at = PG_GETARG_TIMESTAMPTZ(1);
	int64		jobs = Min(PG_GETARG_INT64(2), PG_INT32_MAX);	/* as _jobs_ready */

	if (wake_shared != NULL && jobs > 0 && !TIMESTAMP_NOT_FINITE(at))
		add_due_request(name_hash(queue), jobs, at);
	PG_RETURN_VOID();
}

/*
 * A worker's id and queues, hashed: the queues array is deconstructed (an
 * allocation, as long as the array) and hashed before the slots' lock is
 * taken, which every committing transaction that wakes workers waits for.
 * nqueues is -1 for more than WAKE_MAX_QUEUES: they are in bloom.
 */
typedef struct SlotArgs
{
	NameHash	worker;
	int			nqueues;
	NameHash	queues[WAKE_MAX_QUEUES];
	uint64		bloom[WAKE_BLOOM_BITS / 64];
} SlotArgs;

static void
slot_args(SlotArgs *args, const text *worker, ArrayType *queues)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;

	deconstruct_array(queues, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	args->worker = name_hash(worker);
	if (n > WAKE_MAX_QUEUES)
	{
		args->nqueues = -1;
		memset(args->bloom, 0, sizeof(args->bloom));
		for (int i = 0; i < n; i++)
			if (!nulls[i])
				bloom_add(args->bloom, name_hash(DatumGetTextPP(elems[i])));
	}
	else
	{
		args->nqueues = 0;
		for (int i = 0; i < n; i++)
			if (!nulls[i])
				args->queues[args->nqueues++] = name_hash(DatumGetTextPP(elems[i]));
	}
	pfree(elems);
	pfree(nulls);
}

/* Registers this backend's slot for worker, queues and free; keeps pending wakes. */
static void
register_slot(WakeSlot *slot, const SlotArgs *args, int free)
{
	if (slot->pid != MyProcPid)
	{
		memset(slot, 0, sizeof(WakeSlot));
		slot->pid = MyProcPid;
		slot->pgprocno = MyProc->pgprocno;
		slot->dboid = MyDatabaseId;
	}
	slot->worker = args->worker;
	if (args->nqueues < 0)
	{
		slot->nqueues = -1;
		memcpy(slot->bloom, args->bloom, sizeof(slot->bloom));
	}
	else
	{
		/*
		 * A job wake recorded for a queue no longer at the same index (a
		 * list of another length, or in another order) is kept, as one for
		 * every queue.
		 */
		if ((slot->pending & WAKE_JOBS) &&
			(args->nqueues != slot->nqueues ||
			 memcmp(slot->queues, args->queues, sizeof(NameHash) * args->nqueues) != 0))
			slot->woken_queues = ~(uint32) 0;
		memcpy(slot->queues, args->queues, sizeof(NameHash) * args->nqueues);
		slot->nqueues = args->nqueues;
	}
	slot->free = free;
	slot->last_call = bgexec_mono_clock();
	/* Jobs a wake left while it had no capacity: the first call with some takes them. */
	if (slot->missed && free > 0)
	{
		slot->pending |= WAKE_JOBS;
		slot->woken_queues |= slot->missed_queues;
		slot->missed = false;
		slot->missed_queues = 0;
	}
}

/* libpq/libpq.h, whose libpq-be.h needs the GSSAPI headers */
extern bool pq_check_connection(void);

/*
 * The queues of the slot's job wakes its worker took (woken_queues: bits
 * indexing the slot's list; woken_many for a slot of many queues), by hash
 * into out (WAKE_MAX_QUEUES of them); how many.  The caller holds the lock,
 * and reads them before the list is replaced.
 */
static int
woken_queue_hashes(const WakeSlot *slot, NameHash *out)
{
	int			n = 0;

	if (slot->nqueues < 0)
	{
		memcpy(out, slot->woken_many, sizeof(NameHash) * slot->nwoken_many);
		return slot->nwoken_many;
	}
	for (int i = 0; i < slot->nqueues; i++)
		if (slot->woken_queues & ((uint32) 1 << i))
			out[n++] = slot->queues[i];
	return n;
}

/* Wakes the waiting workers of queues[0..n), a job each. */
static void
pass_on_wakes(const NameHash *queues, int n)
{
	WakeRequest reqs[WAKE_MAX_QUEUES];

	for (int i = 0; i < n; i++)
		reqs[i] = (WakeRequest) {WAKE_JOBS, queues[i], 1, 0, 0, MyBackendId - 1};
	if (n > 0)
	{
		wake_scratch();
		wake_slots(reqs, n, NULL, 0);
	}
}

/*
 * Whether the wait may stop holding back the database's xmin horizon.
 *
 * A statement holds its snapshot until it ends, and the snapshot's xmin
 * keeps VACUUM, HOT pruning and the killing of dead index entries from
 * removing any row version that became dead after it: every second a
 * worker waits (idle, or on its notifier's connection while it drains a
 * backlog), the whole database's dead rows accumulate.  The claims feel
 * it most: each walks job_runnable_idx past the entries of the jobs
 * claimed since the horizon, a heap visit each (bench/README, twenty-ninth
 * round: without it the default drain about a third faster, at 64 slots
 * per worker about half).
 *
 * The wait reads no table, so the session can advertise no xmin while it
 * sleeps (as at the end of a transaction) if nothing reads with a snapshot
 * taken before the wait after it returns.  That holds, and only then is
 * the xmin released, when: the session is in no transaction block and not
 * REPEATABLE READ or SERIALIZABLE (no earlier snapshot of the transaction
 * is kept); no portal is open beside the running one (no cursor, no
 * suspended portal, no PL/pgSQL loop over a query); and the top-level
 * statement is one SELECT that reads no relation, has no subplan and
 * calls no user-defined function but await_work and await_claim (whose
 * claim, after the wait, takes a snapshot of its own).  So `SELECT * FROM
 * bgexec.await_work(...)`, as the daemon sends it, and `SELECT ... FROM
 * bgexec.await_claim(...)` release it; a wait inside BEGIN ... COMMIT, or
 * from a function of the user's, holds it as any statement does.  (A
 * built-in that runs a query of its own in the same statement, such as
 * query_to_xml, is not told apart: not a way to call a wait.)
 */
static bool
wait_may_release_xmin(FunctionCallInfo fcinfo)
{
	Portal		portal = ActivePortal;
	PlannedStmt *stmt;
	Oid			nsp;
	uint32		hashes[8];
	int			nhashes = 0;
	CatCList   *claims;
	ListCell   *lc;

	if (IsTransactionBlock() || IsolationUsesXactSnapshot() || !ThereAreNoReadyPortals())
		return false;
	if (portal == NULL || list_length(portal->stmts) != 1)
		return false;
	stmt = linitial_node(PlannedStmt, portal->stmts);
	if (stmt->commandType != CMD_SELECT || stmt->utilityStmt != NULL ||
		stmt->relationOids != NIL || stmt->subplans != NIL || stmt->rowMarks != NIL)
		return false;
	/* The plan names its functions by the hash of their OID. */
	hashes[nhashes++] = GetSysCacheHashValue1(PROCOID, ObjectIdGetDatum(fcinfo->flinfo->fn_oid));
	nsp = get_func_namespace(fcinfo->flinfo->fn_oid);
	claims = SearchSysCacheList1(PROCNAMEARGSNSP, CStringGetDatum("await_claim"));
	for (int i = 0; i < claims->n_members && nhashes < lengthof(hashes); i++)
	{
		Form_pg_proc proc = (Form_pg_proc) GETSTRUCT(&claims->members[i]->tuple);

		if (proc->pronamespace == nsp)
			hashes[nhashes++] = GetSysCacheHashValue1(PROCOID, ObjectIdGetDatum(proc->oid));
	}
	ReleaseSysCacheList(claims);
	foreach(lc, stmt->invalItems)
	{
		PlanInvalItem *item = lfirst_node(PlanInvalItem, lc);
		bool		ours = false;

		if (item->cacheId != PROCOID)
			continue;
		for (int i = 0; i < nhashes && !ours; i++)
			ours = item->hashValue == hashes[i];
		if (!ours)
			return false;
	}
	return true;
}

/*
 * bgexec.await_work(worker_id text, queues text[], free int, timeout
 * interval, pass_on boolean) -> (jobs boolean, stop boolean)
 *
 * Waits, up to timeout, until a committed transaction makes jobs of one of
 * queues runnable and picks this worker to claim them, or jobs of them
 * submitted for later become due (jobs), or a transaction asks to stop a
 * job whose lease worker_id holds (stop); returns at once with what
 * arrived since the previous call of this session.  free is how many jobs
 * the worker could start now: a worker with none is not picked.  pass_on
 * hands the previous call's job wakes, which the worker could not use, to
 * other waiting workers (at once: those jobs are committed).
 *
 * Holds no lock while it waits.  Called as a statement of its own outside
 * a transaction block, it holds back no xmin horizon while it sleeps
 * (wait_may_release_xmin); otherwise the statement's snapshot is held, so
 * keep timeout short (the daemon uses a second).  Returns half a second
 * before a statement_timeout would cancel it (half the statement_timeout
 * when that is under a second): a fixed 100 ms was one scheduling stall of
 * a loaded host from an error.  Cancellable.
 */
Datum
bgexec_await_work(PG_FUNCTION_ARGS)
{
	text	   *worker;
	ArrayType  *queues;
	int			free;
	Interval   *timeout;
	bool		pass_on;
	int64		timeout_us;
	int64		deadline;		/* monotonic */
	WakeSlot   *slot;
	uint8		got = 0;
	NameHash	passed_queues[WAKE_MAX_QUEUES];
	int			npassed = 0;
	TupleDesc	tupdesc;
	Datum		values[2];
	bool		nulls[2] = {false, false};
	volatile bool xmin_checked = false;	/* set inside PG_TRY */
	SlotArgs	args;

	/* As register_worker, claim and heartbeat bound it (detoasted once). */
	worker = PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0);
	if (worker == NULL || VARSIZE_ANY_EXHDR(worker) == 0 ||
		pg_mbstrlen_with_len(VARDATA_ANY(worker), VARSIZE_ANY_EXHDR(worker)) > 200)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("worker_id must be 1-200 characters")));
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("queues must not be null")));
	if (PG_ARGISNULL(2) || PG_GETARG_INT32(2) < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("free must be 0 or more")));
	if (PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("timeout must not be null")));
	queues = PG_GETARG_ARRAYTYPE_P(1);
	free = PG_GETARG_INT32(2);
	timeout = PG_GETARG_INTERVAL_P(3);
	pass_on = !PG_ARGISNULL(4) && PG_GETARG_BOOL(4);
	if (ARR_NDIM(queues) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("queues must be a one-dimensional array")));
	/* At most an hour: no month, and a day only against a negative time. */
	if (timeout->month != 0 || timeout->day < 0 || timeout->day > 1 ||
		pg_add_s64_overflow(timeout->time, timeout->day * USECS_PER_DAY, &timeout_us) ||
		timeout_us < 0 || timeout_us > (int64) WAKE_MAX_TIMEOUT_MS * 1000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("timeout must be between 0 and 1 hour")));
	/* Return before statement_timeout would cancel the wait. */
	if (StatementTimeout > 0)
		timeout_us = Min(timeout_us,
						 ((int64) StatementTimeout - Min(StatementTimeout / 2, 500)) * 1000);
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "await_work must return a composite type");
	slot = my_slot();
	if (slot == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("await_work and await_claim need bgexec in shared_preload_libraries"),
				 errhint("Add bgexec to shared_preload_libraries and restart, or LISTEN bgexec_jobs instead.")));
	if (!slot_exit_registered)
	{
		before_shmem_exit(wake_slot_exit, (Datum) 0);
		slot_exit_registered = true;
	}

	slot_args(&args, worker, queues);
	LWLockAcquire(wake_shared->lock, LW_EXCLUSIVE);
	if (slot->pid == MyProcPid && (slot->pending & WAKE_JOBS) == 0)
	{
		/*
		 * The wakes to hand on, by queue: the bits index the previous
		 * call's list, which register_slot replaces (a list in another
		 * order handed a queue's wake on as another's).
		 */
		if (pass_on)
			npassed = woken_queue_hashes(slot, passed_queues);
		slot->woken_queues = 0;
		slot->nwoken_many = 0;
	}
	register_slot(slot, &args, free);
	LWLockRelease(wake_shared->lock);

	/* Hand the job wakes this worker could not use to others, now. */
	pass_on_wakes(passed_queues, npassed);

	/*
	 * Until a wake arrives, the deadline passes, or jobs due later become
	 * runnable (then it takes them itself, sleeping until the earliest).
	 * The timeout is kept on the monotonic clock: on the wall clock, a step
	 * of it back made the wait last the step longer, until the client's own
	 * timeout dropped the connection.
	 */
	deadline = bgexec_mono_clock() + timeout_us;
	PG_TRY();
	{
		for (;;)
		{
			TimestampTz now = bgexec_wall_clock();
			int64		mono = bgexec_mono_clock();
			TimestampTz until;
			bool		sleep;

			LWLockAcquire(wake_shared->lock, LW_EXCLUSIVE);
			until = Min(now + (deadline - mono), take_due(slot, now, mono));
			sleep = slot->pending == 0 && until > now;
			slot->sleeping = sleep;
			slot->sleep_until = until;
			LWLockRelease(wake_shared->lock);
			if (!sleep)
				break;
			/* Only a call that sleeps asks; once. */
			if (!xmin_checked && (xmin_checked = true) && wait_may_release_xmin(fcinfo))
			{
				/*
				 * As SnapshotResetXmin does once a transaction holds no
				 * snapshot; the next snapshot taken sets it again.  The
				 * catalog snapshot goes too, so that no lookup after the
				 * wait reuses it.
				 */
				InvalidateCatalogSnapshot();
				MyProc->xmin = InvalidTransactionId;
			}
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 (long) ((until - now + 999) / 1000), PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
	}
	PG_FINALLY();
	{
		LWLockAcquire(wake_shared->lock, LW_EXCLUSIVE);
		if (slot->pid == MyProcPid)
		{
			slot->sleeping = false;
			slot->last_call = bgexec_mono_clock();
		}
		LWLockRelease(wake_shared->lock);
	}
	PG_END_TRY();

	LWLockAcquire(wake_shared->lock, LW_EXCLUSIVE);
	got = slot->pending;
	slot->pending = 0;
	LWLockRelease(wake_shared->lock);

	/*
	 * A worker killed while it waited (SIGKILL, a host gone) leaves its
	 * session here: a wake it took would be claimed by await_claim for a
	 * client that can never run the jobs, and an at-most-once job would
	 * end failed (worker_lost) without having started anywhere.  So when
	 * its client is gone, the session hands its wake to another waiting
	 * worker and ends, as a backend does that finds its client gone
	 * (client_connection_check_interval).  The check is a poll of the
	 * socket, made only for a job wake.
	 */
	if ((got & WAKE_JOBS) && whereToSendOutput == DestRemote && !pq_check_connection())
	{
		NameHash	queues[WAKE_MAX_QUEUES];
		int			n;

		LWLockAcquire(wake_shared->lock, LW_EXCLUSIVE);
		n = woken_queue_hashes(slot, queues);
		if (slot->pid == MyProcPid)
			memset(slot, 0, sizeof(WakeSlot));
		LWLockRelease(wake_shared->lock);
		pass_on_wakes(queues, n);
		ereport(FATAL,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("connection to client lost"),
				 errdetail("The worker's session in await_work passed its job wakes to other waiting workers.")));
	}

	values[0] = BoolGetDatum((got & WAKE_JOBS) != 0);
	values[1] = BoolGetDatum((got & WAKE_STOP) != 0);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls)));
}
