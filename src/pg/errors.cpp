// Core statuses and refusals turned into PostgreSQL errors.
#include "pg_adapter.h"

extern "C" {
#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "utils/datetime.h"
#include "utils/float.h"
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

// The DETAIL of a PT429 error: a JSON object a client can parse.
char* RefusalDetailJson(const LimitId& id, const Decision& decision) {
  StringInfoData buf;
  initStringInfo(&buf);
  appendStringInfoChar(&buf, '{');
  AppendJsonKey(&buf, "name", true);
  AppendJsonText(&buf, id.name, id.name_len);
  AppendJsonKey(&buf, "key", false);
  AppendJsonText(&buf, id.key, id.key_len);
  AppendJsonKey(&buf, "retry_after", false);
  appendStringInfoString(&buf, float8out_internal(decision.retry_after));
  AppendJsonKey(&buf, "retry_at", false);
  char iso[MAXDATELEN + 1];
  JsonEncodeDateTime(iso, TimestampTzGetDatum(TimestamptzFromUnix(decision.retry_at)), TIMESTAMPTZOID,
                     nullptr);
  escape_json(&buf, iso);
  AppendJsonKey(&buf, "remaining", false);
  appendStringInfoString(&buf, float8out_internal(decision.remaining));
  appendStringInfoChar(&buf, '}');
  return buf.data;
}

}  // namespace

void RaiseIfInvalid(const ratelimit::Status& status) {
  if (status.ok()) return;
  ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s", status.message),
                  status.detail[0] ? errdetail("%s", status.detail) : 0));
}

void RaiseRateLimited(const LimitId& id, const Decision& decision) {
  char* detail = RefusalDetailJson(id, decision);
  ereport(ERROR, (errcode(MAKE_SQLSTATE('P', 'T', '4', '2', '9')),
                  errmsg("rate limit \"%.*s\" exceeded", id.name_len, id.name), errdetail("%s", detail),
                  errhint("Retry after %s seconds.", float8out_internal(decision.retry_after))));
}

}  // namespace ratelimit_pg
