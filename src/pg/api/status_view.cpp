// The ratelimit_status view's rows: every stored row of every storage, with
// its kind and value now under the config calls apply to it.
#include "api/status_view.h"

#include "api/fn_args.h"
#include "config/config_cache.h"
#include "policy.h"
#include "shards.h"
#include "storage/row_codec.h"
#include "storage/storage.h"
#include "support/clock.h"

extern "C" {
#include "utils/builtins.h"
#include "utils/timestamp.h"
}

namespace ratelimit_pg {
namespace {

// What ratelimit_status shows of one row: its kind and value now under the
// key's override, else the limit's defined config (NULL for a limit called
// with inline configs only).
struct StatusContext {
  Tuplestorestate* store;
  TupleDesc desc;
  Micros now;
  Datum kind_names[ratelimit::kMaxKinds];  // by KindId, made once per scan
  Datum storage_name;                      // of the storage being scanned
};

void PutStatusRow(const KeyedRow& row, void* context) {
  auto* status = static_cast<StatusContext*>(context);
  // 0.5.0's view has 8 columns, 0.6.0's a 9th: storage.
  Datum values[9];
  bool nulls[9] = {false, row.id.key_text == nullptr, false, true, true, false,
                   false, !row.stored.has_idle_at,    false};
  values[0] = PointerGetDatum(row.id.name_text);
  values[1] = PointerGetDatum(row.id.key_text);
  values[2] = Int16GetDatum(static_cast<int16>(row.id.shard));
  LimitSettings config;
  if (AppliedOwnerConfig(row.id, &config)) {
    LimitConfig per_row = ratelimit::RowConfig(config);
    Micros origin = ratelimit::WindowOrigin(config, row.id.name, row.id.name_len, row.id.key, row.id.key_len);
    values[3] = status->kind_names[static_cast<int>(config.kind)];
    // A row kept with its period off the config's window grid reads as a call would read it (realigned).
    LimitState state = ratelimit::WithinMaxDeficit(
        per_row, ratelimit::Realigned(per_row, origin, StateForKind(row.stored, config.kind, status->now),
                                      row.stored.period, status->now));
    values[4] = Float8GetDatum(ratelimit::ValueAt(per_row, state, status->now, origin).value + 0.0);
    nulls[3] = nulls[4] = false;
  }
  values[5] = TimestampTzGetDatum(TimestamptzFromUnix(row.stored.state.ts));
  values[6] = Float8GetDatum(row.stored.state.value);
  values[7] = TimestampTzGetDatum(TimestamptzFromUnix(row.stored.idle_at));
  values[8] = status->storage_name;
  tuplestore_putvalues(status->store, status->desc, values, nulls);
}

}  // namespace

Datum StatusRows(FunctionCallInfo fcinfo) {
  StatusContext status{};
  status.store = MaterializedResult(fcinfo, &status.desc);
  status.now = ClockNow();
  for (int i = 0; i < ratelimit::KindCount(); ++i)
    status.kind_names[i] = CStringGetTextDatum(ratelimit::KindName(ratelimit::KindAt(i)));
  Oid previous_sql_role = EnterCallContext(fcinfo);
  const Storage* const* storages = nullptr;
  for (int i = 0, n = AllStorages(&storages); i < n; ++i) {
    status.storage_name = CStringGetTextDatum(storages[i]->name);
    storages[i]->scan_status(PutStatusRow, &status);
  }
  LeaveCallContext(previous_sql_role);
  return static_cast<Datum>(0);
}

}  // namespace ratelimit_pg
