// HTTP rate-limit headers as JSON: the text form of the core's header
// numbers (headers.h), for ratelimit_headers() and PostgREST errors.
#include "headers.h"

#include "support/http_headers.h"

extern "C" {
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
}

namespace ratelimit_pg {
namespace {

// Appends a limit name as a structured-field string (RFC 8941): quoted, with
// \ and " escaped; bytes a header cannot carry (controls, non-ASCII) become '_'.
void AppendStructuredString(StringInfo buf, const char* bytes, int len) {
  appendStringInfoChar(buf, '"');
  for (int i = 0; i < len; ++i) {
    auto c = static_cast<unsigned char>(bytes[i]);
    if (c == '"' || c == '\\') appendStringInfoChar(buf, '\\');
    appendStringInfoChar(buf, c >= 0x20 && c <= 0x7e ? static_cast<char>(c) : '_');
  }
  appendStringInfoChar(buf, '"');
}

// Appends "name": "value" (value given as a C string) to a JSON object.
void AppendHeader(StringInfo buf, const char* name, const char* value, bool* first) {
  if (!*first) appendStringInfoString(buf, ", ");
  *first = false;
  escape_json(buf, name);
  appendStringInfoString(buf, ": ");
  escape_json(buf, value);
}

void AppendIntegerHeader(StringInfo buf, const char* name, std::int64_t value, bool* first) {
  char text[32];
  snprintf(text, sizeof text, "%lld", static_cast<long long>(value));
  AppendHeader(buf, name, text, first);
}

}  // namespace

char* HeadersJsonText(const LimitId& id, const LimitConfig& config, const ratelimit::HeaderAnswer& answer,
                      Micros now) {
  ratelimit::HeaderNumbers h = ratelimit::ComputeHeaderNumbers(config, answer, now);
  StringInfoData policy;
  initStringInfo(&policy);
  AppendStructuredString(&policy, id.name, id.name_len);
  StringInfoData state;
  initStringInfo(&state);
  appendBinaryStringInfo(&state, policy.data, policy.len);
  appendStringInfo(&policy, ";q=%lld;w=%lld", static_cast<long long>(h.quota),
                   static_cast<long long>(h.window));
  appendStringInfo(&state, ";r=%lld;t=%lld", static_cast<long long>(h.remaining),
                   static_cast<long long>(h.reset_seconds));

  StringInfoData buf;
  initStringInfo(&buf);
  bool first = true;
  appendStringInfoChar(&buf, '{');
  AppendHeader(&buf, "RateLimit-Policy", policy.data, &first);
  AppendHeader(&buf, "RateLimit", state.data, &first);
  if (h.has_retry_after) AppendIntegerHeader(&buf, "Retry-After", h.retry_after, &first);
  AppendIntegerHeader(&buf, "X-RateLimit-Limit", h.limit, &first);
  AppendIntegerHeader(&buf, "X-RateLimit-Remaining", h.remaining, &first);
  AppendIntegerHeader(&buf, "X-RateLimit-Reset", h.reset_epoch, &first);
  appendStringInfoChar(&buf, '}');
  pfree(policy.data);
  pfree(state.data);
  return buf.data;
}

Datum HeadersJsonb(const LimitId& id, const LimitConfig& config, const ratelimit::HeaderAnswer& answer,
                   Micros now) {
  return DirectFunctionCall1(jsonb_in, CStringGetDatum(HeadersJsonText(id, config, answer, now)));
}

ratelimit::HeaderAnswer HeaderAnswerFromDecision(const Decision& decision) {
  ratelimit::HeaderAnswer answer;
  answer.ok = decision.ok;
  answer.has_retry = decision.has_retry;
  answer.retry_after = decision.retry_after;
  answer.has_retry_at = decision.has_retry;
  answer.retry_at = decision.retry_at;
  answer.remaining = decision.remaining;
  answer.reset_after = decision.reset_after;
  return answer;
}

}  // namespace ratelimit_pg
