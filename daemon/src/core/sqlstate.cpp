#include "sqlstate.hpp"

#include <string>

namespace bgexec::core {

// Follows libpqxx's split, with the lost session known apart (libpqxx's
// broken_connection is what libpq reports, not a SQLSTATE): 40001/40P01/55P03
// are worth an immediate retry; syntax, data, integrity, SQL-routine and
// PL/pgSQL RAISE errors, and the protocol violation of a statement given the
// wrong number of parameters, are fatal.  On a live session the rest of
// class 08 is `other` (dblink's 08001 is about another connection), and so
// are the shutdown codes 57P01-57P03, which the server sends as FATAL
// before it closes the session: the caller reports those as lost.
ErrorClass classify(std::string_view sqlstate, bool connection_lost) {
  if (connection_lost) return ErrorClass::connection;
  std::string code(sqlstate);
  for (char& c : code) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  if (code.size() != 5) return ErrorClass::other;
  const std::string_view cls = std::string_view(code).substr(0, 2);

  if (code == "40001" || code == "40P01" || code == "55P03") return ErrorClass::retry;
  if (cls == "42" || cls == "22" || cls == "23" || cls == "2F" || cls == "3F" || code == "P0001" ||
      code == "08P01") {
    return ErrorClass::fatal;
  }
  return ErrorClass::other;
}

bool transient(std::string_view sqlstate) {
  return sqlstate == "57014" || (sqlstate.size() == 5 && sqlstate.substr(0, 2) == "53");
}

// Stable lowercase names, used as a log field value.
std::string_view describe(ErrorClass error_class) {
  switch (error_class) {
    case ErrorClass::connection: return "connection";
    case ErrorClass::retry: return "retry";
    case ErrorClass::fatal: return "fatal";
    case ErrorClass::other: return "other";
  }
  return "other";
}

}  // namespace bgexec::core
