#include "sqlstate.hpp"

#include <string>

namespace bgexec::core {

// Follows libpqxx's split: class 08 and the 57P0x shutdown codes mean the
// session is gone; 40001/40P01/55P03 are worth an immediate retry; syntax,
// data, integrity, SQL-routine and PL/pgSQL RAISE errors are fatal.
ErrorClass classify(std::string_view sqlstate) {
  if (sqlstate.empty()) return ErrorClass::connection;
  std::string code(sqlstate);
  for (char& c : code) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  if (code.size() != 5) return ErrorClass::other;
  const std::string_view cls = std::string_view(code).substr(0, 2);

  if (cls == "08" || code == "57P01" || code == "57P02" || code == "57P03") {
    return ErrorClass::connection;
  }
  if (code == "40001" || code == "40P01" || code == "55P03") return ErrorClass::retry;
  if (cls == "42" || cls == "22" || cls == "23" || cls == "2F" || cls == "3F" || code == "P0001") {
    return ErrorClass::fatal;
  }
  return ErrorClass::other;
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
