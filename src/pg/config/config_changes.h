// What a change of effective config does to stored rows, in every storage
// (config_changes.cpp, written against the storage seam), and the locks
// that serialize changes.
#pragma once

#include "support/limit_call.h"

namespace ratelimit_pg {

// The rows of (name, key) (key nullptr: every key of the name that has no
// override) are locked; `from` nullptr: the old config is not known (inline
// configs only); `to` nullptr: the new one is not. A row of another kind
// than `to` is reset (deleted); with both known and of one kind, each row
// is brought up to now under `from` and carried into `to`.
void ApplyConfigChange(text* name, text* key, const LimitSettings* from, const LimitSettings* to);
// Serialize changes of definitions, or of overrides (a lock on the table
// held to the end of the transaction; callers only read it), so each change
// reads the config it replaces.
void LockDefinitionChanges();
void LockOverrideChanges();

}  // namespace ratelimit_pg
