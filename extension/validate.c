/*-------------------------------------------------------------------------
 *
 * validate.c
 *	  bgexec._validate_payload(kind, payload): the submit-time check of a
 *	  job payload, and of the workflow DAG when kind = 'workflow'.
 *
 * A payload that passes is safe for every worker to plan from: a workflow
 * has 1..BGEXEC_WORKFLOW_MAX_STEPS steps with unique, well-formed ids,
 * exactly one kind per step, well-typed fields, "needs" that name other
 * existing steps (each at most once), and no cycle.  Rejecting these at
 * submit time keeps them from turning into failed jobs long after the
 * caller has gone; the worker still treats the payload as untrusted input.
 *
 * Every check raises at the first failure and does nothing else; all run
 * on the binary jsonb (no text re-parsing).  Cost: O(size of the payload)
 * to walk it, plus O(n + e) for n steps and e "needs" edges (one hash
 * lookup per edge, Kahn's algorithm for cycles).
 *
 * extension/validate.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "catalog/pg_type_d.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/hsearch.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/varlena.h"

#include "bgexec/bgexec.h"
#include "bgexec/protocol.h"

PG_FUNCTION_INFO_V1(bgexec_validate_payload);
PG_FUNCTION_INFO_V1(bgexec_json_fits);
PG_FUNCTION_INFO_V1(bgexec_raw_bytes);
PG_FUNCTION_INFO_V1(bgexec_unknown_key);
PG_FUNCTION_INFO_V1(bgexec_finish_item_error);
PG_FUNCTION_INFO_V1(bgexec_body_over);
PG_FUNCTION_INFO_V1(bgexec_item_over);
PG_FUNCTION_INFO_V1(bgexec_over_result_limit);

/* Keys a step object may have; the order fixes the order of the checks. */
typedef enum StepKey
{
	SK_ID,
	SK_NEEDS,
	SK_ACTION,
	SK_WITH,
	SK_RUN,
	SK_SQL,
	SK_PARAMS,
	SK_SLEEP,
	SK_APPROVAL,
	SK_TIMEOUT,
	SK_ENV,
	SK_NAME,
	SK_IF,
	SK_HTTP,
	SK_COUNT
} StepKey;

static const char *const step_key_names[SK_COUNT] = {
	"id", "needs", "action", "with", "run", "sql", "params",
	"sleep", "approval", "timeout", "env", "name", "if", "http"
};

/* The step kinds: a step has exactly one of these keys. */
static const StepKey step_kinds[] = {
	SK_ACTION, SK_RUN, SK_SQL, SK_SLEEP, SK_APPROVAL, SK_HTTP
};

#define STEP_KEYS_HINT \
	"A step may have the keys \"id\", \"needs\", \"action\", \"with\", " \
	"\"run\", \"sql\", \"params\", \"sleep\", \"approval\", \"timeout\", " \
	"\"env\", \"name\", \"if\" and \"http\"."
#define STEP_KIND_HINT \
	"Give the step exactly one of \"action\", \"run\", \"sql\", \"sleep\", " \
	"\"approval\" or \"http\"."

/* Hash table entry: one per step, keyed by its id. */
typedef struct StepEntry
{
	char		id[BGEXEC_STEP_ID_MAX_LEN + 1]; /* key, NUL-terminated */
	int			index;			/* position in "steps" */
	int			named_by;		/* last step whose "needs" named this one */
} StepEntry;

/* What pass 2 learns about one step. */
typedef struct WorkflowStep
{
	JsonbContainer *obj;		/* the step object */
	const char *id;				/* its (valid) id, NUL-terminated */
	bool		has[SK_COUNT];	/* which keys are present */
	JsonbValue	val[SK_COUNT];	/* their values, when present */
	int		   *needs;			/* indexes of the steps it needs */
	int			nneeds;
} WorkflowStep;

/*
 * The longest "sleep" or "timeout" of a step, in seconds: 100 years as
 * PostgreSQL compares intervals (36000 days), the bound of a job's timeout.
 * Larger numbers are valid jsonb, but not always a double the worker can
 * read (1e400), and mean nothing a worker could wait for.
 */
#define MAX_STEP_SECONDS INT64CONST(3110400000)

/*
 * What a worker cannot read back of a JSON value: a number past a double's
 * range (1e400), or containers nested deeper than its parser allows
 * (BGEXEC_MAX_JSON_DEPTH, the daemon's core::max_json_depth).
 */
typedef enum JsonFit
{
	JSON_FITS,
	JSON_NUMBER_OUT_OF_RANGE,
	JSON_TOO_DEEP
} JsonFit;

/* The daemon's core::max_json_depth: the containers its parser nests. */
#define BGEXEC_MAX_JSON_DEPTH 512

static JsonFit json_fit(Jsonb *jb, int max_depth);
static void raise_unfit(JsonFit fit, const char *what, int max_depth);
static bool positive_as_double(const JsonbValue *v);
static void validate_workflow(JsonbContainer *root);
static void validate_step(WorkflowStep *steps, int i, HTAB *ids, int nsteps,
						  Numeric zero, Numeric most);
static void check_no_cycle(WorkflowStep *steps, int nsteps);
static void check_template_steps(WorkflowStep *steps, int nsteps, HTAB *ids);
static StepEntry *lookup_step(HTAB *ids, const char *name, int len);
static const char *closest_step_id(WorkflowStep *steps, int nsteps, int self,
								   const char *name, int len);
static bool is_valid_step_id(const char *s, int len);
static bool jbv_is_object(const JsonbValue *v);
static bool jbv_is_array(const JsonbValue *v);
static bool jbv_is_nonempty_string(const JsonbValue *v);
static bool if_is_valid(const JsonbValue *v);
static bool is_one_template(const char *t, int len);
static int	jbv_numeric_cmp(const JsonbValue *v, Numeric zero);
static char *jbv_cstring(const JsonbValue *v);
static bool key_equals(const JsonbValue *key, const char *name);
static bool next_field(JsonbIterator **it, JsonbValue *key, JsonbValue *val);

/*
 * bgexec._validate_payload(kind text, payload jsonb) returns void.
 *
 * Raises on the first rule the payload breaks; returns nothing otherwise.
 * Pure function of its arguments and bgexec.max_payload_bytes: takes no
 * locks and reads no table.  NULL arguments are rejected rather than let
 * through, so the function is safe to declare either STRICT or not.
 */
Datum
bgexec_validate_payload(PG_FUNCTION_ARGS)
{
	text	   *kind;
	Jsonb	   *payload;
	Size		size;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("kind must not be null")));
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("payload must not be null"),
				 errhint("Pass '{}' for a job without a payload.")));

	/*
	 * The size is that of the uncompressed binary jsonb, header included:
	 * what the value occupies once detoasted.  toast_raw_datum_size() reads
	 * it from the toast pointer or compression header, so an oversized
	 * payload is refused before it is decompressed or walked, and the limit
	 * bounds the memory every later step (the worker's claim, the events)
	 * spends on it.  It differs from octet_length(payload::text) by the
	 * per-item overhead of jsonb.
	 */
	size = toast_raw_datum_size(PG_GETARG_DATUM(1));
	if (size > (Size) bgexec_max_payload_bytes)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("payload is %zu bytes, over bgexec.max_payload_bytes (%d)",
						size, bgexec_max_payload_bytes),
				 errhint("Store large data elsewhere and pass a reference to it, "
						 "or raise bgexec.max_payload_bytes.")));

	payload = PG_GETARG_JSONB_P(1);
	if (!JB_ROOT_IS_OBJECT(payload))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("payload must be a JSON object")));

	kind = PG_GETARG_TEXT_PP(0);
	if (VARSIZE_ANY_EXHDR(kind) == strlen(BGEXEC_KIND_WORKFLOW) &&
		memcmp(VARDATA_ANY(kind), BGEXEC_KIND_WORKFLOW,
			   strlen(BGEXEC_KIND_WORKFLOW)) == 0)
		validate_workflow(&payload->root);

	/*
	 * Every job's payload is read by a worker that reads JSON numbers as
	 * doubles (RFC 8259 section 6), as most JSON readers do, and nests at
	 * most BGEXEC_MAX_JSON_DEPTH containers: past either (1e400, 600
	 * levels) the job failed at run ("payload cannot be read", "payload
	 * nested deeper than 512 levels"), and retry could not mend it.
	 * resume() refuses such an input too.  After the workflow's checks,
	 * which name a step's field.
	 */
	raise_unfit(json_fit(payload, BGEXEC_MAX_JSON_DEPTH), "payload", BGEXEC_MAX_JSON_DEPTH);

	PG_RETURN_VOID();
}

/*
 * bgexec._json_fits(value jsonb, max_depth int, what text) returns boolean:
 * whether a worker can read value back: every number within a double's
 * range (|n| <= DBL_MAX) and at most max_depth containers nested (the top
 * one counts).  With what NULL, false when it cannot; else it raises,
 * naming what: 22003 for the number, 54000 for the depth.  submit_many asks
 * it once of its whole array (what NULL), and sends every element through
 * _check_submit only when it is false; resume() checks its input, and
 * append_events a step_completed event's output, with it.
 */
Datum
bgexec_json_fits(PG_FUNCTION_ARGS)
{
	JsonFit		fit;
	int			max_depth;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	max_depth = PG_GETARG_INT32(1);
	fit = json_fit(PG_GETARG_JSONB_P(0), max_depth);
	if (fit != JSON_FITS && !PG_ARGISNULL(2))
		raise_unfit(fit, text_to_cstring(PG_GETARG_TEXT_PP(2)), max_depth);
	PG_RETURN_BOOL(fit == JSON_FITS);
}

/*
 * bgexec._raw_bytes(value jsonb) returns bigint: the value's size once
 * detoasted and decompressed, read from its header (toast_raw_datum_size,
 * as _validate_payload bounds a payload): no copy, no text.  The gateway
 * cuts a page of jobs by it.
 */
Datum
bgexec_raw_bytes(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64((int64) toast_raw_datum_size(PG_GETARG_DATUM(0)));
}

/*
 * bgexec._unknown_key(value jsonb, known text[]) returns text: the first
 * key of the object value (in jsonb's key order) that is not in known, or
 * NULL when every key is known or value is no object.  submit_many's
 * elements, finish_many's items and append_events' events are read by their
 * keys: a misspelt "result" beside "body" was dropped, and the job
 * completed with {}.  One walk of the object's top level, nothing copied
 * but the key returned.
 */
Datum
bgexec_unknown_key(PG_FUNCTION_ARGS)
{
	Jsonb	   *value = PG_GETARG_JSONB_P(0);
	ArrayType  *known = PG_GETARG_ARRAYTYPE_P(1);
	Datum	   *names;
	bool	   *nulls;
	int			n;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;

	if (!JB_ROOT_IS_OBJECT(value))
		PG_RETURN_NULL();
	deconstruct_array(known, TEXTOID, -1, false, TYPALIGN_INT, &names, &nulls, &n);
	it = JsonbIteratorInit(&value->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		bool		found = false;

		if (tok != WJB_KEY)
			continue;
		for (int i = 0; i < n && !found; i++)
		{
			text	   *name;

			if (nulls[i])
				continue;
			name = DatumGetTextPP(names[i]);
			found = VARSIZE_ANY_EXHDR(name) == v.val.string.len &&
				memcmp(VARDATA_ANY(name), v.val.string.val, v.val.string.len) == 0;
		}
		if (!found)
			PG_RETURN_TEXT_P(cstring_to_text_with_len(v.val.string.val, v.val.string.len));
	}
	PG_RETURN_NULL();
}

/* The JSON text of v (a value of an object's top level), for a message. */
static char *
jbv_text(const JsonbValue *v)
{
	Jsonb	   *j = JsonbValueToJsonb((JsonbValue *) v);

	return JsonbToCString(NULL, &j->root, VARSIZE(j));
}

/*
 * Whether v is a JSON number that bigint's input takes, as
 * jsonb_to_recordset casts it: its text (numeric_out: no exponent, the
 * written scale) an integer in range.  1.0 is not (invalid input syntax for
 * type bigint: "1.0"), 1e3 is (1000).
 */
static bool
jbv_is_bigint(const JsonbValue *v)
{
	char	   *digits;
	char	   *end;
	bool		ok;

	if (v->type != jbvNumeric)
		return false;
	digits = DatumGetCString(DirectFunctionCall1(numeric_out,
												 NumericGetDatum(v->val.numeric)));
	errno = 0;
	(void) strtoi64(digits, &end, 10);
	ok = errno == 0 && *end == '\0';	/* a '.' ends the digits early */
	pfree(digits);
	return ok;
}

/*
 * bgexec._finish_item_error(item jsonb) returns text: why item is no
 * finish_many item, or NULL when it is one: an object with no key but
 * job_id, lease, outcome and body (the first other in jsonb's key order is
 * named), job_id and lease JSON numbers that are bigints, an outcome that
 * is terminal or suspended.  The checks in that order; one walk of the
 * object's top level.  A job_id of 1.0 or 1e30 failed in finish_many's
 * cast, 22P02 or 22003 naming neither the item nor the field.
 */
Datum
bgexec_finish_item_error(PG_FUNCTION_ARGS)
{
	Jsonb	   *item = PG_GETARG_JSONB_P(0);
	JsonbIterator *it;
	JsonbValue	k;
	JsonbValue	v;
	JsonbIteratorToken tok;
	JsonbValue	job_id = {.type = jbvNull};
	JsonbValue	lease = {.type = jbvNull};
	JsonbValue	outcome = {.type = jbvNull};
	bool		has_job_id = false;
	bool		has_lease = false;
	bool		has_outcome = false;
	static const char *const outcomes[] = {"completed", "failed", "cancelled", "timed_out", "suspended"};
	bool		outcome_ok = false;

	if (!JB_ROOT_IS_OBJECT(item))
		PG_RETURN_TEXT_P(cstring_to_text("must be a JSON object"));
	it = JsonbIteratorInit(&item->root);
	while ((tok = JsonbIteratorNext(&it, &k, true)) != WJB_DONE)
	{
		if (tok != WJB_KEY)
			continue;
		tok = JsonbIteratorNext(&it, &v, true);
		Assert(tok == WJB_VALUE);
		if (key_equals(&k, "job_id"))
		{
			job_id = v;
			has_job_id = true;
		}
		else if (key_equals(&k, "lease"))
		{
			lease = v;
			has_lease = true;
		}
		else if (key_equals(&k, "outcome"))
		{
			outcome = v;
			has_outcome = true;
		}
		else if (!key_equals(&k, "body"))
			PG_RETURN_TEXT_P(cstring_to_text(psprintf("unknown field %s",
													  quote_literal_cstr(jbv_cstring(&k)))));
	}
	if (!jbv_is_bigint(&job_id))
		PG_RETURN_TEXT_P(cstring_to_text(psprintf("job_id must be an integer (was %s)",
												  has_job_id ? jbv_text(&job_id) : "missing")));
	if (!jbv_is_bigint(&lease))
		PG_RETURN_TEXT_P(cstring_to_text(psprintf("lease must be an integer (was %s)",
												  has_lease ? jbv_text(&lease) : "missing")));
	for (int i = 0; i < lengthof(outcomes) && !outcome_ok; i++)
		outcome_ok = key_equals(&outcome, outcomes[i]);
	if (!outcome_ok)
		PG_RETURN_TEXT_P(cstring_to_text(psprintf("outcome must be completed, failed, cancelled, timed_out or suspended (was %s)",
												  has_outcome ? jbv_text(&outcome) : "missing")));
	PG_RETURN_NULL();
}

/*
 * The error a job fails with when a worker finishes it with a body of size
 * bytes, past bgexec.max_result_bytes: the daemon's own (job.cpp, for
 * --max-result-bytes) in shape, sqlstate 54000, not retryable (its steps
 * would make the same body again).  outcome is the one the worker sent.
 */
static Datum
oversize_note(const char *outcome, int64 bytes)
{
	char	   *text;

	if (strcmp(outcome, "completed") == 0)
		text = psprintf("{\"message\": \"the job's result is " INT64_FORMAT
						" bytes as jsonb, over bgexec.max_result_bytes (%d) "
						"(its steps' outputs stay in their step_completed events; "
						"write large output to a file and print its path)\", "
						"\"sqlstate\": \"54000\", \"result_bytes\": " INT64_FORMAT
						", \"max_result_bytes\": %d, \"retryable\": false}",
						bytes, bgexec_max_result_bytes, bytes, bgexec_max_result_bytes);
	else
		text = psprintf("{\"message\": \"the job's %s body is " INT64_FORMAT
						" bytes as jsonb, over bgexec.max_result_bytes (%d): not stored\", "
						"\"sqlstate\": \"54000\", \"outcome\": \"%s\", \"result_bytes\": "
						INT64_FORMAT ", \"max_result_bytes\": %d, \"retryable\": false}",
						outcome, bytes, bgexec_max_result_bytes, outcome, bytes,
						bgexec_max_result_bytes);
	return DirectFunctionCall1(jsonb_in, CStringGetDatum(text));
}

/*
 * bgexec._body_over(outcome text, body jsonb) returns jsonb: NULL when
 * body is at most bgexec.max_result_bytes as an uncompressed jsonb (read
 * from its header, as _validate_payload bounds a payload: nothing
 * detoasted or walked), else the error finish stores instead (the job
 * fails, 54000).  The outcome must be a finish outcome (the caller checked).
 */
Datum
bgexec_body_over(PG_FUNCTION_ARGS)
{
	Size		size = toast_raw_datum_size(PG_GETARG_DATUM(1));

	if (size <= (Size) bgexec_max_result_bytes)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(oversize_note(text_to_cstring(PG_GETARG_TEXT_PP(0)), (int64) size));
}

/*
 * bgexec._over_result_limit(value jsonb) returns boolean: whether value is
 * larger than bgexec.max_result_bytes as an uncompressed jsonb, read from
 * its header.  finish_many asks it of its whole items array: within the
 * limit, no body in it can be past it, and no item is looked at.
 */
Datum
bgexec_over_result_limit(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(toast_raw_datum_size(PG_GETARG_DATUM(0)) > (Size) bgexec_max_result_bytes);
}

/*
 * bgexec._item_over(item jsonb) returns jsonb: NULL when the "body" of the
 * finish_many item is at most bgexec.max_result_bytes (its size as the
 * jsonb value item->'body' would be, as _body_over measures it), else the
 * item that fails the job instead: its job_id and lease, outcome failed,
 * the 54000 error as body.  The item passed _finish_item_error.  A key
 * lookup; the body is not copied (a long string only is measured by copy).
 */
Datum
bgexec_item_over(PG_FUNCTION_ARGS)
{
	Jsonb	   *item = PG_GETARG_JSONB_P(0);
	JsonbValue	body;
	JsonbValue	v;
	Size		size;
	char	   *outcome;
	char	   *text;

	if (!JB_ROOT_IS_OBJECT(item) ||
		getKeyJsonValueFromContainer(&item->root, "body", 4, &body) == NULL)
		PG_RETURN_NULL();
	if (body.type == jbvBinary)
		size = VARHDRSZ + body.val.binary.len;	/* as JsonbValueToJsonb copies it */
	else if (body.type != jbvString ||
			 (Size) body.val.string.len + 64 <= (Size) bgexec_max_result_bytes)
		PG_RETURN_NULL();		/* a scalar under the limit (the least is 1024) */
	else
		size = VARSIZE(JsonbValueToJsonb(&body));
	if (size <= (Size) bgexec_max_result_bytes)
		PG_RETURN_NULL();
	if (getKeyJsonValueFromContainer(&item->root, "outcome", 7, &v) == NULL ||
		!(key_equals(&v, "completed") || key_equals(&v, "failed") ||
		  key_equals(&v, "cancelled") || key_equals(&v, "timed_out") ||
		  key_equals(&v, "suspended")))
		PG_RETURN_NULL();		/* not an item: _finish_item_error says why */
	outcome = pnstrdup(v.val.string.val, v.val.string.len);
	{
		JsonbValue	job_id;
		JsonbValue	lease;
		char	   *note;

		if (getKeyJsonValueFromContainer(&item->root, "job_id", 6, &job_id) == NULL ||
			getKeyJsonValueFromContainer(&item->root, "lease", 5, &lease) == NULL)
			PG_RETURN_NULL();
		note = DatumGetCString(DirectFunctionCall1(jsonb_out,
												   oversize_note(outcome, (int64) size)));
		text = psprintf("{\"job_id\": %s, \"lease\": %s, \"outcome\": \"failed\", \"body\": %s}",
						jbv_text(&job_id), jbv_text(&lease), note);
	}
	PG_RETURN_DATUM(DirectFunctionCall1(jsonb_in, CStringGetDatum(text)));
}

/* Raises for an unfit value, naming what; returns when it fits. */
static void
raise_unfit(JsonFit fit, const char *what, int max_depth)
{
	if (fit == JSON_NUMBER_OUT_OF_RANGE)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("%s: a number is out of range for a double precision value", what),
				 errhint("Send such a value as a string.")));
	if (fit == JSON_TOO_DEEP)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("%s nested deeper than %d levels", what, max_depth)));
}

/*
 * One pass over jb: numbers compared with +-DBL_MAX, containers counted as
 * they open (a raw scalar's pseudo-array is none).
 */
static JsonFit
json_fit(Jsonb *jb, int max_depth)
{
	JsonbIterator *it = JsonbIteratorInit(&jb->root);
	JsonbValue	v;
	JsonbIteratorToken tok;
	Numeric		most = NULL;
	Numeric		least = NULL;
	int			depth = 0;

	while ((tok = JsonbIteratorNext(&it, &v, false)) != WJB_DONE)
	{
		if (tok == WJB_BEGIN_OBJECT ||
			(tok == WJB_BEGIN_ARRAY && !v.val.array.rawScalar))
		{
			if (++depth > max_depth)
				return JSON_TOO_DEEP;
			continue;
		}
		if (tok == WJB_END_OBJECT || tok == WJB_END_ARRAY)
		{
			depth--;			/* a raw scalar's end too: never checked again */
			continue;
		}
		if ((tok != WJB_VALUE && tok != WJB_ELEM) || v.type != jbvNumeric)
			continue;
		if (most == NULL)
		{
			/* DBL_MAX to 17 digits, as resume() writes it */
			most = DatumGetNumeric(DirectFunctionCall3(numeric_in,
													   CStringGetDatum("1.7976931348623157e308"),
													   ObjectIdGetDatum(InvalidOid),
													   Int32GetDatum(-1)));
			least = DatumGetNumeric(DirectFunctionCall1(numeric_uminus,
														NumericGetDatum(most)));
		}
		if (jbv_numeric_cmp(&v, most) > 0 || jbv_numeric_cmp(&v, least) < 0)
			return JSON_NUMBER_OUT_OF_RANGE;
	}
	return JSON_FITS;
}

/*
 * Checks a workflow payload: top-level keys, then every step (pass 1: ids;
 * pass 2: keys, kinds, fields, needs), then the absence of cycles.
 *
 * Everything is allocated in the caller's memory context, including the
 * id hash table, so an error frees it all with that context.
 */
static void
validate_workflow(JsonbContainer *root)
{
	JsonbIterator *it;
	JsonbValue	key;
	JsonbValue	v;
	JsonbValue	steps_val;
	bool		have_steps = false;
	JsonbContainer *steps_c;
	int			nsteps;
	WorkflowStep *steps;
	HASHCTL		ctl;
	HTAB	   *ids;
	Numeric		zero;
	Numeric		most;

	/* Top-level keys: only input, steps, name, description. */
	it = JsonbIteratorInit(root);
	while (next_field(&it, &key, &v))
	{

		if (key_equals(&key, "steps"))
		{
			steps_val = v;
			have_steps = true;
		}
		else if (key_equals(&key, "input"))
		{
			/* any JSON value: the workflow's input, as given */
		}
		else if (key_equals(&key, "name") || key_equals(&key, "description"))
		{
			if (v.type != jbvString)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("workflow \"%s\" must be a string",
								jbv_cstring(&key))));
		}
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("workflow payload has unknown key \"%s\"",
							jbv_cstring(&key)),
					 errhint("A workflow payload may have the keys \"input\", "
							 "\"steps\", \"name\" and \"description\".")));
	}

	if (!have_steps)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("workflow payload has no \"steps\""),
				 errhint("Give \"steps\" as an array of step objects.")));
	if (!jbv_is_array(&steps_val))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("workflow \"steps\" must be an array")));
	steps_c = steps_val.val.binary.data;
	nsteps = JsonContainerSize(steps_c);
	if (nsteps == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("workflow \"steps\" must not be empty")));
	if (nsteps > BGEXEC_WORKFLOW_MAX_STEPS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("workflow has %d steps, over the limit of %d",
						nsteps, BGEXEC_WORKFLOW_MAX_STEPS),
				 errhint("Split the work into several workflows.")));

	steps = (WorkflowStep *) palloc0(sizeof(WorkflowStep) * nsteps);

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = BGEXEC_STEP_ID_MAX_LEN + 1;
	ctl.entrysize = sizeof(StepEntry);
	ctl.hcxt = CurrentMemoryContext;
	ids = hash_create("bgexec workflow step ids", nsteps, &ctl,
					  HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);

	/* Pass 1: every step is an object with a valid, unique id. */
	for (int i = 0; i < nsteps; i++)
	{
		JsonbValue *step = getIthJsonbValueFromContainer(steps_c, i);
		JsonbValue	idv;
		char		key[BGEXEC_STEP_ID_MAX_LEN + 1];
		StepEntry  *entry;
		bool		found;

		if (!jbv_is_object(step))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("workflow steps[%d] must be a JSON object", i)));
		steps[i].obj = step->val.binary.data;

		if (getKeyJsonValueFromContainer(steps[i].obj, "id", 2, &idv) == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("workflow steps[%d] has no \"id\"", i),
					 errhint("Give every step an \"id\" that other steps can "
							 "name in \"needs\".")));
		if (idv.type != jbvString)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("workflow steps[%d]: \"id\" must be a string", i)));
		if (!is_valid_step_id(idv.val.string.val, idv.val.string.len))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("workflow steps[%d]: \"%s\" is not a valid step id",
							i, jbv_cstring(&idv)),
					 errhint("A step id has 1 to %d characters: a letter or "
							 "underscore, then letters, digits, underscores "
							 "or hyphens.", BGEXEC_STEP_ID_MAX_LEN)));

		memcpy(key, idv.val.string.val, idv.val.string.len);
		key[idv.val.string.len] = '\0';
		entry = (StepEntry *) hash_search(ids, key, HASH_ENTER, &found);
		if (found)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("workflow step id \"%s\" is used more than once",
							key),
					 errdetail("steps[%d] and steps[%d] have the same id.",
							   entry->index, i),
					 errhint("Give every step a distinct \"id\".")));
		entry->index = i;
		entry->named_by = -1;
		steps[i].id = entry->id;
	}

	/* Pass 2: keys, kind and fields of each step; resolve "needs". */
	zero = int64_to_numeric(0);
	most = int64_to_numeric(MAX_STEP_SECONDS);
	for (int i = 0; i < nsteps; i++)
		validate_step(steps, i, ids, nsteps, zero, most);

	check_no_cycle(steps, nsteps);
	check_template_steps(steps, nsteps, ids);

	hash_destroy(ids);
}

/*
 * Checks the keys, the kind and the fields of steps[i], and resolves its
 * "needs" into steps[i].needs (indexes), refusing a step that needs itself,
 * an unknown step, or the same step twice.
 *
 * Needs pass 1 done (all ids in the hash).  The "named_by" mark of each
 * entry detects a repeated name in O(1), so the whole pass is O(n + e).
 */
static void
validate_step(WorkflowStep *steps, int i, HTAB *ids, int nsteps, Numeric zero,
			  Numeric most)
{
	WorkflowStep *s = &steps[i];
	JsonbIterator *it;
	JsonbIteratorToken tok;
	JsonbValue	key;
	JsonbValue	v;
	StepKey		kinds[lengthof(step_kinds)];
	int			nkinds = 0;

	/* Unknown keys, and remember the value of each known one. */
	it = JsonbIteratorInit(s->obj);
	while (next_field(&it, &key, &v))
	{
		int			k;


		for (k = 0; k < SK_COUNT; k++)
			if (key_equals(&key, step_key_names[k]))
				break;
		if (k == SK_COUNT)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("workflow step \"%s\" has unknown key \"%s\"",
							s->id, jbv_cstring(&key)),
					 errhint(STEP_KEYS_HINT)));
		s->has[k] = true;
		s->val[k] = v;
	}

	/* Exactly one kind. */
	for (int k = 0; k < lengthof(step_kinds); k++)
		if (s->has[step_kinds[k]])
			kinds[nkinds++] = step_kinds[k];
	if (nkinds == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("workflow step \"%s\" has no kind", s->id),
				 errhint(STEP_KIND_HINT)));
	if (nkinds > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("workflow step \"%s\" has more than one kind: \"%s\" and \"%s\"",
						s->id, step_key_names[kinds[0]],
						step_key_names[kinds[1]]),
				 errhint(STEP_KIND_HINT)));

	/* The kind's own value. */
	switch (kinds[0])
	{
		case SK_ACTION:
			if (!jbv_is_nonempty_string(&s->val[SK_ACTION]))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("workflow step \"%s\": \"action\" must be a non-empty string",
								s->id)));
			break;
		case SK_RUN:
			{
				JsonbContainer *argv;

				if (!jbv_is_array(&s->val[SK_RUN]) ||
					JsonContainerSize(s->val[SK_RUN].val.binary.data) == 0)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("workflow step \"%s\": \"run\" must be a non-empty array of strings",
									s->id),
							 errhint("Give the program and its arguments, as in [\"wc\", \"-l\", \"file\"].")));
				argv = s->val[SK_RUN].val.binary.data;
				for (int j = 0; j < (int) JsonContainerSize(argv); j++)
				{
					JsonbValue *arg = getIthJsonbValueFromContainer(argv, j);

					if (arg->type != jbvString)
						ereport(ERROR,
								(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
								 errmsg("workflow step \"%s\": \"run\"[%d] must be a string",
										s->id, j)));
					if (j == 0 && arg->val.string.len == 0)
						ereport(ERROR,
								(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
								 errmsg("workflow step \"%s\": \"run\"[0], the program, must not be empty",
										s->id)));
				}
			}
			break;
		case SK_SQL:
			if (!jbv_is_nonempty_string(&s->val[SK_SQL]))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("workflow step \"%s\": \"sql\" must be a non-empty string",
								s->id)));
			break;
		case SK_SLEEP:
			/* or one template ("{{input.delay}}"), rendered as the step starts */
			if (s->val[SK_SLEEP].type == jbvString &&
				is_one_template(s->val[SK_SLEEP].val.string.val, s->val[SK_SLEEP].val.string.len))
				break;
			if (s->val[SK_SLEEP].type != jbvNumeric ||
				jbv_numeric_cmp(&s->val[SK_SLEEP], zero) < 0 ||
				jbv_numeric_cmp(&s->val[SK_SLEEP], most) > 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("workflow step \"%s\": \"sleep\" must be a number of seconds from 0 to %lld, or one template",
								s->id, (long long) MAX_STEP_SECONDS)));
			break;
		case SK_APPROVAL:
			{
				JsonbValue *a = &s->val[SK_APPROVAL];

				if (a->type == jbvBool && a->val.boolean)
					break;
				if (!jbv_is_object(a))
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("workflow step \"%s\": \"approval\" must be true or an object",
									s->id),
							 errhint("Use true, or an object such as {\"prompt\": \"load the rows?\"}.")));
				it = JsonbIteratorInit(a->val.binary.data);
				while (next_field(&it, &key, &v))
				{
					if (!key_equals(&key, "prompt"))
						ereport(ERROR,
								(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
								 errmsg("workflow step \"%s\": \"approval\" has unknown key \"%s\"",
										s->id, jbv_cstring(&key)),
								 errhint("\"approval\" may only have the key \"prompt\".")));
					if (v.type != jbvString)
						ereport(ERROR,
								(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
								 errmsg("workflow step \"%s\": \"approval\" \"prompt\" must be a string",
										s->id)));
				}
			}
			break;
		case SK_HTTP:
			{
				/*
				 * The request's shape; the URL itself is checked by the
				 * worker as it renders it (templates), against its
				 * --allow-http prefixes.
				 */
				JsonbValue *h = &s->val[SK_HTTP];
				bool		has_url = false;

				if (!jbv_is_object(h))
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("workflow step \"%s\": \"http\" must be an object",
									s->id),
							 errhint("Use an object such as {\"url\": \"http://svc:8080/hook\", \"method\": \"POST\", \"body\": {}}.")));
				it = JsonbIteratorInit(h->val.binary.data);
				while (next_field(&it, &key, &v))
				{
					if (key_equals(&key, "url"))
					{
						has_url = true;
						if (!jbv_is_nonempty_string(&v))
							ereport(ERROR,
									(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
									 errmsg("workflow step \"%s\": \"http\" \"url\" must be a non-empty string",
											s->id)));
					}
					else if (key_equals(&key, "method"))
					{
						if (!jbv_is_nonempty_string(&v))
							ereport(ERROR,
									(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
									 errmsg("workflow step \"%s\": \"http\" \"method\" must be a non-empty string",
											s->id)));
					}
					else if (key_equals(&key, "headers"))
					{
						JsonbIterator *hit;
						JsonbValue	hv;

						if (!jbv_is_object(&v))
							ereport(ERROR,
									(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
									 errmsg("workflow step \"%s\": \"http\" \"headers\" must be an object of strings",
											s->id)));
						hit = JsonbIteratorInit(v.val.binary.data);
						while ((tok = JsonbIteratorNext(&hit, &hv, true)) != WJB_DONE)
							if (tok == WJB_VALUE && hv.type != jbvString)
								ereport(ERROR,
										(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
										 errmsg("workflow step \"%s\": \"http\" \"headers\" must be an object of strings",
												s->id)));
					}
					else if (key_equals(&key, "timeout"))
					{
						if (v.type != jbvString &&
							(v.type != jbvNumeric || !positive_as_double(&v) ||
							 jbv_numeric_cmp(&v, most) > 0))
							ereport(ERROR,
									(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
									 errmsg("workflow step \"%s\": \"http\" \"timeout\" must be a number of seconds > 0 and at most %lld, or a duration such as \"30s\"",
											s->id, (long long) MAX_STEP_SECONDS)));
					}
					else if (!key_equals(&key, "body"))
						ereport(ERROR,
								(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
								 errmsg("workflow step \"%s\": \"http\" has unknown key \"%s\"",
										s->id, jbv_cstring(&key)),
								 errhint("\"http\" may have the keys \"url\", \"method\", \"headers\", \"body\" and \"timeout\".")));
				}
				if (!has_url)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("workflow step \"%s\": \"http\" has no \"url\"",
									s->id)));
			}
			break;
		default:
			elog(ERROR, "unexpected step kind %d", (int) kinds[0]);
	}

	/* Fields tied to one kind. */
	if (s->has[SK_WITH] && kinds[0] != SK_ACTION)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("workflow step \"%s\": \"with\" is only allowed with \"action\"",
						s->id)));
	if (s->has[SK_PARAMS])
	{
		if (kinds[0] != SK_SQL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("workflow step \"%s\": \"params\" is only allowed with \"sql\"",
							s->id)));
		if (!jbv_is_array(&s->val[SK_PARAMS]))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("workflow step \"%s\": \"params\" must be an array",
							s->id)));
	}

	/* Fields any step may have, but for the kinds they do nothing to. */
	if (s->has[SK_TIMEOUT] && kinds[0] == SK_APPROVAL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("workflow step \"%s\": \"timeout\" is not allowed with \"approval\"",
						s->id),
				 errhint("An approval waits for resume or stop as long as it takes; the job's timeout does not count while it is suspended.")));
	if (s->has[SK_ENV] && kinds[0] != SK_RUN && kinds[0] != SK_ACTION)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("workflow step \"%s\": \"env\" is only allowed with \"run\" or \"action\"",
						s->id)));
	if (s->has[SK_TIMEOUT] &&
		(s->val[SK_TIMEOUT].type != jbvNumeric ||
		 !positive_as_double(&s->val[SK_TIMEOUT]) ||
		 jbv_numeric_cmp(&s->val[SK_TIMEOUT], most) > 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("workflow step \"%s\": \"timeout\" must be a number of seconds > 0 and at most %lld",
						s->id, (long long) MAX_STEP_SECONDS)));
	if (s->has[SK_IF] && !if_is_valid(&s->val[SK_IF]))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("workflow step \"%s\": \"if\" must be true, false or one template",
						s->id),
				 errhint("Use a template whose value is true or false, such as \"{{steps.check.output.go}}\", or \"!{{steps.check.output.go}}\" for its negation.")));
	if (s->has[SK_NAME] && s->val[SK_NAME].type != jbvString)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("workflow step \"%s\": \"name\" must be a string",
						s->id)));
	if (s->has[SK_ENV])
	{
		if (!jbv_is_object(&s->val[SK_ENV]))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("workflow step \"%s\": \"env\" must be an object of strings",
							s->id)));
		it = JsonbIteratorInit(s->val[SK_ENV].val.binary.data);
		while (next_field(&it, &key, &v))
		{

			/* execve() splits "NAME=value" at the first '=' */
			if (key.val.string.len == 0 ||
				memchr(key.val.string.val, '=', key.val.string.len) != NULL)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("workflow step \"%s\": \"env\" has an invalid variable name \"%s\"",
								s->id, jbv_cstring(&key)),
						 errhint("A variable name must not be empty and must not contain \"=\".")));
			/* The worker sets these for every step process (README). */
			if (key_equals(&key, "BGEXEC_JOB_ID") || key_equals(&key, "BGEXEC_STEP_ID") ||
				key_equals(&key, "BGEXEC_ATTEMPT") || key_equals(&key, "BGEXEC_QUEUE") ||
				key_equals(&key, "BGEXEC_WORKER_INSTANCE"))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("workflow step \"%s\": \"env\" cannot set \"%s\"",
								s->id, jbv_cstring(&key)),
						 errhint("The worker sets BGEXEC_JOB_ID, BGEXEC_STEP_ID, BGEXEC_ATTEMPT, BGEXEC_QUEUE and BGEXEC_WORKER_INSTANCE for every step process.")));
			if (v.type != jbvString)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("workflow step \"%s\": \"env\" variable \"%s\" must be a string",
								s->id, jbv_cstring(&key))));
		}
	}

	/* "needs": other existing steps, each named once. */
	if (s->has[SK_NEEDS])
	{
		JsonbContainer *needs;
		int			n;

		if (!jbv_is_array(&s->val[SK_NEEDS]))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("workflow step \"%s\": \"needs\" must be an array of step ids",
							s->id)));
		needs = s->val[SK_NEEDS].val.binary.data;
		n = JsonContainerSize(needs);
		s->needs = (int *) palloc(sizeof(int) * Max(n, 1));
		for (int j = 0; j < n; j++)
		{
			JsonbValue *name = getIthJsonbValueFromContainer(needs, j);
			StepEntry  *entry;

			if (name->type != jbvString)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("workflow step \"%s\": \"needs\"[%d] must be a string",
								s->id, j)));
			entry = lookup_step(ids, name->val.string.val, name->val.string.len);
			if (entry == NULL)
			{
				const char *close = closest_step_id(steps, nsteps, i,
													name->val.string.val,
													name->val.string.len);

				if (close != NULL)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("workflow step \"%s\": \"needs\" names unknown step \"%s\"",
									s->id, jbv_cstring(name)),
							 errhint("Did you mean \"%s\"?", close)));
				else
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("workflow step \"%s\": \"needs\" names unknown step \"%s\"",
									s->id, jbv_cstring(name)),
							 errhint("Each entry of \"needs\" must be the \"id\" of another step.")));
			}
			if (entry->index == i)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("workflow step \"%s\" needs itself", s->id),
						 errhint("Remove \"%s\" from its own \"needs\".", s->id)));
			if (entry->named_by == i)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("workflow step \"%s\": \"needs\" names step \"%s\" more than once",
								s->id, entry->id),
						 errhint("List each step once in \"needs\".")));
			entry->named_by = i;
			s->needs[s->nneeds++] = entry->index;
		}
	}
}

/*
 * Refuses a workflow whose "needs" edges form a cycle, naming the steps of
 * one cycle in the order they would have to run ("a -> b": b needs a).
 *
 * Kahn's algorithm, O(n + e): repeatedly take a step whose needs are all
 * taken.  Steps left over all wait on another left-over step, so walking
 * "needs" among them from any one must come back to a visited step.
 */
static void
check_no_cycle(WorkflowStep *steps, int nsteps)
{
	int		   *indeg = (int *) palloc0(sizeof(int) * nsteps);
	int		   *first = (int *) palloc0(sizeof(int) * (nsteps + 1));
	int		   *dependents;
	int		   *queue = (int *) palloc(sizeof(int) * nsteps);
	int			nedges = 0;
	int			head = 0;
	int			tail = 0;
	int		   *pos;
	int		   *path;
	int			len = 0;
	int			v;
	int			start;
	int			cycle_len;
	int			lowest;
	StringInfoData buf;

	/* Reverse the "needs" lists into a CSR list of dependents per step. */
	for (int i = 0; i < nsteps; i++)
	{
		indeg[i] = steps[i].nneeds;
		nedges += steps[i].nneeds;
		for (int j = 0; j < steps[i].nneeds; j++)
			first[steps[i].needs[j] + 1]++;
	}
	for (int i = 0; i < nsteps; i++)
		first[i + 1] += first[i];
	dependents = (int *) palloc(sizeof(int) * Max(nedges, 1));
	{
		int		   *fill = (int *) palloc(sizeof(int) * nsteps);

		memcpy(fill, first, sizeof(int) * nsteps);
		for (int i = 0; i < nsteps; i++)
			for (int j = 0; j < steps[i].nneeds; j++)
				dependents[fill[steps[i].needs[j]]++] = i;
	}

	for (int i = 0; i < nsteps; i++)
		if (indeg[i] == 0)
			queue[tail++] = i;
	while (head < tail)
	{
		int			u = queue[head++];

		for (int k = first[u]; k < first[u + 1]; k++)
			if (--indeg[dependents[k]] == 0)
				queue[tail++] = dependents[k];
	}
	if (tail == nsteps)
		return;

	/*
	 * A cycle exists.  From the first left-over step, follow a left-over
	 * need until a step repeats; the repeated suffix of the walk is a cycle.
	 */
	pos = (int *) palloc(sizeof(int) * nsteps);
	path = (int *) palloc(sizeof(int) * nsteps);
	for (int i = 0; i < nsteps; i++)
		pos[i] = -1;
	v = 0;
	while (indeg[v] == 0)
		v++;
	while (pos[v] < 0)
	{
		int			next = -1;

		pos[v] = len;
		path[len++] = v;
		for (int j = 0; j < steps[v].nneeds; j++)
			if (indeg[steps[v].needs[j]] > 0)
			{
				next = steps[v].needs[j];
				break;
			}
		if (next < 0)
			elog(ERROR, "workflow cycle search lost its way at step %d", v);
		v = next;
	}
	start = pos[v];
	cycle_len = len - start;

	/*
	 * path[start..len-1] is a chain of "needs"; print it reversed (run
	 * order), beginning at the step listed first in "steps".
	 */
	lowest = start;
	for (int k = start; k < len; k++)
		if (path[k] < path[lowest])
			lowest = k;
	initStringInfo(&buf);
	for (int n = 0; n <= cycle_len; n++)
	{
		int			k = start + ((lowest - start - n) % cycle_len + cycle_len) % cycle_len;

		if (n > 0)
			appendStringInfoString(&buf, " -> ");
		if (n == 16 && cycle_len > 16)
		{
			/* keep the message readable: elide the middle of long cycles */
			appendStringInfoString(&buf, "... -> ");
			n = cycle_len;
			k = lowest;
		}
		appendStringInfoString(&buf, steps[path[k]].id);
	}

	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("workflow steps form a cycle: %s", buf.data),
			 errdetail("Step \"%s\" needs step \"%s\", and so on around the cycle of %d steps.",
					   steps[path[lowest > start ? lowest - 1 : len - 1]].id,
					   steps[path[lowest]].id,
					   cycle_len),
			 errhint("Remove one of the \"needs\" entries on the cycle.")));
}

/*
 * Pass 3, after the cycle check: every step a step's templates name
 * ({{steps.ID...}} in the fields the worker renders: "with", "run",
 * "params", "env", "sleep", "if", "http" and an approval's "prompt") is among its needs,
 * directly or through theirs.  The worker renders a field as the step
 * starts, and a step it names that was not done by then failed the step
 * ("has not completed"), or did not, as the steps' timing fell; its retry
 * failed again.  Templates are found as the worker finds them
 * (core/template.cpp: "{{" to the next "}}", trimmed, split on '.').
 */
typedef struct TemplateCheck
{
	WorkflowStep *steps;
	int			nsteps;
	HTAB	   *ids;
	int			step;			/* the step whose fields are checked */
	bool	   *needed;			/* the steps it needs, directly or not */
} TemplateCheck;

/*
 * What the worker's evaluate() (core/template.cpp) refuses in a template
 * whatever the data: an empty expression or path segment, a root other than
 * input, steps and secrets, steps.ID without .output or .stdout (which takes
 * no path), secrets without a name.  NULL when it reads.  The job failed
 * with it at run time, after its earlier steps had run.
 */
static char *
template_syntax_error(const char *e, int n)
{
	const char *dot = memchr(e, '.', n);
	int			rootlen = (dot ? dot : e + n) - e;
	int			segments = 1;
	const char *seg = e;		/* the current segment's start */
	const char *field = NULL;	/* steps.ID.FIELD */
	int			fieldlen = 0;

	if (n == 0)
		return "empty expression";
	if (rootlen == 7 && strncmp(e, "secrets", 7) == 0)
		return n <= 8 ? "expected secrets.NAME" : NULL;
	for (const char *k = e; k <= e + n; k++)
		if (k == e + n || *k == '.')
		{
			if (k == seg)
				return "empty path segment";
			if (segments == 3)
				field = seg, fieldlen = k - seg;
			segments++;
			seg = k + 1;
		}
	segments--;
	if (rootlen == 5 && strncmp(e, "input", 5) == 0)
		return NULL;
	if (rootlen != 5 || strncmp(e, "steps", 5) != 0)
		return psprintf("unknown root \"%s\" (expected input, steps or secrets)", pnstrdup(e, rootlen));
	if (segments < 3)
		return "expected steps.ID.output or steps.ID.stdout";
	if (fieldlen == 6 && strncmp(field, "output", 6) == 0)
		return NULL;
	if (fieldlen == 6 && strncmp(field, "stdout", 6) == 0)
		return segments > 3 ? "steps.ID.stdout takes no path" : NULL;
	return psprintf("unknown step field \"%s\" (expected output or stdout)", pnstrdup(field, fieldlen));
}

static void
check_template_text(TemplateCheck *tc, const char *text, int len)
{
	int			pos = 0;

	for (;;)
	{
		const char *open = NULL;
		const char *close = NULL;
		const char *e;
		const char *end;
		const char *id;
		const char *dot;
		StepEntry  *entry;
		char	   *expr;
		int			idlen;

		for (int k = pos; k + 1 < len; k++)
			if (text[k] == '{' && text[k + 1] == '{')
			{
				open = text + k;
				break;
			}
		if (open == NULL)
			return;
		for (const char *k = open + 2; k + 1 < text + len; k++)
			if (k[0] == '}' && k[1] == '}')
			{
				close = k;
				break;
			}
		if (close == NULL)
			return;
		pos = (close - text) + 2;

		e = open + 2;
		end = close;
		while (e < end && (*e == ' ' || *e == '\t' || *e == '\n' || *e == '\r'))
			e++;
		while (end > e && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\n' || end[-1] == '\r'))
			end--;
		{
			char	   *bad = template_syntax_error(e, end - e);

			if (bad)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("workflow step \"%s\": template {{%s}}: %s",
								tc->steps[tc->step].id, pnstrdup(e, end - e), bad),
						 errhint("A template is {{input.PATH}}, {{steps.ID.output[.PATH]}}, "
								 "{{steps.ID.stdout}} or {{secrets.NAME}}; there is no escape for \"{{\".")));
		}
		if (end - e < 7 || strncmp(e, "steps.", 6) != 0)
			continue;
		id = e + 6;
		dot = memchr(id, '.', end - id);
		idlen = (dot ? dot : end) - id;
		if (idlen == 0)
			continue;			/* the worker's error: empty path segment */
		expr = pnstrdup(e, end - e);
		entry = lookup_step(tc->ids, id, idlen);
		if (entry == NULL)
		{
			const char *near = closest_step_id(tc->steps, tc->nsteps, tc->step, id, idlen);

			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("workflow step \"%s\": template {{%s}} names unknown step \"%s\"",
							tc->steps[tc->step].id, expr, pnstrdup(id, idlen)),
					 near ? errhint("Did you mean \"%s\"?", near) : 0));
		}
		if (entry->index == tc->step)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("workflow step \"%s\": template {{%s}} names the step itself",
							tc->steps[tc->step].id, expr),
					 errdetail("A step's fields are rendered as it starts, before it has an output.")));
		if (!tc->needed[entry->index])
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("workflow step \"%s\": template {{%s}} names step \"%s\", which it does not need",
							tc->steps[tc->step].id, expr, entry->id),
					 errdetail("A step's fields are rendered as it starts; only the steps in its \"needs\", "
							   "or in theirs, are done by then."),
					 errhint("Add \"%s\" to the \"needs\" of step \"%s\".",
							 entry->id, tc->steps[tc->step].id)));
	}
}

/* Checks every string of a rendered field (object keys are not rendered). */
static void
check_template_value(TemplateCheck *tc, const JsonbValue *v)
{
	JsonbIterator *it;
	JsonbIteratorToken tok;
	JsonbValue	item;

	if (v->type == jbvString)
	{
		check_template_text(tc, v->val.string.val, v->val.string.len);
		return;
	}
	if (v->type != jbvBinary)
		return;
	it = JsonbIteratorInit(v->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &item, false)) != WJB_DONE)
		if ((tok == WJB_VALUE || tok == WJB_ELEM) && item.type == jbvString)
			check_template_text(tc, item.val.string.val, item.val.string.len);
}

/* Sets needed[i * nsteps + j] for every step j that step i needs, directly or not. */
static void
collect_needed(WorkflowStep *steps, int nsteps, int i, bool *needed, bool *done)
{
	check_stack_depth();
	if (done[i])
		return;
	done[i] = true;				/* no cycle: checked before */
	for (int k = 0; k < steps[i].nneeds; k++)
	{
		int			j = steps[i].needs[k];

		collect_needed(steps, nsteps, j, needed, done);
		needed[(Size) i * nsteps + j] = true;
		for (int m = 0; m < nsteps; m++)
			if (needed[(Size) j * nsteps + m])
				needed[(Size) i * nsteps + m] = true;
	}
}

static void
check_template_steps(WorkflowStep *steps, int nsteps, HTAB *ids)
{
	bool	   *needed = NULL;
	bool	   *done = NULL;
	TemplateCheck tc;
	static const StepKey rendered[] = {SK_WITH, SK_RUN, SK_PARAMS, SK_ENV, SK_SLEEP, SK_IF, SK_HTTP};

	tc.steps = steps;
	tc.nsteps = nsteps;
	tc.ids = ids;
	for (int i = 0; i < nsteps; i++)
	{
		tc.step = i;
		for (int r = 0; r < lengthof(rendered) + 1; r++)
		{
			JsonbValue	prompt;
			const JsonbValue *v;

			if (r < lengthof(rendered))
			{
				if (!steps[i].has[rendered[r]])
					continue;
				v = &steps[i].val[rendered[r]];
			}
			else
			{
				/* an approval's prompt */
				if (!steps[i].has[SK_APPROVAL] || !jbv_is_object(&steps[i].val[SK_APPROVAL]) ||
					getKeyJsonValueFromContainer(steps[i].val[SK_APPROVAL].val.binary.data,
												 "prompt", 6, &prompt) == NULL)
					continue;
				v = &prompt;
			}
			/* the needs are worked out once, for the first template met */
			if (needed == NULL)
			{
				needed = (bool *) palloc0((Size) nsteps * nsteps);
				done = (bool *) palloc0(nsteps);
			}
			collect_needed(steps, nsteps, i, needed, done);
			tc.needed = needed + (Size) i * nsteps;
			check_template_value(&tc, v);
		}
	}
}

/* Returns the hash entry of the step named by a (not NUL-terminated) string, or NULL. */
static StepEntry *
lookup_step(HTAB *ids, const char *name, int len)
{
	char		key[BGEXEC_STEP_ID_MAX_LEN + 1];

	if (!is_valid_step_id(name, len))
		return NULL;
	memcpy(key, name, len);
	key[len] = '\0';
	return (StepEntry *) hash_search(ids, key, HASH_FIND, NULL);
}

/*
 * Returns the step id closest to an unknown name, for a "did you mean"
 * hint, or NULL if none is close; never steps[self], the step naming it.  Error path only: O(n) distances.
 */
static const char *
closest_step_id(WorkflowStep *steps, int nsteps, int self, const char *name, int len)
{
	const char *best = NULL;
	int			max_d;
	int			best_d;

	/* varstr_levenshtein refuses strings over 255 bytes when untrusted */
	if (len == 0 || len > 2 * BGEXEC_STEP_ID_MAX_LEN)
		return NULL;
	max_d = Max(2, len / 3);
	best_d = max_d + 1;
	for (int i = 0; i < nsteps; i++)
	{
		int			d;

		if (i == self)
			continue;			/* "Did you mean" the step itself: it may not name itself */
		d = varstr_levenshtein_less_equal(name, len, steps[i].id,
													  strlen(steps[i].id),
													  1, 1, 1, max_d, false);

		if (d < best_d)
		{
			best = steps[i].id;
			best_d = d;
		}
	}
	return best;
}

/* Checks a step id against ^[A-Za-z_][A-Za-z0-9_-]{0,62}$ (ASCII only). */
static bool
is_valid_step_id(const char *s, int len)
{
	return len >= 1 &&
		((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z') || s[0] == '_') &&
		bgexec_name_chars_ok(s, len, BGEXEC_STEP_ID_MAX_LEN, "_-");
}

/*
 * The next key of the object *it iterates (skipping nested containers: a
 * nested value is its container) and that key's value; false at its end.
 */
static bool
next_field(JsonbIterator **it, JsonbValue *key, JsonbValue *val)
{
	JsonbIteratorToken tok;

	while ((tok = JsonbIteratorNext(it, key, true)) != WJB_DONE)
	{
		if (tok != WJB_KEY)
			continue;
		tok = JsonbIteratorNext(it, val, true);
		Assert(tok == WJB_VALUE);
		return true;
	}
	return false;
}

/* True if v is a JSON object (a nested container, as the jsonb API returns it). */
static bool
jbv_is_object(const JsonbValue *v)
{
	return v->type == jbvBinary && JsonContainerIsObject(v->val.binary.data);
}

/* True if v is a JSON array. */
static bool
jbv_is_array(const JsonbValue *v)
{
	return v->type == jbvBinary && JsonContainerIsArray(v->val.binary.data);
}

/* True if v is a JSON string of at least one byte. */
/*
 * A step's "if": true, false, or a string that is one template and nothing
 * else ("{{steps.check.output.go}}"), with an optional "!" before it for
 * its negation.  The worker renders it as the step starts and runs the step
 * when it is true; a value that is not a boolean fails the step then.  Text
 * around the template would make the value a string, never a boolean.
 */
static bool
if_is_valid(const JsonbValue *v)
{
	const char *t;
	int			len;

	if (v->type == jbvBool)
		return true;
	if (v->type != jbvString)
		return false;
	t = v->val.string.val;
	len = v->val.string.len;
	if (len > 0 && t[0] == '!')
		t++, len--;
	return is_one_template(t, len);
}

/* True if t is one template and nothing else: "{{...}}", no "}}" before its end. */
static bool
is_one_template(const char *t, int len)
{
	if (len < 4 || strncmp(t, "{{", 2) != 0 || strncmp(t + len - 2, "}}", 2) != 0)
		return false;
	/* the first "}}" closes the template at the end */
	for (int k = 2; k < len - 2; k++)	/* "}}}" too: its first "}}" is not last */
		if (t[k] == '}' && t[k + 1] == '}')
			return false;
	return true;
}

static bool
jbv_is_nonempty_string(const JsonbValue *v)
{
	return v->type == jbvString && v->val.string.len > 0;
}

/*
 * True if the jbvNumeric v is above zero as the worker reads it, a double:
 * 1e-400 is above zero as a numeric, but strtod reads it as 0, and the
 * worker then failed the step ("timeout must be a number of seconds > 0").
 */
static bool
positive_as_double(const JsonbValue *v)
{
	char	   *digits;
	double		d;

	Assert(v->type == jbvNumeric);
	digits = DatumGetCString(DirectFunctionCall1(numeric_out,
												 NumericGetDatum(v->val.numeric)));
	d = strtod(digits, NULL);
	pfree(digits);
	return d > 0;
}

/* Compares a jbvNumeric value with zero: <0, 0 or >0.  JSON has no NaN. */
static int
jbv_numeric_cmp(const JsonbValue *v, Numeric zero)
{
	Assert(v->type == jbvNumeric);
	return DatumGetInt32(DirectFunctionCall2(numeric_cmp,
											 NumericGetDatum(v->val.numeric),
											 NumericGetDatum(zero)));
}

/* Returns a palloc'd NUL-terminated copy of a jbvString (for messages). */
static char *
jbv_cstring(const JsonbValue *v)
{
	Assert(v->type == jbvString);
	return pnstrdup(v->val.string.val, v->val.string.len);
}

/* True if the object key (or any JSON string) equals the NUL-terminated name. */
static bool
key_equals(const JsonbValue *key, const char *name)
{
	size_t		len = strlen(name);

	return key->type == jbvString && key->val.string.len == len &&
		memcmp(key->val.string.val, name, len) == 0;
}
