/*-------------------------------------------------------------------------
 *
 * json_prefix.c
 *	  bgexec._json_prefix(value jsonb, n int): the first n characters of
 *	  value::text, made without the rest of it.
 *
 * bgexec status prints a few kB of a job's payload, result and error.
 * left(value::text, n) had the server write the whole value as text first:
 * 0.3-0.6 s and as many MB as the value for a result of 57 MB.  Here the
 * text is written as JsonbToCString (jsonb.c) writes it, "{"key": value,
 * ...}" with ", " and ": ", token by token from the binary value, and the
 * walk stops once n characters are certain: at most 4n bytes (a character
 * is at most four), each string cut to as many before it is escaped.  The
 * value is still detoasted whole (its containers are read from it), but
 * not rendered.
 *
 * extension/json_prefix.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

PG_FUNCTION_INFO_V1(bgexec_json_prefix);

/* Appends scalar v's JSON text, a string's cut to at most room bytes first. */
static void
put_scalar(StringInfo out, const JsonbValue *v, int room)
{
	switch (v->type)
	{
		case jbvNull:
			appendStringInfoString(out, "null");
			break;
		case jbvBool:
			appendStringInfoString(out, v->val.boolean ? "true" : "false");
			break;
		case jbvNumeric:
			appendStringInfoString(out, DatumGetCString(DirectFunctionCall1(numeric_out,
																			 NumericGetDatum(v->val.numeric))));
			break;
		case jbvString:
			{
				int			len = v->val.string.len;
				char	   *s;

				if (len > room)
					len = pg_mbcliplen(v->val.string.val, len, Max(room, 0));
				s = pnstrdup(v->val.string.val, len);
				escape_json(out, s);
				pfree(s);
				break;
			}
		default:
			elog(ERROR, "unexpected jsonb value type %d", (int) v->type);
	}
}

/*
 * bgexec._json_prefix(value jsonb, n int) returns text: left(value::text, n),
 * in characters of the database's encoding, as left() counts them.  Reads
 * only the tokens that make those characters.  STRICT; n < 0 is taken as 0.
 */
Datum
bgexec_json_prefix(PG_FUNCTION_ARGS)
{
	Jsonb	   *jb = PG_GETARG_JSONB_P(0);
	int			n = Max(PG_GETARG_INT32(1), 0);
	int			limit = n > (MaxAllocSize / 8) ? (int) (MaxAllocSize / 8) : n * 4;
	StringInfoData out;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	bool		first = true;	/* no ", " before the next element or key */
	bool		raw = false;	/* the value is one scalar (jsonb's pseudo-array) */

	initStringInfo(&out);
	it = JsonbIteratorInit(&jb->root);
	while (out.len < limit && (tok = JsonbIteratorNext(&it, &v, false)) != WJB_DONE)
	{
		switch (tok)
		{
			case WJB_BEGIN_ARRAY:
				if (v.val.array.rawScalar)
				{
					raw = true;
					break;
				}
				if (!first)
					appendStringInfoString(&out, ", ");
				appendStringInfoChar(&out, '[');
				first = true;
				break;
			case WJB_BEGIN_OBJECT:
				if (!first)
					appendStringInfoString(&out, ", ");
				appendStringInfoChar(&out, '{');
				first = true;
				break;
			case WJB_KEY:
				if (!first)
					appendStringInfoString(&out, ", ");
				put_scalar(&out, &v, limit - out.len);
				appendStringInfoString(&out, ": ");
				/* the value follows its key with no ", " */
				first = true;
				break;
			case WJB_VALUE:
			case WJB_ELEM:
				if (!first && !raw)
					appendStringInfoString(&out, ", ");
				put_scalar(&out, &v, limit - out.len);
				first = false;
				break;
			case WJB_END_ARRAY:
				if (!raw)
					appendStringInfoChar(&out, ']');
				first = false;
				break;
			case WJB_END_OBJECT:
				appendStringInfoChar(&out, '}');
				first = false;
				break;
			default:
				break;
		}
	}
	PG_RETURN_TEXT_P(cstring_to_text_with_len(out.data, pg_mbcharcliplen(out.data, out.len, n)));
}
