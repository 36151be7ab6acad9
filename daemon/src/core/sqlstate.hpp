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

// The class's name for logs ("connection", "retry", "fatal", "other").
std::string_view describe(ErrorClass error_class);

}  // namespace bgexec::core
