/*-------------------------------------------------------------------------
 *
 * jsonb_object.c
 *	  bgexec._jsonb_object(keys text[], vals jsonb[]): the object
 *	  {keys[1]: vals[1], ...}, each value copied into it as it is stored.
 *
 * jsonb_build_object and jsonb_object_agg take every value apart token by
 * token and build it again from an in-memory tree: about 640 bytes per JSON
 * value.  A job's result of a million small values cost its finishing
 * backend 640 MB for the terminal event {"result": ...}, on top of what the
 * parse of the finish had taken, and every claim of a resumed job paid the
 * same for each large output of its completed steps.
 *
 * A jsonb container needs no rebuilding to be nested: its offsets are
 * relative to its own start and its padding is to 4-byte boundaries, so a
 * container copied to a 4-byte boundary of another is valid there as it
 * is.  Here the object's header, its JEntries and its keys are written as
 * convertJsonbObject (jsonb_util.c) writes them, and each value is one
 * copy: O(bytes), no allocation per JSON value.
 *
 * Keys are sorted as jsonb sorts them (length, then bytes); of equal keys
 * the last one's value is kept, as jsonb_object_agg keeps it.  A NULL
 * value is JSON null; a NULL key is an error.  Past what one jsonb holds
 * (JENTRY_OFFLENMASK bytes of elements) the error is jsonb's own
 * (54000, program_limit_exceeded), so callers that catch it still do.
 *
 * extension/jsonb_object.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type_d.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"

PG_FUNCTION_INFO_V1(bgexec_jsonb_object);

typedef struct Pair
{
	text	   *key;
	Jsonb	   *val;			/* NULL for SQL NULL */
	int			order;			/* position in the arrays */
} Pair;

/* Keys in jsonb's order: by length, then bytes. */
static int
key_cmp(const Pair *pa, const Pair *pb)
{
	int			la = VARSIZE_ANY_EXHDR(pa->key);
	int			lb = VARSIZE_ANY_EXHDR(pb->key);

	if (la != lb)
		return la < lb ? -1 : 1;
	return memcmp(VARDATA_ANY(pa->key), VARDATA_ANY(pb->key), la);
}

/* By key, then by position: the last of equal keys sorts last. */
static int
pair_cmp(const void *a, const void *b)
{
	const Pair *pa = (const Pair *) a;
	const Pair *pb = (const Pair *) b;
	int			c = key_cmp(pa, pb);

	if (c != 0)
		return c;
	return pa->order < pb->order ? -1 : pa->order > pb->order;
}

static void
pad_to_int(StringInfo buf)
{
	while (buf->len != INTALIGN(buf->len))
		appendStringInfoCharMacro(buf, '\0');
}

static void
check_total(int64 total)
{
	if (total > JENTRY_OFFLENMASK)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("total size of jsonb object elements exceeds the maximum of %d bytes",
						JENTRY_OFFLENMASK)));
}

/* Appends one value's data; returns its JEntry type bits. */
static JEntry
append_value(StringInfo buf, Jsonb *val)
{
	JsonbValue	scalar;

	if (val == NULL)
		return JENTRY_ISNULL;
	if (!JB_ROOT_IS_SCALAR(val))
	{
		pad_to_int(buf);		/* the padding counts in the value's length */
		appendBinaryStringInfo(buf, (char *) &val->root, VARSIZE(val) - VARHDRSZ);
		return JENTRY_ISCONTAINER;
	}
	/* A scalar is stored at its root as a one-element pseudo-array. */
	if (!JsonbExtractScalar(&val->root, &scalar))
		elog(ERROR, "bgexec: jsonb scalar root without its scalar");
	switch (scalar.type)
	{
		case jbvNull:
			return JENTRY_ISNULL;
		case jbvBool:
			return scalar.val.boolean ? JENTRY_ISBOOL_TRUE : JENTRY_ISBOOL_FALSE;
		case jbvString:
			appendBinaryStringInfo(buf, scalar.val.string.val, scalar.val.string.len);
			return JENTRY_ISSTRING;
		case jbvNumeric:
			pad_to_int(buf);
			appendBinaryStringInfo(buf, (char *) scalar.val.numeric,
								   VARSIZE_ANY(scalar.val.numeric));
			return JENTRY_ISNUMERIC;
		default:
			elog(ERROR, "bgexec: unexpected jsonb scalar type %d", (int) scalar.type);
	}
	pg_unreachable();
}

/*
 * _jsonb_object(keys text[], vals jsonb[]) RETURNS jsonb, strict.
 */
Datum
bgexec_jsonb_object(PG_FUNCTION_ARGS)
{
	ArrayType  *ka = PG_GETARG_ARRAYTYPE_P(0);
	ArrayType  *va = PG_GETARG_ARRAYTYPE_P(1);
	Datum	   *kd,
			   *vd;
	bool	   *kn,
			   *vn;
	int			nk,
				nv,
				n,
				i;
	Pair	   *pairs;
	StringInfoData buf;
	int			jentries;
	uint32		header;
	int64		total = 0;

	if (ARR_NDIM(ka) > 1 || ARR_NDIM(va) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("keys and vals must be one-dimensional arrays")));
	deconstruct_array(ka, TEXTOID, -1, false, TYPALIGN_INT, &kd, &kn, &nk);
	deconstruct_array(va, JSONBOID, -1, false, TYPALIGN_INT, &vd, &vn, &nv);
	if (nk != nv)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("keys has %d elements and vals %d: they must have as many", nk, nv)));

	pairs = palloc(sizeof(Pair) * Max(nk, 1));
	for (i = 0; i < nk; i++)
	{
		if (kn[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("keys[%d] is null: an object key must be a string", i + 1)));
		pairs[i].key = DatumGetTextPP(kd[i]);
		pairs[i].val = vn[i] ? NULL : DatumGetJsonbP(vd[i]);
		pairs[i].order = i;
	}
	qsort(pairs, nk, sizeof(Pair), pair_cmp);
	/* Of equal keys keep the last: the one sorted last of its run. */
	n = 0;
	for (i = 0; i < nk; i++)
	{
		if (i + 1 < nk && key_cmp(&pairs[i], &pairs[i + 1]) == 0)
			continue;
		pairs[n++] = pairs[i];
	}

	/* The varlena header, the container's header, then its JEntries. */
	initStringInfo(&buf);
	appendStringInfoSpaces(&buf, VARHDRSZ);
	header = JB_FOBJECT | (uint32) n;
	appendBinaryStringInfo(&buf, (char *) &header, sizeof(header));
	jentries = buf.len;
	appendStringInfoSpaces(&buf, (int) sizeof(JEntry) * 2 * n);

	/* Keys first, then values, as on disk; every JB_OFFSET_STRIDE'th entry
	 * holds its end offset instead of its length. */
	for (i = 0; i < 2 * n; i++)
	{
		int			start = buf.len;
		JEntry		meta;
		int			len;

		if (i < n)
		{
			appendBinaryStringInfo(&buf, VARDATA_ANY(pairs[i].key),
								   VARSIZE_ANY_EXHDR(pairs[i].key));
			meta = JENTRY_ISSTRING;
		}
		else
			meta = append_value(&buf, pairs[i - n].val);
		len = buf.len - start;
		total += len;
		check_total(total);
		if (i % JB_OFFSET_STRIDE == 0)
			meta |= JENTRY_HAS_OFF | (JEntry) total;
		else
			meta |= (JEntry) len;
		memcpy(buf.data + jentries + i * sizeof(JEntry), &meta, sizeof(JEntry));
	}
	/* the whole container too, its header and JEntries with its data, as
	 * convertJsonbObject checks it: it must fit as an element of another */
	check_total(buf.len - VARHDRSZ);
	SET_VARSIZE(buf.data, buf.len);
	PG_RETURN_JSONB_P((Jsonb *) buf.data);
}
