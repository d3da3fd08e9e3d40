// The router's side of a routed call (routed_answers.cpp): raising the
// error a partition returned as data.
#pragma once

#include "support/limit_call.h"

extern "C" {
#include "fmgr.h"
}

namespace ratelimit_pg {

// Raises the error a partition returned as data: state (five digits or
// upper-case letters, else an internal error), message, and detail and
// hint when not NULL.
[[noreturn]] void RaiseRoutedAnswer(const char* state, const char* message, const char* detail,
                                    const char* hint);

// ratelimit_proxy_raise(state, message, detail, hint): raises that error
// (detail and hint left out when NULL); returns when state is NULL.
Datum RaiseRoutedError(FunctionCallInfo fcinfo);
// ratelimit_proxy_result(answer record): a routed call's row without its
// last four columns (error_state, error_message, error_detail,
// error_hint), as the function's declared row type; raises the error when
// error_state is not NULL.
Datum RoutedResult(FunctionCallInfo fcinfo);

}  // namespace ratelimit_pg
