// What the extension installed on the state table, recognised in a
// relcache entry (installed_parts.cpp): its columns, the shard's CHECK and
// DEFAULT (its unique indexes: support/owner_code.h's InstalledIndex). The
// state table's shape (state_table.cpp) probes and writes through them; the owner-code checks
// (owner_code.cpp) count everything else as the owner's. Internal to the
// table storage.
#pragma once

#include "support/limit_call.h"

extern "C" {
#include "access/tupdesc.h"
#include "nodes/nodes.h"
#include "utils/relcache.h"
}

namespace ratelimit_pg {

// The columns of ratelimit_state, by attribute number (InvalidAttrNumber:
// absent; idle_at is absent before 0.2.0).
struct StateColumns {
  AttrNumber name;
  AttrNumber key;
  AttrNumber shard;
  AttrNumber value;
  AttrNumber ts;
  AttrNumber prev;
  AttrNumber idle_at;
};

// The attribute numbers of the state table's columns, from its descriptor.
StateColumns FindColumns(Relation rel);

// Whether a CHECK constraint is the installed shard check: its name and
// the shape "shard >= 0" (an owner may have replaced it under the same
// name). The answer for the last expression seen is kept, by its text, so
// the table as installed does not parse it on every call.
bool IsInstalledShardCheck(const ConstrCheck& check, AttrNumber shard);

// Whether a column default is the shard's installed one: the constant 0,
// possibly cast to int2 by the built-in int4-to-int2 cast.
bool IsZeroDefault(const Node* node);

}  // namespace ratelimit_pg
