#pragma once
// A page of a job's event log for a reader that follows it (the gateway's
// event streams, the CLI's tail, --wait and --follow).

#include <string>

namespace bgexec::core {

// Up to $3 events after seq $2 of job $1 (bgexec.events), cut after the
// event whose data takes the page past `max_bytes` (one event at least): a
// step's output can hold megabytes, and a reader holds its page while it
// prints or sends it.  `fetched` is how many bgexec.events() returned: more
// than the page's rows when it was cut, so more follow.
inline std::string events_page_sql(long max_bytes) {
  return "SELECT job_id, seq, kind, data, created_at, fetched FROM ("
         " SELECT e.*, count(*) OVER () AS fetched,"
         "        coalesce(sum(octet_length(e.data::text)) OVER (ORDER BY e.seq ROWS BETWEEN UNBOUNDED PRECEDING"
         "                                                    AND 1 PRECEDING), 0) AS before"
         " FROM bgexec.events($1::bigint, $2::int, $3::int) e) x"
         " WHERE before < " +
         std::to_string(max_bytes) + " ORDER BY seq";
}

}  // namespace bgexec::core
