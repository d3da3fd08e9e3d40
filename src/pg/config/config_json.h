// Configs as jsonb (config_json.cpp): a jsonb config to a LimitSettings
// (the core's config and the storage options), errors naming the field.
#pragma once

#include "support/limit_call.h"

namespace ratelimit_pg {

void ParseConfigJsonb(Jsonb* config, LimitSettings* out);
// A jsonb number as a double (overflow gives +-inf, rejected by validation).
double JsonbNumberToDouble(const JsonbValue& value);

}  // namespace ratelimit_pg
