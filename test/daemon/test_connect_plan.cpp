// pg::connect_plan: which servers of a connection string Connection::connect
// tries one by one, each with its own bound (test/e2e/79-multihost-connect
// runs it against a hung server), and when libpq takes the string whole.
#include <gtest/gtest.h>

#include "pg/connection.hpp"

#include <map>
#include <string>

namespace bgexec::pg {
namespace {

// connect_plan with this environment instead of the process's.
ConnectPlan plan(const std::string& conninfo, std::map<std::string, std::string> env = {}) {
  return connect_plan(conninfo, [env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(ConnectPlan, EachServerOnItsOwnWithTheOtherOptions) {
  auto p = plan("host=pg1,pg2 port=5432,6432 dbname=app user=u target_session_attrs=read-write connect_timeout=3");
  ASSERT_EQ(p.hosts.size(), 2u);
  EXPECT_EQ(p.hosts[0].host, "pg1");
  EXPECT_EQ(p.hosts[0].port, "5432");
  EXPECT_EQ(p.hosts[1].host, "pg2");
  EXPECT_EQ(p.hosts[1].port, "6432");
  EXPECT_EQ(p.timeout_s, 3);
  std::map<std::string, std::string> options(p.options.begin(), p.options.end());
  EXPECT_EQ(options, (std::map<std::string, std::string>{
                         {"dbname", "app"}, {"user", "u"}, {"target_session_attrs", "read-write"},
                         {"connect_timeout", "3"}}));
}

TEST(ConnectPlan, OnePortServesEveryServerAndUrisToo) {
  auto p = plan("postgresql://u@pg1,pg2:5433/app?connect_timeout=1");
  ASSERT_EQ(p.hosts.size(), 2u);
  EXPECT_EQ(p.hosts[0].port, "");  // a URI's host without a port: libpq's default
  EXPECT_EQ(p.hosts[1].port, "5433");
  EXPECT_EQ(p.timeout_s, 2);  // as libpq: 1 is 2
  auto q = plan("host=a,b,c port=7000");
  ASSERT_EQ(q.hosts.size(), 3u);
  EXPECT_EQ(q.hosts[2].port, "7000");
}

TEST(ConnectPlan, WithoutConnectTimeoutTheServersShareTenSeconds) {
  EXPECT_EQ(plan("host=a,b").timeout_s, 5);
  EXPECT_EQ(plan("host=a,b,c,d,e,f").timeout_s, 2);
  EXPECT_EQ(plan("host=a").timeout_s, 10);
  EXPECT_EQ(plan("host=a connect_timeout=0").timeout_s, 10);  // libpq: no bound; the daemon keeps its own
  EXPECT_EQ(plan("host=a,b", {{"PGCONNECT_TIMEOUT", "4"}}).timeout_s, 4);
}

TEST(ConnectPlan, TheEnvironmentWhereTheStringIsSilent) {
  auto p = plan("dbname=app", {{"PGHOST", "h1,h2"}, {"PGPORT", "1,2"}});
  ASSERT_EQ(p.hosts.size(), 2u);
  EXPECT_EQ(p.hosts[1].host, "h2");
  EXPECT_EQ(p.hosts[1].port, "2");
  EXPECT_EQ(plan("host=only", {{"PGHOST", "h1,h2"}}).hosts.size(), 0u);
  auto bare = plan("app", {{"PGHOST", "h1,h2"}});  // a bare database name
  ASSERT_EQ(bare.hosts.size(), 2u);
  EXPECT_EQ(bare.options, (std::vector<std::pair<std::string, std::string>>{{"dbname", "app"}}));
  auto addrs = plan("hostaddr=10.0.0.1,10.0.0.2 host=a,b");
  ASSERT_EQ(addrs.hosts.size(), 2u);
  EXPECT_EQ(addrs.hosts[1].hostaddr, "10.0.0.2");
  EXPECT_EQ(addrs.hosts[1].host, "b");
}

TEST(ConnectPlan, LibpqTakesTheStringWhole) {
  EXPECT_TRUE(plan("host=pg1 port=5432").hosts.empty());                       // one server
  EXPECT_TRUE(plan("host=pg1,,pg2").hosts.empty());                            // libpq's default for the empty one
  EXPECT_TRUE(plan("host=a,b,c port=1,2").hosts.empty());                      // ports libpq will not pair
  EXPECT_TRUE(plan("host=a,b target_session_attrs=prefer-standby").hosts.empty());  // ranks all at once
  EXPECT_TRUE(plan("host=a,b nosuchkey=1").hosts.empty());                     // libpq says why
  EXPECT_TRUE(plan("").hosts.empty());
}

}  // namespace
}  // namespace bgexec::pg
