// What the decision paths (consume.cpp, consume_sharded.cpp,
// consume_all.cpp) share (decide.cpp): the state a call decides on,
// reading and locking through the call's storage, and the rows a call
// creates. Internal to the consume*.cpp files.
//
// Lock order: rows are locked in (name, key, shard) byte order, and a call
// only ever waits for a row that sorts after every row it already holds, so
// calls of this extension cannot deadlock each other.
#pragma once

#include "shards.h"
#include "storage/storage.h"

extern "C" {
#include "common/pg_prng.h"
}

namespace ratelimit_pg {

// A uniform random number in [0, 1) from PostgreSQL's PRNG.
inline double RandomUnit() { return pg_prng_double(&pg_global_prng_state); }

// How a step that may have waited ended: decided, or the call's config
// changed meanwhile (it was completed again: the call starts over), or a
// row vanished under its lock (decide again).
enum class Outcome { kDone, kRestart };

// Row `shard` of the call's limit.
LimitId ShardId(const LimitId& id, int shard);
// The row to write for a state under the call's config, its kind tagged.
RowWrite WriteOf(const LimitCall& call, const LimitState& next, Micros idle_at);
// The row a never-used row of `config` is created as: its initial state,
// idle at once (the same as no row at all, so nothing observable is written).
RowWrite InitialRow(const LimitConfig& config, Micros origin);

// The state a call decides on: StateForKind's, and under a config of the
// owner's no deficit deeper than that config allows.
LimitState LiveFor(const LimitCall& call, const StoredState& stored, Micros now);
// Decides on one row at the clock now.
Decision DecideNow(const LimitCall& call, const StoredState& stored);
// Decides on one or two shards at the clock now.
ratelimit::ShardDecision DecideShardsNow(const LimitCall& call, const ratelimit::ShardInput* inputs,
                                         int count);

// Reads a row under its lock (FOR UPDATE). A row another transaction holds
// counts as a lock wait (ratelimit_stats) before this call waits for it.
StoredState LockRowCountingWait(const LimitCall& call);
// lock_or_create of row `id` of the call's limit, counting a lock wait
// when it has to wait.
bool LockOrCreateCountingWait(const LimitCall& call, const LimitId& id, const RowWrite& initial,
                              bool announce, StoredState* out);
// Reads one shard row without a lock (no row: its initial state); stored
// (may be nullptr) receives the row as read.
void ReadShard(const LimitCall& call, int shard, ratelimit::ShardInput* out, StoredState* stored = nullptr);
// Every shard's row (shard i at index i), palloc'd; a row another
// algorithm wrote reads as no row.
ratelimit::ShardInput* ReadDenseShards(const LimitCall& call, bool lock);

static_assert(std::is_trivially_destructible_v<ratelimit::ShardInput>);
static_assert(std::is_trivially_destructible_v<ratelimit::ShardDecision>);

}  // namespace ratelimit_pg
