// jsonb config -> LimitSettings. Only translation happens here: which fields
// exist and what JSON types they take. Ranges and kind rules are checked by
// the core (ratelimit::ValidateConfigFields and ValidateConfigCombination);
// the storage options, which the core never sees, here (their ranges, and
// that the chosen storage takes them, by its properties).
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "config/config_json.h"

#include "storage/storage.h"
#include "support/sql_scope.h"
#include "support/clock.h"
#include "support/errors.h"

extern "C" {
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/guc.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"
}

#include "support/compat.h"

namespace ratelimit_pg {
namespace {

constexpr char kValidFields[] =
    "Valid fields are kind, rate, period, capacity, maxReserved, start, shards, jitter, shadow, storage, "
    "on_rollback and memoryKeys.";
// Largest |microseconds| accepted from a number of milliseconds (about 146,000 years).
constexpr double kMaxAbsMicros = 4.6e18;

// Raises the 22023 error every config problem uses.
[[noreturn]] void RaiseConfigError(const char* field, const char* problem, const char* detail) {
  ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("config field \"%s\" %s", field, problem),
                  detail ? errdetail("%s", detail) : 0));
  pg_unreachable();
}

// A jsonb string value as a NUL-terminated palloc'd C string.
char* JsonbStringToCString(const JsonbValue& value) {
  return pnstrdup(value.val.string.val, value.val.string.len);
}

// Milliseconds (as in the source articles) to whole microseconds.
Micros MillisToMicros(const char* field, double millis) {
  double micros = std::round(millis * ratelimit::kMicrosPerMilli);
  if (!std::isfinite(micros) || std::fabs(micros) > kMaxAbsMicros)
    RaiseConfigError(field, "is out of range", "Milliseconds must be a finite number of reasonable size.");
  return static_cast<Micros>(micros);
}

// Calls a type input function; a parse error (a soft error from 16 on) is
// raised as 22023 naming the field. A config must mean the same in every
// session (they share its state rows and cache), so the input runs under
// fixed settings rather than the session's: a timestamp without a UTC offset is UTC, 01/02 is January
// 2, a zone abbreviation is the default set's, and an interval's leading
// minus applies to its first field only.
Datum ParseTypedString(const char* field, PGFunction input, const char* text, const char* expected) {
  int guc_level = NewGUCNestLevel();
  PinConversionSettings();
  // Abbreviations ("EST") mean what the default set says, whatever set the
  // session loaded (loading one reads a file: only here, where a parsed
  // config is cached, not in every statement's scope).
  (void)set_config_option("timezone_abbreviations", "Default", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
                          true, 0, false);
  Datum result = 0;
  char* failure = nullptr;
  bool ok = compat::CallInputFunction(input, text, &result, &failure);
  AtEOXact_GUC(true, guc_level);
  if (!ok)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("config field \"%s\" must be %s", field, expected), errdetail("%s", failure)));
  return result;
}

// An interval string as microseconds; months and years have no fixed length.
// 'infinity' is refused as it is by 15's interval_in, on every major.
Micros IntervalStringToMicros(const char* field, const JsonbValue& value) {
  char* text = JsonbStringToCString(value);
  Interval* interval = DatumGetIntervalP(ParseTypedString(field, interval_in, text, "a valid interval"));
  if (compat::IntervalIsInfinite(interval))
    RaiseConfigError(field, "must be a valid interval", "An infinite interval has no length.");
  if (interval->month != 0)
    RaiseConfigError(field, "must not have month or year parts",
                     "Months and years have no fixed length; use days, hours, minutes or seconds.");
  Micros micros = 0;
  if (__builtin_mul_overflow(static_cast<Micros>(interval->day), USECS_PER_DAY, &micros) ||
      __builtin_add_overflow(micros, interval->time, &micros))
    RaiseConfigError(field, "is out of range", nullptr);
  return micros;
}

// Whether a timestamp string uses a word timestamptz_in reads relative to
// the current time ("now", "today", "tomorrow", "yesterday").
bool MentionsRelativeTime(const char* text) {
  static const char* const kWords[] = {"now", "today", "tomorrow", "yesterday"};
  while (*text != '\0') {
    if (!std::isalpha(static_cast<unsigned char>(*text))) {
      ++text;
      continue;
    }
    const char* word = text;
    while (std::isalpha(static_cast<unsigned char>(*text))) ++text;
    size_t len = static_cast<size_t>(text - word);
    for (const char* relative : kWords)
      if (std::strlen(relative) == len && pg_strncasecmp(word, relative, len) == 0) return true;
  }
  return false;
}

// A timestamptz string as Unix microseconds: the same instant in every
// session (ParseTypedString), so words relative to the current time are
// refused.
Micros TimestampStringToMicros(const char* field, const JsonbValue& value) {
  char* text = JsonbStringToCString(value);
  if (MentionsRelativeTime(text))
    RaiseConfigError(field, "must be a fixed instant",
                     "Words relative to the current time (now, today, tomorrow, yesterday) would move the "
                     "windows; give a date and time, e.g. \"2026-01-01 00:00:00+00\".");
  TimestampTz ts = DatumGetTimestampTz(ParseTypedString(field, timestamptz_in, text, "a valid timestamptz"));
  if (!TimestamptzSupported(ts))
    RaiseConfigError(field, "is out of range", "Use a timestamp from 0001-01-01 to 100000-01-01.");
  return UnixFromTimestamptz(ts);
}

// A number field (rate, capacity, maxReserved).
double RequireNumber(const char* field, const JsonbValue& value) {
  if (value.type != jbvNumeric) RaiseConfigError(field, "must be a number", nullptr);
  return JsonbNumberToDouble(value);
}

// A duration field: milliseconds as a number, or an interval string.
Micros RequireDuration(const char* field, const JsonbValue& value) {
  if (value.type == jbvNumeric) return MillisToMicros(field, JsonbNumberToDouble(value));
  if (value.type == jbvString) return IntervalStringToMicros(field, value);
  RaiseConfigError(field, "must be a number of milliseconds or an interval string", nullptr);
}

// An instant field: milliseconds since the Unix epoch, or a timestamptz string.
Micros RequireInstant(const char* field, const JsonbValue& value) {
  if (value.type == jbvNumeric) return MillisToMicros(field, JsonbNumberToDouble(value));
  if (value.type == jbvString) return TimestampStringToMicros(field, value);
  RaiseConfigError(field, "must be a number of milliseconds since 1970 or a timestamptz string", nullptr);
}

// The kind field: the name of a registered kind (src/core/kinds).
ratelimit::KindId RequireKind(const JsonbValue& value) {
  if (value.type != jbvString) RaiseConfigError("kind", "must be a string", nullptr);
  ratelimit::KindId kind;
  if (ratelimit::ParseKind(value.val.string.val, value.val.string.len, &kind)) return kind;
  char choice[256];
  ratelimit::DescribeKindChoice(choice, sizeof choice);
  ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                  errmsg("unknown rate limit kind \"%.*s\"",
                         EchoLength(value.val.string.val, value.val.string.len), value.val.string.val),
                  errdetail("%s", choice)));
  pg_unreachable();
}

// The shards field: a whole number of rows (range checked by the core).
int RequireShardCount(const JsonbValue& value) {
  if (value.type != jbvNumeric) RaiseConfigError("shards", "must be a whole number", nullptr);
  double shards = JsonbNumberToDouble(value);
  if (shards != std::floor(shards) || !std::isfinite(shards))
    RaiseConfigError("shards", "must be a whole number", "Use 1 to 1024.");
  if (shards < 0 || shards > 1e6) return -1;  // out of range; the core says so
  return static_cast<int>(shards);
}

// The jitter field: true (up to one period), false/null (none), or a duration.
void ApplyJitterField(const JsonbValue& value, LimitConfig* config) {
  config->has_jitter = false;
  config->jitter_is_period = false;
  if (value.type == jbvNull || (value.type == jbvBool && !value.val.boolean)) return;
  config->has_jitter = true;
  if (value.type == jbvBool) {
    config->jitter_is_period = true;
    return;
  }
  if (value.type != jbvNumeric && value.type != jbvString)
    RaiseConfigError("jitter", "must be true, false, a number of milliseconds or an interval string",
                     nullptr);
  config->jitter = RequireDuration("jitter", value);
}

bool KeyIs(const JsonbValue& key, const char* name) {
  return static_cast<size_t>(key.val.string.len) == std::strlen(name) &&
         std::memcmp(key.val.string.val, name, key.val.string.len) == 0;
}

// A field of two string values: false for `first`, true for `second`.
bool RequireChoice(const char* field, const JsonbValue& value, const char* first, const char* second) {
  if (value.type == jbvString) {
    if (KeyIs(value, first)) return false;
    if (KeyIs(value, second)) return true;
  }
  char* expected = psprintf("must be \"%s\" or \"%s\"", first, second);
  RaiseConfigError(field, expected, nullptr);
  return false;  // not reached
}

// The index of the storage a "storage" value names (storage.h); 22023
// naming every storage if none.
int RequireStorageName(const JsonbValue& value) {
  int index = value.type == jbvString ? StorageIndexNamed(value.val.string.val, value.val.string.len) : -1;
  if (index >= 0) return index;
  const Storage* const* storages = nullptr;
  int count = AllStorages(&storages);
  StringInfoData expected;
  initStringInfo(&expected);
  appendStringInfoString(&expected, "must be ");
  for (int i = 0; i < count; ++i)
    appendStringInfo(&expected, "%s\"%s\"", i == 0 ? "" : i == count - 1 ? " or " : ", ", storages[i]->name);
  RaiseConfigError("storage", expected.data, nullptr);
}

// The first storage `holds` is true of, for a message that names it.
const char* StorageWhere(bool (*holds)(const Storage& storage)) {
  const Storage* const* storages = nullptr;
  for (int i = 0, n = AllStorages(&storages); i < n; ++i)
    if (holds(*storages[i])) return storages[i]->name;
  return "?";
}

// The storage options' ranges: "memoryKeys" a whole number of rows.
void RequireOptionsInRange(const StorageOptions& options) {
  double rows = options.name_rows;
  if (options.has_name_rows && !(rows >= 1 && rows <= 1e8 && rows == std::floor(rows)))
    RaiseConfigError("memoryKeys", "must be a whole number from 1 to 100000000",
                     "A whole number of keys from 1 to 100000000.");
}

// The options whose storage must take them (checked, after their ranges,
// between the core's checks of each field and of the fields together).
void RequireStorageTakes(const StorageOptions& options) {
  const Storage& storage = StorageFor(options);
  if (options.has_name_rows && !storage.bounds_name_rows) {
    const char* bounding = StorageWhere([](const Storage& s) { return s.bounds_name_rows; });
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("config field \"memoryKeys\" needs \"storage\": \"%s\"", bounding),
                    errdetail("memoryKeys bounds the entries of a limit kept in %s.", bounding)));
  }
  if (options.keep_on_rollback && storage.undo != Undo::kByRefund) {
    const char* refunding = StorageWhere([](const Storage& s) { return s.undo == Undo::kByRefund; });
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("config field \"on_rollback\": \"keep\" needs \"storage\": \"%s\"", refunding),
                    errdetail("A %s limit's grant is always given back when its transaction rolls back; use "
                              "\"storage\": \"%s\" to keep it.",
                              storage.name, refunding)));
  }
}

// Stores one field into the config; JSON null means the field is absent.
void ApplyField(const JsonbValue& key, const JsonbValue& value, LimitSettings* config) {
  bool present = value.type != jbvNull;
  if (KeyIs(key, "kind")) {
    config->has_kind = present;
    if (present) config->kind = RequireKind(value);
  } else if (KeyIs(key, "rate")) {
    config->has_rate = present;
    if (present) config->rate = RequireNumber("rate", value);
  } else if (KeyIs(key, "period")) {
    config->has_period = present;
    if (present) config->period = RequireDuration("period", value);
  } else if (KeyIs(key, "capacity")) {
    config->has_capacity = present;
    if (present) config->capacity = RequireNumber("capacity", value);
  } else if (KeyIs(key, "maxReserved")) {
    config->has_max_reserved = present;
    if (present) config->max_reserved = RequireNumber("maxReserved", value);
  } else if (KeyIs(key, "start")) {
    config->has_start = present;
    if (present) config->start = RequireInstant("start", value);
  } else if (KeyIs(key, "shards")) {
    config->has_shards = present;
    config->shards = present ? RequireShardCount(value) : 1;
  } else if (KeyIs(key, "jitter")) {
    ApplyJitterField(value, config);
  } else if (KeyIs(key, "shadow")) {
    if (present && value.type != jbvBool) RaiseConfigError("shadow", "must be true or false", nullptr);
    config->shadow = present && value.val.boolean;
  } else if (KeyIs(key, "storage")) {
    config->options.storage = present ? RequireStorageName(value) : 0;
  } else if (KeyIs(key, "memoryKeys")) {
    config->options.has_name_rows = present;
    if (present) config->options.name_rows = RequireNumber("memoryKeys", value);
  } else if (KeyIs(key, "on_rollback")) {
    config->options.keep_on_rollback = present && RequireChoice("on_rollback", value, "refund", "keep");
  } else {
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("unknown config field \"%.*s\"",
                           EchoLength(key.val.string.val, key.val.string.len), key.val.string.val),
                    errdetail("%s", kValidFields)));
  }
}

}  // namespace

double JsonbNumberToDouble(const JsonbValue& value) {
  char* digits = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(value.val.numeric)));
  double result = std::strtod(digits, nullptr);
  pfree(digits);
  return result;
}

void ParseConfigJsonb(Jsonb* config, LimitSettings* out) {
  *out = LimitSettings{};
  if (!JB_ROOT_IS_OBJECT(config) || JB_ROOT_IS_SCALAR(config))  // the example: the default kind
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("config must be a JSON object"),
                    errdetail("For example {\"kind\": \"%s\", \"rate\": 10, \"period\": 60000}.",
                              ratelimit::KindName(LimitConfig{}.kind))));
  JsonbIterator* it = JsonbIteratorInit(&config->root);
  JsonbValue key;
  JsonbValue value;
  JsonbIteratorToken token;
  while ((token = JsonbIteratorNext(&it, &key, true)) != WJB_DONE) {
    if (token != WJB_KEY) continue;
    token = JsonbIteratorNext(&it, &value, true);
    ApplyField(key, value, out);
  }
  RaiseIfInvalid(ratelimit::ValidateConfigFields(*out));
  RequireOptionsInRange(out->options);
  RequireStorageTakes(out->options);
  RaiseIfInvalid(ratelimit::ValidateConfigCombination(*out));
}

}  // namespace ratelimit_pg
