// Core statuses and refusals turned into PostgreSQL errors.
#include "support/errors.h"

#include "support/clock.h"
#include "support/http_headers.h"

extern "C" {
#include "catalog/pg_type.h"
#include "common/shortest_dec.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/datetime.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/timestamp.h"
}

namespace ratelimit_pg {
namespace {

// Appends "name": to a JSON object under construction.
void AppendJsonKey(StringInfo buf, const char* name, bool first) {
  if (!first) appendStringInfoString(buf, ", ");
  escape_json(buf, name);
  appendStringInfoString(buf, ": ");
}

// Appends a text value (or null) as a JSON string.
void AppendJsonText(StringInfo buf, const char* bytes, int len) {
  if (bytes == nullptr) {
    appendStringInfoString(buf, "null");
    return;
  }
  char* copy = pnstrdup(bytes, len);
  escape_json(buf, copy);
  pfree(copy);
}

// A number as its shortest exact text, whatever the session's
// extra_float_digits (float8out's text at its default): what a refusal
// tells a client, and a router relays as text, never depends on a setting.
char* ExactNumberText(double value) {
  auto* text = static_cast<char*>(palloc(DOUBLE_SHORTEST_DECIMAL_LEN));
  double_to_shortest_decimal_buf(value, text);
  return text;
}

// An instant as ISO 8601 in UTC ("2026-01-01T00:00:01+00:00"), whatever the
// session's TimeZone.
void AppendUtcInstant(StringInfo buf, Micros at) {
  static const int kUtc = 0;
  char iso[MAXDATELEN + 1];
  JsonEncodeDateTime(iso, TimestampTzGetDatum(TimestamptzFromUnix(at)), TIMESTAMPTZOID, &kUtc);
  escape_json(buf, iso);
}

// The DETAIL of a PT429 error: a JSON object a client can parse, the same
// text in every session.
char* RefusalDetailJson(const LimitId& id, const Decision& decision) {
  StringInfoData buf;
  initStringInfo(&buf);
  appendStringInfoChar(&buf, '{');
  AppendJsonKey(&buf, "name", true);
  AppendJsonText(&buf, id.name, id.name_len);
  AppendJsonKey(&buf, "key", false);
  AppendJsonText(&buf, id.key, id.key_len);
  AppendJsonKey(&buf, "retry_after", false);
  appendStringInfoString(&buf, ExactNumberText(decision.retry_after));
  AppendJsonKey(&buf, "retry_at", false);
  AppendUtcInstant(&buf, decision.retry_at);
  AppendJsonKey(&buf, "remaining", false);
  appendStringInfoString(&buf, ExactNumberText(decision.remaining));
  appendStringInfoChar(&buf, '}');
  return buf.data;
}

// The name in double quotes, with " and \ escaped (as the headers quote it),
// so a name containing a quote cannot end the quoted name early.
char* QuotedName(const LimitId& id) {
  StringInfoData buf;
  initStringInfo(&buf);
  appendStringInfoChar(&buf, '"');
  for (int i = 0; i < id.name_len; ++i) {
    if (id.name[i] == '"' || id.name[i] == '\\') appendStringInfoChar(&buf, '\\');
    appendStringInfoChar(&buf, id.name[i]);
  }
  appendStringInfoChar(&buf, '"');
  return buf.data;
}

enum ErrorFormat { kPlain, kPostgrest };

int error_format = kPlain;

const struct config_enum_entry kErrorFormats[] = {
    {"plain", kPlain, false},
    {"postgrest", kPostgrest, false},
    {nullptr, 0, false},
};

// PostgREST's error object: {"code", "message", "details", "hint"}.
char* PostgrestMessageJson(const char* message, const char* details, const char* hint) {
  StringInfoData buf;
  initStringInfo(&buf);
  appendStringInfoChar(&buf, '{');
  AppendJsonKey(&buf, "code", true);
  escape_json(&buf, "PT429");
  AppendJsonKey(&buf, "message", false);
  escape_json(&buf, message);
  AppendJsonKey(&buf, "details", false);
  escape_json(&buf, details);
  AppendJsonKey(&buf, "hint", false);
  escape_json(&buf, hint);
  appendStringInfoChar(&buf, '}');
  return buf.data;
}

// RAISE SQLSTATE 'PGRST': PostgREST answers with the detail's status and
// headers, and the message as the body.
[[noreturn]] void RaisePostgrest(const LimitCall& call, const Decision& decision, const char* message,
                                 const char* details, const char* hint) {
  char* headers = HeadersJsonText(call.id, call.config, HeaderAnswerFromDecision(decision), ClockNow());
  StringInfoData response;
  initStringInfo(&response);
  appendStringInfo(&response, "{\"status\": 429, \"headers\": %s}", headers);
  ereport(ERROR,
          (errcode(MAKE_SQLSTATE('P', 'G', 'R', 'S', 'T')),
           errmsg("%s", PostgrestMessageJson(message, details, hint)), errdetail("%s", response.data)));
  pg_unreachable();
}

}  // namespace

int EchoLength(const char* bytes, int len) { return pg_mbcliplen(bytes, len, kMaxEchoBytes); }

void DefineErrorFormatGuc() {
  DefineCustomEnumVariable("ratelimit.error_format",
                           "How a refused call with throws => true reports the error.",
                           "plain: SQLSTATE PT429 with a JSON DETAIL; postgrest: SQLSTATE PGRST, which "
                           "PostgREST turns into an HTTP 429 response carrying the rate-limit headers.",
                           &error_format, kPlain, kErrorFormats, PGC_USERSET, 0, nullptr, nullptr, nullptr);
}

void RaiseIfInvalid(const ratelimit::Status& status) {
  if (status.ok()) return;
  ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s", status.message),
                  status.detail[0] ? errdetail("%s", status.detail) : 0));
}

void RaiseRateLimited(const LimitCall& call, const Decision& decision) {
  const LimitId& id = call.id;
  char* detail = RefusalDetailJson(id, decision);
  char* message = psprintf("rate limit %s exceeded", QuotedName(id));
  char* hint = psprintf("Retry after %s seconds.", ExactNumberText(decision.retry_after));
  if (error_format == kPostgrest) RaisePostgrest(call, decision, message, detail, hint);
  ereport(ERROR, (errcode(MAKE_SQLSTATE('P', 'T', '4', '2', '9')), errmsg("%s", message),
                  errdetail("%s", detail), errhint("%s", hint)));
}

}  // namespace ratelimit_pg
