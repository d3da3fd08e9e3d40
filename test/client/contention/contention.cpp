// The helpers contention.h declares.

#include "contention.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace contention {

std::string TimedLimitSql() {
  return "SELECT r.ok, (extract(epoch FROM a.t0) * 1000000)::int8,"
         " (extract(epoch FROM clock_timestamp()) * 1000000)::int8"
         " FROM (SELECT clock_timestamp() AS t0 OFFSET 0) a"
         " CROSS JOIN LATERAL " +
         Fn("ratelimit_limit") + "($1, CASE WHEN a.t0 IS NULL THEN NULL ELSE $2 END, $3::jsonb) r";
}

std::string PlainLimitSql() { return "SELECT ok FROM " + Fn("ratelimit_limit") + "($1, $2, $3::jsonb)"; }

std::string TokenBucketConfig(double rate, Micros period_ms, double capacity) {
  char buf[160];
  std::snprintf(buf, sizeof buf,
                R"({"kind": "token bucket", "rate": %.17g, "period": %lld, "capacity": %.17g})", rate,
                static_cast<long long>(period_ms), capacity);
  return buf;
}

std::string WindowConfig(const char* kind, double rate, Micros period_ms, const double* capacity,
                         Micros start_ms) {
  char buf[200];
  char cap[48] = "";
  if (capacity != nullptr) std::snprintf(cap, sizeof cap, R"(, "capacity": %.17g)", *capacity);
  std::snprintf(buf, sizeof buf, R"({"kind": "%s", "rate": %.17g, "period": %lld%s, "start": %lld})", kind,
                rate, static_cast<long long>(period_ms), cap, static_cast<long long>(start_ms));
  return buf;
}

Micros FloorDiv(Micros a, Micros b) { return a / b - ((a % b != 0 && a < 0) ? 1 : 0); }

Start TakeStart(pqxx::connection& conn) {
  Micros server = ServerClock(conn);
  return Start{server, Clock::now()};
}

Clock::time_point LocalDeadline(const Start& start, Micros server_deadline) {
  return start.local + std::chrono::microseconds(server_deadline - start.server);
}
double CheckTokenBucketIntervals(const std::vector<Grant>& grants, double capacity, double rate,
                                 Micros period_us) {
  double min_slack = INFINITY;
  std::vector<Micros> ends;
  for (const Grant& first : grants) {
    Micros a = first.t0;
    ends.clear();
    for (const Grant& g : grants)
      if (g.t0 >= a) ends.push_back(g.t1);
    std::sort(ends.begin(), ends.end());
    for (size_t k = 0; k < ends.size(); ++k) {
      double bound = capacity + rate * static_cast<double>(ends[k] - a) / static_cast<double>(period_us);
      double count = static_cast<double>(k + 1);
      EXPECT_LE(count, bound) << "grants certainly within [" << a << ", " << ends[k] << "] us";
      min_slack = std::min(min_slack, bound - count);
      if (count > bound) return min_slack;  // one report is enough
    }
  }
  return min_slack;
}

std::string KindTestName(const ::testing::TestParamInfo<const char*>& info) {
  std::string name = info.param;
  std::replace(name.begin(), name.end(), ' ', '_');
  return name;
}

}  // namespace contention
