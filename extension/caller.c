/*-------------------------------------------------------------------------
 *
 * caller.c
 *	  Which role called bgexec: the role in effect where the client
 *	  function was called, seen through other roles' SECURITY DEFINER
 *	  functions.
 *
 * bgexec's client functions are SECURITY DEFINER: inside them current_user
 * is the extension's owner, and PostgreSQL keeps no record of the role
 * that was current before the switch.  The outer user (the session user,
 * or the target of SET ROLE) is not that role when a SECURITY DEFINER
 * function of a third role stands in between: Bob's function, called by
 * Alice (or by a superuser), runs as Bob, and a bgexec call inside it
 * must act as Bob, not as Alice.  Naming the outer user there let Bob's
 * function submit jobs that Alice owns (their sql steps run as Alice),
 * read her events, stop, retry and purge her jobs.
 *
 * So the module keeps its own record: fmgr_hook is called when every
 * SECURITY DEFINER function (and every function with a SET clause) starts
 * and ends, after the role switch; each call in progress is a frame with
 * the function and the role it runs as.  The caller of bgexec is the role
 * of the innermost frame that is not a function of schema bgexec (bgexec's
 * own functions call one another), or, with no such frame, the outer
 * user.
 *
 * The record is whole only from a moment when no such call was in
 * progress: always when bgexec is in shared_preload_libraries.  A session
 * that loads the module on first use loads it inside the bgexec function
 * that needs it, whose callers went unrecorded: until that transaction
 * ends (no frame outlives its transaction: SECURITY DEFINER procedures and
 * procedures with SET clauses cannot commit), the outer user stands in,
 * as before this record existed (README, Security).
 *
 * extension/caller.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "bgexec/bgexec.h"

typedef struct CallFrame
{
	FmgrInfo   *flinfo;			/* identifies the call at its end */
	Oid			fn_oid;
	Oid			userid;			/* the role it runs as */
} CallFrame;

static CallFrame *frames = NULL;
static int	nframes = 0;
static int	maxframes = 0;

/* Whether every call in progress has its frame (see above). */
static bool frames_whole = false;

static fmgr_hook_type prev_fmgr_hook = NULL;

/*
 * At FHET_START the frame is pushed after the previous hook returns: that
 * hook is called outside fmgr_security_definer's PG_TRY, so when it raises
 * (sepgsql does, on a denied domain transition) no FHET_ABORT follows, and a
 * frame pushed before it stayed on top until the transaction ended: every
 * bgexec call after a caught error took that function's owner for the
 * caller.  The array grows first, before the previous hook starts, so
 * nothing can fail between its start and the push.  At FHET_END and
 * FHET_ABORT the frame is popped first (the previous hook may raise too).
 */
static void
caller_fmgr_hook(FmgrHookEventType event, FmgrInfo *flinfo, Datum *private)
{
	if (event == FHET_START)
	{
		if (nframes == maxframes)
		{
			int			n = maxframes ? maxframes * 2 : 16;

			frames = frames
				? repalloc(frames, n * sizeof(CallFrame))
				: MemoryContextAlloc(TopMemoryContext, n * sizeof(CallFrame));
			maxframes = n;
		}
		if (prev_fmgr_hook)
			(*prev_fmgr_hook) (event, flinfo, private);
		frames[nframes].flinfo = flinfo;
		frames[nframes].fn_oid = flinfo->fn_oid;
		frames[nframes].userid = GetUserId();
		nframes++;
		return;
	}
	if (nframes > 0 && frames[nframes - 1].flinfo == flinfo)
	{
		/*
		 * FHET_END or FHET_ABORT of the innermost frame.  A call that
		 * started before the module was loaded has no frame and ends
		 * here with another one on top (or none): nothing to pop.
		 */
		nframes--;
	}

	if (prev_fmgr_hook)
		(*prev_fmgr_hook) (event, flinfo, private);
}

/* At the end of a top-level transaction no call is in progress. */
static void
caller_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			nframes = 0;
			frames_whole = true;
			break;
		default:
			break;
	}
}

void
bgexec_caller_init(void)
{
	prev_fmgr_hook = fmgr_hook;
	fmgr_hook = caller_fmgr_hook;
	RegisterXactCallback(caller_xact_callback, NULL);
	/* Loaded outside any role switch: no call can be missing. */
	frames_whole = process_shared_preload_libraries_in_progress || !InLocalUserIdChange();
}

/*
 * The role bgexec acts for: the role of the innermost call in progress
 * outside schema bgexec that changed or set something, else the outer
 * user.
 */
Oid
bgexec_caller_id(void)
{
	if (frames_whole && nframes > 0)
	{
		Oid			bgexec_nsp = get_namespace_oid("bgexec", true);

		for (int i = nframes - 1; i >= 0; i--)
			if (get_func_namespace(frames[i].fn_oid) != bgexec_nsp)
				return frames[i].userid;
	}
	return GetOuterUserId();
}
