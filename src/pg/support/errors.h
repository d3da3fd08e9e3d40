// Errors (errors.cpp): core Status and rate-limit refusals as PostgreSQL
// errors, in the form ratelimit.error_format chooses (plain PT429, or
// PostgREST's PGRST), and how much of a value a message may quote.
#pragma once

#include "support/limit_call.h"

namespace ratelimit_pg {

// How many of the `len` bytes at `bytes` (in the database encoding) an
// error message quotes: at most kMaxEchoBytes, cut at a character boundary
// so the message stays valid in any client encoding.
int EchoLength(const char* bytes, int len);

void DefineErrorFormatGuc();
void RaiseIfInvalid(const ratelimit::Status& status);
void RaiseRateLimited(const LimitCall& call, const Decision& decision);

}  // namespace ratelimit_pg
