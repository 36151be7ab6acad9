#pragma once
// stop and retry of many jobs (the CLI's `stop|retry --queue/--kind/--status`,
// the gateway's POST /v1/jobs/stop|retry): one batch is one statement, so
// the CLI and the gateway act alike.

#include <set>
#include <string>

namespace bgexec::core {

// A list of job statuses as a filter takes it (the CLI's `--status
// failed,cancelled`, the gateway's `?status=`): each of bgexec.job_status,
// each once, in the order given, comma-separated.  `error` says what is
// wrong instead ("unknown status \"done\" (a job is …)", "expected a
// status"), for the caller to prefix with the field.  `array` is the list as
// a job_status[] literal: compared with "= ANY($n::bgexec.job_status[])",
// a constant the planner proves a status's partial index from, where
// string_to_array($n, ',')::bgexec.job_status[] (the cast is not folded)
// walked the primary key past every other job.
struct StatusList {
  std::string list, error;
  std::string array() const { return "{" + list + "}"; }
};
inline StatusList status_list(const std::string& v) {
  static const std::set<std::string> all = {"queued", "running", "suspended", "completed",
                                            "failed", "cancelled", "timed_out"};
  StatusList out;
  std::set<std::string> seen;
  std::size_t from = 0;
  for (;;) {
    const std::size_t comma = v.find(',', from);
    const std::string st = v.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
    if (st.empty()) return {"", "expected a status, got \"" + v + "\""};
    if (!all.count(st))
      return {"", "unknown status \"" + st +
                      "\" (a job is queued, running, suspended, completed, failed, cancelled or timed_out)"};
    if (seen.insert(st).second) out.list += (out.list.empty() ? "" : ",") + st;
    if (comma == std::string::npos) return out;
    from = comma + 1;
  }
}

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
// retry's batch is bgexec._retry_batch's (sql/bgexec--0.1.0.sql): one
// walk in id order of the jobs that ended badly (job_ended_badly_idx by
// queue, job_ended_badly_id_idx without), the statuses not asked for
// filtered, so a batch reads its own jobs and the other such jobs among
// them; row-level security applies in it (SECURITY INVOKER).  As a
// statement here, a branch per status, a queue with few or none of those
// jobs was read through job_ended_badly_id_idx: the planner, taking queue
// and status as independent, walked every queue's by id (315 000 jobs:
// 0.1-1 s for an empty batch, bench/README.md); the function reads
// (queue, id) with sorting off, which a statement cannot ask for.
//
// stop's: one branch per status, each its oldest $5 after $4, merged and
// cut to $5 again: the same jobs as one scan of them all by id.  A branch
// names its status as a constant and tests whether $3 names it apart
// (folded at planning: a branch not asked for is a one-time false), so the
// planner may read the status's partial index.  Those are not in id order
// (job_runnable_idx, job_suspended_idx, job_running_key_idx), and without
// a queue the primary key's walk from $4, which the planner costs as if
// the matches were spread evenly, passed the whole retained history when
// they were its newest jobs: a branch without a queue sorts "id + 0",
// which no index gives, and reads the partial index whole (or the table,
// when most of it matches).  With a queue the planner weighs that walk
// against the index: a queue with a backlog of a tenth of the table may be
// walked.  "status = ANY($3's array)" proved no index predicate and every
// first batch walked the primary key or the table: 1.6-2.2 s to find a
// queue's 1 250 failed jobs among 1M completed, now 9 ms (bench/README.md).
// The same for a client (row-level security): the status test, not
// leakproof, is no index condition, the queue and id tests are.
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
// pg_catalog's = of enums and of text (the array's), and string_to_array
// (pg/connection.hpp: the built-ins a user could shadow); the extension's
// function sets its own search_path.
inline std::string many_sql(bool retry) {
  std::string batch;
  if (retry) {
    batch = "SELECT job_id AS id, job_queue AS queue FROM bgexec._retry_batch($1::text, $2::text,"
            " pg_catalog.string_to_array($3::text, ',')::bgexec.job_status[], $4::bigint, $5::int)";
  } else {
    std::string branches;
    for (const auto& st : many_statuses(retry))
      branches += std::string(branches.empty() ? "" : " UNION ALL ") +
                  "(SELECT id, queue FROM bgexec.job WHERE status OPERATOR(pg_catalog.=) '" + st +
                  "'::bgexec.job_status AND '" + st +
                  "'::text OPERATOR(pg_catalog.=) ANY(pg_catalog.string_to_array($3::text, ','))"
                  " AND ($1::text IS NULL OR queue = $1::text) AND ($2::text IS NULL OR kind = $2::text)"
                  " AND id > $4::bigint ORDER BY CASE WHEN $1::text IS NULL THEN id + 0 ELSE id END LIMIT $5::int)";
    batch = "SELECT id, queue FROM (" + branches + ") u ORDER BY id LIMIT $5::int";
  }
  return std::string("SELECT count(*) FILTER (WHERE r IN ('true', 'cancelled')) AS done,"
                     " count(*) FILTER (WHERE r = 'running') AS stop_requested, count(*) AS matched,"
                     " max(id) AS last FROM (SELECT id, ") +
         (retry ? "bgexec.retry(id)::text" : "bgexec.stop(id)::text") + " AS r FROM (SELECT c.id FROM (" + batch +
         ") c ORDER BY " + (retry ? "pg_catalog.hashtext(c.queue), c.queue, c.id" : "c.id") + ") o) x";
}

}  // namespace bgexec::core
