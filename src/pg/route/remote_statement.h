// What crosses between the router and a partition (types only): one
// statement of a routed function, and the rows a partition answered. The
// connections (connections.h) send the one and copy out the other
// (remote_answers.h); routing.cpp makes the one and reads the other.
#pragma once

#include "support/limit_call.h"

namespace ratelimit_pg {

// One statement of a routed function, for the partitions it runs on.
struct RemoteStatement {
  Oid function;               // the router's function: names its prepared statement,
  uint32 sql_hash;            // with a hash of sql
  const char* function_name;  // "schema.name", in messages
  int function_args;          // its number of arguments, in messages
  const char* sql;            // prepared once per connection
  int params;
  const char* const* values;  // nullptr for NULL
  const int* lengths;         // of each binary value
  const int* formats;         // of each value: 0 text, 1 binary
  int columns;                // each row must have these,
  const Oid* column_types;    // of these (built-in) types, answered in binary
};

// What one partition answered: rows of binary values (nullptr for NULL,
// each followed by a zero byte), copied out of libpq, row by row.
struct RemoteRows {
  int rows;
  int columns;
  char** values;  // rows * columns
  int* lengths;   // rows * columns
  Oid* types;     // columns: the type of each, as the partition said
};

}  // namespace ratelimit_pg
