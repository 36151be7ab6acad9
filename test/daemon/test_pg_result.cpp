// pg::Result::to_json against a real PostgreSQL (the CTest fixture
// pg_cluster, BGEXEC_TEST_DB; skipped without it): with exact_numbers, the
// numbers of numeric, json, jsonb and float cells are written back by
// core::dump as jsonb stores them (numeric and jsonb: as the server printed
// them); without it, as the doubles a worker reads.
#include <gtest/gtest.h>

#include "core/utf8.hpp"
#include "pg/sync.hpp"
#include "pg_test_db.hpp"

#include <string>

namespace bgexec::pg {
namespace {

class PgResult : public ::testing::Test {
 protected:
  void SetUp() override {
    if (test_db().empty()) GTEST_SKIP() << "BGEXEC_TEST_DB is not set";
  }
};

const std::string cells =
    "SELECT '{\"big\": 123456789012345678901234567890, \"dec\": 0.10000000000000000001,"
    " \"z\": 2.50, \"d\": 0.5, \"i\": -9223372036854775809, \"a\": [1e20, 7, \"s\"]}'::jsonb AS j,"
    " 12345678901234567890.5::numeric AS n, 0.1::float8 AS f, 42::int8 AS i, 'x'::text AS t";

TEST_F(PgResult, ExactNumbersAsStored) {
  SyncConnection c(test_db(), "unit");
  auto r = c.exec(cells);
  EXPECT_EQ(core::dump(r.to_json(true)),
            R"([{"f":0.1,"i":42,"j":{"a":[100000000000000000000,7,"s"],"big":123456789012345678901234567890,)"
            R"("d":0.5,"dec":0.10000000000000000001,"i":-9223372036854775809,"z":2.50},)"
            R"("n":12345678901234567890.5,"t":"x"}])");
  // What a double writes back as it was read stays a number.
  auto row = r.to_json(true)[0];
  EXPECT_TRUE(row["j"]["d"].is_number_float());
  EXPECT_TRUE(row["j"]["a"][1].is_number_integer());
  EXPECT_TRUE(row["f"].is_number_float());
}

// A json cell keeps its text as written, a float8 cell is float8's text;
// exact, their numbers are as jsonb would store them (a sql step's rows are
// stored so, and a re-run reads them back so).  The server's texts:
//   SELECT '{"n": 1e2, "z": -0.0}'::json, 1.5e-7::float8, 1e16::float8;
//   {"n": 1e2, "z": -0.0} | 1.5e-07 | 1e+16
//   SELECT '{"n": 1e2, "z": -0.0}'::jsonb, '1.5e-07'::jsonb, '1e+16'::jsonb;
//   {"n": 100, "z": 0.0} | 0.00000015 | 10000000000000000
TEST_F(PgResult, ExactNumbersAsJsonbStoresThem) {
  SyncConnection c(test_db(), "unit");
  auto r = c.exec("SELECT '{\"n\": 1e2, \"z\": -0.0}'::json AS j, 1.5e-7::float8 AS f, 1e16::float8 AS g");
  EXPECT_EQ(core::dump(r.to_json(true)), R"([{"f":0.00000015,"g":10000000000000000,"j":{"n":100,"z":0.0}}])");
}

TEST_F(PgResult, DoublesByDefault) {
  SyncConnection c(test_db(), "unit");
  auto row = c.exec(cells).to_json()[0];
  EXPECT_TRUE(row["j"]["big"].is_number_float());
  EXPECT_EQ(core::dump(row["j"]["big"]), "1.2345678901234568e+29");
  EXPECT_EQ(core::dump(row["j"]["z"]), "2.5");
}

// A number no double holds (jsonb takes 1e400): the cell is its text, as
// before, with or without exact_numbers.
TEST_F(PgResult, PastADoubleIsText) {
  SyncConnection c(test_db(), "unit");
  auto r = c.exec("SELECT '{\"n\": 1e400}'::jsonb AS j");
  EXPECT_TRUE(r.to_json(true)[0]["j"].is_string());
  EXPECT_TRUE(r.to_json()[0]["j"].is_string());
}

}  // namespace
}  // namespace bgexec::pg
