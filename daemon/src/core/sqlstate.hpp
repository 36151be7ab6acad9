#pragma once

#include <string_view>

namespace bgexec::core {

// What the daemon should do about a failed database call.
//   connection: the session is gone; reconnect with backoff.
//   retry:      transient conflict (serialization, deadlock, lock timeout);
//               run the same call again on the same connection.
//   fatal:      the statement itself is wrong (syntax, data, constraint,
//               raised by bgexec.*, the wrong number of parameters);
//               retrying cannot help.
//   other:      anything else; treat conservatively (log, back off).
enum class ErrorClass { connection, retry, fatal, other };

// Classifies a failed call by whether its session was lost and, when it
// was not, by its five-character SQLSTATE (case-insensitive).  Only a lost
// session is `connection`: the SQLSTATE does not say it, since the server
// answers some class 08 errors on a session that stays open (08P01 for a
// statement given the wrong number of parameters is `fatal`, the others
// `other`), and libpq names no state at all for many ways a connection
// breaks.  pg::Error::classify() passes its connection_lost().
ErrorClass classify(std::string_view sqlstate, bool connection_lost);

// A write the server refused for now, on a session that stays open: its
// statement cancelled (57014: pg_cancel_backend, a statement_timeout) or
// short of a resource (class 53: out of memory, disk full, too many
// connections).  The worker's own writes (events, finishes) make it again
// as they do after a lost connection, while the job's lease lasts: the
// same statement may pass a moment later, and the job's outcome is not
// the write's.  (The daemon cancels none of those statements itself
// without closing their session: a Deadline's cancel is a lost connection.)
bool transient(std::string_view sqlstate);

// The class's name for logs ("connection", "retry", "fatal", "other").
std::string_view describe(ErrorClass error_class);

}  // namespace bgexec::core
