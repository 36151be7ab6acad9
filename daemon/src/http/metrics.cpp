// GET /metrics: Prometheus text exposition, computed with one SQL statement
// as the gateway's own login role (fleet-wide when that role is a superuser
// or has BYPASSRLS; otherwise row-level security limits it to its own jobs).
#include "http/gateway.hpp"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace bgexec::http {

namespace {

// Rows (metric, label name, label value, value).  Counters are counts of
// job_event rows, so they shrink when purge/retention deletes old jobs.
const char* metrics_sql = R"SQL(
WITH qs AS (SELECT * FROM bgexec.queue_stats),
d AS (SELECT extract(epoch FROM finished_at - started_at)::float8 AS s FROM bgexec.job
       WHERE finished_at IS NOT NULL AND started_at IS NOT NULL)
SELECT 'jobs' AS m, qs.queue AS l1, s.status AS l2, s.n::float8 AS v
  FROM qs, LATERAL (VALUES ('queued', qs.queued), ('running', qs.running),
                           ('suspended', qs.suspended), ('completed', qs.completed),
                           ('failed', qs.failed), ('cancelled', qs.cancelled),
                           ('timed_out', qs.timed_out)) s(status, n)
UNION ALL
SELECT 'oldest', qs.queue, NULL, coalesce(extract(epoch FROM qs.oldest_queued_age)::float8, 0) FROM qs
UNION ALL
SELECT 'workers_alive', NULL, NULL, count(*) FILTER (WHERE alive)::float8 FROM bgexec.worker_stats
UNION ALL
SELECT 'event', k.kind, NULL, (SELECT count(*) FROM bgexec.job_event e WHERE e.kind = k.kind)::float8
  FROM (VALUES ('started'), ('retry_scheduled'), ('worker_lost'), ('timed_out')) k(kind)
UNION ALL
SELECT 'bucket', b.le::text, NULL, (SELECT count(*) FROM d WHERE d.s <= b.le)::float8
  FROM unnest('{0.01,0.1,1,10,60,600}'::float8[]) b(le)
UNION ALL
SELECT 'count', NULL, NULL, count(*)::float8 FROM d
UNION ALL
SELECT 'sum', NULL, NULL, coalesce(sum(d.s), 0) FROM d
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
  auto r = co_await pool_.query("", metrics_sql, {}, true);
  std::ostringstream jobs, oldest, buckets;
  std::string alive = "0", claims = "0", retries = "0", lost = "0", timeouts = "0", count = "0", sum = "0";
  for (int i = 0; i < r.rows(); ++i) {
    auto m = r.get(i, 0).value_or("");
    auto l1 = r.get(i, 1).value_or("");
    auto l2 = r.get(i, 2).value_or("");
    auto v = num(std::stod(r.get(i, 3).value_or("0")));
    if (m == "jobs")
      jobs << "bgexec_jobs{queue=\"" << label(l1) << "\",status=\"" << l2 << "\"} " << v << "\n";
    else if (m == "oldest")
      oldest << "bgexec_oldest_queued_seconds{queue=\"" << label(l1) << "\"} " << v << "\n";
    else if (m == "workers_alive")
      alive = v;
    else if (m == "event")
      (l1 == "started" ? claims : l1 == "retry_scheduled" ? retries : l1 == "worker_lost" ? lost : timeouts) = v;
    else if (m == "bucket")
      buckets << "bgexec_job_duration_seconds_bucket{le=\"" << num(std::stod(l1)) << "\"} " << v << "\n";
    else if (m == "count")
      count = v;
    else if (m == "sum")
      sum = v;
  }
  std::ostringstream o;
  o << "# HELP bgexec_jobs Jobs by queue and status.\n# TYPE bgexec_jobs gauge\n" << jobs.str()
    << "# HELP bgexec_oldest_queued_seconds Age of the oldest runnable queued job.\n"
       "# TYPE bgexec_oldest_queued_seconds gauge\n"
    << oldest.str()
    << "# HELP bgexec_workers_alive Workers with a recent heartbeat or a live lease.\n"
       "# TYPE bgexec_workers_alive gauge\nbgexec_workers_alive "
    << alive
    << "\n# HELP bgexec_claims_total Claims (started events of retained jobs).\n"
       "# TYPE bgexec_claims_total counter\nbgexec_claims_total "
    << claims
    << "\n# HELP bgexec_retries_total Retries scheduled (retry_scheduled events of retained jobs).\n"
       "# TYPE bgexec_retries_total counter\nbgexec_retries_total "
    << retries
    << "\n# HELP bgexec_lease_expiries_total Runs ended by the watchdog, by reason.\n"
       "# TYPE bgexec_lease_expiries_total counter\n"
       "bgexec_lease_expiries_total{reason=\"worker_lost\"} "
    << lost << "\nbgexec_lease_expiries_total{reason=\"timeout\"} " << timeouts
    << "\n# HELP bgexec_job_duration_seconds finished_at - started_at of terminal jobs.\n"
       "# TYPE bgexec_job_duration_seconds histogram\n"
    << buckets.str() << "bgexec_job_duration_seconds_bucket{le=\"+Inf\"} " << count
    << "\nbgexec_job_duration_seconds_sum " << sum << "\nbgexec_job_duration_seconds_count " << count
    << "\n";
  Response res{bhttp::status::ok, req.version()};
  res.set(bhttp::field::server, "bgexec");
  res.set(bhttp::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
  res.body() = o.str();
  co_return res;
}

}  // namespace bgexec::http
