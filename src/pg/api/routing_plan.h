// The plans of the router's routed functions (routing_plan.cpp): for each
// function, how it is routed, the partition's statement and how each
// argument crosses and each answer column is read, made at its first call
// in a backend from the function's catalog entry and kept until a function
// or type changes. routing.cpp runs a call with its plan.
#pragma once

#include "support/limit_call.h"

extern "C" {
#include "access/tupdesc.h"
#include "fmgr.h"
}

namespace ratelimit_pg {

// Where a call runs: the partition of its first argument, a hash (PL/Proxy's
// RUN ON hash); of (name, key), as ratelimit_hash gives it; every partition
// (RUN ON ALL); any one (RUN ON ANY).
enum class Route { kByHash, kByNameKey, kAll, kAny };

// A kByNameKey statement answers the error's columns after the result's:
// error_state, error_message, error_detail, error_hint.
inline constexpr int kErrorColumns = 4;

// How an argument crosses: its send function's bytes (binary), or its
// output function's text.
struct SentParam {
  bool binary;
  FmgrInfo function;
};

// How a column of the partition's binary answer is read: text and jsonb
// checked for the database's encoding (their receive functions would
// convert from the caller's client_encoding, which the partition did not
// write them in), the others by their receive functions.
enum class ColumnKind { kText, kJsonb, kReceived };

struct ReadColumn {
  ColumnKind form;
  int attnum;  // its index in desc; -1: an error column (text)
  FmgrInfo receive;
  Oid ioparam;
};

// A named row type a plan was made for (its result's, or an argument's)
// and the type cache's identifier of its columns then: an ALTER TYPE
// changes the columns, or a rollback changes them back, without a pg_type
// invalidation, so the plan compares the identifier at every call.
struct RowShape {
  Oid type;
  uint64 identifier;
};

// What a call of one routed function needs, made at its first call in
// the backend and kept until a function or type changes (a query's
// FmgrInfo lives only as long as one execution of it).
struct RoutedPlan {
  Oid function;
  Route route;
  bool answers_error;
  uint32 sql_hash;
  char* function_name;  // schema.name
  int args;
  int first_param;  // 1 when the first argument is the hash
  char* sql;
  SentParam* params;  // of each argument (those before first_param unused)
  bool returns_set;
  TupleDesc desc;
  int columns;        // of each answer row: desc's live columns, then the error columns
  ReadColumn* read;   // of each answer column
  Oid* column_types;  // of each answer column
  int shapes;
  RowShape* shape;  // the named row types it was made for
};

// The call's plan, valid until the call ends (a change seen during the
// call frees it only at the next one).
RoutedPlan* PlanOf(FunctionCallInfo fcinfo);

}  // namespace ratelimit_pg
