// The check every name and key passes, from SQL arguments, JSON or a stored
// row alike.
#include "support/limit_call.h"

namespace ratelimit_pg {

void SetIdText(text* value, const char* what, text** field, const char** bytes, int* len) {
  *field = value;
  *bytes = VARDATA_ANY(value);
  *len = VARSIZE_ANY_EXHDR(value);
  if (*len > kMaxNameBytes)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s is too long", what),
                    errdetail("%s is %d bytes; the maximum is %d.", what, *len, kMaxNameBytes)));
}

}  // namespace ratelimit_pg
