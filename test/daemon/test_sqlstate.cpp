#include <gtest/gtest.h>

#include "core/sqlstate.hpp"

namespace bgexec::core {
namespace {

constexpr bool lost = true, live = false;  // the session, when the error came

TEST(Sqlstate, ConnectionClassIsALostSession) {
  EXPECT_EQ(classify("", lost), ErrorClass::connection);
  EXPECT_EQ(classify("08000", lost), ErrorClass::connection);
  EXPECT_EQ(classify("08003", lost), ErrorClass::connection);
  EXPECT_EQ(classify("08006", lost), ErrorClass::connection);
  EXPECT_EQ(classify("08P01", lost), ErrorClass::connection);  // FATAL: the server closed it
  EXPECT_EQ(classify("57P01", lost), ErrorClass::connection);
  EXPECT_EQ(classify("57P02", lost), ErrorClass::connection);
  EXPECT_EQ(classify("57P03", lost), ErrorClass::connection);
  // Whatever the state: the call has to be made again on a new session.
  EXPECT_EQ(classify("25P03", lost), ErrorClass::connection);  // idle_in_transaction_session_timeout
  EXPECT_EQ(classify("42601", lost), ErrorClass::connection);
  EXPECT_EQ(classify("40001", lost), ErrorClass::connection);
}

// The server answers these on a session that stays open: no reconnect.
TEST(Sqlstate, Class08OnALiveSessionIsNotConnection) {
  // "bind message supplies 1 parameters, but prepared statement requires 2":
  // the statement's own error, the same on every attempt.
  EXPECT_EQ(classify("08P01", live), ErrorClass::fatal);
  EXPECT_EQ(classify("08p01", live), ErrorClass::fatal);
  // dblink_connect's error about the connection it could not make.
  EXPECT_EQ(classify("08001", live), ErrorClass::other);
  EXPECT_EQ(classify("08000", live), ErrorClass::other);
  EXPECT_EQ(classify("08006", live), ErrorClass::other);
  // Sent as FATAL before the server closes the session (then lost, above).
  EXPECT_EQ(classify("57P01", live), ErrorClass::other);
  EXPECT_EQ(classify("", live), ErrorClass::other);
}

TEST(Sqlstate, RetryClass) {
  EXPECT_EQ(classify("40001", live), ErrorClass::retry);
  EXPECT_EQ(classify("40P01", live), ErrorClass::retry);
  EXPECT_EQ(classify("55P03", live), ErrorClass::retry);
}

TEST(Sqlstate, FatalClass) {
  EXPECT_EQ(classify("42601", live), ErrorClass::fatal);  // syntax error
  EXPECT_EQ(classify("42883", live), ErrorClass::fatal);  // undefined function
  EXPECT_EQ(classify("22P02", live), ErrorClass::fatal);  // invalid text representation
  EXPECT_EQ(classify("23505", live), ErrorClass::fatal);  // unique violation
  EXPECT_EQ(classify("2F005", live), ErrorClass::fatal);
  EXPECT_EQ(classify("3F000", live), ErrorClass::fatal);
  EXPECT_EQ(classify("P0001", live), ErrorClass::fatal);  // RAISE EXCEPTION
}

TEST(Sqlstate, OtherClass) {
  EXPECT_EQ(classify("57014", live), ErrorClass::other);  // query canceled
  EXPECT_EQ(classify("57P04", live), ErrorClass::other);
  EXPECT_EQ(classify("53300", live), ErrorClass::other);  // too many connections
  EXPECT_EQ(classify("54000", live), ErrorClass::other);  // a sql step's rows over the cap
  EXPECT_EQ(classify("0A000", live), ErrorClass::other);  // COPY refused
  EXPECT_EQ(classify("40002", live), ErrorClass::other);
  EXPECT_EQ(classify("P0002", live), ErrorClass::other);
  EXPECT_EQ(classify("XX000", live), ErrorClass::other);
  EXPECT_EQ(classify("0800", live), ErrorClass::other);  // malformed: not five chars
  EXPECT_EQ(classify("4200", live), ErrorClass::other);
}

// Made again by the worker's own writes while the lease lasts, as after a
// lost connection: a cancelled statement (pg_cancel_backend, a
// statement_timeout) and class 53; not the other class 57 codes, nor a
// program limit (54), nor anything else.
TEST(Sqlstate, Transient) {
  EXPECT_TRUE(transient("57014"));
  EXPECT_TRUE(transient("53300"));  // too many connections
  EXPECT_TRUE(transient("53200"));  // out of memory
  EXPECT_TRUE(transient("53100"));  // disk full
  EXPECT_FALSE(transient("57P04"));
  EXPECT_FALSE(transient("54000"));
  EXPECT_FALSE(transient("22P02"));
  EXPECT_FALSE(transient("40001"));  // retry class, said by classify
  EXPECT_FALSE(transient("5330"));   // malformed
  EXPECT_FALSE(transient(""));
}

TEST(Sqlstate, CaseInsensitive) {
  EXPECT_EQ(classify("40p01", live), ErrorClass::retry);
  EXPECT_EQ(classify("2f005", live), ErrorClass::fatal);
}

TEST(Sqlstate, Describe) {
  EXPECT_EQ(describe(ErrorClass::connection), "connection");
  EXPECT_EQ(describe(ErrorClass::retry), "retry");
  EXPECT_EQ(describe(ErrorClass::fatal), "fatal");
  EXPECT_EQ(describe(ErrorClass::other), "other");
}

}  // namespace
}  // namespace bgexec::core
