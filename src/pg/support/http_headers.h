// HTTP rate-limit headers of an answer (http_headers.cpp), as a JSON
// object text or a jsonb datum; `now` is the clock the answer is read at.
#pragma once

#include "headers.h"
#include "support/limit_call.h"

namespace ratelimit_pg {

ratelimit::HeaderAnswer HeaderAnswerFromDecision(const Decision& decision);
char* HeadersJsonText(const LimitId& id, const LimitConfig& config, const ratelimit::HeaderAnswer& answer,
                      Micros now);
Datum HeadersJsonb(const LimitId& id, const LimitConfig& config, const ratelimit::HeaderAnswer& answer,
                   Micros now);

}  // namespace ratelimit_pg
