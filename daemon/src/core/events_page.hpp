#pragma once
// A page of a job's event log for a reader that follows it (the gateway's
// event streams, the CLI's tail, --wait and --follow).

#include <string>

#include "core/sql_time.hpp"

namespace bgexec::core {

// Up to $3 events after seq $2 of job $1 (bgexec.events), cut after the
// event whose data takes the page past `max_bytes` (one event at least): a
// step's output can hold megabytes, and a reader holds its page while it
// prints or sends it.  `fetched` is how many bgexec.events() returned: more
// than the page's rows when it was cut, so more follow.  created_at in
// UTC ISO 8601 to the microsecond (sql_time.hpp): exact, as
// rewind_check_sql compares it.
inline std::string events_page_sql(long max_bytes) {
  return "SELECT job_id, seq, kind, data, " + utc_iso("created_at", Time::json) +
         " AS created_at, fetched FROM ("
         " SELECT e.*, count(*) OVER () AS fetched,"
         "        coalesce(sum(octet_length(e.data::text)) OVER (ORDER BY e.seq ROWS BETWEEN UNBOUNDED PRECEDING"
         "                                                    AND 1 PRECEDING), 0) AS before"
         " FROM bgexec.events($1::bigint, $2::int, $3::int) e) x"
         " WHERE before < " +
         std::to_string(max_bytes) + " ORDER BY seq";
}

// A follower's check of job $1 at its position $2, the event it read there
// created at $3 (text; NULL when it read none there: a position given by
// tail --from or Last-Event-ID, or just moved back): status, last_seq, and
// `resume`, NULL unless the log was rewound.  Rewound: no event at $2, or
// one created at another time (an asynchronous failover lost the newest
// events and the job's next ones took their seqs, enough of them to bring
// last_seq back past $2).  Rows written past last_seq around the API,
// which --from reads, are no rewind: the event at $2 is the one read.  Nor
// is a position whose event the reader did not read, last_seq at or past
// it.  `resume` is where to go on from: before the first of the last 1000
// events up to least(last_seq, $2 - 1) created after the event read at $2
// (new on the new primary, unless its clock is behind), else that least.
inline const std::string& rewind_check_sql() {
  static const std::string sql =
      "SELECT j.status::text, j.last_seq,"
      " CASE WHEN $2::int > 0 AND ($3::text IS NOT NULL OR j.last_seq < $2::int) AND NOT EXISTS ("
      "   SELECT 1 FROM bgexec.events($1::bigint, $2::int - 1, 1) e"
      "   WHERE e.seq = $2::int AND ($3::text IS NULL OR e.created_at = $3::text::timestamptz))"
      " THEN coalesce((SELECT min(e.seq) - 1 FROM bgexec.events($1::bigint,"
      "     greatest(least(j.last_seq, $2::int - 1) - 1000, 0), 1000) e"
      "   WHERE e.seq <= least(j.last_seq, $2::int - 1) AND e.created_at > $3::text::timestamptz),"
      "   least(j.last_seq, $2::int - 1)) END AS resume"
      " FROM bgexec.job j WHERE j.id = $1::bigint";
  return sql;
}

}  // namespace bgexec::core
