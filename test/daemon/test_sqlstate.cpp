#include <gtest/gtest.h>

#include "core/sqlstate.hpp"

namespace bgexec::core {
namespace {

TEST(Sqlstate, ConnectionClass) {
  EXPECT_EQ(classify(""), ErrorClass::connection);
  EXPECT_EQ(classify("08000"), ErrorClass::connection);
  EXPECT_EQ(classify("08006"), ErrorClass::connection);
  EXPECT_EQ(classify("08P01"), ErrorClass::connection);
  EXPECT_EQ(classify("57P01"), ErrorClass::connection);
  EXPECT_EQ(classify("57P02"), ErrorClass::connection);
  EXPECT_EQ(classify("57P03"), ErrorClass::connection);
}

TEST(Sqlstate, RetryClass) {
  EXPECT_EQ(classify("40001"), ErrorClass::retry);
  EXPECT_EQ(classify("40P01"), ErrorClass::retry);
  EXPECT_EQ(classify("55P03"), ErrorClass::retry);
}

TEST(Sqlstate, FatalClass) {
  EXPECT_EQ(classify("42601"), ErrorClass::fatal);  // syntax error
  EXPECT_EQ(classify("42883"), ErrorClass::fatal);  // undefined function
  EXPECT_EQ(classify("22P02"), ErrorClass::fatal);  // invalid text representation
  EXPECT_EQ(classify("23505"), ErrorClass::fatal);  // unique violation
  EXPECT_EQ(classify("2F005"), ErrorClass::fatal);
  EXPECT_EQ(classify("3F000"), ErrorClass::fatal);
  EXPECT_EQ(classify("P0001"), ErrorClass::fatal);  // RAISE EXCEPTION
}

TEST(Sqlstate, OtherClass) {
  EXPECT_EQ(classify("57014"), ErrorClass::other);  // query canceled
  EXPECT_EQ(classify("57P04"), ErrorClass::other);
  EXPECT_EQ(classify("53300"), ErrorClass::other);  // too many connections
  EXPECT_EQ(classify("40002"), ErrorClass::other);
  EXPECT_EQ(classify("P0002"), ErrorClass::other);
  EXPECT_EQ(classify("XX000"), ErrorClass::other);
  EXPECT_EQ(classify("0800"), ErrorClass::other);  // malformed: not five chars
  EXPECT_EQ(classify("4200"), ErrorClass::other);
}

TEST(Sqlstate, CaseInsensitive) {
  EXPECT_EQ(classify("40p01"), ErrorClass::retry);
  EXPECT_EQ(classify("57p01"), ErrorClass::connection);
  EXPECT_EQ(classify("2f005"), ErrorClass::fatal);
}

TEST(Sqlstate, Describe) {
  EXPECT_EQ(describe(ErrorClass::connection), "connection");
  EXPECT_EQ(describe(ErrorClass::retry), "retry");
  EXPECT_EQ(describe(ErrorClass::fatal), "fatal");
  EXPECT_EQ(describe(ErrorClass::other), "other");
}

}  // namespace
}  // namespace bgexec::core
