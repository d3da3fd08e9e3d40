// A call's config (config_cache.cpp): parsed configs cached per backend
// (inline by their bytes, named by name until the definitions generation
// moves), and resolution: override, inline, definition.
#pragma once

#include "support/limit_call.h"
#include "support/spi_connection.h"

namespace ratelimit_pg {

// An inline config, parsed or cached. spi (here and below): the call's SPI
// connection, asked for (NeedSpi) before anything that may run SQL, read
// the catalog or allocate (a parse, a table read); nullptr: connected.
void InlineConfig(Jsonb* config, LimitSettings* out, SpiConnection* spi = nullptr);
// A resolved config as calls decide it: a storage that does not keep shards
// (Storage::keeps_shards) keeps one row per limit, decided exactly, so its
// shards are accepted and ignored (1).
void ApplyStorageRules(LimitSettings* config);

// A call's config: the key's override, else the inline config (for a
// defined name only the same limit as the definition: 22023), else the
// definition (42704 if there is none). Fresh as of the invalidations the
// call accepts first; a storage that locks the config tables
// (Storage::locks_config_tables) holds them locked from here to the
// transaction's end.
void ResolveConfig(LimitCall* call, SpiConnection* spi = nullptr);
// The owner's config of a limit, as calls apply it before OwnerBounded:
// the key's override, else the definition (cached, after the config tables'
// locks, as ResolveConfig); false when it has neither.
bool OwnerConfigOf(const LimitId& id, LimitSettings* out);
// The owner's config as calls without a config of their own apply it
// (OwnerConfigOf, bounded and shaped as ResolveConfig does); false when it
// has neither. What ratelimit_status reads every storage's rows under.
bool AppliedOwnerConfig(const LimitId& id, LimitSettings* out);
// ResolveConfig, then the request validated against the config (22023) and
// the window origin derived.
void CompleteLimitCall(LimitCall* call, SpiConnection* spi = nullptr);
// After a wait for a lock: whether another session's committed change of a
// definition or override changed the call's config; if so, completes the
// call again under the config now in force (true).
bool RefreshConfig(LimitCall* call);

}  // namespace ratelimit_pg
