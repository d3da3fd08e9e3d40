// The owner's config rows (config_rows.cpp): named limits, the rows of
// ratelimit_definition; and per-key overrides, the rows of ratelimit_override,
// with the per-backend caches that make a name without any override cost one
// hash lookup. Their generations are catalog.h's.
#pragma once

#include "support/limit_call.h"
#include "support/spi_connection.h"

namespace ratelimit_pg {

// The definition of `name`, read with the latest snapshot; false if none.
bool LookupDefinedConfig(text* name, LimitSettings* config);
void UpsertDefinition(text* name, Jsonb* config);
bool DeleteDefinition(text* name);

// The key's override, if it has one (cached). spi: the call's connection,
// asked for before a table is read (nullptr: connected).
bool LookupOverride(const LimitId& id, LimitSettings* out, SpiConnection* spi = nullptr);
// The stored override config of (name, key), read now; nullptr if none.
Jsonb* ReadOverrideConfig(text* name, text* key);
void UpsertOverride(text* name, text* key, Jsonb* config);
bool DeleteOverride(text* name, text* key);

}  // namespace ratelimit_pg
