#pragma once
// stop and retry of many jobs (the CLI's `stop|retry --queue/--kind/--status`,
// the gateway's POST /v1/jobs/stop|retry): one batch is one statement, so
// the CLI and the gateway act alike.

#include <set>
#include <string>

namespace bgexec::core {

// The statuses each action takes, and those it takes when none is named:
// stop every unfinished job; retry failed and timed-out ones (a cancel is
// deliberate: cancelled ones only when named).
inline const std::set<std::string>& many_statuses(bool retry) {
  static const std::set<std::string> r = {"failed", "cancelled", "timed_out"}, s = {"queued", "suspended", "running"};
  return retry ? r : s;
}
inline const char* many_default_statuses(bool retry) {
  return retry ? "failed,timed_out" : "queued,suspended,running";
}
inline const char* many_statuses_text(bool retry) {
  return retry ? "failed, cancelled or timed_out" : "queued, suspended or running";
}

// One batch: $1 queue, $2 kind (null: any), $3 the statuses comma-separated,
// $4 the id after which to start, $5 the most jobs.  The caller's jobs
// (row-level security: a client's own, a superuser's all), the oldest ones
// after $4, each through bgexec.stop or bgexec.retry, which lock and check
// it again.  One row: done (cancelled, or queued again), stop requested
// (running), matched, the last id matched (null when none).
//
// The order the calls lock in: stop goes by id, as a worker's finish_many
// locks its jobs, so a stop and a finish cannot wait for each other in a
// cycle.  retry goes by queue, then id: it takes each capped queue's
// admission lock until commit, and two batches over several capped queues
// (retry --kind, or --status alone) taking them in id order deadlocked
// (40P01), as retry's documentation warns of one transaction that does.
// The queues in submit_many's order, hashtext then name: in name order a
// batch and a submit_many over the same two capped queues deadlocked
// (isolation retry-batch-order).
// A failed job is no worker's, so its row is locked by retries alone.  The
// subquery that sorts is not pulled up (it has an ORDER BY), nor is the one
// that calls (a volatile function): each is called once per job, in order.
// pg_catalog's = of enums and string_to_array (pg/connection.hpp: the
// built-ins a user could shadow).
inline std::string many_sql(bool retry) {
  return std::string("SELECT count(*) FILTER (WHERE r IN ('true', 'cancelled')) AS done,"
                     " count(*) FILTER (WHERE r = 'running') AS stop_requested, count(*) AS matched,"
                     " max(id) AS last FROM (SELECT id, ") +
         (retry ? "bgexec.retry(id)::text" : "bgexec.stop(id)::text") +
         " AS r FROM (SELECT c.id FROM (SELECT id, queue FROM bgexec.job"
         " WHERE ($1::text IS NULL OR queue = $1::text) AND ($2::text IS NULL OR kind = $2::text)"
         " AND status OPERATOR(pg_catalog.=) ANY(pg_catalog.string_to_array($3::text, ',')::bgexec.job_status[])"
         " AND id > $4::bigint"
         " ORDER BY id LIMIT $5::int) c ORDER BY " +
         (retry ? "pg_catalog.hashtext(c.queue), c.queue, c.id" : "c.id") + ") o) x";
}

}  // namespace bgexec::core
