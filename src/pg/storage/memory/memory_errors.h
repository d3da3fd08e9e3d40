// The errors only the memory storage raises (memory_errors.cpp), as steps of
// its Storage: no room for a new entry, a call in the transaction that
// changed its config (an entry is not rolled back with it), and PREPARE with
// a grant to give back.
#pragma once

#include "storage/seam.h"

namespace ratelimit_pg {

// The memory storage's parts that can be full (seam.h's kNoRoomInPart on):
// room for a new name, and for a long identity.
constexpr ModifyResult kNoRoomForNewName = ModifyResult::kNoRoomInPart;
constexpr ModifyResult kNoRoomForLongIdentity =
    static_cast<ModifyResult>(static_cast<int>(ModifyResult::kNoRoomInPart) + 1);

// Storage::raise_no_room: the call's new entry had no room (why: its name's
// memoryKeys are in use, ratelimit.memory_max_keys, the room for new names
// or for long identities; counted in ratelimit_stats.memory_full).
[[noreturn]] void RaiseMemoryNoRoom(const LimitCall& call, ModifyResult why);
// Storage::raise_uncommitted_config: 55000 for a call under a config this
// transaction changed and has not committed.
[[noreturn]] void RaiseMemoryUncommittedConfig(const LimitCall& call);
// Storage::raise_prepare_refused: 0A000, a prepared transaction cannot hold
// a memory limit's grant (this session would have to give it back).
[[noreturn]] void RaiseMemoryPrepareRefused();
// 55000: with ratelimit.memory_durability = wal, the worker that makes
// memory limits durable has not started (or not finished its first pass).
[[noreturn]] void RaiseMemoryNotDurable();

}  // namespace ratelimit_pg
