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
//
// What crosses is bit-exact and depends on no session setting: parameters
// go in binary (each type's send function) or, for text and jsonb, as
// their text, which no setting changes; the partition answers in binary
// (each column's type checked against what the statement expects). The
// partition session's settings are its own (ALTER ROLE/DATABASE ... SET
// there): no startup option is sent, which a pooler in front of the
// partitions (pgbouncer) would refuse, and nothing that crosses depends on
// them (what a partition renders as text itself, a refusal's DETAIL, is
// written the same under every setting).
#pragma once

#include "route/cluster.h"
#include "route/remote_statement.h"

namespace ratelimit_pg {

// Runs statement on each of the partitions in targets (sent to every one,
// then read): out[i] is what targets[i] answered. Raises a partition's
// error, a lost connection's naming the partition, or 42804 for an answer
// whose columns are not the statement's.
void RunOnPartitions(const RouterCluster& cluster, const int* targets, int count,
                     const RemoteStatement& statement, RemoteRows* out);

}  // namespace ratelimit_pg
