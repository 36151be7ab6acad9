#pragma once
// A blocking PostgreSQL connection for drivers that own their thread (the
// benchmark).  Never use it on the worker's event loop: every call blocks.

#include "pg/connection.hpp"

#include <string>
#include <string_view>

namespace bgexec::pg {

// One libpq connection in blocking mode; text parameters, text results.
class SyncConnection {
 public:
  // Connects at once, as Connection::connect does; throws a lost Error
  // (connection_lost()) on failure, with the server's SQLSTATE when it
  // refused the session (3D000, 28000, 53300 ...).  `name` completes the
  // application_name (see ConnectParams in connection.hpp).
  explicit SyncConnection(const std::string& conninfo, std::string_view name = "");
  ~SyncConnection();
  SyncConnection(const SyncConnection&) = delete;
  SyncConnection& operator=(const SyncConnection&) = delete;

  // Runs one statement (extended protocol when params are given); throws Error.
  Result exec(const std::string& sql, const Params& params = {});
  // Prepares a named statement (parsed once, its generic plan kept: what a
  // driver's prepared statement does), and runs one; both throw Error.
  void prepare(const std::string& name, const std::string& sql);
  Result exec_prepared(const std::string& name, const Params& params = {});
  // Runs a statement and returns cell (0,0), or "" when NULL or no row.
  std::string scalar(const std::string& sql, const Params& params = {});
  // Server process id of this session (pg_backend_pid()).
  int backend_pid() const;

 private:
  Result checked(pg_result* r);
  pg_conn* conn_ = nullptr;
};

}  // namespace bgexec::pg
