// Named limits (definitions.cpp): the rows of ratelimit_definition. Their
// generation, which config_cache.cpp's named entries carry, is catalog.h's.
#pragma once

#include "limit_call.h"

namespace ratelimit_pg {

// The definition of `name`, read with the latest snapshot; false if none.
bool LookupDefinedConfig(text* name, LimitConfig* config);
void UpsertDefinition(text* name, Jsonb* config);
bool DeleteDefinition(text* name);

}  // namespace ratelimit_pg
