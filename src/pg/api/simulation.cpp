// ratelimit_simulate(config, arrivals, counts, name, key): reads the
// arrays, has the core decide every arrival (simulate.h) and returns the
// answers as rows. The config is read as ratelimit_limit reads an inline
// config (same errors); nothing else is read or written.
#include "api/simulation.h"

#include "api/fn_args.h"
#include "config/config_cache.h"
#include "support/clock.h"
#include "support/errors.h"

extern "C" {
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
}

namespace ratelimit_pg {
namespace {

using ratelimit::Arrival;

constexpr int kConfigArg = 0;
constexpr int kArrivalsArg = 1;
constexpr int kCountsArg = 2;
constexpr int kNameArg = 3;
constexpr int kKeyArg = 4;

// The elements of a one-dimensional float8 or timestamptz array argument
// (both 8 bytes, by value); 42804 for an array of another element type
// (never read as this one), 22004 for a NULL element, 22023 for more than
// one dimension or more elements than a simulation takes.
int ArrayElements(FunctionCallInfo fcinfo, int arg, Oid type, const char* what, Datum** out) {
  ArrayType* array = PG_GETARG_ARRAYTYPE_P(arg);
  if (ARR_ELEMTYPE(array) != type)
    ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
                    errmsg("%s must be an array of %s, not of %s", what, format_type_be(type),
                           format_type_be(ARR_ELEMTYPE(array)))));
  if (ARR_NDIM(array) > 1)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s must be one-dimensional", what)));
  int n = ArrayGetNItems(ARR_NDIM(array), ARR_DIMS(array));
  if (static_cast<std::size_t>(n) > ratelimit::kMaxArrivals)
    ereport(ERROR,
            (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
             errmsg("%s has %d elements; a simulation takes at most %zu", what, n, ratelimit::kMaxArrivals)));
  bool* nulls = nullptr;
  int count = 0;
  deconstruct_array(array, type, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, out, &nulls, &count);
  for (int i = 0; i < count; ++i)
    if (nulls[i])
      ereport(ERROR,
              (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("%s[%d] must not be null", what, i + 1)));
  return count;
}

// The arrivals with their counts (1 each when counts is NULL); 22023 for an
// arrival outside the clock's range or counts of another length.
int ArrivalsFromArgs(FunctionCallInfo fcinfo, Arrival** out) {
  Datum* times = nullptr;
  int n = ArrayElements(fcinfo, kArrivalsArg, TIMESTAMPTZOID, "arrivals", &times);
  Datum* counts = nullptr;
  if (!PG_ARGISNULL(kCountsArg) && ArrayElements(fcinfo, kCountsArg, FLOAT8OID, "counts", &counts) != n)
    ereport(ERROR,
            (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("counts must have one element per arrival"),
             errdetail("There are %d arrivals.", n)));
  auto* arrivals = static_cast<Arrival*>(palloc0(sizeof(Arrival) * (n + 1)));
  for (int i = 0; i < n; ++i) {
    TimestampTz at = DatumGetTimestampTz(times[i]);
    if (!TimestamptzSupported(at))
      ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("arrivals[%d] is out of range", i + 1),
                      errdetail("An arrival must be a timestamptz from 0001-01-01 to 100000-01-01, as "
                                "ratelimit.now must.")));
    arrivals[i].at = UnixFromTimestamptz(at);
    arrivals[i].count = counts == nullptr ? 1 : DatumGetFloat8(counts[i]) + 0.0;  // + 0.0: -0 is 0
  }
  *out = arrivals;
  return n;
}

// The window origin ratelimit_limit(name, key) would use; without a name
// the config's start, else the Unix epoch (windows on whole periods).
// ratelimit_simulate(config, arrivals, counts) has no name or key.
Micros OriginFromArgs(FunctionCallInfo fcinfo, const LimitConfig& config) {
  if (PG_NARGS() <= kKeyArg || PG_ARGISNULL(kNameArg)) {
    if (PG_NARGS() > kKeyArg && !PG_ARGISNULL(kKeyArg))
      ereport(ERROR,
              (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("name must not be null when key is given"),
               errdetail("A key aligns windows as ratelimit_limit(name, key) does, which needs a name.")));
    if (config.has_start) return ratelimit::WindowOrigin(config, "", 0, nullptr, 0);
    return 0;
  }
  LimitId id = IdFromArgs(fcinfo, kNameArg, kKeyArg);
  return ratelimit::WindowOrigin(config, id.name, id.name_len, id.key, id.key_len);
}

// Raises a core error about arrival `index` (of n), naming it.
void RaiseForArrival(const ratelimit::Status& status, std::size_t index, int n) {
  if (status.ok()) return;
  ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s", status.message),
                  status.detail[0] ? errdetail("%s", status.detail) : 0,
                  errcontext("arrival %zu of %d", index + 1, n)));
}

}  // namespace

void EncodeSimulated(const Arrival& arrival, const Decision& decision, Datum* values, bool* nulls) {
  values[0] = TimestampTzGetDatum(TimestamptzFromUnix(arrival.at));
  values[1] = Float8GetDatum(arrival.count);
  values[2] = BoolGetDatum(decision.ok);
  values[3] = Float8GetDatum(decision.remaining + 0.0);
  values[4] = Float8GetDatum(decision.retry_after);
  nulls[0] = nulls[1] = nulls[2] = nulls[3] = false;
  nulls[4] = !decision.has_retry;
}

int SimulateFromArgs(FunctionCallInfo fcinfo, Arrival** arrivals_out, Decision** decisions_out) {
  RequireNotNull(fcinfo, kConfigArg, "config");
  RequireNotNull(fcinfo, kArrivalsArg, "arrivals");
  LimitSettings config;
  InlineConfig(PG_GETARG_JSONB_P(kConfigArg), &config);
  ApplyStorageRules(&config);
  RaiseIfInvalid(ratelimit::ValidateSimulatedConfig(config));
  Micros origin = OriginFromArgs(fcinfo, config);
  Arrival* arrivals = nullptr;
  int n = ArrivalsFromArgs(fcinfo, &arrivals);
  std::size_t failed = 0;
  ratelimit::Status status = ratelimit::ValidateArrivals(config, arrivals, n, &failed);
  RaiseForArrival(status, failed, n);
  auto* decisions = static_cast<Decision*>(palloc0(sizeof(Decision) * (n + 1)));
  ratelimit::Simulate(config, origin, arrivals, n, decisions);
  *arrivals_out = arrivals;
  *decisions_out = decisions;
  return n;
}

Datum SimulateLimit(FunctionCallInfo fcinfo) {
  Arrival* arrivals = nullptr;
  Decision* decisions = nullptr;
  int n = SimulateFromArgs(fcinfo, &arrivals, &decisions);
  TupleDesc desc;
  Tuplestorestate* store = MaterializedResult(fcinfo, &desc);
  Datum values[kSimulatedColumns];
  bool nulls[kSimulatedColumns];
  for (int i = 0; i < n; ++i) {
    EncodeSimulated(arrivals[i], decisions[i], values, nulls);
    tuplestore_putvalues(store, desc, values, nulls);
  }
  return static_cast<Datum>(0);
}

}  // namespace ratelimit_pg
