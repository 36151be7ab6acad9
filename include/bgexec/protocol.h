/*-------------------------------------------------------------------------
 *
 * protocol.h
 *	  Names shared by the bgexec extension and the bgexec daemon.
 *
 * Everything here is part of the contract in DESIGN.md: NOTIFY channel
 * names, job status names, event kinds, heartbeat actions and workflow
 * limits.  Plain C macros only, so that the header compiles unchanged as
 * C (the extension) and as C++ (the daemon).  Changing a value here is a
 * protocol change: the SQL install script spells the same strings.
 *
 * include/bgexec/protocol.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef BGEXEC_PROTOCOL_H
#define BGEXEC_PROTOCOL_H

/* Schema and roles created by the install script. */
#define BGEXEC_SCHEMA					"bgexec"
#define BGEXEC_ROLE_CLIENT				"bgexec_client"
#define BGEXEC_ROLE_WORKER				"bgexec_worker"

/* NOTIFY channels and what their payload carries. */
#define BGEXEC_CHANNEL_JOBS				"bgexec_jobs"	/* queue name */
#define BGEXEC_CHANNEL_STOP				"bgexec_stop"	/* job id */
#define BGEXEC_CHANNEL_EVENTS			"bgexec_events" /* "job_id:seq" */

/* Values of the enum bgexec.job_status. */
#define BGEXEC_STATUS_QUEUED			"queued"
#define BGEXEC_STATUS_RUNNING			"running"
#define BGEXEC_STATUS_SUSPENDED			"suspended"
#define BGEXEC_STATUS_COMPLETED			"completed"		/* terminal */
#define BGEXEC_STATUS_FAILED			"failed"		/* terminal */
#define BGEXEC_STATUS_CANCELLED			"cancelled"		/* terminal */
#define BGEXEC_STATUS_TIMED_OUT			"timed_out"		/* terminal */

/* Values of bgexec.job_event.kind. */
#define BGEXEC_EVENT_STARTED			"started"
#define BGEXEC_EVENT_STEP_STARTED		"step_started"
#define BGEXEC_EVENT_STEP_COMPLETED		"step_completed"
#define BGEXEC_EVENT_STEP_FAILED		"step_failed"
#define BGEXEC_EVENT_LOG				"log"
#define BGEXEC_EVENT_PROGRESS			"progress"
#define BGEXEC_EVENT_STOP_REQUESTED		"stop_requested"
#define BGEXEC_EVENT_SUSPENDED			"suspended"
#define BGEXEC_EVENT_RESUMED			"resumed"
#define BGEXEC_EVENT_RETRY_SCHEDULED	"retry_scheduled"
#define BGEXEC_EVENT_WORKER_LOST		"worker_lost"
#define BGEXEC_EVENT_COMPLETED			"completed"		/* terminal */
#define BGEXEC_EVENT_FAILED				"failed"		/* terminal */
#define BGEXEC_EVENT_CANCELLED			"cancelled"		/* terminal */
#define BGEXEC_EVENT_TIMED_OUT			"timed_out"		/* terminal */

/* Values of the "action" column returned by bgexec.heartbeat(). */
#define BGEXEC_HEARTBEAT_OK				"ok"
#define BGEXEC_HEARTBEAT_STOP			"stop"
#define BGEXEC_HEARTBEAT_LOST			"lost"

/* Job kinds the system itself interprets; any other kind names an action. */
#define BGEXEC_KIND_WORKFLOW			"workflow"
#define BGEXEC_KIND_NOOP				"noop"

/* Step kinds of a workflow: each step has exactly one of these keys. */
#define BGEXEC_STEP_ACTION				"action"
#define BGEXEC_STEP_RUN					"run"
#define BGEXEC_STEP_SQL					"sql"
#define BGEXEC_STEP_SLEEP				"sleep"
#define BGEXEC_STEP_APPROVAL			"approval"

/*
 * Workflow limits enforced by bgexec._validate_payload().  A step id matches
 * ^[A-Za-z_][A-Za-z0-9_-]{0,62}$, so it always fits in a PostgreSQL name.
 */
#define BGEXEC_WORKFLOW_MAX_STEPS		1000
#define BGEXEC_STEP_ID_MAX_LEN			63

#endif							/* BGEXEC_PROTOCOL_H */
