// Blocking libpq connection for the benchmark driver (see sync.hpp).
#include "pg/sync.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <libpq-fe.h>

#include <exception>

#include <vector>

namespace bgexec::pg {

// Connection::connect run to its end on a loop of its own: a refused
// session's error carries the server's SQLSTATE (28000, 3D000, 53300,
// 57P03), as the worker's and the client's do.  libpq's blocking connect
// keeps no code of a refusal: every failure read 08006.
SyncConnection::SyncConnection(const std::string& conninfo, std::string_view name) {
  asio::io_context io;
  Connection c(io.get_executor(), conninfo, std::string(name));
  std::exception_ptr failed;
  asio::co_spawn(io, c.connect(), [&failed](std::exception_ptr e) { failed = std::move(e); });
  io.run();
  if (failed) std::rethrow_exception(failed);
  conn_ = c.release_blocking();
}

SyncConnection::~SyncConnection() {
  if (conn_) PQfinish(conn_);
}

namespace {

std::vector<const char*> values_of(const Params& params) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
  return values;
}

}  // namespace

Result SyncConnection::exec(const std::string& sql, const Params& params) {
  auto values = values_of(params);
  return checked(params.empty() ? PQexec(conn_, sql.c_str())
                                : PQexecParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr,
                                               values.data(), nullptr, nullptr, 0));
}

void SyncConnection::prepare(const std::string& name, const std::string& sql) {
  checked(PQprepare(conn_, name.c_str(), sql.c_str(), 0, nullptr));
}

Result SyncConnection::exec_prepared(const std::string& name, const Params& params) {
  auto values = values_of(params);
  return checked(PQexecPrepared(conn_, name.c_str(), static_cast<int>(values.size()), values.data(), nullptr,
                                nullptr, 0));
}

Result SyncConnection::checked(PGresult* r) {
  Result res(r);
  auto st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return res;
  const char* code = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  std::string msg = one_line(r ? PQresultErrorMessage(r) : PQerrorMessage(conn_));
  if (msg.empty()) msg = one_line(PQerrorMessage(conn_));
  // Lost when libpq says so, not by the SQLSTATE (see Error::connection_lost).
  if (PQstatus(conn_) == CONNECTION_BAD) throw Error::lost(code ? code : "08006", msg);
  throw Error(code ? code : "08006", msg);
}

std::string SyncConnection::scalar(const std::string& sql, const Params& params) {
  auto r = exec(sql, params);
  return r.get(0, 0).value_or("");
}

int SyncConnection::backend_pid() const { return PQbackendPID(conn_); }

}  // namespace bgexec::pg
