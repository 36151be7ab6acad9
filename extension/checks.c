/*-------------------------------------------------------------------------
 *
 * checks.c
 *	  The row rules of bgexec.job and bgexec.job_event, for their CHECK
 *	  constraints.
 *
 * PostgreSQL 15 prepares a table's CHECK constraints again for every
 * statement that writes to it: it reads each expression back from its
 * stored node text (stringToNode), runs the planner's expression
 * preprocessing over it and compiles it.  Claim and finish each write a
 * batch of jobs and their events in one statement, so this preparation is
 * paid per call, not per row.  The job table's seven rules as SQL
 * expressions were about 6 000 characters of node text, and the event
 * kinds' list 3 100 more; preparing them was 8 % of the backend CPU of a
 * claim of 16 jobs and their finish (perf, bench/README.md).  Here they are
 * one function call per table with its columns as arguments (about 1 500
 * and 300 characters).
 *
 * Each rule keeps its own name: _job_valid raises check_violation (23514)
 * with the message PostgreSQL would give for a constraint of that name
 * (new row for relation "job" violates check constraint
 * "job_running_has_lease"), the rule in words as detail, and the rule's
 * name as the error's constraint field.  NULL arguments cannot reach the
 * rules that name NOT NULL columns (PostgreSQL checks NOT NULL first).
 *
 * extension/checks.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_enum.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "bgexec/bgexec.h"

PG_FUNCTION_INFO_V1(bgexec_job_valid);
PG_FUNCTION_INFO_V1(bgexec_valid_event_kind);

/* The statuses the rules name, by the OID of their enum label. */
typedef struct StatusOids
{
	Oid			type;			/* bgexec.job_status, InvalidOid until looked up */
	Oid			running;
	Oid			completed;
	Oid			terminal[4];	/* completed, failed, cancelled, timed_out */
} StatusOids;

static StatusOids status_oids;

static Oid
enum_label_oid(Oid type, const char *label)
{
	Oid			oid = GetSysCacheOid2(ENUMTYPOIDNAME, Anum_pg_enum_oid,
									  ObjectIdGetDatum(type),
									  CStringGetDatum(label));

	if (!OidIsValid(oid))
		elog(ERROR, "bgexec.job_status has no label \"%s\"", label);
	return oid;
}

/*
 * The label OIDs of `type` (bgexec.job_status), looked up once per backend
 * and again when the type changed (the extension was dropped and created).
 */
static const StatusOids *
lookup_status_oids(Oid type)
{
	if (!OidIsValid(type))
		elog(ERROR, "bgexec._job_valid called without the type of its status argument");
	if (status_oids.type != type)
	{
		StatusOids	s;

		s.type = type;
		s.running = enum_label_oid(type, "running");
		s.completed = enum_label_oid(type, "completed");
		s.terminal[0] = s.completed;
		s.terminal[1] = enum_label_oid(type, "failed");
		s.terminal[2] = enum_label_oid(type, "cancelled");
		s.terminal[3] = enum_label_oid(type, "timed_out");
		status_oids = s;
	}
	return &status_oids;
}

/* Raises what a broken CHECK constraint of bgexec.job named `rule` would. */
static pg_noinline void
violated(const char *rule, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_CHECK_VIOLATION),
			 errmsg("new row for relation \"job\" violates check constraint \"%s\"", rule),
			 errdetail_internal("%s", detail),
			 err_generic_string(PG_DIAG_SCHEMA_NAME, "bgexec"),
			 err_generic_string(PG_DIAG_TABLE_NAME, "job"),
			 err_generic_string(PG_DIAG_CONSTRAINT_NAME, rule)));
}

/* A job's events at most: room left below the int's end for the appends and
 * the terminal event of a run (claim takes no job at 2000000000 or more). */
#define BGEXEC_LAST_SEQ_MAX 2100000000

/*
 * bgexec._job_valid(status, lease, lease_owner, lease_expires_at,
 * finished_at, result, attempt, max_attempts, timeout, kind, queue,
 * last_seq) ->
 * boolean: true when the row keeps every rule of bgexec.job, else raises
 * check_violation naming the first rule it breaks.  The CHECK constraint
 * job_valid calls it.  Not strict: most columns it reads may be NULL.
 */
Datum
bgexec_job_valid(PG_FUNCTION_ARGS)
{
	const StatusOids *st = lookup_status_oids(get_fn_expr_argtype(fcinfo->flinfo, 0));
	Oid			status = PG_ARGISNULL(0) ? InvalidOid : PG_GETARG_OID(0);
	bool		has_lease = !PG_ARGISNULL(1);
	bool		running = status == st->running;
	bool		terminal = false;

	for (int i = 0; i < lengthof(st->terminal); i++)
		terminal |= status == st->terminal[i];

	/*
	 * In the order of their names, as PostgreSQL checks constraints.
	 * attempt and last_seq short of the int's end: claim adds one to each,
	 * and a row written past the functions with either at 2147483647 made
	 * every claim of its queue fail (22003, integer out of range).
	 */
	if ((!PG_ARGISNULL(7) && PG_GETARG_INT32(7) < 1) ||
		(!PG_ARGISNULL(6) && (PG_GETARG_INT32(6) < 0 || PG_GETARG_INT32(6) == PG_INT32_MAX)))
		violated("job_attempts_valid",
				 "max_attempts must be at least 1 and attempt from 0 to 2147483646");
	if (status == st->completed && PG_ARGISNULL(5))
		violated("job_completed_has_result", "a completed job has a result");
	if (!PG_ARGISNULL(9) && !bgexec_text_name_ok(PG_GETARG_TEXT_PP(9), 128))
		violated("job_kind_valid",
				 "kind must be 1 to 128 ASCII letters, digits or _ . : -");
	if (!PG_ARGISNULL(11) && (PG_GETARG_INT32(11) < 0 || PG_GETARG_INT32(11) > BGEXEC_LAST_SEQ_MAX))
		violated("job_last_seq_valid",
				 "last_seq must be from 0 to 2100000000");
	if (!PG_ARGISNULL(10) && !bgexec_text_name_ok(PG_GETARG_TEXT_PP(10), 63))
		violated("job_queue_valid",
				 "queue must be 1 to 63 ASCII letters, digits or _ . : -");
	/* invariant 2: a running job holds exactly one lease; no other state holds one */
	if (!PG_ARGISNULL(0) &&
		(running != has_lease || has_lease != !PG_ARGISNULL(3) || has_lease != !PG_ARGISNULL(2)))
		violated("job_running_has_lease",
				 "a running job, and only a running job, has a lease, a lease_owner and a lease_expires_at");
	/* invariant 5: terminal states, and only they, carry finished_at */
	if (!PG_ARGISNULL(0) && terminal != !PG_ARGISNULL(4))
		violated("job_terminal_has_finished_at",
				 "a job in a terminal status, and only such a job, has a finished_at");
	if (!PG_ARGISNULL(8))
	{
		Interval	zero = {0};
		Interval   *t = PG_GETARG_INTERVAL_P(8);

		if (!DatumGetBool(DirectFunctionCall2(interval_gt, PG_GETARG_DATUM(8),
											  IntervalPGetDatum(&zero))))
			violated("job_timeout_positive", "timeout must be positive");
		/*
		 * Each part within 100 years, as submit's _interval_within bounds it:
		 * claim adds it to now() part by part, and a row written past the
		 * functions with '1000000 years' made every claim of its queue fail
		 * (22008, timestamp out of range).
		 */
		if (t->month > 1200 || t->month < -1200 || t->day > 36500 || t->day < -36500 ||
			t->time > INT64CONST(36500) * USECS_PER_DAY || t->time < -INT64CONST(36500) * USECS_PER_DAY)
			violated("job_timeout_positive", "timeout must be positive, each of its parts at most 100 years");
	}

	PG_RETURN_BOOL(true);
}

/*
 * bgexec._valid_event_kind(kind text) -> boolean: true for the event kinds
 * of DESIGN.md §2.  The CHECK constraint job_event_kind_valid calls it.
 */
Datum
bgexec_valid_event_kind(PG_FUNCTION_ARGS)
{
	static const char *const kinds[] = {
		"started", "step_started", "step_completed", "step_failed", "log",
		"progress", "stop_requested", "suspended", "resumed", "retry_scheduled",
		"worker_lost", "rescheduled", "completed", "failed", "cancelled", "timed_out",
	};
	text	   *t = PG_GETARG_TEXT_PP(0);
	const char *s = VARDATA_ANY(t);
	size_t		len = VARSIZE_ANY_EXHDR(t);

	for (int i = 0; i < lengthof(kinds); i++)
		if (strlen(kinds[i]) == len && memcmp(kinds[i], s, len) == 0)
			PG_RETURN_BOOL(true);
	PG_RETURN_BOOL(false);
}
