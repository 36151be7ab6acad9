/*-------------------------------------------------------------------------
 *
 * cron.c
 *	  Cron expressions for bgexec.schedule: _cron_next(expr, after, zone) is
 *	  the first whole minute strictly after `after` that the expression
 *	  matches on the wall clock of time zone `zone` (UTC by default).
 *
 * The syntax is Vixie cron's five fields, minute hour day-of-month month
 * day-of-week, each a comma list of `*`, `N`, `N-M`, with an optional
 * `/STEP` (`N/STEP` runs from N to the field's end); months and days of the
 * week also by their three-letter English names, any case; day of week 0-7,
 * 0 and 7 both Sunday.  The macros @yearly (@annually), @monthly, @weekly,
 * @daily (@midnight) and @hourly stand for their usual expressions.  As in
 * Vixie cron, when both day fields are restricted (neither starts with `*`)
 * a day matching either runs; otherwise a day must match both.
 *
 * Bad input raises invalid_parameter_value (22023) naming the field and the
 * item, and so does an expression that never matches (`0 0 30 2 *`): the
 * search gives up after 12 years, past the longest gap between two 29ths of
 * February (8 years, around 2100).
 *
 * The search skips whole months, days and hours that cannot match, so a
 * call does at most a few thousand steps.
 *
 * Daylight saving time: the search walks the zone's wall clock and turns the
 * minute it finds into an instant.  A minute the clock skips (02:30 when it
 * jumps from 02:00 to 03:00) becomes the instant an hour later on the new
 * clock (03:30), as PostgreSQL reads it: the job runs, late.  A minute the
 * clock shows twice (01:30 when it goes back from 02:00 to 01:00) runs at
 * its first showing only, as in Vixie cron, unless the hour field has every
 * hour: such a schedule keeps its pace and runs in both showings (every 15
 * minutes stays every 15 minutes of real time).  UTC, the default, has
 * neither.
 *
 * extension/cron.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>

#include "datatype/timestamp.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "pgtime.h"
#include "utils/datetime.h"
#include "utils/timestamp.h"

#include "bgexec/bgexec.h"

PG_FUNCTION_INFO_V1(bgexec_cron_next);

#define CRON_MAX_LEN	200
#define CRON_MAX_YEARS	12
/* the most hourly looks past a clock change (cron_next) */
#define CRON_MAX_LOOKS	48

typedef struct CronSpec
{
	uint64		minute;			/* bit N: minute N matches (0-59) */
	uint32		hour;			/* 0-23 */
	uint32		dom;			/* 1-31 */
	uint32		month;			/* 1-12 */
	uint32		dow;			/* 0-6, Sunday 0 */
	bool		dom_star;		/* the field starts with '*' */
	bool		dow_star;
} CronSpec;

typedef struct CronField
{
	const char *name;			/* as errors name it */
	int			min;
	int			max;			/* day of week: 7, folded to 0 */
	const char *const *names;	/* names[i] is value min + i, or NULL */
} CronField;

static const char *const month_names[] = {
	"jan", "feb", "mar", "apr", "may", "jun",
	"jul", "aug", "sep", "oct", "nov", "dec", NULL
};
static const char *const dow_names[] = {
	"sun", "mon", "tue", "wed", "thu", "fri", "sat", NULL
};

static const CronField fields[5] = {
	{"minute", 0, 59, NULL},
	{"hour", 0, 23, NULL},
	{"day-of-month", 1, 31, NULL},
	{"month", 1, 12, month_names},
	{"day-of-week", 0, 7, dow_names},
};

static const struct
{
	const char *macro;
	const char *expr;
}			macros[] = {
	{"@yearly", "0 0 1 1 *"},
	{"@annually", "0 0 1 1 *"},
	{"@monthly", "0 0 1 * *"},
	{"@weekly", "0 0 * * 0"},
	{"@daily", "0 0 * * *"},
	{"@midnight", "0 0 * * *"},
	{"@hourly", "0 * * * *"},
};

static void pg_attribute_noreturn()
cron_error(const CronField *f, const char *item, const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("cron %s field \"%s\" is not valid: %s", f->name, item, why),
			 errhint("five fields: minute hour day-of-month month day-of-week, "
					 "each *, N, N-M or a list of them, with an optional /STEP")));
}

/* A number or (for months and days of the week) a name; *end past it. */
static int
parse_value(const CronField *f, const char *item, const char *s, const char **end)
{
	if (isdigit((unsigned char) *s))
	{
		const char *start = s;
		long		v = 0;

		/* Every digit read, the value capped (the message quotes them). */
		for (; isdigit((unsigned char) *s); s++)
			if (v <= 1000)
				v = v * 10 + (*s - '0');
		if (v < f->min || v > f->max)
			cron_error(f, item, psprintf("%.*s is out of range %d-%d",
										 (int) (s - start), start, f->min, f->max));
		*end = s;
		return (int) v;
	}
	if (f->names && isalpha((unsigned char) s[0]) && isalpha((unsigned char) s[1])
		&& isalpha((unsigned char) s[2]))
	{
		for (int i = 0; f->names[i]; i++)
			if (pg_strncasecmp(s, f->names[i], 3) == 0)
			{
				*end = s + 3;
				return f->min + i;
			}
	}
	cron_error(f, item, f->names ? "expected a number or a three-letter name" : "expected a number");
}

/* One field (its text in `text`, NUL-terminated) into a bit set. */
static uint64
parse_field(const CronField *f, const char *text)
{
	uint64		bits = 0;
	char	   *copy;
	char	   *save = NULL;
	size_t		len = strlen(text);

	if (text[0] == ',' || text[len - 1] == ',' || strstr(text, ",,") != NULL)
		cron_error(f, text, "a list item is empty");
	copy = pstrdup(text);

	for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save))
	{
		const char *s = item;
		int			lo,
					hi,
					step = 1;

		if (*s == '*')
		{
			lo = f->min;
			hi = f->max;
			s++;
		}
		else
		{
			lo = parse_value(f, item, s, &s);
			hi = lo;
			if (*s == '-')
			{
				hi = parse_value(f, item, s + 1, &s);
				if (hi < lo)
					cron_error(f, item, "a range must not run backwards");
			}
			else if (*s == '/')
				hi = f->max;
		}
		if (*s == '/')
		{
			long		v = 0;

			s++;
			if (!isdigit((unsigned char) *s))
				cron_error(f, item, "a step must be a number");
			while (isdigit((unsigned char) *s))
			{
				v = v * 10 + (*s++ - '0');
				if (v > 1000)
					break;
			}
			if (v < 1 || v > f->max)
				cron_error(f, item, psprintf("a step must be 1-%d", f->max));
			step = (int) v;
		}
		if (*s != '\0')
			cron_error(f, item, psprintf("unexpected \"%s\"", s));
		for (int v = lo; v <= hi; v += step)
			bits |= UINT64CONST(1) << v;
	}
	if (bits == 0)
		cron_error(f, text, "empty");
	pfree(copy);
	return bits;
}

static void
parse_cron(const char *expr, CronSpec *spec)
{
	char	   *field[5];
	int			n = 0;
	char	   *copy;
	char	   *save = NULL;
	uint64		bits[5];

	if (strlen(expr) > CRON_MAX_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cron must be at most %d characters", CRON_MAX_LEN)));
	while (isspace((unsigned char) *expr))
		expr++;
	if (*expr == '@')
	{
		const char *e = NULL;
		size_t		len = strcspn(expr, " \t\r\n");

		for (int i = 0; i < lengthof(macros); i++)
			if (strlen(macros[i].macro) == len && pg_strncasecmp(expr, macros[i].macro, len) == 0)
				e = macros[i].expr;
		if (e == NULL || expr[len + strspn(expr + len, " \t\r\n")] != '\0')
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("cron macro \"%s\" is not known", expr),
					 errhint("@yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly")));
		expr = e;
	}
	copy = pstrdup(expr);
	for (char *t = strtok_r(copy, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save))
	{
		if (n == 5)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("cron \"%s\" has more than five fields", expr),
					 errhint("minute hour day-of-month month day-of-week")));
		field[n++] = t;
	}
	if (n != 5)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cron \"%s\" has %d field%s, not five", expr, n, n == 1 ? "" : "s"),
				 errhint("minute hour day-of-month month day-of-week")));
	for (int i = 0; i < 5; i++)
		bits[i] = parse_field(&fields[i], field[i]);
	spec->minute = bits[0];
	spec->hour = (uint32) bits[1];
	spec->dom = (uint32) bits[2];
	spec->month = (uint32) bits[3];
	spec->dow = (uint32) ((bits[4] | (bits[4] >> 7)) & 0x7f);	/* 7 is Sunday */
	spec->dom_star = field[2][0] == '*';
	spec->dow_star = field[4][0] == '*';
	pfree(copy);
}

static bool
day_matches(const CronSpec *spec, int y, int m, int d)
{
	bool		dom = (spec->dom >> d) & 1;
	bool		dow = (spec->dow >> j2day(date2j(y, m, d))) & 1;

	if (spec->dom_star || spec->dow_star)
		return dom && dow;
	return dom || dow;
}

/* Wall-clock minute fields, as the search walks them. */
typedef struct WallMinute
{
	int			y,
				m,
				d,
				h,
				mi;
} WallMinute;

/* To the first minute of the next hour (a day past 23:00; wall_search
 * moves a day past the month's end to the next month). */
static void
next_hour(WallMinute *w)
{
	if (++w->h > 23)
	{
		w->d++;
		w->h = 0;
	}
	w->mi = 0;
}

/*
 * Move w forward to the first minute at or after it that spec matches
 * (calendar arithmetic only: no time zone).  Raises 22023 past `limit`.
 */
static void
wall_search(const CronSpec *spec, WallMinute *w, int limit, const char *expr)
{
	for (;;)
	{
		if (w->y > limit)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("cron \"%s\" matches no time in %d years", expr, CRON_MAX_YEARS),
					 errhint("check the day-of-month against the month (a 30th of February never comes)")));
		if (!((spec->month >> w->m) & 1) || w->d > day_tab[isleap(w->y)][w->m - 1])
		{
			/* to the first minute of the next month */
			if (++w->m > 12)
			{
				w->m = 1;
				w->y++;
			}
			w->d = 1;
			w->h = 0;
			w->mi = 0;
			continue;
		}
		if (!day_matches(spec, w->y, w->m, w->d))
		{
			w->d++;
			w->h = 0;
			w->mi = 0;
			continue;
		}
		if (!((spec->hour >> w->h) & 1))
		{
			next_hour(w);
			continue;
		}
		if (!((spec->minute >> w->mi) & 1))
		{
			if (++w->mi > 59)
				next_hour(w);
			continue;
		}
		return;
	}
}

/* The wall-clock minute of instant t in zone. */
static WallMinute
wall_of(TimestampTz t, pg_tz *zone)
{
	struct pg_tm tm;
	fsec_t		fsec;
	int			offset;
	WallMinute	w;

	if (timestamp2tm(t, &offset, &tm, &fsec, NULL, zone) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp out of range")));
	w.y = tm.tm_year;
	w.m = tm.tm_mon;
	w.d = tm.tm_mday;
	w.h = tm.tm_hour;
	w.mi = tm.tm_min;
	return w;
}

/* w as a struct pg_tm, seconds 0. */
static void
wall_tm(const WallMinute *w, struct pg_tm *tm)
{
	memset(tm, 0, sizeof(*tm));
	tm->tm_year = w->y;
	tm->tm_mon = w->m;
	tm->tm_mday = w->d;
	tm->tm_hour = w->h;
	tm->tm_min = w->mi;
}

/* The instant that wall minute w shows at UTC offset `offset` (PG's sign). */
static TimestampTz
instant_at(const WallMinute *w, int offset)
{
	struct pg_tm tm;
	TimestampTz result;

	wall_tm(w, &tm);
	if (tm2timestamp(&tm, 0, &offset, &result) != 0 || !IS_VALID_TIMESTAMP(result))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp out of range")));
	return result;
}

static bool
wall_equal(const WallMinute *a, const WallMinute *b)
{
	return a->y == b->y && a->m == b->m && a->d == b->d &&
		a->h == b->h && a->mi == b->mi;
}

/*
 * The instant wall minute w stands for in zone, as PostgreSQL reads a local
 * time: a skipped minute on the new clock (an hour late), a repeated one at
 * its second showing.  *first gets the first showing of a repeated minute,
 * else the same instant.
 */
static TimestampTz
wall_instant(const WallMinute *w, pg_tz *zone, TimestampTz *first)
{
	struct pg_tm tm;
	fsec_t		fsec;
	int			offset;
	TimestampTz result;
	TimestampTz earlier;
	WallMinute	back;

	wall_tm(w, &tm);
	result = instant_at(w, DetermineTimeZoneOffset(&tm, zone));

	/*
	 * Read at the offset of a day before (the clock before a transition), w
	 * is an earlier instant that still shows w exactly when the clock went
	 * back in between.  Two transitions within a day leave the second
	 * reading only.
	 */
	*first = result;
	if (timestamp2tm(result - USECS_PER_DAY, &offset, &tm, &fsec, NULL, zone) != 0)
		return result;
	earlier = instant_at(w, offset);
	if (earlier < result)
	{
		back = wall_of(earlier, zone);
		if (wall_equal(&back, w))
			*first = earlier;
	}
	return result;
}

/*
 * The first whole minute after `after` that spec matches on zone's clock.
 *
 * A schedule with every hour in its hour field keeps its pace through the
 * hour the clock repeats: it runs in both showings of it.  Any other runs a
 * repeated minute once, at its first showing.
 */
static TimestampTz
cron_next_from(const CronSpec *spec, TimestampTz after, pg_tz *zone, const char *expr,
			   TimestampTz *second_pass_out)
{
	bool		every_hour = spec->hour == (1U << 24) - 1;
	TimestampTz start;
	TimestampTz result;
	TimestampTz first;
	TimestampTz second_pass = DT_NOEND;
	WallMinute	w;
	int			limit;

	/* the next whole minute: floor to the minute, plus one */
	start = after - after % USECS_PER_MINUTE;
	if (after % USECS_PER_MINUTE < 0)
		start -= USECS_PER_MINUTE;
	start += USECS_PER_MINUTE;
	w = wall_of(start, zone);
	limit = w.y + CRON_MAX_YEARS;

	/*
	 * `after` in the first showing of a repeated hour: the wall clock will
	 * go back past where the search starts, so look at the second showing
	 * too, from its first minute.
	 */
	if (every_hour)
	{
		pg_time_t	t = timestamptz_to_time_t(after);
		pg_time_t	boundary;
		long int	before_gmtoff,
					after_gmtoff;
		int			before_isdst,
					after_isdst;

		if (pg_next_dst_boundary(&t, &before_gmtoff, &before_isdst, &boundary,
								 &after_gmtoff, &after_isdst, zone) == 1 &&
			after_gmtoff < before_gmtoff &&
			boundary - t <= before_gmtoff - after_gmtoff)
		{
			TimestampTz b = time_t_to_timestamptz(boundary);
			WallMinute	w2 = wall_of(b, zone);

			wall_search(spec, &w2, limit, expr);
			second_pass = instant_at(&w2, (int) -after_gmtoff);
			if (second_pass >= b + (before_gmtoff - after_gmtoff) * USECS_PER_SEC)
				second_pass = DT_NOEND;
		}
	}

	/*
	 * `start` within a jump forward of the clock (07:00Z when New York jumps
	 * from 02:00 to 03:00): the search from w, on the new clock (03:00),
	 * never comes back to the wall minutes the jump skipped that follow
	 * start's reading on the old clock (02:00-02:59), though they run late
	 * (02:30 at 03:30), after `after`.  Search them too, from that reading;
	 * a match still inside the jump runs at its late instant.
	 */
	{
		pg_time_t	st = timestamptz_to_time_t(start);
		pg_time_t	t = st - 26 * SECS_PER_HOUR;	/* a jump is at most a day (Apia, 2011) */
		pg_time_t	boundary;
		long int	before_gmtoff,
					after_gmtoff;
		int			before_isdst,
					after_isdst;

		for (int n = 0; n < 8 &&
			 pg_next_dst_boundary(&t, &before_gmtoff, &before_isdst, &boundary,
								  &after_gmtoff, &after_isdst, zone) == 1 &&
			 boundary <= st; n++)
		{
			if (after_gmtoff > before_gmtoff && st < boundary + (after_gmtoff - before_gmtoff))
			{
				struct pg_tm tm;
				fsec_t		fsec;
				WallMinute	w3;
				TimestampTz late;

				if (timestamp2tm(start + before_gmtoff * USECS_PER_SEC, NULL, &tm, &fsec, NULL, NULL) == 0)
				{
					w3.y = tm.tm_year;
					w3.m = tm.tm_mon;
					w3.d = tm.tm_mday;
					w3.h = tm.tm_hour;
					w3.mi = tm.tm_min;
					wall_search(spec, &w3, limit, expr);
					late = instant_at(&w3, (int) -before_gmtoff);
					if (late < time_t_to_timestamptz(boundary) + (after_gmtoff - before_gmtoff) * USECS_PER_SEC)
						second_pass = Min(second_pass, late);
				}
			}
			t = boundary + 1;
		}
	}

	for (;;)
	{
		wall_search(spec, &w, limit, expr);
		result = wall_instant(&w, zone, &first);
		if (first < result)
		{
			/* a repeated minute */
			if (first > after)
				result = first;
			else if (!(every_hour && result > after))
			{
				/* its first showing is past: the minute after it */
				w.mi++;
				continue;
			}
		}
		break;
	}

	*second_pass_out = second_pass;
	return result;
}

/*
 * A skipped minute read on the new clock can land at or before `after` (the
 * search started in the skipped hour): look again from an hour on, keeping
 * each look's second showing.  A clock change skips an hour or two, so a few
 * looks find the run; the bound turns a zone the search cannot read (it was
 * a recursion without end, a backend's crash) into an error.
 */
static TimestampTz
cron_next(const CronSpec *spec, TimestampTz after, pg_tz *zone, const char *expr)
{
	TimestampTz best = DT_NOEND;
	TimestampTz second_pass;
	TimestampTz result;
	int			look;

	for (look = 0; look < CRON_MAX_LOOKS; look++)
	{
		TimestampTz from = after + look * USECS_PER_HOUR;

		CHECK_FOR_INTERRUPTS();
		result = cron_next_from(spec, from, zone, expr, &second_pass);
		best = Min(best, second_pass);
		if (result > from)
			return Min(result, best);
	}
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("cron \"%s\" finds no run after %s on its time zone's clock", expr,
					timestamptz_to_str(after))));
	return DT_NOEND;			/* keep the compiler quiet */
}

/*
 * The offset from UTC of zone at t, in seconds.
 */
static long int
gmtoff_at(TimestampTz t, pg_tz *zone)
{
	pg_time_t	tt = timestamptz_to_time_t(t);
	struct pg_tm *tm = pg_localtime(&tt, zone);

	return tm ? tm->tm_gmtoff : 0;
}

/*
 * Whether zone's offset from UTC is whole minutes from t on, through its
 * clock changes of the next two years; when not, the first offset that is
 * not, and from when (*off, *from).  A POSIX zone's daylight time may be
 * seconds off UTC while its standard time is not
 * ("AAA0BBB-0:00:30,J339,J365/23"): checked at t alone, schedule() took it
 * outside daylight time, and each of the watchdog's ticks in it failed,
 * moving the schedule a day on.  The past (a local mean time before 1911)
 * does not count: no run is read against it.
 */
static bool
zone_keeps_minutes(TimestampTz t, pg_tz *zone, long int *off, pg_time_t *from)
{
	pg_time_t	tt = timestamptz_to_time_t(t);
	const pg_time_t end = tt + (pg_time_t) 2 * 366 * SECS_PER_DAY;
	int			i;

	*off = gmtoff_at(t, zone);
	*from = tt;
	if (*off % SECS_PER_MINUTE != 0)
		return false;
	/* a zone changes its clock a few times a year: 64 is past any */
	for (i = 0; i < 64; i++)
	{
		long int	before_off,
					after_off;
		int			before_dst,
					after_dst;
		pg_time_t	boundary;

		if (pg_next_dst_boundary(&tt, &before_off, &before_dst, &boundary,
								 &after_off, &after_dst, zone) != 1 ||
			boundary >= end || boundary <= tt)
			break;
		if (after_off % SECS_PER_MINUTE != 0)
		{
			*off = after_off;
			*from = boundary;
			return false;
		}
		tt = boundary;
	}
	return true;
}

/*
 * bgexec._cron_next(expr text, after timestamptz, time_zone text)
 *		RETURNS timestamptz
 */
Datum
bgexec_cron_next(PG_FUNCTION_ARGS)
{
	char	   *expr = text_to_cstring(PG_GETARG_TEXT_PP(0));
	TimestampTz after = PG_GETARG_TIMESTAMPTZ(1);
	char	   *zone_name = text_to_cstring(PG_GETARG_TEXT_PP(2));
	pg_tz	   *zone;
	CronSpec	spec;
	long int	off;
	pg_time_t	from;

	if (TIMESTAMP_NOT_FINITE(after))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("after must be a finite timestamp")));
	/* Not quoted back whole: a megabyte of name made a megabyte of message. */
	if (strlen(zone_name) >= TZ_STRLEN_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("time_zone must be at most %d characters", TZ_STRLEN_MAX - 1),
				 errhint("a name of the IANA time zone database, such as UTC or Europe/Paris")));
	zone = pg_tzset(zone_name);
	if (zone == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("time_zone \"%s\" is not known", zone_name),
				 errhint("a name of the IANA time zone database, such as UTC or Europe/Paris")));
	/*
	 * As SET timezone refuses them: a clock with leap seconds ("right/UTC")
	 * or one whose offset is not whole minutes ("UTC+0:00:01") has minutes
	 * that are not 60 seconds after each other on the UTC clock, which a
	 * schedule's whole minutes cannot be read against (the search went on
	 * for ever: a backend crash, the watchdog's at every tick).
	 */
	if (!pg_tz_acceptable(zone))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("time_zone \"%s\" does not keep whole minutes of UTC (it counts leap seconds, or is seconds off UTC)",
						zone_name),
				 errhint("a zone such as UTC or Europe/Paris; not right/..., not an offset with seconds")));
	if (!zone_keeps_minutes(after, zone, &off, &from))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("time_zone \"%s\" is %ld seconds off UTC at %s, not a whole number of minutes",
						zone_name, off, timestamptz_to_str(time_t_to_timestamptz(from))),
				 errhint("schedules read whole minutes; such an offset is a local mean time of the past")));
	parse_cron(expr, &spec);
	PG_RETURN_TIMESTAMPTZ(cron_next(&spec, after, zone, expr));
}
