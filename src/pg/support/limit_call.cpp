// What every identity shares: its order, and the check every name and key
// passes, from SQL arguments, JSON or a stored row alike; and when two
// limits' settings are the same.
#include <algorithm>
#include <cstring>

#include "support/limit_call.h"

namespace ratelimit_pg {
namespace {

// Whether two limits' storage options are the same ("memoryKeys" compared
// only where given).
bool SameOptions(const StorageOptions& a, const StorageOptions& b) {
  return a.storage == b.storage && a.keep_on_rollback == b.keep_on_rollback &&
         a.has_name_rows == b.has_name_rows && (!a.has_name_rows || a.name_rows == b.name_rows);
}

// Byte order of two strings: memcmp of the common prefix, then the shorter first.
int CompareBytes(const char* a, int a_len, const char* b, int b_len) {
  int c = std::memcmp(a, b, std::min(a_len, b_len));
  if (c != 0) return c < 0 ? -1 : 1;
  return (a_len > b_len) - (a_len < b_len);
}

}  // namespace

bool SameSettings(const LimitSettings& a, const LimitSettings& b) {
  return ratelimit::SameLimit(a, b) && SameOptions(a.options, b.options);
}

int CompareIdentity(const char* a_name, int a_name_len, const char* a_key, int a_key_len, const char* b_name,
                    int b_name_len, const char* b_key, int b_key_len) {
  int c = CompareBytes(a_name, a_name_len, b_name, b_name_len);
  if (c != 0) return c;
  if (a_key_len < 0 || b_key_len < 0) return (a_key_len >= 0) - (b_key_len >= 0);
  return CompareBytes(a_key, a_key_len, b_key, b_key_len);
}

int CompareLimitIds(const LimitId& a, const LimitId& b) {
  return CompareIdentity(a.name, a.name_len, a.key, a.key != nullptr ? a.key_len : -1, b.name, b.name_len,
                         b.key, b.key != nullptr ? b.key_len : -1);
}

void SetIdText(text* value, const char* what, text** field, const char** bytes, int* len) {
  *field = value;
  *bytes = VARDATA_ANY(value);
  *len = VARSIZE_ANY_EXHDR(value);
  if (*len > kMaxNameBytes)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s is too long", what),
                    errdetail("%s is %d bytes; the maximum is %d.", what, *len, kMaxNameBytes)));
}

}  // namespace ratelimit_pg
