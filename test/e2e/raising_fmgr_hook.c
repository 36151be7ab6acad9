/*
 * Test module for e2e 88: an fmgr_hook that raises at FHET_START for a
 * function named deny_me, as sepgsql's hook does when a domain transition
 * is denied.  Loaded before bgexec (shared_preload_libraries), so bgexec's
 * hook is the outer one and calls this one.
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/lsyscache.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

static fmgr_hook_type prev_hook = NULL;

static void
raising_hook(FmgrHookEventType event, FmgrInfo *flinfo, Datum *private)
{
	if (prev_hook)
		(*prev_hook) (event, flinfo, private);
	if (event == FHET_START)
	{
		char	   *name = get_func_name(flinfo->fn_oid);

		if (name != NULL && strcmp(name, "deny_me") == 0)
			ereport(ERROR, (errmsg("raising_fmgr_hook: deny_me denied")));
	}
}

void
_PG_init(void)
{
	prev_hook = fmgr_hook;
	fmgr_hook = raising_hook;
}
