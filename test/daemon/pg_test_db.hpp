#pragma once
// The throwaway cluster of the CTest fixture pg_cluster: a libpq conninfo in
// BGEXEC_TEST_DB; empty without the fixture (the tests then skip).
#include <cstdlib>
#include <string>

namespace bgexec::pg {

inline std::string test_db() {
  const char* db = std::getenv("BGEXEC_TEST_DB");
  return db ? db : "";
}

}  // namespace bgexec::pg
