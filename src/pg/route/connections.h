// The router's connections to its partitions: one libpq connection per
// connect string, kept for the backend's life, each statement of a routed
// function prepared once on each connection it runs on. This is what
// replaces PL/Proxy's transport for the extension's own routed functions:
// PL/Proxy sends every call unprepared (the partition parses and plans it
// each time) and drops its connection on every remote error.
//
// A remote error leaves the connection as it was: it is the partition's
// answer, raised here as PL/Proxy raises it ("<function>(<args>):
// [<database>] REMOTE ERROR: <message>", the same SQLSTATE, "Remote
// detail:" and "Remote hint:"). Only a connection that is lost, or that a
// cancel or error left in the middle of a statement, is closed, and the
// next call opens a new one; an idle connection the partition closed (a
// restart) is noticed before it is used. Waits are interruptible (a cancel
// of the router's statement cancels the partition's).
#pragma once

#include "route/cluster.h"

namespace ratelimit_pg {

// One statement of a routed function, for the partitions it runs on.
struct RemoteStatement {
  Oid function;               // the router's function: names its prepared statement,
  uint32 sql_hash;            // with a hash of sql
  const char* function_name;  // "schema.name", in messages
  int function_args;          // its number of arguments, in messages
  const char* sql;            // prepared once per connection
  int params;
  const char* const* values;  // text; nullptr for NULL
  int columns;                // each row must have these
};

// What one partition answered: rows of text values (nullptr for NULL),
// copied out of libpq, row by row.
struct RemoteRows {
  int rows;
  int columns;
  char** values;  // rows * columns
};

// Runs statement on each of the partitions in targets (sent to every one,
// then read): out[i] is what targets[i] answered. Raises a partition's
// error, or a lost connection's naming the partition.
void RunOnPartitions(const RouterCluster& cluster, const int* targets, int count,
                     const RemoteStatement& statement, RemoteRows* out);

}  // namespace ratelimit_pg
