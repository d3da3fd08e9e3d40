// The argument ratelimit_limit_all takes: a JSON array of limits, each
// {"name", "key", "config", "count", "reserve"}, parsed into calls.
#include <cstring>

#include "api/limits_json.h"

#include "config/config_json.h"
#include "support/errors.h"

extern "C" {
#include "utils/builtins.h"
}

namespace ratelimit_pg {
namespace {

// The most entries one ratelimit_limit_all call takes.
constexpr int kMaxLimitsPerCall = 1000;

bool KeyIs(const JsonbValue& key, const char* name) {
  return static_cast<size_t>(key.val.string.len) == std::strlen(name) &&
         std::memcmp(key.val.string.val, name, key.val.string.len) == 0;
}

[[noreturn]] void RaiseEntryError(int index, const char* problem) {
  ereport(ERROR,
          (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("limits[%d]: %s", index, problem),
           errdetail("Each element is an object with name, and optionally key, config, count and reserve.")));
  pg_unreachable();
}

// A JSON string as a text datum for an id field (null -> nullptr for key).
void SetIdFromJson(int index, const JsonbValue& value, const char* what, bool nullable, text** field,
                   const char** bytes, int* len) {
  if (nullable && value.type == jbvNull) return;
  if (value.type != jbvString)
    RaiseEntryError(index, nullable ? "key must be a string or null" : "name must be a string");
  SetIdText(cstring_to_text_with_len(value.val.string.val, value.val.string.len), what, field, bytes, len);
}

// Applies one field of a limits element to its call.
void ApplyEntryField(int index, const JsonbValue& key, JsonbValue* value, LimitCall* call, bool* has_name) {
  LimitId& id = call->id;
  if (KeyIs(key, "name")) {
    SetIdFromJson(index, *value, "name", false, &id.name_text, &id.name, &id.name_len);
    *has_name = true;
  } else if (KeyIs(key, "key")) {
    SetIdFromJson(index, *value, "key", true, &id.key_text, &id.key, &id.key_len);
  } else if (KeyIs(key, "config")) {
    if (value->type == jbvNull) return;
    if (value->type != jbvBinary || !JsonContainerIsObject(value->val.binary.data))
      RaiseEntryError(index, "config must be an object or null");
    call->inline_config = JsonbValueToJsonb(value);
  } else if (KeyIs(key, "count")) {
    if (value->type != jbvNumeric) RaiseEntryError(index, "count must be a number");
    call->request.count = JsonbNumberToDouble(*value) + 0.0;
  } else if (KeyIs(key, "reserve")) {
    if (value->type != jbvBool) RaiseEntryError(index, "reserve must be a boolean");
    call->request.reserve = value->val.boolean;
  } else {
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("limits[%d]: unknown field \"%.*s\"", index,
                           EchoLength(key.val.string.val, key.val.string.len), key.val.string.val),
                    errdetail("Valid fields are name, key, config, count and reserve.")));
  }
}

// Parses one element of the limits array into a call.
LimitCall EntryFromJson(int index, JsonbValue* element) {
  if (element->type != jbvBinary || !JsonContainerIsObject(element->val.binary.data))
    RaiseEntryError(index, "must be an object");
  LimitCall call{};
  call.request = Request{1, false};
  bool has_name = false;
  JsonbIterator* it = JsonbIteratorInit(element->val.binary.data);
  JsonbValue key;
  JsonbValue value;
  JsonbIteratorToken token;
  while ((token = JsonbIteratorNext(&it, &key, true)) != WJB_DONE) {
    if (token != WJB_KEY) continue;
    JsonbIteratorNext(&it, &value, true);
    ApplyEntryField(index, key, &value, &call, &has_name);
  }
  if (!has_name) RaiseEntryError(index, "name is required");
  return call;
}

}  // namespace

int EntriesFromJson(Jsonb* limits, LimitCall** out) {
  if (!JB_ROOT_IS_ARRAY(limits) || JB_ROOT_IS_SCALAR(limits))
    ereport(ERROR,
            (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("limits must be a JSON array"),
             errdetail("For example [{\"name\": \"perUser\", \"key\": \"u1\"}, {\"name\": \"global\"}].")));
  int count = JB_ROOT_COUNT(limits);
  if (count > kMaxLimitsPerCall)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("too many limits in one call"),
                    errdetail("At most %d limits; %d were given.", kMaxLimitsPerCall, count)));
  LimitCall* calls = static_cast<LimitCall*>(palloc0(sizeof(LimitCall) * (count + 1)));
  JsonbIterator* it = JsonbIteratorInit(&limits->root);
  JsonbValue element;
  JsonbIteratorToken token;
  int index = 0;
  while ((token = JsonbIteratorNext(&it, &element, true)) != WJB_DONE)
    if (token == WJB_ELEM) {
      calls[index] = EntryFromJson(index, &element);
      ++index;
    }
  *out = calls;
  return index;
}

}  // namespace ratelimit_pg
