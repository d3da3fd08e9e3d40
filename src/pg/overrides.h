// Per-key overrides (overrides.cpp): the rows of ratelimit_override and the
// per-backend caches that make a name without any override cost one hash
// lookup. Their generation is catalog.h's.
#pragma once

#include "limit_call.h"

namespace ratelimit_pg {

// The key's override, if it has one (cached).
bool LookupOverride(const LimitId& id, LimitConfig* out);
// The stored override config of (name, key), read now; nullptr if none.
Jsonb* ReadOverrideConfig(text* name, text* key);
void UpsertOverride(text* name, text* key, Jsonb* config);
bool DeleteOverride(text* name, text* key);

}  // namespace ratelimit_pg
