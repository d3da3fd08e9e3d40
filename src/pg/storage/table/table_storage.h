// The table storage (table_storage.cpp): limits kept in rows of
// ratelimit_state, durable and locked as SELECT ... FOR UPDATE locks them.
#pragma once

#include "storage/seam.h"

namespace ratelimit_pg {

const Storage& TableStorage();

}  // namespace ratelimit_pg
