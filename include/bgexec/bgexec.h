/*-------------------------------------------------------------------------
 *
 * bgexec.h
 *	  Declarations internal to the bgexec extension module.
 *
 * The GUC variables are defined and registered in bgexec.c (_PG_init);
 * every other file only reads them.  The daemon never includes this
 * header: what it shares with the extension lives in protocol.h.
 *
 * include/bgexec/bgexec.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef BGEXEC_BGEXEC_H
#define BGEXEC_BGEXEC_H

#include "access/xact.h"
#include "fmgr.h"

/* GUC variables (see _PG_init for defaults, units and contexts). */
extern int	bgexec_max_payload_bytes;
extern int	bgexec_max_result_bytes;
extern bool bgexec_notify_events;
extern bool bgexec_notify_jobs;
extern int	bgexec_watchdog_interval;
extern int	bgexec_retention;
extern int	bgexec_retention_batch;
extern int	bgexec_vacuum_threshold;
extern char *bgexec_database;
extern bool bgexec_watchdog_enabled;

/* bgexec.c: true when s[0..len) is 1 to max_len ASCII letters, digits and
 * characters of punct (the rule of kinds, queue names and step ids). */
extern bool bgexec_name_chars_ok(const char *s, int len, int max_len,
								 const char *punct);
/* bgexec.c: the rule of job kinds and queue names (1 to max_len of
 * [A-Za-z0-9_.:-]) on a text value. */
extern bool bgexec_text_name_ok(const text *name, int max_len);

/* bgexec.c: what a transaction does at its commit (wake.c's wakes,
 * step_session.c's ends) is kept in an array of n entries of `size` bytes,
 * each with an int nesting level at `level_offset`.  At the end of a
 * subtransaction: its entries dropped (abort) or handed to its parent
 * (commit).  Returns the new count. */
extern int	bgexec_subxact_entries(SubXactEvent event, void *entries, int n,
								   size_t size, size_t level_offset);

/*
 * Shared memory (shared_preload_libraries only): bgexec.c's hooks call each
 * module's request (RequestAddinShmemSpace, its LWLock tranche) and startup
 * (ShmemInitStruct, with AddinShmemInitLock held).
 */
extern void bgexec_wake_shmem_request(void);		/* wake.c: wake slots */
extern void bgexec_wake_shmem_startup(void);
extern TimestampTz bgexec_wall_clock(void);	/* wake.c: clocks of the timers */
extern int64 bgexec_mono_clock(void);
extern int	bgexec_debug_clock_offset;
extern void bgexec_clock_offset_assign(int newval, void *extra);
extern void bgexec_step_session_shmem_request(void);	/* step_session.c */
extern void bgexec_step_session_shmem_startup(void);

/* watchdog.c */
/* caller.c: the role bgexec acts for */
extern void bgexec_caller_init(void);
extern Oid	bgexec_caller_id(void);

extern void bgexec_watchdog_register(void);
extern PGDLLEXPORT void bgexec_watchdog_main(Datum main_arg);

#endif							/* BGEXEC_BGEXEC_H */
