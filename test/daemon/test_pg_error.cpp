// pg::Error's connection_lost(): set where the error is raised, from what
// libpq says of the connection, never from the SQLSTATE.  PgConnection and
// PgSync run against the throwaway cluster of the CTest fixture pg_cluster
// (BGEXEC_TEST_DB, a libpq conninfo); without it they are skipped.
#include <gtest/gtest.h>

#include "pg/connection.hpp"
#include "pg/sync.hpp"
#include "pg_test_db.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <thread>

namespace bgexec::pg {
namespace {

using core::ErrorClass;

// What the server answers a statement given fewer parameters than it uses.
const std::string two_params = "SELECT $1::int + $2::int";

TEST(PgError, ConstructedIsLiveWhateverTheSqlstate) {
  Error e("08P01", "bind message supplies 1 parameters, but prepared statement requires 2");
  EXPECT_FALSE(e.connection_lost());
  EXPECT_EQ(e.classify(), ErrorClass::fatal);
  EXPECT_FALSE(Error("08006", "x").connection_lost());
  EXPECT_EQ(Error("40001", "x").classify(), ErrorClass::retry);
}

TEST(PgError, LostIsConnectionWhateverTheSqlstate) {
  Error e = Error::lost("08006", "server closed the connection unexpectedly");
  EXPECT_TRUE(e.connection_lost());
  EXPECT_EQ(e.classify(), ErrorClass::connection);
  EXPECT_EQ(e.sqlstate(), "08006");
  EXPECT_EQ(Error::lost("08P01", "x").classify(), ErrorClass::connection);
  EXPECT_EQ(Error::lost("57P01", "x").classify(), ErrorClass::connection);
}

TEST(PgError, CopyKeepsTheFlag) {  // as http/pool.cpp's RoleSwitchLost copies it
  Error lost = Error::lost("08003", "closed", {"closed", "", "", ""});
  Error copy(lost);
  EXPECT_TRUE(copy.connection_lost());
  EXPECT_EQ(copy.fields().primary, "closed");
}

// A database without the extension: the client, the worker and the
// gateway say what to do (the message alone read `schema "bgexec" does not
// exist`).  The server's own hint wins, but its cast hint for a bgexec
// function gone (DROP EXTENSION leaves the schema, or the extension is
// older than the binary); other missing objects get none.
TEST(PgError, HintForAMissingExtension) {
  const std::string create = "is the bgexec extension installed in this database? (CREATE EXTENSION bgexec, as a superuser)";
  EXPECT_EQ(Error("3F000", "x", {"schema \"bgexec\" does not exist", "", "", ""}).hint(), create);
  EXPECT_EQ(Error("42P01", "x", {"relation \"bgexec.job\" does not exist", "", "", ""}).hint(), create);
  EXPECT_EQ(Error("42P01", "ERROR:  relation \"bgexec.queue_stats\" does not exist").hint(), create);
  EXPECT_EQ(Error("42P01", "x", {"relation \"orders\" does not exist", "", "", ""}).hint(), "");
  EXPECT_EQ(Error("42883", "x", {"function bgexec.submit(text) does not exist", "",
                                 "No function matches the given name and argument types. You might need to add explicit type casts.",
                                 ""}).hint(),
            "is the bgexec extension installed in this database, from the same source as this binary? "
            "(CREATE EXTENSION bgexec, as a superuser; an older one lacks functions this binary calls: "
            "README, Troubleshooting)");
  EXPECT_EQ(Error("42883", "x", {"function app.f(text) does not exist", "", "a hint", ""}).hint(), "a hint");
  EXPECT_EQ(Error("3F000", "x", {"schema \"bgexec\" does not exist", "", "ask the DBA", ""}).hint(), "ask the DBA");
  EXPECT_EQ(Error("22023", "x", {"bad", "", "a hint", ""}).hint(), "a hint");
}

// libpq quotes a malformed URI whole, or a token of it, in its reason; the
// reason is printed, so every password in it reads *** (the whole URI,
// password included, was echoed).  No connection is made: the PgError
// filter runs without the test cluster.
TEST(PgError, ConninfoErrorHidesPasswords) {
  auto err = [](const std::string& conninfo) { return conninfo_error(conninfo).value_or("(parses)"); };
  EXPECT_EQ(err("postgresql://bgexec:S3cretPw@[::1/app"),
            "end of string reached when looking for matching \"]\" in IPv6 host address in URI: "
            "\"postgresql://bgexec:***@[::1/app\"");
  EXPECT_EQ(err("postgres://u:p w@[::1/app?password=x2&sslpassword=y3"),
            "end of string reached when looking for matching \"]\" in IPv6 host address in URI: "
            "\"postgres://u:***@[::1/app?password=***&sslpassword=***\"");
  // A password with a bad %-escape is quoted alone.
  EXPECT_EQ(err("postgresql://u:pa%zzss@h/db"), "invalid percent-encoded token: \"***\"");
  EXPECT_EQ(err("postgresql://u@h/db?password=xx%zz"), "invalid percent-encoded token: \"***\"");
  // No password: the message as libpq gave it.
  EXPECT_EQ(err("postgresql://bgexec@[::1/app"),
            "end of string reached when looking for matching \"]\" in IPv6 host address in URI: "
            "\"postgresql://bgexec@[::1/app\"");
  EXPECT_EQ(err("postgresql://u:pw@h/db"), "(parses)");
  EXPECT_EQ(err("host=/tmp password='abc def' dbname=x"), "(parses)");
}

// A key=value string libpq cannot split quotes one token; after password=
// it may be a piece of the password (an unquoted blank in it), and where
// the password ends is unknown: every such token reads "***", one before
// it is named.
TEST(PgError, ConninfoErrorHidesKeyValuePasswordPieces) {
  auto err = [](const std::string& conninfo) { return conninfo_error(conninfo).value_or("(parses)"); };
  const std::string hint = " (*** is a token after password=; a value with a space is quoted: password='a b')";
  EXPECT_EQ(err("host=/tmp password=abc def dbname=x"),
            "missing \"=\" after \"***\" in connection info string" + hint);
  EXPECT_EQ(err("password=abc def=1"), "invalid connection option \"***\"" + hint);
  EXPECT_EQ(err("password=abc bogus=1"), "invalid connection option \"***\"" + hint);
  EXPECT_EQ(err("password = abc\tdef"), "missing \"=\" after \"***\" in connection info string" + hint);
  EXPECT_EQ(err("sslpassword='x'def ghi"), "missing \"=\" after \"***\" in connection info string" + hint);
  EXPECT_EQ(err("user=u password=a\\ b c"), "missing \"=\" after \"***\" in connection info string" + hint);
  // A token before the password is named; no password, nothing hidden.
  EXPECT_EQ(err("hots=h password=abc def"), "invalid connection option \"hots\"");
  EXPECT_EQ(err("host=h bogus=1"), "invalid connection option \"bogus\"");
  EXPECT_EQ(err("password='abc def"), "unterminated quoted string in connection info string");
}

// redact_passwords alone: a URI's password reads *** only between the marks
// libpq quotes it with, not in libpq's own words ("in", "URI").
TEST(PgError, RedactPasswordsKeepsLibpqWords) {
  EXPECT_EQ(redact_passwords("bad thing in URI: \"postgresql://u:in@h/db?password=URI\"",
                             "postgresql://u:in@h/db?password=URI"),
            "bad thing in URI: \"postgresql://u:***@h/db?password=***\"");
  // A password with a tab (a URI's is taken as written): hidden before
  // conninfo_error folds the message's blanks.
  EXPECT_EQ(conninfo_error("postgresql://u:a\tb@[::1/db").value_or(""),
            "end of string reached when looking for matching \"]\" in IPv6 host address in URI: "
            "\"postgresql://u:***@[::1/db\"");
  // A %-escaped key may decode to password: its value is hidden too.
  EXPECT_EQ(redact_passwords("x: \"postgres://h/db?pass%77ord=S3cret&sslmode=require\"",
                             "postgres://h/db?pass%77ord=S3cret&sslmode=require"),
            "x: \"postgres://h/db?pass%77ord=***&sslmode=require\"");
}

// A '/' or '@' written raw in a URI's password: libpq reads the rest of
// it as port, host or database, and a connect's message quotes them.
// Those pieces read *** as words, with a hint; a URI libpq reads as meant
// is left alone.
TEST(PgError, RedactPasswordsHidesAMisreadUriPassword) {
  const std::string hint =
      " (the URI's user info ends at its first '@' before a '/': a '/' or '@' in a password is written %2F or %40)";
  EXPECT_EQ(redact_passwords("connect: invalid integer value \"se\" for connection option \"port\"",
                             "postgresql://u:se/cret@h/db"),
            "connect: invalid integer value \"***\" for connection option \"port\"" + hint);
  EXPECT_EQ(redact_passwords("connect: FATAL: database \"cret@h/db\" does not exist",
                             "postgresql://u:5432/cret@h/db"),
            "connect: FATAL: database \"***@h/db\" does not exist" + hint);
  EXPECT_EQ(redact_passwords("connect: could not translate host name \"ss@h\" to address: Name or service not known",
                             "postgres://u:p@ss@h/db"),
            "connect: could not translate host name \"***@h\" to address: Name or service not known" + hint);
  // A piece inside a longer word stays: "se" in "server".
  EXPECT_EQ(redact_passwords("connection to server at \"u\" failed", "postgresql://u:se/x@h"),
            "connection to server at \"u\" failed" + hint);
  // Read as meant: nothing hidden, no hint.
  EXPECT_EQ(redact_passwords("connect: port 5 failed", "postgresql://u:a:b@localhost:5/db"), "connect: port 5 failed");
  EXPECT_EQ(redact_passwords("connect: port 5 failed", "postgresql://localhost:5/db?user=u"),
            "connect: port 5 failed");
  EXPECT_EQ(redact_passwords("connect: port 5 failed", "host=h port=5"), "connect: port 5 failed");
}

// Runs `call` on `io` to its end; its exception is rethrown here.
template <class T>
T run(asio::io_context& io, asio::awaitable<T> call) {
  auto done = asio::co_spawn(io, std::move(call), asio::use_future);
  io.restart();
  io.run();
  return done.get();
}

// The Error `call` throws; nullopt (and a test failure) when it throws none.
template <class T>
std::optional<Error> error_of(asio::io_context& io, asio::awaitable<T> call) {
  try {
    run(io, std::move(call));
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "the call succeeded";
  return std::nullopt;
}

class PgConnection : public ::testing::Test {
 protected:
  void SetUp() override {
    if (test_db().empty()) GTEST_SKIP() << "BGEXEC_TEST_DB is not set";
  }
  std::string pid() { return run(io_, conn_.query("SELECT pg_backend_pid()")).get(0, 0).value_or(""); }

  asio::io_context io_;  // before conn_: outlives it
  Connection conn_{io_.get_executor(), test_db(), "unit"};
};

// A sql step's statement with the wrong number of params: the server's
// 08P01 on a session it keeps open.
TEST_F(PgConnection, WrongParameterCountIsNotLost) {
  auto before = pid();
  auto e = error_of(io_, conn_.query(two_params, {"1"}));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->sqlstate(), "08P01") << e->what();
  EXPECT_FALSE(e->connection_lost()) << e->what();
  EXPECT_EQ(e->classify(), ErrorClass::fatal);
  EXPECT_TRUE(conn_.connected());
  EXPECT_EQ(pid(), before);  // the same session goes on
}

TEST_F(PgConnection, WrongParameterCountInRowsIsNotLost) {  // the sql step's call
  auto before = pid();
  auto e = error_of(io_, conn_.query_rows(two_params, {"1"}, 1 << 20));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->sqlstate(), "08P01") << e->what();
  EXPECT_FALSE(e->connection_lost()) << e->what();
  EXPECT_EQ(pid(), before);
}

TEST_F(PgConnection, ServerErrorIsNotLost) {
  auto e = error_of(io_, conn_.query("SELEC 1"));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->sqlstate(), "42601");
  EXPECT_FALSE(e->connection_lost());
  EXPECT_EQ(e->classify(), ErrorClass::fatal);
}

// 57P01 (FATAL), then the server closes the session: lost, and the next
// call connects again.
TEST_F(PgConnection, SessionTerminatedIsLost) {
  auto before = pid();
  auto e = error_of(io_, conn_.query("SELECT pg_terminate_backend(pg_backend_pid())"));
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->connection_lost()) << e->sqlstate() << " " << e->what();
  EXPECT_EQ(e->classify(), ErrorClass::connection);
  EXPECT_FALSE(conn_.connected());
  EXPECT_NE(pid(), before);
}

// Ends the backend `pid` from another session, and waits until it is gone
// (pg_terminate_backend only signals).
void terminate(const std::string& pid) {
  SyncConnection admin(test_db(), "unit-admin");
  admin.exec("SELECT pg_terminate_backend($1::int)", {pid});
  for (int i = 0; i < 200; ++i) {
    if (admin.exec("SELECT count(*) FROM pg_stat_activity WHERE pid = $1::int", {pid}).get(0, 0) == "0") return;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ADD_FAILURE() << "backend " << pid << " did not exit";
}

// A session the server ended while it sat idle (a script terminating idle
// backends) is opened again before the next call, which is answered: it
// failed before, and the worker logged it and shut its claims.
TEST_F(PgConnection, SessionEndedWhileIdleIsOpenedAgain) {
  conn_.set_reopen_when_ended_idle(true);
  auto before = pid();
  terminate(before);
  auto r = run(io_, conn_.query("SELECT pg_backend_pid()"));
  EXPECT_NE(r.get(0, 0).value_or(""), before);
}

// The same for idle_session_timeout (57P05), which a database may set.
TEST_F(PgConnection, IdleSessionTimeoutIsOpenedAgain) {
  conn_.set_reopen_when_ended_idle(true);
  auto before = pid();
  run(io_, conn_.query("SET idle_session_timeout = 100"));
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  auto r = run(io_, conn_.query("SELECT pg_backend_pid(), current_setting('idle_session_timeout')"));
  EXPECT_NE(r.get(0, 0).value_or(""), before);
  EXPECT_EQ(r.get(0, 1).value_or(""), "0");  // a new session, with the server's setting
}

// In a transaction the session is never replaced: the statement after the
// end must fail, not run outside the transaction (a sql step's COMMIT
// would have reported a rolled-back step as done).
TEST_F(PgConnection, SessionEndedInTransactionFails) {
  conn_.set_reopen_when_ended_idle(true);
  run(io_, conn_.query("BEGIN"));
  terminate(pid());
  auto e = error_of(io_, conn_.query("COMMIT"));
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->connection_lost()) << e->what();
}

// Not asked for (a LISTEN's connection): the call fails, and its caller
// knows to LISTEN again.
TEST_F(PgConnection, SessionEndedWhileIdleFailsUnlessAsked) {
  terminate(pid());
  auto e = error_of(io_, conn_.query("SELECT 1"));
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->connection_lost()) << e->what();
}

// A call of more than 8 MiB, asked for, closes the connection after it,
// outside a transaction: libpq kept its buffers at the largest message's
// size for the session's life.  The result is whole, and the next call
// runs on a new session.
// The gateway's and the CLI's sessions: JIT off at every connect (its
// compile of queue_stats took 1.3 s with 2 000 queues), the server's own
// setting otherwise, and a jit the conninfo's options name is the client's.
TEST_F(PgConnection, JitOffWhenAsked) {
  Connection plain{io_.get_executor(), test_db(), "unit-plain"};
  EXPECT_EQ(run(io_, plain.query("SELECT current_setting('jit')")).get(0, 0).value_or(""), "on");
  conn_.set_jit_off(true);
  EXPECT_EQ(run(io_, conn_.query("SELECT current_setting('jit')")).get(0, 0).value_or(""), "off");
  // and on every connect after
  conn_.set_reopen_when_ended_idle(true);
  terminate(pid());
  EXPECT_EQ(run(io_, conn_.query("SELECT current_setting('jit')")).get(0, 0).value_or(""), "off");
}

TEST_F(PgConnection, JitNamedInOptionsIsKept) {
  Connection named{io_.get_executor(), test_db() + " options='-c jit=on -c jit_above_cost=7'", "unit-jit"};
  named.set_jit_off(true);
  auto r = run(io_, named.query("SELECT current_setting('jit'), current_setting('jit_above_cost')"));
  EXPECT_EQ(r.get(0, 0).value_or(""), "on");
  EXPECT_EQ(r.get(0, 1).value_or(""), "7");
  // jit_above_cost alone does not name jit
  Connection other{io_.get_executor(), test_db() + " options='-c jit_above_cost=7'", "unit-jit2"};
  other.set_jit_off(true);
  EXPECT_EQ(run(io_, other.query("SELECT current_setting('jit')")).get(0, 0).value_or(""), "off");
}

TEST_F(PgConnection, LargeCallClosesTheConnectionWhenAsked) {
  const std::string big = "SELECT repeat('x', 9 * 1024 * 1024) AS big, pg_backend_pid()";
  auto before = pid();
  auto kept = run(io_, conn_.query(big));  // not asked: kept
  EXPECT_EQ(kept.get(0, 1).value_or(""), before);
  EXPECT_TRUE(conn_.connected());
  conn_.set_recycle_after_large_calls(true);
  auto r = run(io_, conn_.query("SELECT 1"));  // small: kept
  EXPECT_TRUE(conn_.connected());
  r = run(io_, conn_.query(big));
  EXPECT_EQ(r.get(0, 0).value_or("").size(), 9u * 1024 * 1024);
  EXPECT_FALSE(conn_.connected());
  EXPECT_NE(pid(), before);
  // Sent, not received: the same.
  run(io_, conn_.query("SELECT length($1)", {std::string(9 * 1024 * 1024, 'y')}));
  EXPECT_FALSE(conn_.connected());
  // Inside a transaction: kept, the transaction goes on.
  run(io_, conn_.query("BEGIN"));
  run(io_, conn_.query(big));
  EXPECT_TRUE(conn_.connected());
  run(io_, conn_.query("COMMIT"));
}

// The call bound (a Deadline) closes the connection under the statement.
TEST_F(PgConnection, UnansweredCallIsLost) {
  conn_.set_call_timeout(std::chrono::milliseconds(200));
  auto e = error_of(io_, conn_.query("SELECT pg_sleep(3)"));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->sqlstate(), "08006");
  EXPECT_TRUE(e->connection_lost()) << e->what();
  EXPECT_FALSE(conn_.connected());
}

// The bound grows with what the call sends (2 s per MiB, past 64 KiB): a statement
// whose server work grows with a large parameter is not cut short and sent
// again for ever.  200 ms, and 2 s more for the 1 MiB sent: a 1 s statement
// is answered; without the parameter it is cut at the bound, which the
// error names.
TEST_F(PgConnection, BoundGrowsWithWhatIsSent) {
  conn_.set_call_timeout(std::chrono::milliseconds(200));
  std::string mib(1 << 20, 'x');
  auto r = run(io_, conn_.query("SELECT length($1), pg_sleep(1)", {mib}));
  EXPECT_EQ(r.get(0, 0), std::to_string(1 << 20));
  auto e = error_of(io_, conn_.query("SELECT pg_sleep(1)"));
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->connection_lost()) << e->what();
  EXPECT_NE(std::string(e->what()).find("did not answer within 0.2"), std::string::npos) << e->what();
}

TEST_F(PgConnection, ConnectFailureIsLost) {
  Connection nowhere(io_.get_executor(), "host=/nonexistent/bgexec-unit dbname=postgres", "unit");
  auto e = error_of(io_, nowhere.query("SELECT 1"));
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->connection_lost()) << e->what();
  EXPECT_EQ(e->classify(), ErrorClass::connection);
  // Never sent: a worker's claim refused so claimed nothing (no unclaim).
  EXPECT_TRUE(e->unsent()) << e->what();
  auto p = error_of(io_, nowhere.query("SELECT 1", {}, /*prepare=*/true));
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->unsent()) << p->what();
}

// A statement that went out is not unsent, whether the server refused it
// or the session was lost under it (a claim whose reply may be what was
// lost).
TEST_F(PgConnection, SentIsNotUnsent) {
  auto e = error_of(io_, conn_.query("SELEC 1"));
  ASSERT_TRUE(e);
  EXPECT_FALSE(e->unsent());
  auto lost = error_of(io_, conn_.query("SELECT pg_terminate_backend(pg_backend_pid())", {}, /*prepare=*/true));
  ASSERT_TRUE(lost);
  EXPECT_TRUE(lost->connection_lost());
  EXPECT_FALSE(lost->unsent()) << lost->what();
  conn_.set_call_timeout(std::chrono::milliseconds(200));
  auto cut = error_of(io_, conn_.query("SELECT pg_sleep(3)"));
  ASSERT_TRUE(cut);
  EXPECT_FALSE(cut->unsent()) << cut->what();
}

// Connection ends the session itself for rows over the cap: the
// statement's error, not a lost connection (a sql step does not retry it).
TEST_F(PgConnection, RowsOverTheCapAreNotLost) {
  auto e = error_of(io_, conn_.query_rows("SELECT repeat('x', 100)", {}, 10));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->sqlstate(), "54000");
  EXPECT_FALSE(e->connection_lost());
  EXPECT_FALSE(conn_.connected());
}

class PgSync : public ::testing::Test {
 protected:
  void SetUp() override {
    if (test_db().empty()) GTEST_SKIP() << "BGEXEC_TEST_DB is not set";
  }
};

TEST_F(PgSync, WrongParameterCountIsNotLost) {
  SyncConnection c(test_db(), "unit");
  try {
    c.exec(two_params, {"1"});
    FAIL() << "the call succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.sqlstate(), "08P01") << e.what();
    EXPECT_FALSE(e.connection_lost());
  }
  EXPECT_EQ(c.scalar("SELECT 1"), "1");
}

TEST_F(PgSync, SessionTerminatedIsLost) {
  SyncConnection c(test_db(), "unit");
  try {
    c.exec("SELECT pg_terminate_backend(pg_backend_pid())");
    FAIL() << "the call succeeded";
  } catch (const Error& e) {
    EXPECT_TRUE(e.connection_lost()) << e.sqlstate() << " " << e.what();
  }
}

TEST_F(PgSync, ConnectFailureIsLost) {
  try {
    SyncConnection c("host=/nonexistent/bgexec-unit dbname=postgres", "unit");
    FAIL() << "connected";
  } catch (const Error& e) {
    EXPECT_TRUE(e.connection_lost()) << e.what();
  }
}

// A session the server refuses names the server's SQLSTATE, as the async
// connect does; libpq's blocking connect kept none (08006 for every failure).
TEST_F(PgSync, RefusedConnectNamesServerSqlstate) {
  try {
    // test_db() is key=value: the last dbname wins.
    SyncConnection c(test_db() + " dbname=bgexec_unit_no_such_db", "unit");
    FAIL() << "connected";
  } catch (const Error& e) {
    EXPECT_TRUE(e.connection_lost()) << e.what();
    EXPECT_EQ(e.sqlstate(), "3D000") << e.what();
  }
}

}  // namespace
}  // namespace bgexec::pg
