// Sharded limits: one limit spread over N rows, each holding 1/N of the
// rate, capacity and maxReserved. A call picks two shards at random and uses
// the one with more tokens (the power of two choices); when neither alone
// has enough but both together do, it takes from both so they end balanced.
#pragma once

#include "core_guard.h"
#include "limiter.h"

namespace ratelimit {

// The config of one shard: rate, capacity and maxReserved divided by N.
LimitConfig ShardConfig(const LimitConfig& config) noexcept;

// The config one stored row of `config` holds: a shard's share
// (ShardConfig) when the limit is sharded, else the config itself.
LimitConfig RowConfig(const LimitConfig& config) noexcept;

// Whether two full shards of a sharded limit could ever grant the request
// (the same test a call makes).
bool ShardsCanEverGrant(const LimitConfig& config, const Request& request) noexcept;

// Two distinct shards in [0, shards), ascending, from two uniform numbers in
// [0, 1). With one shard both are 0.
void PickCandidates(int shards, double unit1, double unit2, int out[2]) noexcept;

// One shard row as input to a sharded decision.
struct ShardInput {
  int shard = 0;
  LimitState state;
};

// What a decision does to one shard row: store `next` (idle from full_at).
struct ShardWrite {
  bool write = false;
  LimitState next;
  Micros full_at = 0;
};

// A sharded decision: the answer, and the writes to the input shards.
struct ShardDecision {
  Decision summary;  // remaining: estimated over all shards from the inputs
  int count = 0;     // number of inputs
  ShardWrite writes[2];
};

// Decides a request over one or two shards of a sharded limit.
// shard_config = ShardConfig(config); total_shards scales `remaining`.
ShardDecision DecideShards(const LimitConfig& shard_config, const ShardInput* inputs, int count, Micros now,
                           Micros origin, const Request& request, int total_shards) noexcept;

// The tokens of all shards estimated from the candidates a call looked at:
// their average at `now`, times the number of shards.
double EstimatedTotal(const LimitConfig& shard_config, const ShardInput* observed, int count,
                      int total_shards, Micros now, Micros origin) noexcept;

// A refusal for a call whose second shard is held by another transaction
// and that may not wait for it (lock order): retry at once, 1 µs later,
// unless the decision itself already says when.
Decision ContendedRefusal(const Decision& decision, Micros now) noexcept;

// The tokens available now summed over all shards. all[i] is shard i
// (state.exists false: no row, so full). ts as ValueAt reports it.
Reading TotalValueAt(const LimitConfig& shard_config, const ShardInput* all, int total_shards, Micros now,
                     Micros origin) noexcept;

// What ratelimit_check answers for a sharded limit: the decision of the two
// shards with the most tokens (the best a call could draw), with remaining
// the exact total over all shards. all[i] is shard i, as above.
Decision CheckShards(const LimitConfig& shard_config, const ShardInput* all, int total_shards, Micros now,
                     Micros origin, const Request& request) noexcept;

// Plans a refund over all shards: the emptiest get tokens first, each capped
// at its capacity. inputs[i].state is shard i's row (exists=false: none).
// Fills out[0..count) and returns the summary (remaining: the new total).
Decision RefundShards(const LimitConfig& shard_config, const ShardInput* inputs, int count, Micros now,
                      Micros origin, double amount, ShardWrite* out) noexcept;

}  // namespace ratelimit
