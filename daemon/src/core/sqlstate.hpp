#pragma once

#include <string_view>

namespace bgexec::core {

// What the daemon should do about a failed database call.
//   connection: the session is gone or unusable; reconnect with backoff.
//   retry:      transient conflict (serialization, deadlock, lock timeout);
//               run the same call again on the same connection.
//   fatal:      the statement itself is wrong (syntax, data, constraint,
//               raised by bgexec.*); retrying cannot help.
//   other:      anything else; treat conservatively (log, back off).
enum class ErrorClass { connection, retry, fatal, other };

// Classifies a five-character SQLSTATE. An empty SQLSTATE means no server
// error was received at all (connection lost, no result) and is therefore
// `connection`. Case-insensitive.
ErrorClass classify(std::string_view sqlstate);

// The class's name for logs ("connection", "retry", "fatal", "other").
std::string_view describe(ErrorClass error_class);

}  // namespace bgexec::core
