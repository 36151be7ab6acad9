// GET /metrics: Prometheus text exposition, computed with one SQL statement
// as the gateway's own login role (fleet-wide when that role is a superuser
// or has BYPASSRLS; otherwise row-level security limits it to its own jobs).
//
// A scrape costs what is active, never the retained history: the gauges
// count queued, running and suspended jobs through their partial indexes,
// and the counters add up the jobs finished since the previous scrape
// (job_finished_idx), so they grow from 0 when the gateway starts and purge
// or retention never makes them shrink.
//
// The per-queue gauges have a series for every queue queue_stats lists (its
// settings row, its retained jobs of any status: the terminal ones through
// queue_count, not the job table), 0 where nothing is counted: a queue
// whose last active job finished keeps its series at 0 instead of dropping
// it, which Prometheus would show as a gap after the last non-zero value.
#include "http/gateway.hpp"

#include "core/duration.hpp"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace bgexec::http {

namespace {

// How far behind now() a scrape counts finishes: finished_at is its
// transaction's start, so a finish that commits later than this after it
// began is not counted.  finish and finish_many commit in milliseconds.
constexpr const char* commit_margin = "5 seconds";

// Rows (metric, label 1, label 2, value).  The watermark is ISO 8601 in UTC,
// read back the same whatever the session's DateStyle and TimeZone: as
// timestamptz's text under DateStyle SQL in Asia/Kolkata it read "… IST",
// which PostgreSQL reads as Israel's time, and every scrape's window was
// empty from then on.  'queue' rows name the known
// queues, those queue_stats lists, from bgexec._queue_names: it reads as its
// owner, as queue_stats does, so it names every tenant's queues whatever RLS
// lets the login role count, and it counts no job (queue_stats counted
// every queued one a second time).  The active jobs are counted once, by
// bgexec._active_counts() as the login role (no JIT, no parallel workers:
// under RLS the planner costed the empty running set like half the table).
// fin's bounds are written out in its WHERE, its upper one as w's cur (now()
// is the transaction's start: the same value), its lower one as a CASE:
// under RLS a coalesce counts as leaky, so coalesce($1, now() - $3) was no
// condition of job_finished_idx, and a tenant login role's scrape walked
// every finished job (1 s at 1M); as columns of w joined in, the planner
// could still scan job first.  $1: the previous scrape's watermark; on the first scrape, NULL, and the window starts $3 ago: when
// the gateway started (its uptime on the host's clock), so the counters
// count from there, not from the first scrape; nor from before it: within
// 5 s of the start the window ends at the start, not 5 s before, where the
// next scrape's would begin.  The watchdog's timeouts are the
// timed_out jobs whose error names the attempt (_reconcile_one); a worker
// ending its own job at its deadline writes none.  A
// run_after of -infinity (runnable since forever) has no age: now() minus it
// raises 22008 and would fail every scrape, so the oldest age skips it; so
// does a job's duration skip an infinite started_at (a row written past the
// functions: every scrape was 422 until it was mended).  The built-ins a
// user could shadow are pg_catalog's (pg/connection.hpp): unnest, count(s),
// ->> with its untyped key, = of the enum job_status (fin's and active's
// status are text).
const char* metrics_sql = R"SQL(
WITH w AS (SELECT greatest(now() - $2::interval, now() - $3::interval) AS cur),
fin AS (
  SELECT j.queue, j.status::text AS status, j.attempt, j.error OPERATOR(pg_catalog.->>) 'reason' AS reason,
         j.error OPERATOR(pg_catalog.?) 'attempt' AS by_watchdog,
         CASE WHEN isfinite(j.started_at) THEN extract(epoch FROM j.finished_at - j.started_at)::float8 END AS s
    FROM bgexec.job j
   WHERE j.finished_at > CASE WHEN $1::timestamptz IS NULL THEN now() - $3::interval ELSE $1::timestamptz END
     AND j.finished_at <= greatest(now() - $2::interval, now() - $3::interval)),
active AS (SELECT queue, status, n, oldest FROM bgexec._active_counts())
-- v through numeric, whose text has every digit whatever extra_float_digits
-- is set to (at -15, a float8 count of 17 read 20)
SELECT m, l1, l2, v::numeric FROM (
SELECT 'watermark' AS m,
       (SELECT pg_catalog.to_char(cur AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') FROM w) AS l1,
       NULL AS l2, NULL::float8 AS v
UNION ALL
SELECT 'queue', queue, NULL, workers::float8 FROM bgexec._queue_names
UNION ALL
SELECT 'active', queue, status, n::float8 FROM active
UNION ALL
SELECT 'oldest', queue, NULL, coalesce(oldest, 0) FROM active WHERE status = 'queued'
UNION ALL
SELECT 'workers_alive', NULL, NULL, count(*) FILTER (WHERE alive)::float8 FROM bgexec.worker_stats
UNION ALL
SELECT 'finished', queue, status, count(*)::float8 FROM fin GROUP BY queue, status
UNION ALL
SELECT 'claims', NULL, NULL, coalesce(sum(attempt), 0)::float8 FROM fin
UNION ALL
SELECT 'retries', NULL, NULL, coalesce(sum(greatest(attempt - 1, 0)), 0)::float8 FROM fin
UNION ALL
SELECT 'worker_lost', NULL, NULL, count(*) FILTER (WHERE reason = 'worker_lost')::float8 FROM fin
UNION ALL
SELECT 'timeouts', NULL, NULL, count(*) FILTER (WHERE status = 'timed_out' AND by_watchdog)::float8 FROM fin
UNION ALL
SELECT 'bucket', b.le::text, NULL, (SELECT count(*) FROM fin WHERE fin.s <= b.le)::float8
  FROM pg_catalog.unnest('{0.01,0.1,1,10,60,600}'::float8[]) b(le)
UNION ALL
SELECT 'count', NULL, NULL, pg_catalog.count(s)::float8 FROM fin
UNION ALL
SELECT 'sum', NULL, NULL, coalesce(sum(s), 0) FROM fin
) x
)SQL";

std::string label(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string num(double v) {
  if (std::floor(v) == v && std::fabs(v) < 1e15) return std::to_string(static_cast<long long>(v));
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

}  // namespace

asio::awaitable<Response> Gateway::metrics(const Request& req) {
  auto& f = finished_;
  const auto since = f.watermark;  // another scrape may advance it while we wait
  const double up = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  pg::Params params{since, std::string(commit_margin), core::to_pg_interval(up)};
  auto r = co_await pool_.query("", metrics_sql, std::move(params), true);
  // Counted only when no other scrape moved the watermark meanwhile (both
  // would have counted the same window); this window is then counted next time.
  const bool apply = f.watermark == since;
  std::map<std::pair<std::string, std::string>, std::string> active;  // (queue, status) -> n
  std::map<std::string, std::string> oldest;
  std::map<std::string, std::string> claiming;  // queue -> live workers that claim from it
  std::string alive = "0";
  // Every gauge series of a known queue, at 0 until a row counts something.
  auto known = [&](const std::string& q) {
    for (const char* st : {"queued", "running", "suspended"}) active.try_emplace({q, st}, "0");
    oldest.try_emplace(q, "0");
  };
  for (int i = 0; i < r.rows(); ++i) {
    auto m = r.get(i, 0).value_or("");
    auto l1 = r.get(i, 1).value_or("");
    auto l2 = r.get(i, 2).value_or("");
    double v = std::stod(r.get(i, 3).value_or("0"));
    if (m == "watermark") {
      if (apply) f.watermark = l1;
    } else if (m == "queue") {
      known(l1);
      claiming[l1] = num(v);
    } else if (m == "active") {
      known(l1);
      active[{l1, l2}] = num(v);
    } else if (m == "oldest") {
      known(l1);
      oldest[l1] = num(v);
    } else if (m == "workers_alive") {
      alive = num(v);
    } else if (!apply) {
      continue;
    } else if (m == "finished") {
      f.jobs[{l1, l2}] += v;
    } else if (m == "claims") {
      f.claims += v;
    } else if (m == "retries") {
      f.retries += v;
    } else if (m == "worker_lost") {
      f.worker_lost += v;
    } else if (m == "timeouts") {
      f.timeouts += v;
    } else if (m == "bucket") {
      f.buckets[num(std::stod(l1))] += v;
    } else if (m == "count") {
      f.count += v;
    } else if (m == "sum") {
      f.sum += v;
    }
  }
  std::ostringstream o;
  o << "# HELP bgexec_jobs Jobs waiting or in flight, by queue and status.\n# TYPE bgexec_jobs gauge\n";
  for (const auto& [k, n] : active)
    o << "bgexec_jobs{queue=\"" << label(k.first) << "\",status=\"" << k.second << "\"} " << n << "\n";
  o << "# HELP bgexec_oldest_queued_seconds Age of the oldest runnable queued job.\n"
       "# TYPE bgexec_oldest_queued_seconds gauge\n";
  for (const auto& [q, v] : oldest) o << "bgexec_oldest_queued_seconds{queue=\"" << label(q) << "\"} " << v << "\n";
  o << "# HELP bgexec_queue_workers Live workers that claim from the queue (0 with jobs queued: nothing runs them).\n"
       "# TYPE bgexec_queue_workers gauge\n";
  for (const auto& [q, n] : claiming) o << "bgexec_queue_workers{queue=\"" << label(q) << "\"} " << n << "\n";
  o << "# HELP bgexec_workers_alive Workers with a recent heartbeat or a live lease.\n"
       "# TYPE bgexec_workers_alive gauge\nbgexec_workers_alive "
    << alive << "\n";
  o << "# HELP bgexec_jobs_finished_total Jobs that reached a terminal status since this gateway started.\n"
       "# TYPE bgexec_jobs_finished_total counter\n";
  for (const auto& [k, n] : f.jobs)
    o << "bgexec_jobs_finished_total{queue=\"" << label(k.first) << "\",status=\"" << k.second << "\"} "
      << num(n) << "\n";
  o << "# HELP bgexec_claims_total Claims (attempts) of the jobs finished since this gateway started.\n"
       "# TYPE bgexec_claims_total counter\nbgexec_claims_total "
    << num(f.claims)
    << "\n# HELP bgexec_retries_total Attempts after the first, of the jobs finished since this gateway started.\n"
       "# TYPE bgexec_retries_total counter\nbgexec_retries_total "
    << num(f.retries)
    << "\n# HELP bgexec_lease_expiries_total Jobs ended by the watchdog since this gateway started, by reason.\n"
       "# TYPE bgexec_lease_expiries_total counter\n"
       "bgexec_lease_expiries_total{reason=\"worker_lost\"} "
    << num(f.worker_lost) << "\nbgexec_lease_expiries_total{reason=\"timeout\"} " << num(f.timeouts)
    << "\n# HELP bgexec_job_duration_seconds finished_at - started_at of the jobs finished since this gateway started.\n"
       "# TYPE bgexec_job_duration_seconds histogram\n";
  for (const char* le : {"0.01", "0.1", "1", "10", "60", "600"}) {
    auto it = f.buckets.find(le);
    o << "bgexec_job_duration_seconds_bucket{le=\"" << le << "\"} " << num(it == f.buckets.end() ? 0 : it->second)
      << "\n";
  }
  o << "bgexec_job_duration_seconds_bucket{le=\"+Inf\"} " << num(f.count) << "\nbgexec_job_duration_seconds_sum "
    << num(f.sum) << "\nbgexec_job_duration_seconds_count " << num(f.count) << "\n";
  // The gateway's own: its event streams' work and what waits to be written.
  o << "# HELP bgexec_gateway_event_batches_rendered_total Event batches read and rendered as SSE (one per shared "
       "fetch, whatever the number of streams it serves).\n"
       "# TYPE bgexec_gateway_event_batches_rendered_total counter\nbgexec_gateway_event_batches_rendered_total "
    << batches_rendered_
    << "\n# HELP bgexec_gateway_event_batches_sent_total Event batches written to streams (one per stream).\n"
       "# TYPE bgexec_gateway_event_batches_sent_total counter\nbgexec_gateway_event_batches_sent_total "
    << batches_sent_
    << "\n# HELP bgexec_gateway_stream_sweeps_total Safety-net reads of the jobs event streams follow (one "
       "statement per role with streams, every 3 s).\n"
       "# TYPE bgexec_gateway_stream_sweeps_total counter\nbgexec_gateway_stream_sweeps_total "
    << sweeps_
    << "\n# HELP bgexec_gateway_stream_sweep_wakes_total Event streams a sweep woke: their job had something "
       "they had not sent.\n"
       "# TYPE bgexec_gateway_stream_sweep_wakes_total counter\nbgexec_gateway_stream_sweep_wakes_total "
    << sweep_wakes_
    << "\n# HELP bgexec_gateway_response_bytes_held Bytes of answers and event batches waiting to be written "
       "(counted against --response-memory).\n"
       "# TYPE bgexec_gateway_response_bytes_held gauge\nbgexec_gateway_response_bytes_held "
    << held_
    << "\n# HELP bgexec_gateway_pool_waiting Requests waiting for a database connection, by class (a role's "
       "requests are served before its event streams' reads).\n"
       "# TYPE bgexec_gateway_pool_waiting gauge\nbgexec_gateway_pool_waiting{class=\"request\"} "
    << pool_.waiting_requests() << "\nbgexec_gateway_pool_waiting{class=\"stream\"} " << pool_.waiting_streams()
    << "\n";
  Response res{bhttp::status::ok, req.version()};
  res.set(bhttp::field::server, "bgexec");
  res.set(bhttp::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
  res.set("X-Content-Type-Options", "nosniff");
  res.body() = o.str();
  co_return res;
}

}  // namespace bgexec::http
